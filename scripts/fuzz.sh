#!/usr/bin/env bash
# A long libFuzzer session against the GGUF reader, or the .irpa reader with FUZZ_TARGET=irpa (not
# part of the test suite; ctest -L fuzz in the fuzz build runs a short one of each).
#
#   scripts/fuzz.sh            # 600 seconds
#   scripts/fuzz.sh 3600       # an hour
#   FUZZ_JOBS=2 scripts/fuzz.sh 1800   # two fuzzing processes sharing one corpus
#   FUZZ_TARGET=irpa scripts/fuzz.sh   # the .irpa reader (corpus in build/fuzz/tests/fuzz/irpa-corpus)
#
# Configures and builds the "fuzz" preset (clang, SKAINET_FUZZ=ON; only the fuzzer target is built),
# writes the seed corpus, then fuzzes. New inputs accumulate in build/fuzz/tests/fuzz/corpus (kept
# between runs); a crashing input lands in build/fuzz/tests/fuzz/artifacts/ and the script fails.
# Reproduce one with: build/fuzz/tests/fuzz/gguf_reader_fuzzer <artifact> (or irpa_reader_fuzzer)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
jobs="${FUZZ_JOBS:-1}"
target="${FUZZ_TARGET:-gguf}"
case "$target" in gguf|irpa) ;; *) echo "fuzz: FUZZ_TARGET must be gguf or irpa, not '$target'" >&2; exit 2 ;; esac
cd "$root"

scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${target}_reader_fuzzer" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

out="$root/build/fuzz/tests/fuzz"
extra=()
if [ "$target" = gguf ]; then
  tests/fuzz/make_seed_corpus.sh "$root/build/venv/bin/python" tests/fuzz/make_seed_corpus.py "$out/seed" \
    "$root/../shared/models/stories260K.gguf"
  corpus="$out/corpus" seed="$out/seed"
else
  tests/fuzz/make_irpa_seed_corpus.sh "$root/build/venv/bin" "$out/irpa-seed" "$root/../shared/models/stories260K.gguf"
  corpus="$out/irpa-corpus" seed="$out/irpa-seed"
  extra+=(-dict="$root/tests/fuzz/irpa.dict")  # replaces run_fuzzer.sh's gguf.dict
fi

if [ "$jobs" -gt 1 ]; then extra+=(-jobs="$jobs" -workers="$jobs"); fi
echo "fuzz: ${target}, ${seconds}s, ${jobs} job(s); corpus $corpus, crashes in $out/artifacts"
cd "$out"  # libFuzzer writes its per-job logs (fuzz-N.log) into the working directory
"$root/tests/fuzz/run_fuzzer.sh" "$out/${target}_reader_fuzzer" "$corpus" "$seed" -max_total_time="$seconds" "${extra[@]}"
