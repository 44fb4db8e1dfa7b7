#!/usr/bin/env python3
"""The exported stories260K module compiles for GPU targets (compile only: no GPU is needed).

    check_targets.py SKAINET MODEL.gguf WORKDIR {cuda|vulkan}

Compiles the portable module (`export --kernels stablehlo`, for Vulkan `stablehlo-flat`; the
engine-kernel form is for this CPU only) of MODEL (F32) and of its Q4_0 quantization (made here; the packed weights' nibble and f16-scale
dequantization in StableHLO) with iree-compile, with the flags the export wrote (compile.flags), for
  cuda:   --iree-hal-target-device=cuda --iree-cuda-target=sm_80
  vulkan: --iree-hal-target-device=vulkan --iree-vulkan-target=ampere
Vulkan needs a target with 16-bit storage: the default one (vp_android_baseline_2022: 32-bit storage
only) cannot hold the f16 KV cache (iree-compile: failed to legalize 'vector.bitcast' of f16 vectors).
"""
import os
import sys

from record_support import compile_export, export, fresh_dir, quantized

# IREE 3.13's SPIR-V backend cannot compile the fused one-row products (their reduction over the
# block dims: "failed to legalize operation 'memref.alloc'" of an index buffer in workgroup memory).
FORM = {"cuda": "stablehlo", "vulkan": "stablehlo-flat"}
TARGETS = {
    "cuda": ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"],
    "vulkan": ["--iree-hal-target-device=vulkan", "--iree-vulkan-target=ampere"],
}


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in TARGETS:
        sys.exit(__doc__)
    skainet, model, work, target = sys.argv[1:]
    fresh_dir(work)
    q4 = quantized(skainet, model, os.path.join(work, "q4_0.gguf"), "Q4_0")
    for name, gguf in (("f32", model), ("q4_0", q4)):
        out = export(skainet, gguf, os.path.join(work, name), "--ctx", "128", "--kernels", FORM[target])
        compile_export(out, TARGETS[target], os.path.join(out, f"model.{target}.vmfb"))
    print("PASS")


if __name__ == "__main__":
    main()
