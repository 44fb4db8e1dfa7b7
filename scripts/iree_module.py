"""How a folder written by `skainet export` is compiled and loaded: the one home of that knowledge for
the runner (scripts/iree_generate.py), the tests (tests/record/) and the benchmark (bench/).

The export writes beside model.mlir the flags the module needs: compile.flags (for iree-compile on
any target; the engine-kernel form names its target, llvm-cpu for this CPU; the StableHLO form leaves
the target to the caller, llvm-cpu for this CPU by default here), compile.llvm-cpu.flags (added when
the target is llvm-cpu) and run.flags (for the runtime: the plugin that resolves the engine-kernel
imports). All are one flag per line.
"""
import os
import resource
import subprocess
import sys

BIN = os.path.dirname(sys.executable)
HOST_CPU_TARGET = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                   "--iree-llvmcpu-target-cpu=host"]


def read_flags(export_dir, name):
    path = os.path.join(export_dir, name)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def compile_flags(export_dir, target=None):
    """The module's own flags, then `target` (flags naming an IREE target); without one, this CPU's
    when the module does not fix its target itself. compile.llvm-cpu.flags join them for llvm-cpu."""
    flags = read_flags(export_dir, "compile.flags")
    names_target = any(f.startswith("--iree-hal-target-device") for f in flags)
    if target:
        if names_target:
            raise SystemExit(f"{export_dir}: this module is for the CPU it was exported on ({' '.join(flags)}); "
                             "export it with --kernels stablehlo for another target")
        flags = flags + list(target)
    elif not names_target:
        flags = flags + HOST_CPU_TARGET
    if any(f == "--iree-hal-target-device=local" for f in flags):
        flags += read_flags(export_dir, "compile.llvm-cpu.flags")
    return flags


def compile_module(export_dir, vmfb=None, target=None, extra=()):
    """Compiles EXPORT/model.mlir (skipped when vmfb is newer); returns the vmfb path."""
    mlir = os.path.join(export_dir, "model.mlir")
    vmfb = vmfb or os.path.join(export_dir, "model.vmfb")
    if os.path.exists(vmfb) and os.path.getmtime(vmfb) >= os.path.getmtime(mlir):
        return vmfb
    tmp = vmfb + ".tmp"
    cmd = [os.path.join(BIN, "iree-compile"), mlir, *compile_flags(export_dir, target), *extra, "-o", tmp]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"iree-compile failed ({' '.join(cmd)}):\n{p.stderr[-4000:]}")
    os.replace(tmp, vmfb)
    return vmfb


def run_flags(export_dir):
    return read_flags(export_dir, "run.flags")


def load(export_dir, vmfb, params, device="local-task", threads=None):
    """The module's VM context on `device` with its parameters and run.flags; returns the module."""
    import iree.runtime as rt
    flags = run_flags(export_dir)
    if threads:
        flags.append(f"--task_topology_group_count={threads}")
    if flags:
        rt.flags.parse_flags(*flags)  # before the device exists: it reads them when it is created
    config = rt.Config(device)
    index = rt.ParameterIndex()
    index.load(params)
    modules = rt.load_vm_modules(
        rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope="model")),
        rt.create_hal_module(config.vm_instance, config.device),
        rt.VmModule.mmap(config.vm_instance, vmfb),
        config=config)
    return modules[-1]


def peak_rss_bytes():
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


if __name__ == "__main__":
    # For shell scripts: `iree_module.py compile-flags DIR [TARGET FLAG...]` prints the flags, one a line.
    if len(sys.argv) < 3 or sys.argv[1] != "compile-flags":
        raise SystemExit("usage: iree_module.py compile-flags EXPORT_DIR [TARGET FLAG...]")
    print("\n".join(compile_flags(sys.argv[2], sys.argv[3:] or None)))
