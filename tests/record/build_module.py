#!/usr/bin/env python3
"""Exports a model and compiles it for this CPU: one IREE module of the recorded-path tests, made as a
build step (tests/record/modules.cmake) so that each module is compiled once and again only when
`skainet`, the model or this script changes, not on every test run.

    build_module.py SKAINET MODEL.gguf OUT_DIR [--prompt TEXT] [--statistics] [skainet export options...]

--prompt TEXT sets the prefill function's length (--seq-len) to TEXT's token count with MODEL's
vocabulary (BOS included), so a test can run its prompt unpadded. --statistics has iree-compile write
its scheduling statistics to OUT_DIR/statistics.csv (which dispatches run, and where). OUT_DIR gets what `skainet export`
writes, then model.vmfb compiled with the flags the export wrote (scripts/iree_module.py), written last
and atomically: a build cut short leaves no model.vmfb, so the step runs again.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record_support import export, fail, run  # noqa: E402  (also puts scripts/ on the path)
import iree_module  # noqa: E402


def prompt_length(skainet, model, prompt):
    ids = json.loads(run([skainet, "tokenize", "-m", model, "-p", prompt, "--ids"]))
    if not ids:
        fail(f"{model}: the prompt {prompt!r} has no tokens")
    return len(ids)


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    skainet, model, out, options = args[0], args[1], args[2], args[3:]
    if "--prompt" in options:
        at = options.index("--prompt")
        if at + 1 >= len(options):
            sys.exit("build_module.py: --prompt needs a text")
        options = options[:at] + ["--seq-len", str(prompt_length(skainet, model, options[at + 1]))] + options[at + 2:]
    extra = []
    if "--statistics" in options:
        options.remove("--statistics")
        extra = ["--iree-scheduling-dump-statistics-format=csv",
                 f"--iree-scheduling-dump-statistics-file={os.path.join(out, 'statistics.csv')}"]
    shutil.rmtree(out, ignore_errors=True)
    export(skainet, model, out, *options)
    iree_module.compile_module(out, extra=extra)


if __name__ == "__main__":
    main()
