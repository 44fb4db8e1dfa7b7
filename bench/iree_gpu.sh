#!/usr/bin/env bash
# The portable module (`skainet export --kernels stablehlo`) on a CUDA GPU: greedy generation
# against the eager engine's tokens, and prefill/decode speed. Two steps, because the GPU machine has
# neither the build nor the compiler (docs/export.md, "On a GPU"):
#
#   bench/iree_gpu.sh prepare DIR [SM]   here: exports, compiles for cuda (sm_SM, default 80: IREE 3.13 knows no sm_90 target; the driver JIT-compiles its PTX for newer GPUs), writes
#                                        the eager engine's greedy text and copies the IREE runtime tools
#   bench/iree_gpu.sh run DIR OUT        on the GPU machine (needs only the NVIDIA driver): greedy ids
#                                        through iree-run-module in a shell loop (argmax by awk, caches
#                                        kept as .npy), then iree-benchmark-module; results under OUT
#   bench/iree_gpu.sh compare DIR OUT    here again: the GPU's ids detokenized against the eager text
#
# Models: stories260K F32 and Q4_0 (the trained model: generation is compared token for token), and a
# stories15M-shaped Q4_0 and Q8_0 synth (vocabulary 32000, 24M parameters: speed). Environment:
#   SKAINET=build/release/skainet  PY=build/venv/bin/python  N=32 (generated tokens)  CTX=256  P=64
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SKAINET=${SKAINET:-$ROOT/build/release/skainet}
PY=${PY:-$ROOT/build/venv/bin/python}
STORIES=${STORIES:-$ROOT/../shared/models/stories260K.gguf}
N=${N:-32} CTX=${CTX:-256} P=${P:-64} DEVICE=${DEVICE:-cuda}  # DEVICE=local-task tries `run` on a CPU build
PROMPT="Once upon a time"

prepare() {
  local dir=$1 sm=${2:-80} bin tools
  bin=$(dirname "$PY")
  tools=$("$PY" -c 'import iree._runtime_libs as m, os; print(os.path.dirname(m.__file__))')
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/gguf"
  cp "$tools/iree-run-module" "$tools/iree-benchmark-module" "$dir/bin/"
  "$SKAINET" quantize "$STORIES" "$dir/gguf/stories260K-q4_0.gguf" Q4_0 >/dev/null
  "$SKAINET" synth "$dir/gguf/stories15M-q4_0.gguf" --preset stories15M --type Q4_0 >/dev/null
  "$SKAINET" synth "$dir/gguf/stories15M-q8_0.gguf" --preset stories15M --type Q8_0 >/dev/null
  local name gguf
  for name in stories260K-f32 stories260K-q4_0 stories15M-q4_0 stories15M-q8_0; do
    gguf=$dir/gguf/$name.gguf
    [[ $name == stories260K-f32 ]] && gguf=$STORIES
    "$SKAINET" export "$gguf" -o "$dir/$name" --ctx "$CTX" --seq-len "$P" --kernels stablehlo -q
    mapfile -t flags < <("$PY" "$ROOT/scripts/iree_module.py" compile-flags "$dir/$name" \
                         --iree-hal-target-device=cuda --iree-cuda-target="sm_$sm")
    "$bin/iree-compile" "$dir/$name/model.mlir" "${flags[@]}" -o "$dir/$name/model.cuda.vmfb"
    rm "$dir/$name/model.mlir"
    if [[ $name == stories260K-* ]]; then
      "$SKAINET" tokenize -m "$gguf" -p "$PROMPT" --ids | tr -d '[] \n' >"$dir/$name/prompt.ids"
      "$SKAINET" run -m "$gguf" -p "$PROMPT" -n "$N" --temp 0 --ctx "$CTX" --ignore-eos >"$dir/$name/eager.txt" 2>/dev/null
      echo "$gguf" >"$dir/$name/gguf.path"
    fi
  done
  du -sh "$dir"
}

# argmax of row ROW of the logits iree-run-module printed (one "AxBxf32=[..][..]" or "Bxf32=[..]" line).
argmax_row() {
  awk -v row="$1" '{
    sub(/^[^=]*=/, ""); gsub(/^\[+|\]+$/, ""); n = split($0, rows, /\]\[/)
    split(rows[row + 1], v, " "); best = 1
    for (i = 2; i <= length(v); i++) if (v[i] + 0 > v[best] + 0) best = i
    print best - 1 }'
}

