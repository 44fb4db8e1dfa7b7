#!/usr/bin/env python3
"""libskainet_iree_plugin.so resolves a module's imports to the engine's kernels, under IREE.

    check_plugin.py PLUGIN.so WORKDIR

Compiles tests/record/plugin_dispatch.mlir for llvm-cpu (this CPU), then, with the plugin loaded:
  - iree-run-module --executable_plugin runs the static Q8_0 matmul; without the plugin the module
    does not load (its imports are unresolved);
  - through the Python runtime (flags parsed before the local-task device is made, so its workers
    call the imports): matmul against numpy for F32, F16, Q8_0, Q4_0, Q4_K, Q6_K at 1 and 37 rows,
    k = 256 or 512, 48 output features, in file order and (Q8_0, Q4_0, Q4_K, Q6_K) in the
    interleaved16 kernel-feed order made by the plugin's repack; the two-phase path against the
    fallback (scratch too small); attention (F16 and F32 caches; decode n=1 at pos 5 of 32 cells,
    prefill n=7 at 0, a sliding window with a soft cap, GQA, gpt-oss's per-head sinks, with and
    without a window) against numpy; the embedding gather in both orders;
  - calls that must fail do (a position past the cache, a token id outside the table), each in
    iree-run-module so the failure is seen as the tool's exit status.
The weights are packed by gguf-py (Q8_0, Q4_0) or made of random blocks with sane scales (Q4_K,
Q6_K, which gguf-py cannot quantize) and dequantized by gguf-py for the references.
"""
import os
import struct
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

from record_support import ROOT, fail, fresh_dir, run, tool

