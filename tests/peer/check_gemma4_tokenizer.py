#!/usr/bin/env python3
"""Gemma 4's tokenizer against the peer's llama-tokenize (label `peer`).

The vocabulary is llama.cpp's own ggml-vocab-gemma-4.gguf (tokenizer.ggml.model "gemma4"). Its .inp
cases plus extra texts (unicode, whitespace and newline runs, digits, code, Gemma 4's turn and tool
tokens) are tokenized by both engines twice: with BOS as the vocabulary asks and special tokens
parsed (llama-tokenize's defaults), and with neither. The ids must be equal. All cases go through one
run per engine and mode; on a difference each case is run on its own to name the ones that differ.

    check_gemma4_tokenizer.py SKAINET PEER_BIN VOCAB WORK
"""
import os
import sys

from check_pre_tokenizers import run  # beside this file

SEP = "\n__ggml_vocab_test__\n"
EXTRA = [
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 0x7f 2024-12-03 ½ ¾ ٣٤٥ ४५६",
    "東京は日本の首都です。我想在北京吃饭！한국어 텍스트입니다. ひらがな カタカナ",
    "Ünïcödé café naïve e\u0301 Привет мир Ωμέγα مرحبا नमस्ते ภาษาไทย 😁🦙 👩\u200d👩\u200d👧 ✨ →",
    "line one\nline two\r\nline three\n\n\n  indented\ttab\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nend",
    "   leading, trailing and  double  spaces   \t\t\t \u00a0\u3000 non-ASCII spaces \u2009",
    "def f(x):\n    return x**2 + 1  # comment\n\nint main() { return a[i] != b->c; }\n\t\t}\n",
    "<start_of_turn>user <end_of_turn> <s> </s> [multimodal] <unused5> <mask>",
    "<bos><|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n<|channel>thought\nhmm<channel|>4<turn|>",
    "<|tool>declaration:get_weather{}<tool|><|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"
    "<|tool_response>response:get_weather{t:20}<tool_response|><|think|><eos><pad>",
    "\x01\x02\x7f control bytes \ufffd and a lone surrogate-free tail",
]


def cases(vocab):
    out = []
    path = vocab + ".inp"
    for c in open(path, encoding="utf-8").read().split(SEP):
        if c and c not in out:
            out.append(c)
    return out + EXTRA


def peer(peer_bin, vocab, text, plain, work):
    path = os.path.join(work, "case.txt")
    with open(path, "wb") as f:
        f.write(text.encode())
    flags = ["--no-bos", "--no-parse-special"] if plain else []
    return run([os.path.join(peer_bin, "llama-tokenize"), "-m", vocab, "-f", path, "--no-escape", "--ids",
                "--log-disable"] + flags)


def ours(skainet, vocab, text, plain):
    flags = ["--no-bos", "--no-parse-special"] if plain else []
    return run([skainet, "tokenize", "-m", vocab, "-p", text, "--ids"] + flags)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    skainet, peer_bin, vocab, work = sys.argv[1:]
    if not os.path.exists(vocab):
        raise SystemExit("%s is missing: run scripts/peer.sh --source" % vocab)
    os.makedirs(work, exist_ok=True)
    all_cases = cases(vocab)
    text = "\n\n".join(all_cases)
    bad = 0
    for plain in (False, True):
        mode = "no BOS, specials as text" if plain else "BOS, specials parsed"
        want, got = peer(peer_bin, vocab, text, plain, work), ours(skainet, vocab, text, plain)
        if want == got and not want.startswith(("error", "no output")):
            print("%-26s equal (%d ids)" % (mode, want.count(",") + 1), flush=True)
            continue
        bad += 1
        diffs = [i for i, c in enumerate(all_cases)
                 if peer(peer_bin, vocab, c, plain, work) != ours(skainet, vocab, c, plain)]
        print("%-26s DIFFERENT: cases %s of %d" % (mode, diffs, len(all_cases)), flush=True)
        if not diffs:
            print("    joined text\n      peer    %s\n      skainet %s" % (want[:300], got[:300]))
        for i in diffs[:3]:
            c = all_cases[i]
            print("    case %d %r\n      peer    %s\n      skainet %s" % (
                i, c[:80], peer(peer_bin, vocab, c, plain, work)[:300], ours(skainet, vocab, c, plain)[:300]))
    print("%d of 2 modes give the peer's ids on %d texts" % (2 - bad, len(all_cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
