#!/usr/bin/env python3
"""Expected pre-tokenizer splits for the BPE families we have no vocabulary file for (llama3, qwen2).

Uses the third-party `regex` module (real \\p{..} support, the engine Hugging Face's patterns are
written for) on the original tokenizer.json patterns. Writes pretok-<name>.txt beside this script: one
line per input (llama.cpp's .inp cases, then pretok-extra.inp), the piece lengths in code points.

    python3 -m pip install regex
    python3 tests/text/data/gen_pretokenizer_splits.py ../shared/models/vocab/ggml-vocab-gpt-2.gguf.inp
"""
import os
import sys

import regex

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\n__ggml_vocab_test__\n"
PATTERNS = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def cases(path):
    text = open(path, encoding="utf-8", newline="").read()
    return text.split(SEP)[:-1]


def split(pattern, text):
    out, last = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > last:
            out.append(m.start() - last)
        if m.end() > m.start():
            out.append(m.end() - m.start())
        last = m.end()
    if last < len(text):
        out.append(len(text) - last)
    return out


inputs = cases(sys.argv[1]) + cases(os.path.join(HERE, "pretok-extra.inp"))
for name, pattern in PATTERNS.items():
    with open(os.path.join(HERE, "pretok-%s.txt" % name), "w", encoding="utf-8", newline="\n") as f:
        for t in inputs:
            f.write(" ".join(str(n) for n in split(pattern, t)) + "\n")