FIXTURE = os.path.join(ROOT, "tests", "record", "plugin_dispatch.mlir")
TYPE_ID = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
ROW_MAJOR, INTERLEAVED16 = 0, 1
N = 48  # output features
rng = np.random.default_rng(1234)


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def random_k_blocks(qtype, rows, k):
    """Random Q4_K / Q6_K blocks (any bytes are valid codes) with f16 scales of a sane size."""
    block = {"Q4_K": 144, "Q6_K": 210}[qtype]
    raw = rng.integers(0, 256, size=(rows, k // 256, block), dtype=np.uint8)
    if qtype == "Q4_K":  # d, dmin first
        raw[:, :, 0:2] = np.frombuffer(np.float16(rng.uniform(0.001, 0.01, raw.shape[:2])).tobytes(), np.uint8).reshape(*raw.shape[:2], 2)
        raw[:, :, 2:4] = np.frombuffer(np.float16(rng.uniform(0.001, 0.01, raw.shape[:2])).tobytes(), np.uint8).reshape(*raw.shape[:2], 2)
    else:  # d last
        raw[:, :, 208:210] = np.frombuffer(np.float16(rng.uniform(0.0005, 0.002, raw.shape[:2])).tobytes(), np.uint8).reshape(*raw.shape[:2], 2)
    return raw.reshape(rows, -1)


def weight(qtype, rows, k):
    """(bytes as int8 [rows * row_bytes], dequantized f32 [rows, k]) of a random weight."""
    w = rng.standard_normal((rows, k)).astype(np.float32)
    if qtype == "F32":
        return w.view(np.int8).reshape(-1), w
    if qtype == "F16":
        h = w.astype(np.float16)
        return h.view(np.int8).reshape(-1), h.astype(np.float32)
    if qtype in ("Q8_0", "Q4_0"):
        packed = quants.quantize(w, getattr(Q, qtype))
    else:
        packed = random_k_blocks(qtype, rows, k)
    deq = quants.dequantize(packed, getattr(Q, qtype)).reshape(rows, k).astype(np.float32)
    return np.ascontiguousarray(packed).view(np.int8).reshape(-1), deq


def close(name, got, want, rel):
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / max(float(np.max(np.abs(want))), 1e-30)
    print(f"  {name:<48} max|d|/max|ref| = {err:.2e} (bound {rel:.0e})", flush=True)
    if not np.isfinite(err) or err > rel:
        fail(f"{name}: relative error {err:.3e} over {rel:.0e}")
    return err


class Module:
    def __init__(self, vmfb, plugin):
        import iree.runtime as rt
        # The flag is read when the driver makes its device (the local-task driver's executable
        # plugin manager), so it must be parsed before that.
        rt.flags.parse_flags(f"--executable_plugin={plugin}")
        device = rt.get_driver("local-task").create_default_device()
        config = rt.Config(device=device)
        self.ctx = rt.SystemContext(config=config)
        self.ctx.add_vm_module(rt.VmModule.mmap(config.vm_instance, vmfb))
        self.m = self.ctx.modules.plugin_dispatch

    def call(self, name, *args):
        return self.m[name](*args).to_host()


def scratch_bound(rows, k):
    # Over every prepared layout (Q8x32, Q8x256, BF16 pairs: x86/isa.hpp) plus the 64-byte slack.
    return rows * (8 * k + 1024) + 64


def check_matmul(mod):
    results = {}
    for qtype, k in [("F32", 256), ("F16", 256), ("Q8_0", 256), ("Q4_0", 512), ("Q4_K", 512), ("Q6_K", 256)]:
        wbytes, deq = weight(qtype, N, k)
        dense = qtype in ("F32", "F16")
        for rows in (1, 37):
            x = rng.standard_normal((rows, k)).astype(np.float32)
            want = x.astype(np.float64) @ deq.astype(np.float64).T
            # Dense weights see x in F32 (or split into two BF16 exactly to 2^-18); packed ones an
            # 8-bit x, as the engine's kernels (and llama.cpp's) quantize it.
            rel = 1e-5 if dense else 2e-2
            orders = [ROW_MAJOR] + ([] if dense else [INTERLEAVED16])
            for order in orders:
                w = wbytes
                if order == INTERLEAVED16:
                    w = mod.call("repack_rows", wbytes, N, k, TYPE_ID[qtype], order)
                    if np.array_equal(w, wbytes):
                        fail(f"{qtype}: the interleaved16 repack changed nothing")
                row_chunk, col_chunk = (8, 16) if order == INTERLEAVED16 else (8, 20)
                got = mod.call("matmul", x, w, N, TYPE_ID[qtype], order, scratch_bound(rows, k), row_chunk, col_chunk, 0)
                close(f"matmul {qtype} rows={rows} k={k} order={order}", got, want, rel)
                results[(qtype, rows, order)] = got
                # The scratch binding 3 bytes off IREE's alignment: the plugin realigns it.
                skewed = mod.call("matmul", x, w, N, TYPE_ID[qtype], order, scratch_bound(rows, k), row_chunk, col_chunk, 3)
                if not np.array_equal(skewed, got):
                    fail(f"matmul {qtype} rows={rows} order={order}: a misaligned scratch changed the result")
            # Without room for the prepared x the rows import takes the one-phase kernel.
            fallback = mod.call("matmul", x, wbytes, N, TYPE_ID[qtype], ROW_MAJOR, 64, 8, 20, 0)
            close(f"matmul {qtype} rows={rows} fallback vs two-phase", fallback, results[(qtype, rows, ROW_MAJOR)].astype(np.float64),
                  1e-5 if dense else 2e-2)
    for (qtype, rows, order), got in results.items():
        if order == INTERLEAVED16:
            close(f"matmul {qtype} rows={rows} interleaved vs file order", got,
                  results[(qtype, rows, ROW_MAJOR)].astype(np.float64), 1e-4)


def attention_ref(q, kc, vc, layer, heads, kv_heads, hd, offset, scale, window, softcap, sinks):
    n = q.shape[0]
    group = heads // kv_heads
    out = np.zeros((n, heads * hd))
    keys, values = kc[layer].astype(np.float64), vc[layer].astype(np.float64)
    for h in range(heads):
        g = h // group
        s = q[:, h * hd:(h + 1) * hd].astype(np.float64) @ keys[:, g * hd:(g + 1) * hd].T * scale
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        pos = offset + np.arange(n)[:, None]
        cell = np.arange(keys.shape[0])[None, :]
        visible = cell <= pos
        if window > 0:
            visible &= pos - cell < window
        s = np.where(visible, s, -np.inf)
        # A sink joins each row's maximum and denominator and takes no column (-inf: none).
        mx = np.maximum(s.max(axis=1, keepdims=True), sinks[h])
        p = np.exp(s - mx)
        p /= p.sum(axis=1, keepdims=True) + np.exp(sinks[h] - mx)
        out[:, h * hd:(h + 1) * hd] = p @ values[:, g * hd:(g + 1) * hd]
    return out


def attention_inputs(kv, layers=2, ctx=32, heads=4, kv_heads=2, hd=16, n=1):
    dt = {"F16": np.float16, "F32": np.float32}[kv]
    kc = rng.standard_normal((layers, ctx, kv_heads * hd)).astype(dt)
    vc = rng.standard_normal((layers, ctx, kv_heads * hd)).astype(dt)
    q = rng.standard_normal((n, heads * hd)).astype(np.float32)
    return q, kc, vc


def check_attention(mod):
    heads, kv_heads, hd, ctx, layer = 4, 2, 16, 32, 1
    scale = 1.0 / np.sqrt(hd)
    none = np.full(heads, -np.inf, np.float32)
    # gpt-oss's sinks: of the scores' size, one far above them (the head's output all but vanishes)
    # and one far below (no effect).
    sinks = np.array([0.5, -1.0, 30.0, -30.0], np.float32)
    cases = [  # name, kv type, n, pos, delta, window, softcap, heads per workgroup, sinks
        ("decode", "F16", 1, 5, 0, 0, 0.0, 1, none),
        ("decode", "F32", 1, 5, 0, 0, 0.0, 3, none),
        ("prefill", "F16", 7, 0, 0, 0, 0.0, 1, none),
        ("prefill", "F32", 7, 0, 0, 0, 0.0, 2, none),
        ("prefill at 9 (pos 4 + delta 5)", "F16", 7, 4, 5, 0, 0.0, 1, none),
        ("window 3, softcap 2", "F16", 7, 10, 0, 3, 2.0, 1, none),
        ("last cell", "F32", 1, ctx - 1, 0, 0, 0.0, 4, none),
        ("sinks, decode", "F16", 1, 5, 0, 0, 0.0, 1, sinks),
        ("sinks, prefill", "F32", 7, 0, 0, 0, 0.0, 2, sinks),
        ("sinks, window 3", "F16", 7, 10, 0, 3, 0.0, 1, sinks),
    ]
    for name, kv, n, pos, delta, window, softcap, chunk, sink in cases:
        q, kc, vc = attention_inputs(kv, ctx=ctx, heads=heads, kv_heads=kv_heads, hd=hd, n=n)
        got = mod.call("attention", q, kc.view(np.int8).reshape(-1), vc.view(np.int8).reshape(-1), np.array(pos, np.int32),
                       sink, heads, kv_heads, hd, layer, ctx, TYPE_ID[kv], f32_bits(scale), window, f32_bits(softcap),
                       delta, chunk)
        want = attention_ref(q, kc, vc, layer, heads, kv_heads, hd, pos + delta, scale, window, softcap, sink)
        close(f"attention {name} {kv} n={n}", got, want, 1e-5)


def check_gather(mod):
    rows, cols = 40, 256
    ids = np.array([0, 39, 17, 16, 15, 32, 5], np.int32)
    for qtype in ("F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"):
        table, deq = weight(qtype, rows, cols)
        want = deq[ids].astype(np.float64)
        got = mod.call("gather_rows", table, ids, rows, cols, TYPE_ID[qtype], ROW_MAJOR, 3)
        close(f"gather {qtype} file order", got, want, 1e-6)
        if qtype != "F16":
            fed = mod.call("repack_rows", table, rows, cols, TYPE_ID[qtype], INTERLEAVED16)
            got = mod.call("gather_rows", fed, ids, rows, cols, TYPE_ID[qtype], INTERLEAVED16, 2)
            close(f"gather {qtype} interleaved16", got, want, 1e-6)


def run_module(vmfb, plugin, function, inputs):
    cmd = [tool("iree-run-module"), "--device=local-task", f"--module={vmfb}", f"--function={function}"]
    if plugin:
        cmd.insert(1, f"--executable_plugin={plugin}")
    return subprocess.run(cmd + [f"--input={i}" for i in inputs], capture_output=True, text=True)


def check_tools(work, vmfb, plugin):
    p = run_module(vmfb, plugin, "matmul_q8_0_static", ["1x256xf32=1", "48x8x34xi8=1"])
    # Every byte 1: d = f16 0x0101 = 257 * 2^-24, each of the 256 products 1 * 1.
    want = 256 * 257 * 2.0 ** -24
    line = next((l for l in p.stdout.splitlines() if l.startswith("1x48xf32=")), "")
    got = [float(v) for v in line.split("=", 1)[1].strip("[]").split()] if line else []
    if p.returncode != 0 or len(got) != N or max(abs(g - want) for g in got) > 1e-3 * want:
        fail(f"iree-run-module --executable_plugin: exit {p.returncode}, expected {want:.6g}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    print(f"  iree-run-module --executable_plugin: matmul_q8_0_static = {want:.6g} each", flush=True)
    p = run_module(vmfb, None, "matmul_q8_0_static", ["1x256xf32=1", "48x8x34xi8=1"])
    if p.returncode == 0:
        fail("the module ran without the plugin: its imports should be unresolved")
    print("  without the plugin: refused (" + (p.stderr.strip().splitlines() or ["?"])[0][:100] + ")", flush=True)

    # Calls the imports must refuse, each run alone (a failed dispatch fails the tool).
    q, kc, vc = attention_inputs("F16", ctx=32)
    np.save(os.path.join(work, "q.npy"), q)
    np.save(os.path.join(work, "kc.npy"), kc.view(np.int8).reshape(-1))
    np.save(os.path.join(work, "vc.npy"), vc.view(np.int8).reshape(-1))
    table, _ = weight("Q4_0", 40, 256)
    np.save(os.path.join(work, "table.npy"), table)
    for what, function, inputs in [
        ("pos past the cache", "attention",
         ["@" + os.path.join(work, f) for f in ("q.npy", "kc.npy", "vc.npy")] + ["i32=32", "4xf32=0"] +
         [f"{v}" for v in (4, 2, 16, 1, 32, 1, f32_bits(0.25), 0, 0, 0, 1)]),
        ("negative position", "attention",
         ["@" + os.path.join(work, f) for f in ("q.npy", "kc.npy", "vc.npy")] + ["i32=-1", "4xf32=0"] +
         [f"{v}" for v in (4, 2, 16, 1, 32, 1, f32_bits(0.25), 0, 0, 0, 1)]),
        ("token id outside the table", "gather_rows",
         ["@" + os.path.join(work, "table.npy"), "3xi32=1 40 2"] + [f"{v}" for v in (40, 256, 2, 0, 3)]),
    ]:
        p = run_module(vmfb, plugin, function, inputs)
        if p.returncode == 0:
            fail(f"{what}: the call succeeded\n{p.stdout[-1000:]}")
        if "dispatch kernel returned non-zero" not in p.stderr:
            fail(f"{what}: failed, but not in the import\n{p.stderr[-2000:]}")
        print(f"  {what}: refused by the import (exit {p.returncode})", flush=True)
    # The same inputs within range run (so the refusals above are the imports' checks).
    p = run_module(vmfb, plugin, "attention", ["@" + os.path.join(work, f) for f in ("q.npy", "kc.npy", "vc.npy")] +
                   ["i32=31", "4xf32=0"] + [f"{v}" for v in (4, 2, 16, 1, 32, 1, f32_bits(0.25), 0, 0, 0, 1)])
    if p.returncode != 0:
        fail(f"attention at the last cell failed: {p.stderr[-2000:]}")


def main():
    if len(sys.argv) != 3:
        fail("usage: check_plugin.py PLUGIN.so WORKDIR")
    # Under sanitizers (make test-asan) the build's own plugin is instrumented and cannot load into
    # IREE's processes: SKAINET_IREE_PLUGIN names the release one, as for every recorded-path test.
    plugin = os.path.abspath(os.environ.get("SKAINET_IREE_PLUGIN") or sys.argv[1])
    work = fresh_dir(sys.argv[2])
    if not os.path.exists(plugin):
        fail(f"{plugin} not found: build the target skainet_iree_plugin")
    vmfb = os.path.join(work, "plugin.vmfb")
    run([tool("iree-compile"), FIXTURE, "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host", "-o", vmfb])
    check_tools(work, vmfb, plugin)
    mod = Module(vmfb, plugin)
    check_matmul(mod)
    check_attention(mod)
    check_gather(mod)
    print("OK")


if __name__ == "__main__":
    main()
