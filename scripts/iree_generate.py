#!/usr/bin/env python3
"""Greedy generation with a model exported by `skainet export`, run by the IREE runtime.

    build/venv/bin/python scripts/iree_generate.py -m model.gguf -p "Once upon a time" -n 64
    build/venv/bin/python scripts/iree_generate.py --export DIR -m model.gguf ...

One command from a GGUF to text: without --export the model is exported to build/iree/<name>/ (again
only when the GGUF or the skainet binary is newer than it; --ctx, --seq-len and --kernels are passed
on), compiled to model.vmfb with the flags the export wrote (compile.flags; iree_module.py) when that
is missing or older, and run with the runtime flags it wrote (run.flags: the engine-kernel plugin).
--params FILE names another parameter file (e.g. the GGUF itself after `export --params gguf`).
Tokenizing and detokenizing go through `skainet tokenize`, so the text is the engine's own. The prompt
is run by the `prefill` function (padded to its static length: padded cells are overwritten before any
query can see them), then one `decode` call per token, each taking and returning the KV caches. Prints
the text, then the ids, tokens/s and the process's peak resident memory; --ids prints only the
generated ids (for tests).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

import iree_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, errors="replace").stdout


def export_if_stale(skainet, model, out, args):
    """Exports model to out unless out/model.mlir is newer than both the GGUF and skainet."""
    mlir = os.path.join(out, "model.mlir")
    if os.path.exists(mlir) and os.path.getmtime(mlir) >= max(os.path.getmtime(model), os.path.getmtime(skainet)):
        return
    cmd = [skainet, "export", model, "-o", out, "-q", "--kernels", args.kernels]
    if args.ctx:
        cmd += ["--ctx", str(args.ctx)]
    if args.seq_len:
        cmd += ["--seq-len", str(args.seq_len)]
    print(f"exporting {model} to {out}", file=sys.stderr)
    run(cmd)


def prefill_length(vm_module):
    """The static token count of `prefill`, from its declaration: prefill(%input0: tensor<Nxi32>) -> ..."""
    fn = vm_module.lookup_function("prefill")
    if fn is None:
        sys.exit("iree_generate: the module has no prefill function (export with --entry prefill,decode)")
    declaration = str(fn.reflection.get("iree.abi.declaration", ""))
    match = re.search(r"tensor<(\d+)xi32>", declaration)
    if not match:
        sys.exit(f"iree_generate: cannot read prefill's token count from '{declaration}'")
    return int(match.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", help="folder written by skainet export (default: export to build/iree/NAME)")
    ap.add_argument("-m", "--model", required=True, help="the GGUF it was exported from (its vocabulary)")
    ap.add_argument("-p", "--prompt", default="Once upon a time")
    ap.add_argument("-n", "--n-predict", type=int, default=64)
    ap.add_argument("--params", help="parameter file (default: EXPORT/model.irpa)")
    ap.add_argument("--skainet", default=os.path.join(ROOT, "build", "release", "skainet"))
    ap.add_argument("--device", default="local-task")
    ap.add_argument("-t", "--threads", type=int, help="IREE worker threads (default: the runtime's)")
    ap.add_argument("--ctx", type=int, help="when exporting: the KV cache cells")
    ap.add_argument("--seq-len", type=int, help="when exporting: prefill's token count")
    ap.add_argument("--kernels", default="engine", choices=["engine", "stablehlo", "stablehlo-flat"], help="when exporting")
    ap.add_argument("--ids", action="store_true", help="print only the generated ids")
    a = ap.parse_args()

    if not a.export:
        a.export = os.path.join(ROOT, "build", "iree", os.path.splitext(os.path.basename(a.model))[0])
        export_if_stale(a.skainet, a.model, a.export, a)
    params = a.params or os.path.join(a.export, "model.irpa")
    vmfb = iree_module.compile_module(a.export)

    prompt = [int(t) for t in run([a.skainet, "tokenize", "-m", a.model, "-p", a.prompt, "--ids"]).strip("[]\n ").split(",")]
    model = iree_module.load(a.export, vmfb, params, a.device, a.threads)

    seq = prefill_length(model.vm_module)
    if len(prompt) > seq:
        sys.exit(f"iree_generate: the prompt has {len(prompt)} tokens, the exported prefill takes {seq} (--seq-len)")
    padded = np.zeros(seq, np.int32)
    padded[: len(prompt)] = prompt

    t0 = time.perf_counter()
    logits, k, v = model.prefill(padded)
    token = int(np.argmax(logits.to_host()[len(prompt) - 1]))
    t1 = time.perf_counter()
    out = [token]
    pos = len(prompt)
    while len(out) < a.n_predict:
        logits, k, v = model.decode(np.array([token], np.int32), np.array(pos, np.int32), k, v)
        token = int(np.argmax(logits.to_host()))
        out.append(token)
        pos += 1
    t2 = time.perf_counter()

    if a.ids:
        print(",".join(map(str, out)))
        return
    print(a.prompt + run([a.skainet, "tokenize", "-m", a.model, "--decode", ",".join(map(str, out))]).rstrip("\n"))
    print(f"\nids: {','.join(map(str, out))}", file=sys.stderr)
    print(f"prefill: {len(prompt)} tokens (function of {seq}) in {t1 - t0:.3f} s; "
          f"decode: {len(out) - 1} tokens in {t2 - t1:.3f} s = {(len(out) - 1) / max(t2 - t1, 1e-9):.1f} tokens/s; "
          f"peak resident memory {iree_module.peak_rss_bytes() / 2**20:.1f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
