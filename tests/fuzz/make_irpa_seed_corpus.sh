#!/usr/bin/env bash
# make_irpa_seed_corpus.sh TOOLS_DIR OUT_DIR MODEL — writes the seed corpus for irpa_reader_fuzzer with
# IREE's own tools (from the venv's iree-base-runtime): an empty archive, zeroed data and splat
# entries, and stories260K's tensors stripped to splats. Without the tools it leaves an empty seed
# directory so the fuzz session can still run. Generated files are build outputs; never commit them.
set -euo pipefail
tools=$1 out=$2 model=$3
mkdir -p "$out"
create="$tools/iree-create-parameters" convert="$tools/iree-convert-parameters"
if [ ! -x "$create" ] || [ ! -x "$convert" ]; then
  echo "make_irpa_seed_corpus: no IREE tools in $tools (run scripts/setup.sh); empty seed corpus"
  exit 0
fi
"$create" --quiet --output="$out/empty.irpa"
"$create" --quiet --data=a=4xf32 --data=b=3xi8 --data=c=1xi16 --output="$out/data.irpa"
"$create" --quiet --splat=s=2xi32=3 --splat=h=8xi16=258 --splat=d=2xf64=1.5 --output="$out/splat.irpa"
"$create" --quiet --data=w=16xf32 --splat=z=5xi8=1 --data=x.y=3xi8 --output="$out/mixed.irpa"
if [ -f "$model" ]; then
  "$convert" --quiet --parameters="$model" --strip --output="$out/stories-stripped.irpa"
fi
# The page padding after the last data byte holds nothing the reader looks at; copies without it
# put the fuzzer's mutations where they matter.
for f in "$out"/*.irpa; do
  read -r offset length < <(od -An -t u8 -j 72 -N 16 "$f")
  head -c "$((offset + length))" "$f" > "${f%.irpa}.trimmed"
done
