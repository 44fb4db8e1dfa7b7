#!/usr/bin/env bash
# Speculative decoding against plain decoding, alternated on the same file, prompt and threads:
# `skainet run --temp 0 -t 2 -n N` with each set of extra flags, ROUNDS rounds of A then B ...; one CSV
# row per run: label, round, generated tokens, decode tokens/s, drafted, accepted, verifications, probes,
# probe hits, seconds in the drafter, seconds decoding.
#   bench/speculative.sh SKAINET MODEL PROMPT_FILE N ROUNDS 'label:flags' ['label:flags' ...]
#   bench/speculative.sh build/release/skainet ../shared/models/stories260K.gguf /tmp/repeat.txt 256 5 \
#     'plain:' 'ngram:--spec-type ngram-simple'
set -euo pipefail
bin=$1 model=$2 prompt=$3 n=$4 rounds=$5
shift 5
echo "label,round,generated,decode_tps,drafted,accepted,verifications,probes,hits,draft_s,decode_s"
for round in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    label=${spec%%:*} flags=${spec#*:}
    # shellcheck disable=SC2086
    err=$("$bin" run -m "$model" -f "$prompt" -n "$n" --temp 0 -t 2 --no-display-prompt $flags 2>&1 >/dev/null)
    gen=$(sed -n 's/.*generated \([0-9]*\) tokens, \([0-9.]*\) tokens\/s.*/\1,\2/p' <<<"$err")
    acc=$(sed -n 's/.*drafted \([0-9]*\) tokens in \([0-9]*\) verifications, accepted \([0-9]*\).*; \([0-9]*\) probes, \([0-9]*\) hit; drafter \([0-9.]*\) s of \([0-9.]*\) s.*/\1,\3,\2,\4,\5,\6,\7/p' <<<"$err")
    echo "$label,$round,$gen,${acc:-0,0,0,0,0,0,}"
  done
done
