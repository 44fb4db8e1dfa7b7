#!/usr/bin/env bash
# Side-by-side speed of skainet and llama.cpp (the peer, scripts/peer.sh), by the protocol of
# ../shared/BENCHMARKS.md: the same GGUF file for both, the same threads, page cache warmed once, then
# A B A B … interleaved process runs; medians per engine and the median of the pairwise ratios
# (ours / llama.cpp) with min–max; peak RSS (/usr/bin/time -v) and startup; the machine's read
# bandwidth and the decode ceiling it implies. Prints a Markdown report (also written to --out).
#
#   bench/compare_llama_bench.sh --quick                       # ~100M shape, Q8_0 + Q4_0, 3 runs
#   bench/compare_llama_bench.sh                               # both shapes, Q4_0 Q8_0, 5 runs
#   bench/compare_llama_bench.sh --types "Q4_0 Q8_0 Q4_K_M F16" --shapes "tinyllama 100m" --runs 7
#
# Options: --skainet PATH (default build/release/skainet), --work DIR (models and raw results; default
# build/compare), --out FILE.md, --runs N, -p N, -n N, -t N, --shapes "tinyllama 100m" (or moe7b, a ~7B/1.1B-active MoE),
# --types "Q4_0 Q8_0", --sources "synth peerq" (synth: `skainet synth --type T`; peerq: the peer's
# llama-quantize from an F16 synth of the same seed), --python PY (default build/venv/bin/python:
# needs the gguf package for the bytes-per-token figure).
# Environment: SKAINET_PEER_BIN overrides `scripts/peer.sh`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
skainet=$root/build/release/skainet
work=$root/build/compare
out=""
runs=5 pp=128 tg=32 threads=2
shapes="tinyllama 100m" types="Q4_0 Q8_0" sources="synth peerq"
python=$root/build/venv/bin/python
quick=0
peer_args=""  # extra llama-bench flags, e.g. "--repack 0" (its AMX path crashes: docs/benchmarks.md)
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; runs=3; shapes="100m"; types="Q8_0 Q4_0"; sources="synth" ;;
    --skainet) skainet=$2; shift ;;
    --work) work=$2; shift ;;
    --out) out=$2; shift ;;
    --runs) runs=$2; shift ;;
    -p) pp=$2; shift ;;
    -n) tg=$2; shift ;;
    -t) threads=$2; shift ;;
    --shapes) shapes=$2; shift ;;
    --types) types=$2; shift ;;
    --sources) sources=$2; shift ;;
    --python) python=$2; shift ;;
    --peer-args) peer_args=$2; shift ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$skainet" ] || { echo "no skainet binary at $skainet (--skainet PATH)" >&2; exit 1; }
peer_bin=${SKAINET_PEER_BIN:-$("$root/scripts/peer.sh")}
for t in llama-bench llama-quantize; do [ -x "$peer_bin/$t" ] || { echo "no $peer_bin/$t" >&2; exit 1; }; done
vocab=$root/../shared/models/vocab/ggml-vocab-llama-spm.gguf
mkdir -p "$work"
raw=$work/results-$(date +%Y%m%d-%H%M%S).jsonl
log=$work/last-run.log
: >"$log"

shape_args() {
  case $1 in
    # TinyLlama-1.1B: dim 2048, 22 layers, 32/4 heads, ffn 5632, vocab 32000.
    tinyllama) echo "--preset tinyllama-1.1b" ;;
    # ~112M parameters with the same architecture (head dim 64, GQA 3:1, ffn 2.67 x dim).
    100m) echo "--preset tinyllama-1.1b --dim 768 --layers 10 --heads 12 --kv-heads 4 --ffn 2048" ;;
    # A mixture of experts, ~7B parameters of which ~1.1B active per token (issue 29): Qwen3-MoE's
    # layer at dim 2048, 22 layers, 32/4 heads of 64, 64 experts of ffn 768, 8 chosen per token.
    moe7b) echo "--preset tinyllama-1.1b --arch qwen3moe --layers 22 --head-dim 64 --experts 64 --experts-used 8 --expert-ffn 768" ;;
    *) echo "unknown shape $1" >&2; return 1 ;;
  esac
}

# The file for (shape, type, source), made once and kept in $work.
model_file() {
  local shape=$1 type=$2 source=$3 f
  if [ "$source" = synth ]; then
    f=$work/$shape-$type.gguf
    [ -f "$f" ] || "$skainet" synth "$f" --type "$type" --seed 1 --vocab-from "$vocab" $(shape_args "$shape") >>"$log" 2>&1
  else
    local f16=$work/$shape-F16.gguf
    [ -f "$f16" ] || "$skainet" synth "$f16" --type F16 --seed 1 --vocab-from "$vocab" $(shape_args "$shape") >>"$log" 2>&1
    f=$work/$shape-$type-peerq.gguf
    [ -f "$f" ] || "$peer_bin/llama-quantize" "$f16" "$f" "$type" "$threads" >>"$log" 2>&1
  fi
  echo "$f"
}

