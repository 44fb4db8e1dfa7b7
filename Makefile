# Thin wrapper over the CMake presets (CMakePresets.json). Every target first runs scripts/setup.sh,
# which installs what is missing (Debian packages, the Python test environment) and is quick otherwise.
PRESET ?= release
JOBS ?= $(shell nproc)
BUILD := build/$(PRESET)
SKAINET := $(BUILD)/skainet

.PHONY: setup configure build demo test test-slow test-asan test-tsan test-peer fuzz bench format clean

setup:
	@bash scripts/setup.sh

configure: setup
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The main job on the trained TinyStories model beside this repository (260K parameters, 1.1 MiB):
# planned from its header (where every tensor lives and why), then loaded as planned and run greedily.
DEMO_MODEL := ../shared/models/stories260K.gguf
demo: build
	@test -f $(DEMO_MODEL) || { echo "make demo: $(DEMO_MODEL) is missing (the trained TinyStories model beside this repository)"; exit 1; }
	$(SKAINET) plan $(DEMO_MODEL) --ctx 256
	$(SKAINET) run -m $(DEMO_MODEL) -p "Once upon a time" -n 128 --temp 0 --ctx 256

# The default test suite (what the README and .ci/run run): everything but the `slow` label.
test: build
	@ctest --preset $(PRESET)

# The `slow` label (the 1.1B export, the CUDA and Vulkan compiles), which .ci/run runs after `test`.
test-slow: build
	@ctest --preset slow

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang: float-cast-overflow included).
# ASan would take SIGBUS for itself; the engine's own handler (a mapped file cut under it) is tested.
# SKAINET_SANITIZED tells the RSS checks that RSS now measures the sanitizer (docs/reliability.md).
# IREE's tools and Python runtime are not instrumented, and a sanitized shared object cannot be loaded
# into them: the recorded-path tests load the release build's IREE plugin (SKAINET_IREE_PLUGIN).
test-asan: setup
	@cmake --preset release >/dev/null && cmake --build --preset release -j $(JOBS) --target skainet_iree_plugin
	@ASAN_OPTIONS=handle_sigbus=0 SKAINET_SANITIZED=1 SKAINET_IREE_PLUGIN=$(CURDIR)/build/release/libskainet_iree_plugin.so \
	  $(MAKE) --no-print-directory test PRESET=asan

# ThreadSanitizer (clang) over what runs threads: the thread pool (test_memory), the kernels
# (test_kernels), synth/quantize's workers and concurrent generation (test_generate). Only those three
# binaries and the libraries below them are built (the tsan build preset), and only their tests run
# (the tsan test preset's label filter), to keep CI within its time.
test-tsan: setup
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" ctest --preset tsan

# Checks against llama.cpp, built from the llama-cpp-python source distribution (slow the first time).
test-peer: build
	@peer_bin=$$(bash scripts/peer.sh) && cmake --preset $(PRESET) -DSKAINET_PEER_BIN=$$peer_bin >/dev/null && \
	  cmake --build --preset $(PRESET) -j $(JOBS) && ctest --preset $(PRESET) -L peer

# Side by side with llama.cpp (docs/benchmarks.md); BENCH_ARGS=--quick for a short run.
bench: build
	@SKAINET_PEER_BIN=$$(bash scripts/peer.sh) bash bench/compare_llama_bench.sh --skainet $(SKAINET) $(BENCH_ARGS)

# Issue 24's load test of `skainet serve` on loopback (docs/reliability.md); SERVE_LOAD_ARGS=--seconds 10 for a short run.
.PHONY: bench-serve
bench-serve: build
	@nice -n 5 build/venv/bin/python bench/serve_load.py --skainet $(SKAINET) $(SERVE_LOAD_ARGS)

fuzz:
	@bash scripts/fuzz.sh

# Lays out every tracked C++ file by .clang-format (not part of setup: the layout was made with
# Debian's clang-format 14, and another version may move lines).
format:
	@git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format -i

clean:
	rm -rf build/release build/debug build/asan build/tsan build/fuzz build/demo
