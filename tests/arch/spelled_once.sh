#!/usr/bin/env bash
# Issue 12: a model family's tensor names and hyper-parameter keys are spelled in one place, the arch
# module (src/arch, include/skainet/io/arch.hpp). This fails, naming file and line, when code anywhere
# else in src/ or include/ spells one inside a string literal (comments and C++ identifiers such as
# `attn_norm` may name them: they explain, they do not decide).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
names='token_embd|output_norm|output\.weight|attn_(q|k|v|output|norm|qkv)|ffn_(gate|up|down|norm)|rope_(freqs|factors)\.|post_(attention|ffw)_norm|"blk\.'
keys='block_count|embedding_length|head_count|feed_forward_length|context_length|freq_base|layer_norm_rms_epsilon|dimension_count|key_length|value_length|rope\.scaling'
found=$(grep -rnE --include='*.cpp' --include='*.hpp' "$names|$keys" src include \
          | grep -vE '^(src/arch/|include/skainet/io/arch\.hpp:)' \
          | awk -F: '{ line = $0; sub(/^[^:]*:[0-9]+:/, "", line); sub(/\/\/.*$/, "", line); if (line ~ /"[^"]*('"$names|$keys"')[^"]*"/) print $0 }' || true)
if [ -n "$found" ]; then
  echo "tensor names or hyper-parameter keys spelled outside the arch module:" >&2
  echo "$found" >&2
  exit 1
fi
echo "tensor names and hyper-parameter keys: only in the arch module"
