#!/usr/bin/env python3
"""Greedy generation through IREE equals the eager engine's, token for token.

    check_generation.py SKAINET MODEL.gguf MODULES CTX

For MODEL (stories260K F32) and its Q8_0 quantization, in both kernel forms (`--kernels engine`, the
default: the engine's kernels through the plugin; `--kernels stablehlo`: every op compiled by IREE),
and Q8_0 in `--kernels stablehlo-flat` (the products Vulkan compiles): the modules exported with
`--ctx CTX` and compiled for this CPU by the build (tests/record/modules.cmake, under MODULES: the
Q8_0 file is MODULES/models/Q8_0.gguf), run by scripts/iree_generate.py --ids -n 64 (prefill + 63
greedy decode steps on the IREE runtime), against `skainet run --temp 0 -n 64 --ctx CTX --ignore-eos`
(CTX: modules.cmake's generation_ctx, so both engines run at the same context).

`skainet run` prints text, not ids, so the comparison is on text: the prompt followed by the IREE ids
detokenized by `skainet tokenize --decode` must equal run's output byte for byte, and both must be 64
tokens (run's own count, from its stats line). A single different token changes the text; two
different sequences with the same text would need the greedy argmax to differ only in how the same
string is split, which no test here could tell from a tokenizer artefact anyway.
"""
import os
import re
import subprocess
import sys

from record_support import PROMPT, ROOT, fail, run

N = 64


def check(skainet, model, out, kernels, ctx):
    if not os.path.isfile(os.path.join(out, "model.vmfb")):
        fail(f"no module in {out}: build the target record_modules (the record.modules test does)")
    ids = run([sys.executable, os.path.join(ROOT, "scripts", "iree_generate.py"), "--export", out, "-m", model,
               "-p", PROMPT, "-n", str(N), "--ids", "--skainet", skainet]).strip()
    if not re.fullmatch(r"\d+(,\d+)*", ids):
        fail(f"iree_generate --ids printed {ids!r}")
    if len(ids.split(",")) != N:
        fail(f"iree_generate produced {len(ids.split(','))} ids, asked for {N}")
    iree_text = PROMPT + run([skainet, "tokenize", "-m", model, "--decode", ids]).removesuffix("\n")

    cmd = [skainet, "run", "-m", model, "-p", PROMPT, "-n", str(N), "--temp", "0", "--ctx", ctx, "--ignore-eos"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    m = re.search(r"generated (\d+) tokens", p.stderr)
    if not m or int(m[1]) != N:
        fail(f"skainet run did not report {N} generated tokens:\n{p.stderr}")
    eager_text = p.stdout.removesuffix("\n")

    if iree_text != eager_text:
        k = next((i for i, (a, b) in enumerate(zip(iree_text, eager_text)) if a != b),
                 min(len(iree_text), len(eager_text)))
        fail(f"{os.path.basename(model)}: texts differ at character {k}\n  IREE : {iree_text!r}\n"
             f"  eager: {eager_text!r}\n  IREE ids: {ids}")
    print(f"  {os.path.basename(model)} ({kernels}): {N} tokens equal: {iree_text[:60]!r}...")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    skainet, model, modules, ctx = sys.argv[1:]
    q8 = os.path.join(modules, "models", "Q8_0.gguf")
    for kernels in ("engine", "stablehlo"):
        check(skainet, model, os.path.join(modules, "generation-F32", kernels), kernels, ctx)
        check(skainet, q8, os.path.join(modules, "generation-Q8_0", kernels), kernels, ctx)
    check(skainet, q8, os.path.join(modules, "generation-Q8_0", "stablehlo-flat"), "stablehlo-flat", ctx)
    print("PASS")


if __name__ == "__main__":
    main()
