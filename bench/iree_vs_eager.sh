#!/usr/bin/env bash
# Prefill and decode tokens/s of the exported model run by IREE (llvm-cpu, --iree-llvmcpu-target-cpu=host)
# beside the eager engine's (`skainet bench`), same file, same threads, same context. Reported in
# docs/export.md; a measurement, not a target.
#
#   bench/iree_vs_eager.sh [--1b]      (from the repository root, after scripts/setup.sh and a build)
#
# Models: stories260K F32 and its Q8_0 quantization; --1b adds a TinyLlama-1.1B-shaped Q4_0 synth
# (~600 MiB, written under $WORK and deleted at the end). Environment (defaults):
#   SKAINET=build/release/skainet  PY=build/venv/bin/python  WORK=build/iree-bench
#   P=64 (prompt tokens = the prefill function's length)  N=64 (generated tokens, eager)  CTX=256
#   THREADS=2  REPS=5
# IREE: iree-benchmark-module runs `prefill` on P tokens and `decode` at position P with zeroed caches
# (its cost does not depend on the position: decode attends over all CTX cells, masked), on the
# local-task device with THREADS worker groups; the median over REPS repetitions. Eager: `skainet bench
# -p P -n N -t THREADS -r REPS -c CTX`, the median of its samples.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SKAINET=${SKAINET:-$ROOT/build/release/skainet}
PY=${PY:-$ROOT/build/venv/bin/python}
BIN=$(dirname "$PY")
WORK=${WORK:-$ROOT/build/iree-bench}
STORIES=${STORIES:-$ROOT/../shared/models/stories260K.gguf}
P=${P:-64} N=${N:-64} CTX=${CTX:-256} THREADS=${THREADS:-2} REPS=${REPS:-5}
WITH_1B=0
[[ "${1:-}" == "--1b" ]] && WITH_1B=1

for tool in iree-compile iree-benchmark-module; do
  [[ -x "$BIN/$tool" ]] || { echo "iree_vs_eager: $BIN/$tool missing (run scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p "$WORK"
cleanup() { rm -f "$WORK/tinyllama-1.1b-q4_0.gguf"; rm -rf "$WORK/tinyllama-1.1b-q4_0"; }
trap cleanup EXIT

models=("stories260K-f32:$STORIES")
"$SKAINET" quantize "$STORIES" "$WORK/stories260K-q8_0.gguf" Q8_0 >/dev/null
models+=("stories260K-q8_0:$WORK/stories260K-q8_0.gguf")
if (( WITH_1B )); then
  "$SKAINET" synth "$WORK/tinyllama-1.1b-q4_0.gguf" --preset tinyllama-1.1b --type Q4_0 >/dev/null
  models+=("tinyllama-1.1b-q4_0:$WORK/tinyllama-1.1b-q4_0.gguf")
fi

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); P=$P N=$N CTX=$CTX THREADS=$THREADS REPS=$REPS"
echo "| model | IREE prefill t/s | eager pp$P t/s | IREE decode t/s | eager tg$N t/s | iree-compile |"
echo "| ----- | ---------------: | -----------: | --------------: | -----------: | -----------: |"
for entry in "${models[@]}"; do
  name=${entry%%:*} gguf=${entry#*:} out=$WORK/$name
  "$SKAINET" export "$gguf" -o "$out" --ctx "$CTX" --seq-len "$P" -q
  t0=$(date +%s%N)
  "$BIN/iree-compile" "$out/model.mlir" --iree-hal-target-device=local \
    --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host -o "$out/model.vmfb"
  compile_s=$(( ($(date +%s%N) - t0) / 1000000000 ))
  cache=$(grep -o 'k_cache: tensor<[0-9x]*f16>' "$out/report.txt" | head -1 | sed 's/k_cache: tensor<\(.*\)>/\1/')
  common=(--module="$out/model.vmfb" --parameters=model="$out/model.irpa" --device=local-task
          --task_topology_group_count="$THREADS" --benchmark_repetitions="$REPS" --benchmark_format=json)
  "$BIN/iree-benchmark-module" "${common[@]}" --function=prefill --input="${P}xi32=1" >"$out/iree_prefill.json" 2>/dev/null
  "$BIN/iree-benchmark-module" "${common[@]}" --function=decode --input=1xi32=1 --input="i32=$P" \
    --input="$cache=0" --input="$cache=0" >"$out/iree_decode.json" 2>/dev/null
  "$SKAINET" bench -m "$gguf" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" -c "$CTX" -o json >"$out/eager.json" 2>/dev/null
  "$PY" - "$name" "$out" "$P" "$compile_s" <<'EOF'
import json, statistics, sys
name, out, p, compile_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
def iree_median_s(path):
    b = json.load(open(path))["benchmarks"]
    m = [x for x in b if x.get("aggregate_name") == "median"] or [x for x in b if x.get("run_type") == "iteration"]
    return m[0]["real_time"] * unit[m[0]["time_unit"]]
eager = {("pp" if r["n_prompt"] else "tg"): statistics.median(r["samples_ts"]) for r in json.load(open(f"{out}/eager.json"))}
pre, dec = iree_median_s(f"{out}/iree_prefill.json"), iree_median_s(f"{out}/iree_decode.json")
def f(x):  # three significant figures at least, no exponent
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"
print(f"| {name} | {f(p / pre)} | {f(eager['pp'])} | {f(1 / dec)} | {f(eager['tg'])} | {compile_s:.0f} s |")
EOF
done
