#!/usr/bin/env python3
"""Greedy generation with a model exported by `skainet export`, run by the IREE runtime.

    build/venv/bin/python scripts/iree_generate.py --export DIR -m model.gguf -p "Once upon a time" -n 64

DIR holds model.mlir (compiled here to DIR/model.vmfb for llvm-cpu when that file is missing or older)
and model.irpa (or --params FILE, e.g. the GGUF itself after `export --params gguf`). Tokenizing and
detokenizing go through `skainet tokenize`, so the text is the engine's own. The prompt is run by the
`prefill` function (padded to its static length: padded cells are overwritten before any query can
see them), then one `decode` call per token, each taking and returning the KV caches. Prints the
text, then the ids and tokens/s; --ids prints only the generated ids (for tests).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import iree.runtime as rt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, errors="replace").stdout


def compile_module(mlir, vmfb):
    if os.path.exists(vmfb) and os.path.getmtime(vmfb) >= os.path.getmtime(mlir):
        return
    tmp = vmfb + ".tmp"
    run([os.path.join(BIN, "iree-compile"), mlir, "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host", "-o", tmp])
    os.replace(tmp, vmfb)


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
    ap.add_argument("--export", required=True, help="folder written by skainet export")
    ap.add_argument("-m", "--model", required=True, help="the GGUF it was exported from (its vocabulary)")
    ap.add_argument("-p", "--prompt", default="Once upon a time")
    ap.add_argument("-n", "--n-predict", type=int, default=64)
    ap.add_argument("--params", help="parameter file (default: EXPORT/model.irpa)")
    ap.add_argument("--skainet", default=os.path.join(ROOT, "build", "release", "skainet"))
    ap.add_argument("--device", default="local-task")
    ap.add_argument("--ids", action="store_true", help="print only the generated ids")
    a = ap.parse_args()

    mlir = os.path.join(a.export, "model.mlir")
    vmfb = os.path.join(a.export, "model.vmfb")
    params = a.params or os.path.join(a.export, "model.irpa")
    compile_module(mlir, vmfb)

    prompt = [int(t) for t in run([a.skainet, "tokenize", "-m", a.model, "-p", a.prompt, "--ids"]).strip("[]\n ").split(",")]
    config = rt.Config(a.device)
    index = rt.ParameterIndex()
    index.load(params)
    modules = rt.load_vm_modules(
        rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope="model")),
        rt.create_hal_module(config.vm_instance, config.device),
        rt.VmModule.mmap(config.vm_instance, vmfb),
        config=config)
    model = modules[-1]

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
          f"decode: {len(out) - 1} tokens in {t2 - t1:.3f} s = {(len(out) - 1) / max(t2 - t1, 1e-9):.1f} tokens/s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