generate() {
  local m=$1 out=$2 run=("$m/../bin/iree-run-module" --device="$DEVICE" --module="$m/model.cuda.vmfb"
                         --parameters=model="$m/model.irpa" --output_max_element_count=100000000)
  IFS=, read -r -a prompt <"$m/prompt.ids" || true  # one line, no newline at its end
  local padded=("${prompt[@]}") pos=${#prompt[@]} ids=() token
  while (( ${#padded[@]} < P )); do padded+=(0); done
  token=$("${run[@]}" --function=prefill --input="${P}xi32=${padded[*]}" --output=- --output=@"$out/k0.npy" \
          --output=@"$out/v0.npy" | grep -m1 'f32=' | argmax_row $((pos - 1)))
  ids+=("$token")
  local a=0 b=1
  while (( ${#ids[@]} < N )); do
    token=$("${run[@]}" --function=decode --input=1xi32="$token" --input=i32="$pos" --input=@"$out/k$a.npy" \
            --input=@"$out/v$a.npy" --output=- --output=@"$out/k$b.npy" --output=@"$out/v$b.npy" |
            grep -m1 'f32=' | argmax_row 0)
    ids+=("$token"); pos=$((pos + 1)); a=$((1 - a)); b=$((1 - b))
  done
  (IFS=,; echo "${ids[*]}")
}

bench_fn() {  # median ms of one function on the GPU
  local m=$1; shift
  "$m/../bin/iree-benchmark-module" --device="$DEVICE" --module="$m/model.cuda.vmfb" --parameters=model="$m/model.irpa" \
    --benchmark_repetitions=5 "$@" 2>/dev/null |
    awk '/_median/ && $2 ~ /[0-9]/ { print $2 * ($3 == "us" ? 0.001 : $3 == "ns" ? 1e-6 : $3 == "s" ? 1000 : 1); exit }'
}

run_on_gpu() {
  local dir=$1 out=$2 m cache
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt" || true
  for m in "$dir"/stories260K-*; do
    generate "$m" "$out" | tee "$out/$(basename "$m").ids"
  done
  rm -f "$out"/*.npy
  echo "| model | prefill $P tokens (ms) | prefill t/s | decode (ms) | decode t/s |" | tee "$out/speed.md"
  echo "| --- | ---: | ---: | ---: | ---: |" | tee -a "$out/speed.md"
  for m in "$dir"/*/; do
    m=${m%/}; [[ -f $m/model.cuda.vmfb ]] || continue
    cache=$(grep -o 'k_cache: tensor<[0-9x]*f[0-9]*>' "$m/report.txt" | head -1 | sed 's/k_cache: tensor<\(.*\)>/\1/')
    local pre dec
    pre=$(bench_fn "$m" --function=prefill --input="${P}xi32=1")
    dec=$(bench_fn "$m" --function=decode --input=1xi32=1 --input="i32=$P" --input="$cache=0" --input="$cache=0")
    awk -v n="$(basename "$m")" -v p="$P" -v a="$pre" -v b="$dec" \
      'BEGIN { printf "| %s | %.2f | %.0f | %.3f | %.0f |\n", n, a, p * 1000 / a, b, 1000 / b }' | tee -a "$out/speed.md"
  done
}

# The GPU's ids, detokenized by the engine, against `skainet run`'s text (as tests/record/check_generation.py).
compare() {
  local dir=$1 out=$2 m name text gguf
  for m in "$dir"/stories260K-*; do
    name=$(basename "$m"); gguf=$(cat "$m/gguf.path")
    text="$PROMPT$("$SKAINET" tokenize -m "$gguf" --decode "$(cat "$out/$name.ids")")"
    if [[ "$text" == "$(cat "$m/eager.txt")" ]]; then echo "$name: $N tokens on CUDA equal the eager engine's"
    else echo "$name: CUDA text differs: $text"; echo "   eager: $(cat "$m/eager.txt")"; fi
  done
}

case "${1:-}" in
  prepare) prepare "${2:?DIR}" "${3:-80}" ;;
  run) run_on_gpu "${2:?DIR}" "${3:?OUT}" ;;
  compare) compare "${2:?DIR}" "${3:?OUT}" ;;
  *) sed -n 2,17p "$0"; exit 2 ;;
esac
