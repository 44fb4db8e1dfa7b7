#!/usr/bin/env python3
"""Cross-checks SKaiNET's reference quantizers against gguf-py's gguf.quants (numpy).

usage: quant_crosscheck.py PATH/TO/quant_exchange WORK_DIR

1. gguf.quants encodes seeded data (Gaussian rows, outliers, an all-zero block, tiny and large
   values) for every type it can quantize; for the types it can only decode, random blocks with
   finite scales are made. gguf.GGUFWriter stores them raw; `quant_exchange dequantize` decodes them
   with our kernels, which must equal gguf.quants.dequantize bit for bit.
2. An F32 file of the same data goes through `quant_exchange quantize` for each of our formats;
   gguf.GGUFReader reads the result, gguf.quants.dequantize decodes it, and that must equal our own
   decoding bit for bit; where gguf.quants also quantizes the type, our bytes must equal its bytes.

Prints one line per type and exits non-zero on any mismatch.
"""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

OURS = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
        T.IQ4_NL, T.IQ4_XS, T.MXFP4]

# Byte differences between our quantizer and gguf.quants that have a known, legitimate cause.
# Empty: on the data below every byte agrees. (Q4_0/Q5_0 round x*id + offset as a fused
# multiply-add would; both sides emulate that the same way, see docs/formats.md.)
KNOWN_BYTE_DIFFERENCES: dict[T, str] = {}

ROWS, COLS = 24, 1024  # COLS is a multiple of every block size (32 and 256)


def make_data(seed: int = 20240611) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[1] *= np.float32(0.02)                                    # small weights, like real layers
    outliers = rng.random((ROWS, COLS)) < 1 / 64
    x[2:6][outliers[2:6]] *= np.float32(12.0)                   # rows with outliers
    x[6, :256] = 0.0                                            # an all-zero (super-)block
    x[6, 256:288] = np.float32(0.75)                            # a constant block
    x[7] = np.abs(x[7])                                         # all positive
    x[8] = -np.abs(x[8])                                        # all negative
    x[9] *= np.float32(1e-3)                                    # tiny: binary16 scales go subnormal
    x[10] *= np.float32(300.0)                                  # large
    x[11] = rng.integers(-8, 8, COLS).astype(np.float32)        # exact grid values (ties)
    x[12] = (rng.integers(-20, 20, COLS) * 0.5).astype(np.float32)
    x[13, ::32] = np.float32(40.0)                              # one spike per block
    return x


def can_quantize(t: T) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, 256), dtype=np.float32), t)
        return True
    except (NotImplementedError, gguf.quants.QuantError):
        return False


def random_blocks(t: T, rng: np.random.Generator, rows: int) -> np.ndarray:
    """Random bytes in ggml's block layout, with every binary16 scale made finite and moderate."""
    block, size = GGML_QUANT_SIZES[t]
    nblocks = COLS // block
    raw = rng.integers(0, 256, (rows, nblocks, size), dtype=np.uint8)
    half_fields = {T.Q4_0: [0], T.Q8_0: [0], T.Q5_0: [0], T.Q4_1: [0, 2], T.Q5_1: [0, 2],
                   T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
                   T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: []}[t]
    for off in half_fields:
        h = (rng.standard_normal((rows, nblocks)) * 0.01).astype(np.float16)
        raw[:, :, off:off + 2] = h.view(np.uint8).reshape(rows, nblocks, 2)
    if t == T.MXFP4:  # the E8M0 exponent byte first: scales 2^-20 .. 2^10, every product finite
        raw[:, :, 0] = rng.integers(127 - 20, 127 + 10, (rows, nblocks), dtype=np.uint8)
    return raw.reshape(rows, nblocks * size)


def write_raw(path: Path, tensors: list[tuple[str, np.ndarray, T]]) -> None:
    w = gguf.GGUFWriter(str(path), "skainet-xcheck")
    for name, data, t in tensors:
        if t == T.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=t)  # uint8 rows of encoded blocks
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_tensors(path: Path) -> dict[str, tuple[T, np.ndarray]]:
    """name -> (type, raw bytes as (rows, bytes per row))"""
    out = {}
    r = gguf.GGUFReader(str(path))
    for t in r.tensors:
        rows = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else 1
        out[t.name] = (T(t.tensor_type), np.asarray(t.data).view(np.uint8).reshape(rows, -1).copy())
    return out


def run(exe: str, *args: str) -> None:
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")


