#!/usr/bin/env bash
# Prefill and decode tokens/s of the exported model run by IREE beside the eager engine's (`skainet
# bench`), same file, same threads, same context, as ratios; and IREE's decode at CTX_LONG cells
# against CTX (the same position: decode reads only the cells it can see). Reported in docs/export.md.
#
#   bench/iree_vs_eager.sh [--quick]     (from the repository root, after scripts/setup.sh and a build)
#
# Models: TinyLlama-1.1B-shaped synths in TYPES (Q4_0 Q8_0 Q4_K_M F16; ~0.6-2.2 GB each, written under
# $WORK and deleted after their row); --quick: stories260K F32 and Q8_0 instead. Environment
# (defaults):
#   SKAINET=build/release/skainet  PY=build/venv/bin/python  WORK=build/iree-bench  KERNELS=engine
#   P=64 (prompt tokens = the prefill function's length)  N=64 (generated tokens, eager)  CTX=256
#   CTX_LONG=2048  THREADS=2  REPS=5  TYPES="Q4_0 Q8_0 Q4_K_M F16"
# IREE: the module compiled for this CPU with the flags the export wrote (scripts/iree_module.py) and run with its
# run.flags (the engine-kernel plugin) by iree-benchmark-module on the local-task device with THREADS
# worker groups: `prefill` on P tokens, `decode` at position P; the median over REPS repetitions.
# Eager: `skainet bench -p P -n N -t THREADS -r REPS -c CTX`, the median of its samples.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SKAINET=${SKAINET:-$ROOT/build/release/skainet}
PY=${PY:-$ROOT/build/venv/bin/python}
BIN=$(dirname "$PY")
WORK=${WORK:-$ROOT/build/iree-bench}
STORIES=${STORIES:-$ROOT/../shared/models/stories260K.gguf}
KERNELS=${KERNELS:-engine}
P=${P:-64} N=${N:-64} CTX=${CTX:-256} CTX_LONG=${CTX_LONG:-2048} THREADS=${THREADS:-2} REPS=${REPS:-5}
TYPES=${TYPES:-Q4_0 Q8_0 Q4_K_M F16}
QUICK=0
[[ "${1:-}" == "--quick" ]] && QUICK=1

for tool in iree-compile iree-benchmark-module; do
  [[ -x "$BIN/$tool" ]] || { echo "iree_vs_eager: $BIN/$tool missing (run scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p "$WORK"
made=()
cleanup() { rm -rf "${made[@]}"; }
trap cleanup EXIT

# One IREE function's median seconds per call: iree-benchmark-module FOLDER FUNCTION INPUTS...
iree_seconds() {
  local out=$1 fn=$2; shift 2
  mapfile -t run_flags <"$out/run.flags"
  "$BIN/iree-benchmark-module" --module="$out/model.vmfb" --parameters=model="$out/model.irpa" --device=local-task \
    "${run_flags[@]}" --task_topology_group_count="$THREADS" --benchmark_repetitions="$REPS" \
    --benchmark_format=json --function="$fn" "$@" 2>/dev/null |
    "$PY" -c 'import json, sys
b = json.load(sys.stdin)["benchmarks"]
m = [x for x in b if x.get("aggregate_name") == "median"] or [x for x in b if x.get("run_type") == "iteration"]
print(m[0]["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[m[0]["time_unit"]])'
}

# The caches' type of an export folder ("22x256x256xf16"), from its report's signatures.
cache_type() {
  grep -o 'k_cache: tensor<[0-9x]*f[0-9]*>' "$1/report.txt" | head -1 | sed 's/k_cache: tensor<\(.*\)>/\1/'
}

# Exports GGUF to OUT with the context given, compiles it with its own flags; prints compile seconds.
export_and_compile() {
  local gguf=$1 out=$2 ctx=$3; shift 3
  "$SKAINET" export "$gguf" -o "$out" --ctx "$ctx" --seq-len "$P" --kernels "$KERNELS" -q "$@"
  mapfile -t flags < <("$PY" "$ROOT/scripts/iree_module.py" compile-flags "$out")
  local t0; t0=$(date +%s%N)
  "$BIN/iree-compile" "$out/model.mlir" "${flags[@]}" -o "$out/model.vmfb"
  echo $(( ($(date +%s%N) - t0) / 1000000000 ))
}

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); KERNELS=$KERNELS P=$P N=$N CTX=$CTX CTX_LONG=$CTX_LONG THREADS=$THREADS REPS=$REPS"
echo "| model | IREE prefill t/s | eager pp$P t/s | prefill ratio | IREE decode t/s | eager tg$N t/s | decode ratio | IREE decode ctx $CTX_LONG / ctx $CTX | iree-compile |"
echo "| ----- | ---------------: | -----------: | ----: | --------------: | -----------: | ----: | ----: | ---: |"

models=()
if (( QUICK )); then
  "$SKAINET" quantize "$STORIES" "$WORK/stories260K-q8_0.gguf" Q8_0 >/dev/null
  models=("stories260K-f32:$STORIES" "stories260K-q8_0:$WORK/stories260K-q8_0.gguf")
else
  for t in $TYPES; do models+=("tinyllama-1.1b-${t,,}:synth:$t"); done
fi

for entry in "${models[@]}"; do
  name=${entry%%:*} gguf=${entry#*:}
  if [[ $gguf == synth:* ]]; then
    gguf=$WORK/$name.gguf
    made+=("$gguf" "$WORK/$name" "$WORK/$name-long")
    "$SKAINET" synth "$gguf" --preset tinyllama-1.1b --type "${entry##*:}" >/dev/null
  fi
  out=$WORK/$name long=$WORK/$name-long
  compile_s=$(export_and_compile "$gguf" "$out" "$CTX")
  export_and_compile "$gguf" "$long" "$CTX_LONG" --entry decode >/dev/null
  cache=$(cache_type "$out") cache_long=$(cache_type "$long")
  prefill_s=$(iree_seconds "$out" prefill --input="${P}xi32=1")
  decode_s=$(iree_seconds "$out" decode --input=1xi32=1 --input="i32=$P" --input="$cache=0" --input="$cache=0")
  decode_long_s=$(iree_seconds "$long" decode --input=1xi32=1 --input="i32=$P" --input="$cache_long=0" --input="$cache_long=0")
  "$SKAINET" bench -m "$gguf" -p "$P" -n "$N" -t "$THREADS" -r "$REPS" -c "$CTX" -o json >"$out/eager.json" 2>/dev/null
  "$PY" - "$name" "$out/eager.json" "$P" "$prefill_s" "$decode_s" "$decode_long_s" "$compile_s" <<'EOF'
import json, statistics, sys
name, eager_json, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
prefill_s, decode_s, decode_long_s, compile_s = map(float, sys.argv[4:8])
eager = {("pp" if r["n_prompt"] else "tg"): statistics.median(r["samples_ts"]) for r in json.load(open(eager_json))}
def f(x):  # three significant figures at least, no exponent
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"
pp, tg = p / prefill_s, 1 / decode_s
print(f"| {name} | {f(pp)} | {f(eager['pp'])} | {pp / eager['pp']:.2f}x | {f(tg)} | {f(eager['tg'])} | "
      f"{tg / eager['tg']:.2f}x | {decode_long_s / decode_s:.2f} | {compile_s:.0f} s |")
EOF
  [[ $gguf == "$WORK"/tinyllama-* ]] && rm -rf "$gguf" "$out" "$long"
done
