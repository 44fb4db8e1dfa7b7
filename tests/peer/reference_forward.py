#!/usr/bin/env python3
"""An independent float64 forward pass of a plain llama GGUF (numpy + gguf-py), for judging logits.

    reference_forward.py MODEL.gguf TOKENS.bin OUT.bin [--q8-activations] [--kv-f16] [--perturb EPS]

Reads the prompt and chosen ids of an SKLOGITS record (tests/peer/logits_file.hpp), feeds the same
tokens (prompt, then each recorded choice but the last) one position at a time, and writes the logits
of every step as an SKLOGITS record, so compare_logits.py can set either engine against it.

  --q8-activations  quantize every matmul input to Q8_0 blocks first, as both engines do for 8-bit
                    weights: d = f16(amax / 127), q = round-half-even(x * (127 / amax)) in float32
  --kv-f16          round keys and values to F16, as an F16 KV cache does
  --perturb EPS     multiply every matmul input by (1 + EPS * N(0, 1)) first (seeded): how far a
                    rounding-level difference alone moves the logits

Weights are dequantized by gguf-py; everything else is float64. Supports the llama architecture
without biases or RoPE scaling (what `skainet synth` writes); adjacent-pair RoPE.
"""
import argparse
import os
import struct
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_logits import read  # noqa: E402


def metadata(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            sys.exit(f"missing metadata key {key}")
        return default
    return field.parts[field.data[0]][0].item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--q8-activations", action="store_true")
    ap.add_argument("--kv-f16", action="store_true")
    ap.add_argument("--perturb", type=float, default=0.0)
    a = ap.parse_args()

    r = GGUFReader(a.model)
    arch = r.fields["general.architecture"]
    if bytes(arch.parts[arch.data[0]]).decode() != "llama":
        sys.exit("only the llama architecture is supported")
    heads = metadata(r, "llama.attention.head_count")
    kv_heads = metadata(r, "llama.attention.head_count_kv", heads)
    layers = metadata(r, "llama.block_count")
    eps = metadata(r, "llama.attention.layer_norm_rms_epsilon")
    base = metadata(r, "llama.rope.freq_base", 10000.0)
    w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64).reshape([int(x) for x in t.shape][::-1])
         for t in r.tensors}
    dim = w["token_embd.weight"].shape[1]
    hd = dim // heads
    output = w.get("output.weight", w["token_embd.weight"])
    rng = np.random.default_rng(1)

    def q8(x):
        x = x.astype(np.float32).reshape(-1, 32)
        amax = np.abs(x).max(axis=1, keepdims=True)
        safe = np.where(amax > 0, amax, np.float32(1))
        inv = np.where(amax > 0, np.float32(127) / safe, np.float32(0)).astype(np.float32)
        d = (amax / np.float32(127)).astype(np.float16).astype(np.float64)
        return (np.rint(x * inv) * d).reshape(-1)

    def matmul(m, x):
        if a.perturb:
            x = x * (1 + a.perturb * rng.standard_normal(x.shape))
        return m @ (q8(x) if a.q8_activations else x)

    def rms_norm(x, g):
        return x / np.sqrt(np.mean(x * x) + eps) * g

    def rope(x, pos):
        theta = pos * base ** (-2.0 * np.arange(hd // 2) / hd)
        c, s = np.cos(theta), np.sin(theta)
        y = np.empty_like(x)
        y[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
        y[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
        return y

    kv_round = (lambda v: v.astype(np.float16).astype(np.float64)) if a.kv_f16 else (lambda v: v)
    prompt, chosen, _ = read(a.tokens)
    tokens = list(prompt) + list(chosen[:-1])
    keys = [[] for _ in range(layers)]
    values = [[] for _ in range(layers)]
    logits = []
    group = heads // kv_heads
    for pos, tok in enumerate(tokens):
        x = w["token_embd.weight"][tok].copy()
        for l in range(layers):
            b = f"blk.{l}."
            h = rms_norm(x, w[b + "attn_norm.weight"])
            q = rope(matmul(w[b + "attn_q.weight"], h).reshape(heads, hd), pos)
            keys[l].append(kv_round(rope(matmul(w[b + "attn_k.weight"], h).reshape(kv_heads, hd), pos)))
            values[l].append(kv_round(matmul(w[b + "attn_v.weight"], h).reshape(kv_heads, hd)))
            k, v = np.stack(keys[l]), np.stack(values[l])  # [positions, kv_heads, hd]
            out = np.empty((heads, hd))
            for head in range(heads):
                scores = k[:, head // group, :] @ q[head] / np.sqrt(hd)
                p = np.exp(scores - scores.max())
                out[head] = (p / p.sum()) @ v[:, head // group, :]
            x = x + matmul(w[b + "attn_output.weight"], out.reshape(-1))
            h = rms_norm(x, w[b + "ffn_norm.weight"])
            gate, up = matmul(w[b + "ffn_gate.weight"], h), matmul(w[b + "ffn_up.weight"], h)
            x = x + matmul(w[b + "ffn_down.weight"], gate / (1 + np.exp(-gate)) * up)
        if pos >= len(prompt) - 1:
            logits.append(matmul(output, rms_norm(x, w["output_norm.weight"])).astype(np.float32))

    with open(a.out + ".tmp", "wb") as f:
        f.write(b"SKLOGITS" + struct.pack("<4I", 1, len(logits[0]), len(prompt), len(logits)))
        f.write(np.asarray(prompt, "<i4").tobytes())
        for row in logits:
            f.write(struct.pack("<i", int(np.argmax(row))) + row.astype("<f4").tobytes())
    os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
