#!/usr/bin/env python3
"""Differential tokenizer cases from the pinned llama.cpp peer (docs/peer.md).

Draws random strings (seeded) from an alphabet chosen to stress the pre-tokenizers and special-token
handling: ASCII, runs of whitespace, contractions, letters/digits/punctuation of many scripts,
combining marks, emoji with ZWJ, non-ASCII spaces, special-token texts, and (in the second half)
one stray invalid UTF-8 byte. Each string is tokenized by the peer's llama-tokenize (no BOS, special
tokens not parsed) with every vocabulary in ../shared/models/vocab. Writes, beside this script:

    peer-fuzz.inp            the inputs, separated by "\\n__ggml_vocab_test__\\n" (as llama.cpp's .inp)
    peer-fuzz-<vocab>.out    the peer's ids, one line per input
    peer-fuzz-special.inp, peer-fuzz-special-<vocab>.out
                             150 more inputs, tokenized with BOS (where the vocabulary adds one) and
                             special tokens parsed

    scripts/peer.sh   # builds build/peer/<pin>/build/bin/llama-tokenize
    python3 tests/text/data/gen_peer_cases.py build/peer/0.3.36/build/bin ../shared/models/vocab
"""
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\n__ggml_vocab_test__\n"
VOCABS = ["llama-spm", "phi-3", "gpt-2", "deepseek-coder", "falcon"]
ATOMS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") + \
    list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + \
    [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "'s", "'t", "'re", "'LL", "'D", "'ve", "'M",
     "é", "ß", "Ü", "ñ", "ø", "õ", "÷", "Á", "ý", "À", "ÿ", "ú", "þ", "ü", "ù", "ö", "û",
     "Привет", "мир", "Ωμέγα", "東京", "我想在", "한국어", "مرحبا", "नमस्ते", "ก", "ខ្មែរ",
     "٣", "٤٥", "ⅷ", "²", "½", "१२", "€", "©", "✨", "→", "…", "—", "“", "”", "‘", "’", "、", "。", "！",
     "👩\u200d👩\u200d👧", "😁", "🦙", "\u00a0", "\u3000", "\u2003", "\u0085", "\u0301", "e\u0301", "\u200b",
     "<s>", "</s>", "<|endoftext|>", ">>TITLE<<", "<unk>", "<|end|>", "<pad>", "▁", "Ġ", "\x0b", "\x0c", "\x1c", "\x00"]


def corpus(seed, n, invalid):
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        s = "".join(rnd.choice(ATOMS) for _ in range(rnd.randint(1, 12)))
        b = s.encode("utf-8")
        if invalid and rnd.random() < 0.5:
            pos = rnd.randint(0, len(b))
            b = b[:pos] + bytes([rnd.choice([0x80, 0xC3, 0xE2, 0xF0, 0xFF, 0xBF])]) + b[pos:]
        out.append(b)
    return out


def tokenize(bin_dir, vocab_dir, vocab, cases, flags, tmp):
    lines = []
    for c in cases:
        path = os.path.join(tmp, "case.bin")
        with open(path, "wb") as f:
            f.write(c)
        r = subprocess.run([os.path.join(bin_dir, "llama-tokenize"), "-m",
                            os.path.join(vocab_dir, "ggml-vocab-%s.gguf" % vocab), "-f", path, "--no-escape",
                            *flags, "--ids", "--log-disable"],
                           capture_output=True, text=True, check=True)
        ids = r.stdout.strip().splitlines()[-1].strip("[]").replace(",", " ").split()
        lines.append(" ".join(ids))
    return lines


def write(name, cases, outputs):
    with open(os.path.join(HERE, name + ".inp"), "wb") as f:
        for c in cases:
            f.write(c + SEP)
    for v, lines in outputs.items():
        with open(os.path.join(HERE, "%s-%s.out" % (name, v)), "w") as f:
            f.write("\n".join(lines) + "\n")


def main():
    bin_dir, vocab_dir = sys.argv[1], sys.argv[2]
    plain = corpus(1, 150, False) + corpus(2, 150, True)
    special = corpus(3, 150, False)
    with tempfile.TemporaryDirectory() as tmp:
        write("peer-fuzz", plain, {v: tokenize(bin_dir, vocab_dir, v, plain, ["--no-bos", "--no-parse-special"], tmp)
                                   for v in VOCABS})
        write("peer-fuzz-special", special, {v: tokenize(bin_dir, vocab_dir, v, special, [], tmp) for v in VOCABS})


if __name__ == "__main__":
    main()
