#!/usr/bin/env bash
# Long libFuzzer sessions (`make fuzz`; not part of the test suite: ctest -L fuzz in the fuzz build
# runs a short one of each target, and the default suite replays each on seeded mutations).
#
#   scripts/fuzz.sh                          # every target, 600 seconds each, one after another
#   scripts/fuzz.sh 60                       # every target, a minute each
#   FUZZ_TARGET=tokenizer scripts/fuzz.sh 3600          # one target for an hour
#   FUZZ_TARGET="plan plan_json" scripts/fuzz.sh 300     # a few
#   FUZZ_JOBS=2 FUZZ_TARGET=gguf scripts/fuzz.sh 1800    # two processes sharing one corpus
#
# Targets (docs/fuzzing.md): gguf (the GGUF reader), irpa (the .irpa reader), tokenizer,
# pre_tokenizer, vocab, plan, plan_json, placement_parse, dequantize, chat_template (the template
# engine), serve_request (the server's request parser), grammar (GBNF and JSON Schema grammars).
#
# Configures and builds the "fuzz" preset (clang, SKAINET_FUZZ=ON; only the chosen fuzzers are
# built), writes the seeds, then fuzzes. New inputs accumulate in build/fuzz/tests/fuzz/NAME-corpus
# (kept between runs); a crashing input lands in build/fuzz/tests/fuzz/artifacts/ and the script
# fails (after the remaining targets have run). Reproduce one with:
#   build/fuzz/tests/fuzz/NAME_fuzzer <artifact>      (gguf_reader_fuzzer, irpa_reader_fuzzer for those two)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
jobs="${FUZZ_JOBS:-1}"
all="gguf irpa tokenizer pre_tokenizer vocab plan plan_json placement_parse dequantize chat_template serve_request grammar"
targets="${FUZZ_TARGET:-$all}"

executable() {  # target name -> fuzzer executable name
  case "$1" in gguf | irpa) echo "${1}_reader_fuzzer" ;; *) echo "${1}_fuzzer" ;; esac
}
executables=()
for t in $targets; do
  case " $all " in *" $t "*) ;; *) echo "fuzz: unknown FUZZ_TARGET '$t' (known: $all)" >&2; exit 2 ;; esac
  executables+=("$(executable "$t")")
done
cd "$root"

scripts/setup.sh
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${executables[@]}" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

out="$root/build/fuzz/tests/fuzz"
failed=()
for t in $targets; do
  extra=()
  case "$t" in
    gguf)
      tests/fuzz/make_seed_corpus.sh "$root/build/venv/bin/python" tests/fuzz/make_seed_corpus.py "$out/gguf-seed" \
        "$root/../shared/models/stories260K.gguf" ;;
    irpa)
      tests/fuzz/make_irpa_seed_corpus.sh "$root/build/venv/bin" "$out/irpa-seed" "$root/../shared/models/stories260K.gguf"
      extra+=(-dict="$root/tests/fuzz/irpa.dict") ;;  # replaces run_fuzzer.sh's gguf.dict
    tokenizer) extra+=(-max_len=4096 -timeout=60) ;;    # the first input reads seven vocabularies
    pre_tokenizer) extra+=(-max_len=4096) ;;
    plan_json) extra+=(-dict="$root/tests/fuzz/plan_json.dict") ;;
    placement_parse) extra+=(-max_len=1024) ;;
    dequantize) extra+=(-max_len=16384) ;;
    chat_template) extra+=(-max_len=8192 -timeout=30) ;;
    serve_request) extra+=(-max_len=4096) ;;
    grammar) extra+=(-max_len=4096 -timeout=30) ;;
  esac
  if [ "$jobs" -gt 1 ]; then extra+=(-jobs="$jobs" -workers="$jobs"); fi
  echo "fuzz: ${t}, ${seconds}s, ${jobs} job(s); corpus $out/${t}-corpus, crashes in $out/artifacts"
  # libFuzzer writes its per-job logs (fuzz-N.log) into the working directory.
  if ! (cd "$out" && "$root/tests/fuzz/run_fuzzer.sh" "$out/$(executable "$t")" "$out/${t}-corpus" "$out/${t}-seed" \
          -max_total_time="$seconds" "${extra[@]}"); then
    failed+=("$t")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: findings in: ${failed[*]} (inputs in $out/artifacts)" >&2
  exit 1
fi
echo "fuzz: no findings in: $targets"