def bits_equal(a: np.ndarray, b: np.ndarray) -> tuple[bool, int]:
    a32 = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    b32 = np.ascontiguousarray(b, dtype=np.float32).view(np.uint32)
    if a32.shape != b32.shape:
        return False, -1
    n = int(np.count_nonzero(a32 != b32))
    return n == 0, n


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exe, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    x = make_data()
    rng = np.random.default_rng(7)
    failures: list[str] = []
    lines: list[str] = []
    package_quantizes = {t: can_quantize(t) for t in OURS}

    # ---- 1. gguf.quants encodes, we decode --------------------------------------------------
    tensors: list[tuple[str, np.ndarray, T]] = []
    for t in OURS:
        if t == T.F32:
            continue
        if package_quantizes[t]:
            q = gguf.quants.quantize(x, t)
            q = np.ascontiguousarray(q).view(np.uint8).reshape(ROWS, -1)
            tensors.append((f"pkg.{t.name}", q, t))
        if t not in (T.F16, T.BF16):
            tensors.append((f"rnd.{t.name}", random_blocks(t, rng, 8), t))
    write_raw(work / "package_encoded.gguf", tensors)
    run(exe, "dequantize", str(work / "package_encoded.gguf"), str(work / "package_encoded.ours_f32.gguf"))
    ours = read_tensors(work / "package_encoded.ours_f32.gguf")
    for name, q, t in tensors:
        ot, ob = ours[name]
        expect = gguf.quants.dequantize(q, t)
        ok, n = bits_equal(ob.view(np.float32), expect)
        ok = ok and ot == T.F32
        lines.append(f"decode  {t.name:5} {name.split('.')[0]:3} {'bit-exact' if ok else f'{n} floats differ'}")
        if not ok:
            failures.append(f"decoding {name}: {n} floats differ from gguf.quants.dequantize")

    # ---- 2. we encode, gguf.quants decodes ------------------------------------------------------
    f32_path = work / "source_f32.gguf"
    write_raw(f32_path, [("x", x, T.F32)])
    for t in OURS:
        qpath = work / f"ours.{t.name}.gguf"
        run(exe, "quantize", str(f32_path), str(qpath), t.name)
        qt, qb = read_tensors(qpath)["x"]
        if qt != t:
            failures.append(f"{t.name}: our file declares {qt.name}")
            continue
        run(exe, "dequantize", str(qpath), str(work / f"ours.{t.name}.f32.gguf"))
        _, ours_f32 = read_tensors(work / f"ours.{t.name}.f32.gguf")["x"]
        theirs = gguf.quants.dequantize(qb, t)
        ok, n = bits_equal(ours_f32.view(np.float32), theirs)
        msg = f"encode  {t.name:5} decode {'bit-exact' if ok else f'{n} floats differ'}"
        if not ok:
            failures.append(f"{t.name}: gguf.quants decodes our bytes differently from us in {n} floats")
        if package_quantizes[t]:
            pkg = np.ascontiguousarray(gguf.quants.quantize(x, t)).view(np.uint8).reshape(ROWS, -1)
            block, size = GGML_QUANT_SIZES[t]
            diff_blocks = int(np.count_nonzero((qb.reshape(-1, size) != pkg.reshape(-1, size)).any(axis=1)))
            total = qb.size // size
            msg += f", bytes vs gguf.quants: {diff_blocks}/{total} blocks differ"
            if diff_blocks and t not in KNOWN_BYTE_DIFFERENCES:
                failures.append(f"{t.name}: {diff_blocks} of {total} blocks differ from gguf.quants.quantize")
        else:
            msg += ", bytes: gguf.quants cannot quantize this type"
        if t == T.F32:
            ok32 = bool(np.array_equal(qb.view(np.float32), x))
            msg += ", F32 copy exact" if ok32 else ", F32 copy DIFFERS"
            if not ok32:
                failures.append("F32: quantize is not a plain copy")
        lines.append(msg)

    others = [t.name for t in T if t not in OURS and can_quantize(t)]
    print(f"gguf {version('gguf')} numpy {np.__version__}; data {ROWS}x{COLS}")
    if others:
        print(f"  (gguf.quants also quantizes {', '.join(others)}: no reference kernel of ours, skipped)")
    for line in lines:
        print("  " + line)
    if failures:
        print("MISMATCHES:")
        for f in failures:
            print("  " + f)
        return 1
    print("all formats agree with gguf.quants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
