#!/usr/bin/env bash
# Prompt processing, skainet against llama.cpp's llama-bench, alternated on one file and thread count:
# ROUNDS rounds of `bench -p P -n 0 -r 5 -t T` in each engine, one CSV row per round (its mean
# tokens/s in each, and their ratio). For the small models whose prefill is per-op overhead (issue 30:
# "stories260K prefill >= 1.5x the peer in every run of five").
#   bench/prefill_vs_peer.sh SKAINET PEER_BIN_DIR MODEL P T ROUNDS
#   bench/prefill_vs_peer.sh build/release/skainet build/peer/0.3.36/build/bin \
#     ../shared/models/stories260K.gguf 128 2 5
set -euo pipefail
bin=$1 peer=$2 model=$3 p=$4 t=$5 rounds=$6
mean_tps() { python3 -c "import json,sys; print(round(json.load(sys.stdin)[0]['avg_ts']))"; }
echo "round,skainet_tps,llama_tps,ratio"
for round in $(seq 1 "$rounds"); do
  ours=$("$bin" bench -m "$model" -p "$p" -n 0 -r 5 -t "$t" -o json 2>/dev/null | mean_tps)
  theirs=$("$peer/llama-bench" -m "$model" -p "$p" -n 0 -r 5 -t "$t" -o json 2>/dev/null | mean_tps)
  echo "$round,$ours,$theirs,$(python3 -c "print(round($ours / $theirs, 2))")"
done
