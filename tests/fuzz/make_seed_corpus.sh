#!/usr/bin/env bash
# make_seed_corpus.sh PYTHON SCRIPT OUT_DIR MODEL — runs make_seed_corpus.py when the venv exists;
# otherwise leaves an empty seed directory so the fuzz session can still run.
set -euo pipefail
python=$1 script=$2 out=$3 model=$4
mkdir -p "$out"
if [ ! -x "$python" ] || ! "$python" -c "import gguf" 2>/dev/null; then
  echo "make_seed_corpus: no Python with the gguf package at $python (run scripts/setup.sh); empty seed corpus"
  exit 0
fi
exec "$python" "$script" --out "$out" --model "$model"
