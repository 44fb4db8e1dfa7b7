#!/usr/bin/env bash
# Two skainet binaries (say, before and after a refactor) alternated on the same files and threads:
# `skainet bench -p 128 -n 32 -r 3 -t 2`, five rounds of old then new per model, one CSV row per test
# prefixed by model, which binary and round. The models are made by `skainet synth` beforehand:
#   skainet synth --preset stories15M --type Q8_0 s15m-q8.gguf
#   skainet synth --preset tiny --dim 1024 --layers 8 --heads 16 --kv-heads 4 --ffn 2816 --vocab 32000 \
#     --type Q4_K_M d1024-q4km.gguf
#   bench/ab_before_after.sh OLD_SKAINET NEW_SKAINET > ab.csv      (in the folder holding them)
set -euo pipefail
old=$1 new=$2
for m in s15m-q8.gguf d1024-q4km.gguf; do
  for round in 1 2 3 4 5; do
    for which in old new; do
      bin=${!which}
      $bin bench -m $m -p 128 -n 32 -r 3 -t 2 -o csv 2>/dev/null | tail -n +2 | sed "s/^/$m,$which,$round,/"
    done
  done
done
