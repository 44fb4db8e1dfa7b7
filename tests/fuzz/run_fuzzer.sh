#!/usr/bin/env bash
# run_fuzzer.sh FUZZER WORK_CORPUS SEED_CORPUS [libFuzzer flags...]
# Runs FUZZER over the seeds, writing new inputs to WORK_CORPUS (seeds stay untouched) and any crash
# reproducer beside it. The limits make hangs and oversized allocations findings, not slowness.
# Targets built on fuzz_target.hpp write their own seeds into SKAINET_FUZZ_SEED_DIR at start-up.
# Later flags win: a target's own -dict or -max_len replaces the defaults here.
set -euo pipefail
fuzzer=$1 work=$2 seed=$3
shift 3
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work" "$seed" "$work/../artifacts"
export SKAINET_FUZZ_SEED_DIR="$seed"
exec "$fuzzer" -dict="$here/gguf.dict" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
  -artifact_prefix="$work/../artifacts/" -print_final_stats=1 "$@" "$work" "$seed"
