#!/usr/bin/env bash
# Builds the peer engine (llama.cpp) used for compatibility checks and benchmarks, and prints its bin dir.
#
#   scripts/peer.sh            # download + build once, then just print the bin dir
#   BIN=$(scripts/peer.sh) && "$BIN/llama-completion" --version
#   scripts/peer.sh --source   # download + unpack only (no build), print llama.cpp's source dir: the
#                              # default suite reads its test vocabularies (models/ggml-vocab-gemma-4.gguf)
#
# llama.cpp comes from the source distribution of the PyPI package llama-cpp-python, which vendors a full
# llama.cpp tree at vendor/llama.cpp. Nothing of it is committed: everything lives under build/peer/.
# A finished build is recognised by a stamp that records the pin and the configure flags, so a second run
# costs nothing. Progress goes to stderr; stdout carries only the bin dir.
#
# Environment: SKAINET_PEER_DIR (default <repo>/build/peer), PYTHON (default python3), SKAINET_PEER_JOBS
# (default 2: these machines have 2 shared cores).
set -euo pipefail

# Pinned peer. docs/peer.md records the llama.cpp commit this version vendors; change both together.
readonly PIN=0.3.36
readonly TARGETS=(llama-completion llama-simple llama-bench llama-tokenize llama-quantize llama-server)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
peer_dir=${SKAINET_PEER_DIR:-$root/build/peer}
python=${PYTHON:-python3}
jobs=${SKAINET_PEER_JOBS:-2}

work=$peer_dir/$PIN
src=$work/llama_cpp_python-$PIN
llama_src=$src/vendor/llama.cpp
build=$work/build
bin=$build/bin
stamp=$work/built.stamp

cmake_flags=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=ON
  -DLLAMA_CURL=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_EXAMPLES=ON
  -DBUILD_SHARED_LIBS=OFF
)
stamp_text="llama-cpp-python==$PIN ${cmake_flags[*]} targets: ${TARGETS[*]}"

log() { printf 'peer.sh: %s\n' "$*" >&2; }

source_only=false
case "${1:-}" in
  --source) source_only=true ;;
  "") ;;
  *) log "unknown argument '$1' (expected none or --source)"; exit 2 ;;
esac

all_built() {
  [[ -f $stamp && "$(cat "$stamp")" == "$stamp_text" ]] || return 1
  local t
  for t in "${TARGETS[@]}"; do [[ -x $bin/$t ]] || return 1; done
}

if ! $source_only && all_built; then
  echo "$bin"
  exit 0
fi
if $source_only && [[ -f $llama_src/CMakeLists.txt ]]; then
  echo "$llama_src"
  exit 0
fi

mkdir -p "$work"
# Two callers (say, ctest and a bench script) must not unpack or build into the same folder at once.
exec 9>"$work/lock"
flock 9
if ! $source_only && all_built; then
  echo "$bin"
  exit 0
fi

sdist=$work/llama_cpp_python-$PIN.tar.gz
if [[ ! -f $sdist ]]; then
  log "downloading llama-cpp-python==$PIN (source distribution) into $work"
  # The file PyPI's simple index (PEP 691, JSON) lists for the pin, checked against the sha256 it gives.
  # Not `pip download`: pip prepares an sdist's metadata, building its build requirements from source
  # under --no-binary :all: (with some pips that took tens of minutes).
  "$python" - "$PIN" "$sdist" >&2 <<'PY'
import hashlib, json, os, sys, urllib.request
pin, out = sys.argv[1], sys.argv[2]
name = f"llama_cpp_python-{pin}.tar.gz"
index = urllib.request.Request("https://pypi.org/simple/llama-cpp-python/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(index, timeout=60) as r:
    files = [f for f in json.load(r)["files"] if f["filename"] == name]
if len(files) != 1:
    sys.exit(f"peer.sh: PyPI's index lists {len(files)} files named {name}, expected 1")
f = files[0]
tmp = out + ".part"
with urllib.request.urlopen(f["url"], timeout=600) as r, open(tmp, "wb") as w:
    while chunk := r.read(1 << 20):
        w.write(chunk)
with open(tmp, "rb") as got_file:
    got = hashlib.sha256(got_file.read()).hexdigest()
if got != f["hashes"]["sha256"]:
    os.remove(tmp)
    sys.exit(f"peer.sh: {name}: sha256 {got}, PyPI's index says {f['hashes']['sha256']}")
os.replace(tmp, out)
PY
fi

if [[ ! -f $llama_src/CMakeLists.txt ]]; then
  log "unpacking $sdist"
  rm -rf "$src"
  tar -xzf "$sdist" -C "$work"
fi

# The sdist keeps the submodule's git metadata; its HEAD is the vendored llama.cpp commit.
commit_file=$src/.git/modules/vendor/llama.cpp/HEAD
if [[ -f $commit_file ]]; then
  commit=$(tr -d '[:space:]' <"$commit_file")
  echo "$commit" >"$work/llama.cpp-commit"
  log "llama.cpp commit $commit"
fi

if $source_only; then
  echo "$llama_src"
  exit 0
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

log "configuring $llama_src -> $build"
rm -f "$stamp"
cmake -S "$llama_src" -B "$build" "${generator[@]}" "${cmake_flags[@]}" \
  -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$bin" >"$work/configure.log" 2>&1 \
  || { log "configure failed, see $work/configure.log"; tail -n 30 "$work/configure.log" >&2; exit 1; }

log "building ${TARGETS[*]} with -j$jobs (several minutes on 2 cores)"
start=$SECONDS
cmake --build "$build" --target "${TARGETS[@]}" -j "$jobs" >"$work/build.log" 2>&1 \
  || { log "build failed, see $work/build.log"; tail -n 30 "$work/build.log" >&2; exit 1; }
log "built in $((SECONDS - start)) s"

for t in "${TARGETS[@]}"; do
  [[ -x $bin/$t ]] || { log "missing $bin/$t after build"; exit 1; }
done
echo "$stamp_text" >"$stamp"
echo "$bin"
