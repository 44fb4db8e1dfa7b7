#!/usr/bin/env bash
# Logits agreement with llama.cpp on a synthetic tinyllama-shaped model (docs/benchmarks.md, "Logits").
#
#   check_logits.sh SKAINET PEER_LOGITS SKAINET_LOGITS PYTHON VOCAB_GGUF WORK_DIR TYPE TOL RMS_TOL TOP1 [SHAPE...]
#
# Makes WORK_DIR/synth-TYPE.gguf with `skainet synth` (never committed; remade only when SHAPE changes;
# TYPE@peer: the F16 synth through the peer's llama-quantize to TYPE),
# runs a 32-step greedy run from the ids of "Once upon a time" in llama.cpp (peer_logits), then ours
# (skainet_logits, fed llama.cpp's tokens), and compares with compare_logits.py: top-1 equal at every
# step, max|dlogit|/max|logit| <= TOL and rms(dlogit)/max|logit| <= RMS_TOL at every step. TOP1 is
# `strict` (every differing top-1 fails) or `near-ties` (a flip inside the measured logit difference is
# reported, rule in compare_logits.py). SHAPE is passed to `skainet synth` (default: the tinyllama
# architecture at 2 layers; see docs/benchmarks.md).
set -euo pipefail

skainet=$1 peer_logits=$2 skainet_logits=$3 python=$4 vocab=$5 work=$6 type=$7 tol=$8 rms_tol=$9 top1=${10}
shift 10
case $top1 in
  strict) top1_flag=(--strict-top1) ;;
  near-ties) top1_flag=() ;;
  *) echo "TOP1 must be strict or near-ties, not '$top1'" >&2; exit 2 ;;
esac
shape=("$@")
[ ${#shape[@]} -gt 0 ] || shape=(--preset tinyllama-1.1b --layers 2)
steps=${SKAINET_LOGITS_STEPS:-32}
threads=${SKAINET_LOGITS_THREADS:-2}
here=$(cd "$(dirname "$0")" && pwd)

# TYPE@peer: the model is made by the peer's llama-quantize from the F16 synth (the formats we read but
# llama.cpp's quantizer decides the bytes and the per-tensor mix of, e.g. Q3_K_M@peer).
synth_type=$type peer_type=
if [[ $type == *@peer ]]; then
  peer_type=${type%@peer} synth_type=F16
fi
mkdir -p "$work"
model=$work/synth-$synth_type.gguf
stamp="$model.args"
args="synth --type $synth_type --seed 1 --vocab-from $vocab ${shape[*]}"
if [ ! -f "$model" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$args" ]; then
  rm -f "$model" "$stamp"
  "$skainet" synth "$model" --type "$synth_type" --seed 1 --vocab-from "$vocab" "${shape[@]}" >/dev/null
  echo "$args" >"$stamp"
fi
if [ -n "$peer_type" ]; then
  quantized=$work/llama-quantize-$peer_type.gguf
  if [ ! -f "$quantized" ] || [ "$quantized" -ot "$model" ]; then
    rm -f "$quantized"
    "${SKAINET_PEER_BIN:?TYPE@peer needs SKAINET_PEER_BIN}/llama-quantize" "$model" "$quantized" "$peer_type" \
      >"$work/llama-quantize-$peer_type.log" 2>&1 || { tail -n 5 "$work/llama-quantize-$peer_type.log" >&2; exit 1; }
  fi
  # Our quantize of the same F16 file must choose llama-quantize's type for every tensor (the mix
  # rules); bytes may differ in a few blocks where the peer's compiler fused multiply-adds
  # (docs/formats.md), so they are counted, not failed.
  ours_q=$work/skainet-quantize-$peer_type.gguf
  "$skainet" quantize "$model" "$ours_q" "$peer_type" >"$work/skainet-quantize-$peer_type.log"
  "$python" - "$quantized" "$ours_q" <<'PY'
import sys
import numpy as np
from gguf import GGUFReader
theirs, ours = ({t.name: t for t in GGUFReader(p).tensors} for p in sys.argv[1:3])
bad = [f"{n}: llama-quantize {t.tensor_type.name}, ours {ours[n].tensor_type.name if n in ours else 'missing'}"
       for n, t in theirs.items() if n not in ours or ours[n].tensor_type != t.tensor_type]
same = sum(np.array_equal(np.asarray(t.data).view(np.uint8), np.asarray(ours[n].data).view(np.uint8))
           for n, t in theirs.items() if n in ours)
print(f"types: {len(theirs) - len(bad)}/{len(theirs)} tensors as llama-quantize; bytes identical in {same}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
  model=$quantized
fi

# "Once upon a time" in the LLaMA SPM vocabulary, BOS first (llama-tokenize on this file; the test
# checks the ids again through the peer's tokenizer below). SKAINET_LOGITS_IDS gives them for another
# vocabulary (the Qwen2 tests: GPT-2's).
ids=${SKAINET_LOGITS_IDS:-1,9038,2501,263,931}
if [ -x "${SKAINET_PEER_BIN:-}/llama-tokenize" ]; then
  got=$("$SKAINET_PEER_BIN/llama-tokenize" -m "$model" -p "Once upon a time" --ids --log-disable 2>/dev/null | tail -1 | tr -d '[] ')
  if [ "$got" != "$ids" ]; then echo "llama-tokenize gives [$got], expected [$ids]" >&2; exit 1; fi
fi

# SKAINET_LOGITS_REPEAT=N: the prompt N times over, so the steps run at positions in the hundreds,
# where RoPE's low frequencies (and their scaling: Llama 3's rope_freqs) move the logits.
if [ -n "${SKAINET_LOGITS_REPEAT:-}" ]; then
  ids=$(for _ in $(seq "$SKAINET_LOGITS_REPEAT"); do printf '%s,' "$ids"; done)
  ids=${ids%,}
fi

ref=$work/peer-$type.bin ours=$work/skainet-$type.bin
t0=$(date +%s.%N)
"$peer_logits" "$model" "$ref" "$ids" "$steps" "$threads"
t1=$(date +%s.%N)
"$skainet_logits" "$model" "$ours" "$ids" "$steps" "$threads" default "$ref"
t2=$(date +%s.%N)
echo "wall: llama.cpp $(echo "$t1 - $t0" | bc) s, skainet $(echo "$t2 - $t1" | bc) s"
"$python" "$here/compare_logits.py" "$ref" "$ours" --tol "$tol" --rms-tol "$rms_tol" "${top1_flag[@]}" --label "$type ${shape[*]}" --json "$work/compare-$type.json"
