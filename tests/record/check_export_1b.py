#!/usr/bin/env python3
"""A 1.1B-shaped Q4_0 model exports in bounded memory, its archive the size of the GGUF, and compiles.

    check_export_1b.py SKAINET WORKDIR

`skainet synth --preset tinyllama-1.1b --type Q4_0` (~600 MiB, written under WORKDIR and deleted at
the end, pass or fail), then `skainet export`:
  - model.irpa is within 2% of the GGUF's size (the packed weights travel as they are stored);
  - the export's peak RSS is under 25% of the GGUF's size (the archive is streamed, never held);
  - model.mlir compiles with iree-compile for llvm-cpu.
Peak RSS is the export process's own: ru_maxrss of RUSAGE_CHILDREN read in a fresh Python that ran
only the export (in this process it would also count synth).
"""
import os
import shutil
import sys

from record_support import fail, fresh_dir, run, tool

SIZE_TOLERANCE = 0.02
RSS_FRACTION = 0.25

# Runs argv[1:] and prints the peak RSS of that child alone, in bytes (Linux: ru_maxrss is KiB).
_MEASURE = (
    "import resource, subprocess, sys\n"
    "p = subprocess.run(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    "sys.exit(p.returncode)\n"
)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    skainet, work = sys.argv[1:]
    fresh_dir(work)
    try:
        gguf = os.path.join(work, "tinyllama-1.1b-q4_0.gguf")
        run([skainet, "synth", gguf, "--preset", "tinyllama-1.1b", "--type", "Q4_0"])
        out = os.path.join(work, "export")
        peak = int(run([sys.executable, "-c", _MEASURE, skainet, "export", gguf, "-o", out, "-q"]).split()[-1])

        gguf_bytes = os.path.getsize(gguf)
        irpa_bytes = os.path.getsize(os.path.join(out, "model.irpa"))
        ratio = irpa_bytes / gguf_bytes
        print(f"  GGUF {gguf_bytes} bytes, model.irpa {irpa_bytes} bytes ({ratio:.4f}); "
              f"export peak RSS {peak} bytes ({peak / gguf_bytes:.3f} of the GGUF)")
        if abs(ratio - 1) > SIZE_TOLERANCE:
            fail(f"model.irpa is {irpa_bytes} bytes, not within {SIZE_TOLERANCE:.0%} of the GGUF's {gguf_bytes}")
        # Under AddressSanitizer (make test-asan) RSS measures the sanitizer's allocator, quarantine
        # and shadow memory (0.6 of the file here), not the export: the bound holds for real builds.
        sanitized = os.environ.get("SKAINET_SANITIZED") == "1"
        if peak >= RSS_FRACTION * gguf_bytes and not sanitized:
            fail(f"export peak RSS {peak} bytes is not under {RSS_FRACTION:.0%} of the GGUF's {gguf_bytes}")

        run([tool("iree-compile"), os.path.join(out, "model.mlir"), "--iree-hal-target-device=local",
             "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
             "-o", os.path.join(out, "model.vmfb")])
        if os.path.getsize(os.path.join(out, "model.vmfb")) == 0:
            fail("iree-compile wrote an empty module")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
