"""Helpers shared by the recorded-path checks (tests/record/check_*.py).

The IREE tools are the ones of the test virtual environment (scripts/setup.sh), which sit beside the
Python that runs these scripts. A missing tool is a failure, never a skip: the recorded path is
checked against IREE or not at all.
"""
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IREE_BIN = os.path.dirname(sys.executable)
PROMPT = "Once upon a time"
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import iree_module  # noqa: E402  (how an export folder is compiled and run: its flags files)


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def tool(name):
    path = os.path.join(IREE_BIN, name)
    if not os.access(path, os.X_OK):
        fail(f"{name} not found in {IREE_BIN}: install IREE with scripts/setup.sh (the tests never skip)")
    return path


def run(cmd, **kw):
    """Runs cmd; on failure prints its output and fails. Returns stdout."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        fail(f"exit {p.returncode} after {dt:.1f} s: {' '.join(cmd)}\n--- stdout\n{p.stdout[-4000:]}"
             f"\n--- stderr\n{p.stderr[-4000:]}")
    shown = " ".join(os.path.basename(c) if i == 0 else c.split("\n")[0] for i, c in enumerate(cmd))
    print(f"  {dt:6.1f} s  {shown}", flush=True)
    return p.stdout


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def quantized(skainet, model, out, qtype):
    """MODEL re-encoded to qtype under out (made at test time, never committed)."""
    run([skainet, "quantize", model, out, qtype])
    return out


def export(skainet, model, out, *args):
    run([skainet, "export", model, "-o", out, "-q", *args])
    for f in ("model.mlir", "report.txt", "compile.flags", "compile.llvm-cpu.flags", "run.flags"):
        if not os.path.isfile(os.path.join(out, f)):
            fail(f"skainet export wrote no {f} in {out}")
    return out


# One row of iree-dump-parameters' table: "start | end | length | `name`".
_DUMP_ROW = re.compile(r"^\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*`(.*)`\s*$")


def dump_parameters(archive):
    """iree-dump-parameters' entries of archive: [(name, start, length)] in its order."""
    out = run([tool("iree-dump-parameters"), f"--parameters={archive}"])
    rows = []
    for line in out.splitlines():
        m = _DUMP_ROW.match(line)
        if m:
            start, end, length, name = int(m[1]), int(m[2]), int(m[3]), m[4]
            if end - start != length:
                fail(f"iree-dump-parameters {archive}: {name} spans {start}..{end} but says length {length}")
            rows.append((name, start, length))
    return rows


def compile_export(out, target=None, vmfb=None, extra=()):
    """iree-compile of out/model.mlir with the flags the export wrote (and `target`); returns the vmfb."""
    vmfb = vmfb or os.path.join(out, "model.vmfb")
    run([tool("iree-compile"), os.path.join(out, "model.mlir"), *iree_module.compile_flags(out, target), *extra,
         "-o", vmfb])
    if not os.path.isfile(vmfb) or os.path.getsize(vmfb) == 0:
        fail(f"iree-compile wrote no module {vmfb}")
    return vmfb


def initializer_dispatches(stats_csv):
    """Dispatches IREE runs at module load (const-expr hoisting: weights unpacked into globals), from
    the CSV that --iree-scheduling-dump-statistics-format=csv writes."""
    with open(stats_csv) as f:
        return [line.strip() for line in f if '"dispatch"' in line and "_initializer_" in line]


# Runs argv[1:] and prints the peak RSS of that child alone, in bytes (Linux: ru_maxrss is KiB).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    "sys.exit(p.returncode)\n"
)


def peak_rss(cmd):
    """Runs cmd in a fresh Python and returns the child's peak resident set in bytes."""
    return int(run([sys.executable, "-c", _MEASURE, *cmd]).split()[-1])
