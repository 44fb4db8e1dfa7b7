#!/usr/bin/env bash
# Installs everything the build and the tests need: Debian packages with apt-get, Python tools with pip
# into a virtual environment under the build folder. Idempotent and quiet when all is present, so the
# README's commands can call it every time.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${SKAINET_VENV:-$root/build/venv}"

# Chromium (headless) is the browser the plan's SVG is opened in by tests/plan/svg_in_chromium.py.
debian_packages=(
  build-essential cmake ninja-build clang libclang-rt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libre2-dev libmicrohttpd-dev libedit-dev pkg-config
  tmux
  python3 python3-venv haproxy
  chromium
)
# IREE is the compiler and runtime the recorded path is tested against (docs/export.md); Jinja2 is the
# reference renderer for chat templates; openai is the real client the server's tests drive it with;
# jsonschema validates what structured output generates (tests/grammar, tests/serve); prometheus_client
# parses /metrics as Prometheus would.
python_packages=(numpy "gguf==0.18.0" "iree-base-compiler==3.13.0" "iree-base-runtime==3.13.0" "jinja2==3.1.6"
                 "openai==3.57.0" "jsonschema==4.23.0" "prometheus_client==0.21.1")

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

stamp="$venv/.skainet-packages"
want="${python_packages[*]}"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating Python environment in $venv"
  # The venv must be built by a Python that ships venv; prefer the system one when present.
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
  echo "$want" >"$stamp"
fi

# llama.cpp's source (not built here): the default suite reads its test vocabularies, such as
# models/ggml-vocab-gemma-4.gguf (tests/text/tests.cmake, SKAINET_PEER_VOCAB_DIR). Quiet once unpacked.
PYTHON="$venv/bin/python" "$root/scripts/peer.sh" --source >/dev/null
