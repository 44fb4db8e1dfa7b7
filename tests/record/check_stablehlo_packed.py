#!/usr/bin/env python3
"""The portable form keeps packed weights packed under IREE: nothing is unpacked at load, and every
one-row product reads its weight's bytes in the dispatch that multiplies.

    check_stablehlo_packed.py MODULES FORMAT...

For a tiny synthetic llama (`skainet synth --preset tiny`: rows of 256 and 512, so the K and IQ4
formats apply, unlike stories260K's 64) quantized to Q4_0, Q8_0, Q4_K_M, Q6_K, Q3_K_M and IQ4_XS
(legacy, K and IQ4 formats), `skainet export --kernels stablehlo` and iree-compile for this CPU with
the flags the export wrote (compile.flags) and IREE's scheduling statistics (CSV), all made by the
build (tests/record/modules.cmake, MODULES/packed/<format>/statistics.csv), the statistics must show
  - no dispatch in an initializer (const-expr hoisting would unpack every weight into a global);
  - in `decode`, no elementwise dispatch reading i8 that writes a weight-sized f32 tensor (an
    unfused dequantization, materialized per call), and one fused `matvec` per packed weight shape.
"""
import os
import re
import sys

from record_support import fail, initializer_dispatches

# The smallest matmul weight of the tiny preset (attn_k, 128 x 256): a dequantization at least this
# big, written out on its own, is a weight materialized in f32.
SMALLEST_WEIGHT = 128 * 256


def decode_dispatches(stats_csv):
    with open(stats_csv) as f:
        return [m[1] for m in re.finditer(r'"dispatch","@decode_dispatch_\d+::@decode_dispatch_\d+_([^"]+)"', f.read())]


def elements(name):
    m = re.search(r"_(\d+(?:x\d+)*)_", name + "_")
    n = 1
    for d in (m[1].split("x") if m else []):
        n *= int(d)
    return n


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    modules, formats = sys.argv[1], sys.argv[2:]
    for scheme in formats:
        stats = os.path.join(modules, "packed", scheme, "statistics.csv")
        if not os.path.isfile(stats):
            fail(f"no {stats}: build the target record_modules (the record.modules test does)")
        at_load = initializer_dispatches(stats)
        if at_load:
            fail(f"{scheme}: {len(at_load)} dispatches at module load (weights unpacked into globals): {at_load[:3]}")
        names = decode_dispatches(stats)
        unfused = [n for n in names if n.startswith("elementwise") and "i8" in n and elements(n) >= SMALLEST_WEIGHT]
        if unfused:
            fail(f"{scheme}: decode dequantizes weights in dispatches of their own: {sorted(set(unfused))}")
        matvecs = sorted({n for n in names if n.startswith("matvec")})
        if not matvecs:
            fail(f"{scheme}: decode has no matvec dispatch: {sorted(set(names))}")
        print(f"  {scheme}: 0 dispatches at load; decode: {len(names)} dispatches, fused products {matvecs}")
    print("PASS")


if __name__ == "__main__":
    main()
