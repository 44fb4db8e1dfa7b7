#!/usr/bin/env python3
"""Every tokenizer.ggml.pre value against the peer's llama-tokenize (label `peer`).

For each supported name (read from the kAliases table in src/text/pre_tokenizer.cpp), a copy of a
real vocabulary from ../shared/models/vocab is written into WORK that differs only in
tokenizer.ggml.pre, and the same text (the vocabularies' .inp cases plus digits, CJK, newlines,
apostrophes, emoji, code) is tokenized by both engines with BOS as the vocabulary asks and special
tokens parsed. The ids must be equal. All cases go through
one run per engine and name (a run costs about half a second); on a difference each case is run on
its own to name the ones that differ.

    check_pre_tokenizers.py SKAINET PEER_BIN VOCAB_DIR WORK [--base llama-bpe] [--only NAME ...]
"""
import argparse
import os
import re
import struct
import subprocess
import sys

import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "..", "..", "src", "text", "pre_tokenizer.cpp")
SEP = "\n__ggml_vocab_test__\n"
EXTRA = [
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 0x7f 2024-12-03",
    "東京は日本の首都です。我想在北京吃饭！한국어 텍스트입니다. ひらがな カタカナ",
    "line one\nline two\r\nline three\n\n\n  indented\ttab\n",
    "I'm you're he's it'll we'd they've DON'T Can't 'quoted' ''",
    "emoji 😁🦙 👩\u200d👩\u200d👧 ✨ →",
    "def f(x):\n    return x**2 + 1  # comment\n\nint main() { return a[i] != b->c; }",
    "HelloWorld camelCase snake_case SCREAMING_CASE MixedUP iPhone",
    "Ünïcödé café naïve e\u0301 Привет мир Ωμέγα مرحبا नमस्ते ภาษาไทย",
    "   leading and trailing spaces   ",
    "<sentinel:12> IMGIMGABCZ ok. Hello, world! ... — “quotes” ‘single’ …",
]


def names_from_table():
    src = open(TABLE, encoding="utf-8").read()
    body = src[src.index("constexpr Alias kAliases[]"):]
    body = body[:body.index("};")]
    return re.findall(r'\{"([^"]+)", PreTokenizer::', body)


def cases(vocab_dir, base):
    out = []
    for v in [base, "llama-bpe", "qwen2"]:
        path = os.path.join(vocab_dir, "ggml-vocab-%s.gguf.inp" % v)
        if os.path.exists(path):
            for c in open(path, encoding="utf-8").read().split(SEP):
                if c and c not in out:
                    out.append(c)
    return out + EXTRA


class PreSplicer:
    """A tensor-less GGUF, copied with only tokenizer.ggml.pre's value replaced (read once: parsing
    a 128k-token vocabulary takes seconds)."""

    def __init__(self, src):
        reader = gguf.GGUFReader(src)
        if len(reader.tensors):
            raise SystemExit("%s has tensors; a vocabulary-only file is expected" % src)
        field = reader.fields["tokenizer.ggml.pre"]
        self.data = bytes(reader.data)
        length, value = field.parts[-2], field.parts[-1]  # the string's length, then its bytes
        self.begin = field.offset + sum(p.nbytes for p in field.parts[:-2])
        self.end = self.begin + length.nbytes + value.nbytes

    def write(self, dst, pre):
        new = pre.encode()
        with open(dst, "wb") as f:
            f.write(self.data[:self.begin] + struct.pack("<Q", len(new)) + new + self.data[self.end:])


def run(cmd):
    """The last id list a tokenizer command prints, or its error (check_gemma4_tokenizer.py uses it too)."""
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        tail = r.stderr.decode(errors="replace").strip().splitlines()
        return "error: " + (tail[-1] if tail else "exit %d" % r.returncode)
    lines = [l for l in r.stdout.decode().splitlines() if l.startswith("[")]
    return lines[-1] if lines else "no output"


def peer(peer_bin, model, text, work):
    path = os.path.join(work, "case.txt")
    with open(path, "wb") as f:
        f.write(text.encode())
    return run([os.path.join(peer_bin, "llama-tokenize"), "-m", model, "-f", path, "--no-escape", "--ids",
                "--log-disable"])


def ours(skainet, model, text):
    return run([skainet, "tokenize", "-m", model, "-p", text, "--ids"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("skainet")
    ap.add_argument("peer_bin")
    ap.add_argument("vocab_dir")
    ap.add_argument("work")
    ap.add_argument("--base", default="llama-bpe")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    base = os.path.join(a.vocab_dir, "ggml-vocab-%s.gguf" % a.base)
    all_cases = cases(a.vocab_dir, a.base)
    text = "\n\n".join(all_cases)
    names = a.only or names_from_table()
    bad = []
    splicer = PreSplicer(base)
    for name in names:
        model = os.path.join(a.work, "vocab-pre.gguf")
        splicer.write(model, name)
        want, got = peer(a.peer_bin, model, text, a.work), ours(a.skainet, model, text)
        if want == got and not want.startswith(("error", "no output")):
            print("%-26s equal (%d ids)" % (name, want.count(",") + 1), flush=True)
            continue
        diffs = [i for i, c in enumerate(all_cases) if peer(a.peer_bin, model, c, a.work) != ours(a.skainet, model, c)]
        bad.append(name)
        print("%-26s DIFFERENT: cases %s of %d" % (name, diffs, len(all_cases)), flush=True)
        for i in diffs[:3]:
            c = all_cases[i]
            print("    case %d %r\n      peer    %s\n      skainet %s" % (i, c[:80], peer(a.peer_bin, model, c, a.work)[:300],
                                                                     ours(a.skainet, model, c)[:300]))
    print("%d of %d pre-tokenizer names give the peer's ids (base vocabulary %s)" % (len(names) - len(bad), len(names), a.base))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