# One process run of one engine: pp and tg with -r 1 (each engine warms up inside the process), under
# /usr/bin/time -v. Appends a JSON line to $raw; a failure is recorded, not fatal.
run_one() {
  local engine=$1 f=$2 key=$3 i=$4 json tv rc=0
  json=$(mktemp) tv=$(mktemp)
  if [ "$engine" = skainet ]; then
    /usr/bin/time -v -o "$tv" "$skainet" bench -m "$f" -p "$pp" -n "$tg" -r 1 -t "$threads" -o json >"$json" 2>>"$log" || rc=$?
  else
    /usr/bin/time -v -o "$tv" "$peer_bin/llama-bench" -m "$f" -p "$pp" -n "$tg" -r 1 -t "$threads" $peer_args -o json >"$json" 2>>"$log" || rc=$?
  fi
  "$python" "$root/bench/tools/compare_summary.py" record --engine "$engine" --key "$key" --run "$i" --rc "$rc" \
    --bench-json "$json" --time-v "$tv" >>"$raw"
  rm -f "$json" "$tv"
}

# Startup: process wall time of a 1-token tg test (-p 0 -n 1 -r 1: load, a 1-token warm-up, one token).
run_startup() {
  local engine=$1 f=$2 key=$3 i=$4 tv rc=0
  tv=$(mktemp)
  if [ "$engine" = skainet ]; then
    /usr/bin/time -v -o "$tv" "$skainet" bench -m "$f" -p 0 -n 1 -r 1 -t "$threads" -o json >/dev/null 2>>"$log" || rc=$?
  else
    /usr/bin/time -v -o "$tv" "$peer_bin/llama-bench" -m "$f" -p 0 -n 1 -r 1 -t "$threads" $peer_args -o json >/dev/null 2>>"$log" || rc=$?
  fi
  "$python" "$root/bench/tools/compare_summary.py" record --engine "$engine" --key "$key" --run "$i" --rc "$rc" \
    --startup --time-v "$tv" >>"$raw"
  rm -f "$tv"
}

# The machine's read ceiling.
bw_bin=$work/read_bandwidth
[ "$bw_bin" -nt "$root/bench/tools/read_bandwidth.cpp" ] ||
  g++ -O3 -march=native -pthread "$root/bench/tools/read_bandwidth.cpp" -o "$bw_bin"
bw_before=$("$bw_bin" 1024 7 1 2 | tr '\n' ' ')

for shape in $shapes; do
  for type in $types; do
    for source in $sources; do
      # F16 from llama-quantize would be the F16 synth itself: skip it.
      if [ "$source" = peerq ] && [ "$type" = F16 ]; then continue; fi
      key="$shape $type $source"
      echo "== $key" >&2
      f=$(model_file "$shape" "$type" "$source") || { echo "   cannot make the file (see $log)" >&2; continue; }
      "$python" "$root/bench/tools/compare_summary.py" model --key "$key" --file "$f" >>"$raw"
      cat "$f" >/dev/null  # warm the page cache once
      for i in $(seq 1 "$runs"); do
        run_one skainet "$f" "$key" "$i"
        run_one llama.cpp "$f" "$key" "$i"
        run_startup skainet "$f" "$key" "$i"
        run_startup llama.cpp "$f" "$key" "$i"
        echo "   run $i/$runs done" >&2
      done
    done
  done
done
bw_after=$("$bw_bin" 1024 7 1 2 | tr '\n' ' ')

report=$("$python" "$root/bench/tools/compare_summary.py" report --raw "$raw" --bandwidth "$bw_before" \
  --bandwidth-after "$bw_after" --threads "$threads" --runs "$runs" --pp "$pp" --tg "$tg" \
  --command "bench/compare_llama_bench.sh $( [ $quick = 1 ] && echo --quick ) --runs $runs -p $pp -n $tg -t $threads --shapes \"$shapes\" --types \"$types\" --sources \"$sources\"$( [ -n "$peer_args" ] && echo " --peer-args \"$peer_args\"" )" \
  --peer-commit "$(cat "$peer_bin/../../llama.cpp-commit" 2>/dev/null || echo unknown)")
echo "$report"
[ -z "$out" ] || echo "$report" >"$out"
echo "raw results: $raw" >&2
