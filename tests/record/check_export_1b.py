#!/usr/bin/env python3
"""A 1.1B-shaped Q4_0 model exports in bounded memory, and the compiled module keeps the plan.

    check_export_1b.py SKAINET WORKDIR

`skainet synth --preset tinyllama-1.1b --type Q4_0` (~600 MiB, written under WORKDIR and deleted at
the end, pass or fail), then `skainet export --ctx 256` (the default, engine-kernel form):
  - model.irpa is within 2% of the GGUF's size (the packed weights travel as they are stored);
  - the export's peak RSS is under 25% of the GGUF's size (the archive is streamed, never held);
  - model.mlir compiles with the flags the export wrote (compile.flags), and IREE's own statistics
    (--iree-scheduling-dump-statistics-format=csv) list no dispatch at module load: nothing is
    unpacked into hoisted globals;
  - iree-run-module (with run.flags: the plugin) runs `decode` within 1.15x the archive's size of
    peak RSS, and `prefill` within the archive + the largest weight in f32 + the caches;
  - report.txt's total ("memory at run time") is within 10% of each measured peak.
Peak RSS is each child's own: ru_maxrss of RUSAGE_CHILDREN read in a fresh Python that ran only it.
"""
import os
import re
import shutil
import sys

from record_support import compile_export, fail, fresh_dir, initializer_dispatches, iree_module, peak_rss, run, tool

SIZE_TOLERANCE = 0.02
EXPORT_RSS_FRACTION = 0.25
DECODE_RSS_RATIO = 1.15
REPORT_TOLERANCE = 0.10
CTX = 256
SEQ = 64
# TinyLlama 1.1B: the largest weight is the output (32000 x 2048); caches [22, CTX, 256] f16, K and V.
LARGEST_WEIGHT_F32 = 32000 * 2048 * 4
CACHE_SHAPE = f"22x{CTX}x256xf16"
CACHE_BYTES = 2 * 22 * CTX * 256 * 2

_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def report_total(report):
    m = re.search(r"^\s*total\s+([\d.]+) (B|KiB|MiB|GiB)", report, re.M)
    if not m:
        fail(f"report.txt states no run-time total:\n{report}")
    return float(m[1]) * _UNITS[m[2]]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    skainet, work = sys.argv[1:]
    fresh_dir(work)
    # Under AddressSanitizer (make test-asan) RSS measures the sanitizer's allocator, quarantine
    # and shadow memory (0.6 of the file here), not the export: the bound holds for real builds.
    sanitized = os.environ.get("SKAINET_SANITIZED") == "1"
    try:
        gguf = os.path.join(work, "tinyllama-1.1b-q4_0.gguf")
        run([skainet, "synth", gguf, "--preset", "tinyllama-1.1b", "--type", "Q4_0"])
        out = os.path.join(work, "export")
        peak = peak_rss([skainet, "export", gguf, "-o", out, "-q", "--ctx", str(CTX), "--seq-len", str(SEQ)])

        gguf_bytes = os.path.getsize(gguf)
        irpa = os.path.join(out, "model.irpa")
        irpa_bytes = os.path.getsize(irpa)
        ratio = irpa_bytes / gguf_bytes
        print(f"  GGUF {gguf_bytes} bytes, model.irpa {irpa_bytes} bytes ({ratio:.4f}); "
              f"export peak RSS {peak} bytes ({peak / gguf_bytes:.3f} of the GGUF)")
        if abs(ratio - 1) > SIZE_TOLERANCE:
            fail(f"model.irpa is {irpa_bytes} bytes, not within {SIZE_TOLERANCE:.0%} of the GGUF's {gguf_bytes}")
        if peak >= EXPORT_RSS_FRACTION * gguf_bytes and not sanitized:
            fail(f"export peak RSS {peak} bytes is not under {EXPORT_RSS_FRACTION:.0%} of the GGUF's {gguf_bytes}")

        stats = os.path.join(out, "statistics.csv")
        vmfb = compile_export(out, extra=["--iree-scheduling-dump-statistics-format=csv",
                                          f"--iree-scheduling-dump-statistics-file={stats}"])
        at_load = initializer_dispatches(stats)
        print(f"  {len(at_load)} dispatches at module load")
        if at_load:
            fail(f"the module computes at load (hoisted weight unpacking?): {at_load[:5]}")

        common = [tool("iree-run-module"), f"--module={vmfb}", f"--parameters=model={irpa}", "--device=local-task",
                  *iree_module.run_flags(out)]
        decode = peak_rss([*common, "--function=decode", "--input=1xi32=1", f"--input=i32={SEQ}",
                           f"--input={CACHE_SHAPE}=0", f"--input={CACHE_SHAPE}=0"])
        prefill = peak_rss([*common, "--function=prefill", f"--input={SEQ}xi32=1"])
        with open(os.path.join(out, "report.txt")) as f:
            planned = report_total(f.read())
        prefill_bound = irpa_bytes + LARGEST_WEIGHT_F32 + CACHE_BYTES
        print(f"  IREE peak RSS: decode {decode / 2**20:.1f} MiB ({decode / irpa_bytes:.3f} of the archive), "
              f"prefill {prefill / 2**20:.1f} MiB (bound {prefill_bound / 2**20:.1f} MiB); "
              f"report.txt: {planned / 2**20:.1f} MiB")
        if not sanitized:
            if decode > DECODE_RSS_RATIO * irpa_bytes:
                fail(f"decode peak RSS {decode} bytes is over {DECODE_RSS_RATIO}x the archive's {irpa_bytes}")
            if prefill > prefill_bound:
                fail(f"prefill peak RSS {prefill} bytes is over the archive + largest f32 weight + caches "
                     f"({prefill_bound})")
            for name, measured in (("decode", decode), ("prefill", prefill)):
                if abs(planned - measured) > REPORT_TOLERANCE * measured:
                    fail(f"report.txt says {planned:.0f} bytes at run time, {name} measured {measured} "
                         f"(more than {REPORT_TOLERANCE:.0%} apart)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
