#!/usr/bin/env bash
# A long libFuzzer session against the GGUF reader (not part of the test suite; ctest -L fuzz in the
# fuzz build runs a short one).
#
#   scripts/fuzz.sh            # 600 seconds
#   scripts/fuzz.sh 3600       # an hour
#   FUZZ_JOBS=2 scripts/fuzz.sh 1800   # two fuzzing processes sharing one corpus
#
# Configures and builds the "fuzz" preset (clang, SKAINET_FUZZ=ON; only the fuzzer target is built),
# writes the seed corpus, then fuzzes. New inputs accumulate in build/fuzz/tests/fuzz/corpus (kept
# between runs); a crashing input lands in build/fuzz/tests/fuzz/artifacts/ and the script fails.
# Reproduce one with: build/fuzz/tests/fuzz/gguf_reader_fuzzer <artifact>
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
jobs="${FUZZ_JOBS:-1}"
cd "$root"

scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target gguf_reader_fuzzer -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

out="$root/build/fuzz/tests/fuzz"
tests/fuzz/make_seed_corpus.sh "$root/build/venv/bin/python" tests/fuzz/make_seed_corpus.py "$out/seed" \
  "$root/../shared/models/stories260K.gguf"

extra=()
if [ "$jobs" -gt 1 ]; then extra+=(-jobs="$jobs" -workers="$jobs"); fi
echo "fuzz: ${seconds}s, ${jobs} job(s); corpus $out/corpus, crashes in $out/artifacts"
cd "$out"  # libFuzzer writes its per-job logs (fuzz-N.log) into the working directory
"$root/tests/fuzz/run_fuzzer.sh" "$out/gguf_reader_fuzzer" "$out/corpus" "$out/seed" -max_total_time="$seconds" "${extra[@]}"
