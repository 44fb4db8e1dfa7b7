#!/usr/bin/env bash
# Does the plan predict memory? For synthetic TinyLlama-1.1B-shaped models (Q4_0 and Q8_0 unless
# TYPES says otherwise), under the default and in-memory profiles (or PROFILES): the plan's resident total (`skainet plan --json`) against
# the peak RSS of `skainet run` after loading, prefill and one decode step. Prints a Markdown table
# and exits non-zero when any difference exceeds 5%.
#
#   bench/rss_vs_plan.sh [SKAINET_BINARY] [WORK_DIR]      (defaults: build/release/skainet, build/rss)
#   TYPES="Q4_0 Q8_0 Q4_K_M F16" PROFILES="default throughput" CTX=512 bench/rss_vs_plan.sh
#   KV=q8_0 CTX=8192 TYPES=Q4_0 bench/rss_vs_plan.sh      (the KV cache's type, --kv-type; default f16)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/release/skainet}
work=${2:-$root/build/rss}
ctx=${CTX:-512}
types=${TYPES:-Q4_0 Q8_0}
profiles=${PROFILES:-default in-memory}
kv=${KV:-f16}
mkdir -p "$work"

printf '| model | profile | plan resident | peak RSS | difference |\n|---|---|---:|---:|---:|\n'
worst=0
for type in $types; do
  model=$work/tinyllama-1.1b-$type.gguf
  [ -f "$model" ] || "$bin" synth "$model" --preset tinyllama-1.1b --type "$type" --seed 1 >/dev/null
  for profile in $profiles; do
    resident=$("$bin" plan "$model" --profile "$profile" --ctx "$ctx" --kv-type "$kv" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["resident"])')
    stats=$("$bin" run -m "$model" -p "Hello" -n 2 --temp 0 --ctx "$ctx" --kv-type "$kv" --profile "$profile" -t 2 2>&1 >/dev/null)
    rss=$(sed -n 's/.*peak RSS .* (\([0-9]*\) bytes).*/\1/p' <<<"$stats")
    [ -n "$rss" ] || { echo "no peak RSS in the output of skainet run:" >&2; echo "$stats" >&2; exit 1; }
    python3 - "$type" "$profile" "$resident" "$rss" "$kv" <<'PY'
import sys
t, profile, plan, rss = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"| tinyllama-1.1b {t}, KV {sys.argv[5]} | {profile} | {mib(plan)} | {mib(rss)} | {100 * (rss - plan) / plan:+.1f}% |")
PY
    worst=$(python3 -c "print(max($worst, abs($rss - $resident) * 100 / $resident))")
  done
done
echo
echo "largest difference: ${worst}%"
python3 -c "import sys; sys.exit(0 if $worst <= 5 else 1)"
