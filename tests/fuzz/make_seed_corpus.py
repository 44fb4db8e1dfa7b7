#!/usr/bin/env python3
"""Writes the seed corpus for gguf_reader_fuzzer: small valid GGUF files that between them use every
metadata value type, arrays of each, several tensor types, a custom alignment, version 2, plus the
header of stories260K (its metadata and tensor table without the tensor data).

    make_seed_corpus.py --out build/fuzz/tests/fuzz/seed [--model ../shared/models/stories260K.gguf]

Generated files are build outputs; never commit them.
"""
import argparse
import struct
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V


def write(path: Path, fill, arch: str = "llama", alignment: int | None = None) -> bytes:
    w = gguf.GGUFWriter(str(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def scalars(w: gguf.GGUFWriter) -> None:
    w.add_uint8("seed.u8", 200)
    w.add_int8("seed.i8", -5)
    w.add_uint16("seed.u16", 60000)
    w.add_int16("seed.i16", -300)
    w.add_uint32("seed.u32", 4_000_000_000)
    w.add_int32("seed.i32", -70000)
    w.add_float32("seed.f32", 1.5)
    w.add_bool("seed.bool", True)
    w.add_string("seed.string", "héllo")
    w.add_uint64("seed.u64", 1 << 40)
    w.add_int64("seed.i64", -(1 << 40))
    w.add_float64("seed.f64", -2.25)


def arrays(w: gguf.GGUFWriter) -> None:
    for vtype in (V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.UINT64, V.INT64):
        w.add_key_value(f"seed.arr.{vtype.name.lower()}", [1, 2, 3], V.ARRAY, sub_type=vtype)
    w.add_key_value("seed.arr.float32", [0.5, -1.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("seed.arr.float64", [0.25], V.ARRAY, sub_type=V.FLOAT64)
    w.add_key_value("seed.arr.bool", [True, False], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("tokenizer.ggml.tokens", ["<s>", "</s>", "a", "\u2581the"], V.ARRAY, sub_type=V.STRING)


def raw(n_bytes: int) -> np.ndarray:
    return (np.arange(n_bytes) % 251).astype(np.uint8)


def tensors(w: gguf.GGUFWriter) -> None:
    w.add_uint32("llama.block_count", 1)
    w.add_tensor("token_embd.weight", np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16))
    w.add_tensor("output_norm.weight", np.ones(16, dtype=np.float16))
    # Quantized tensors as raw blocks: byte shape [rows, blocks * block_bytes].
    w.add_tensor("blk.0.attn_q.weight", raw(2 * 34), raw_shape=[2, 68], raw_dtype=Q.Q8_0)
    w.add_tensor("blk.0.attn_k.weight", raw(2 * 18), raw_shape=[2, 36], raw_dtype=Q.Q4_0)
    w.add_tensor("blk.0.ffn_up.weight", raw(144), raw_shape=[1, 144], raw_dtype=Q.Q4_K)
    w.add_tensor("blk.0.ffn_down.weight", raw(210), raw_shape=[1, 210], raw_dtype=Q.Q6_K)
    w.add_tensor("rope_freqs", np.arange(8, dtype=np.int32))


def stories_seeds(out: Path, model: Path) -> None:
    data = model.read_bytes()
    r = gguf.GGUFReader(str(model))
    kv_end = r.tensors[0].field.offset if r.tensors else r.data_offset
    # The header as it is: metadata and tensor table; the data is missing, so the reader reports the
    # file cut short only after it has parsed everything.
    (out / "stories260K-header.gguf").write_bytes(data[:r.data_offset])
    # Its metadata as a complete file: tensor count 0 and nothing after the last pair.
    (out / "stories260K-metadata.gguf").write_bytes(data[:8] + struct.pack("<Q", 0) + data[16:kv_end])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", type=Path, help="stories260K.gguf (skipped when absent)")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    write(out / "empty.gguf", lambda w: None)
    write(out / "scalars.gguf", scalars)
    write(out / "arrays.gguf", arrays)
    v3 = write(out / "tensors.gguf", tensors)
    write(out / "tensors-align64.gguf", tensors, alignment=64)
    # Versions 2 and 3 share one layout; only the version field differs.
    (out / "tensors-v2.gguf").write_bytes(v3[:4] + struct.pack("<I", 2) + v3[8:])
    if args.model and args.model.exists():
        stories_seeds(out, args.model)
    names = sorted(p.name for p in out.iterdir())
    print(f"make_seed_corpus: {len(names)} seeds in {out}: {' '.join(names)}")


if __name__ == "__main__":
    main()
