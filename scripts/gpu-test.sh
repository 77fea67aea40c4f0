#!/usr/bin/env bash
# `make gpu-test`: everything the GPU path promises, on a machine with an NVIDIA GPU, with or
# without a network (docs/gpu-machines.md):
#   1. builds with nvcc: from .deps/ (scripts/offline-build.sh) when it is there, else `make build`;
#   2. the environment report (`zarrstream doctor`): GPU, nvCOMP;
#   3. every GPU test: the C++ ones (suites *GpuTest) and the Python ones (pytest -m gpu), none
#      skipped;
#      those needing JAX (pytest -m jax) or two GPUs (pytest -m multi_gpu) as steps of their own,
#      left out where JAX is absent or the machine has one GPU;
#   4. compute-sanitizer memcheck, racecheck and synccheck over the C++ GPU tests;
#   5. the GPU benchmark, short (bench/gpu_bench.py --quick; the full one: docs/benchmarks.md);
# then prints one line per step and fails if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -d .deps/debs ] && [ -d .deps/wheels ]; then
  scripts/offline-build.sh || exit 1
  # shellcheck disable=SC1091
  . .deps/env.sh
  python=${PYTHON:-python3}
  tests=build/offline/zarrstream_tests
else
  make build || exit 1
  python=.venv/bin/python
  export PATH=$PWD/.venv/bin:$PATH
  tests=build/release/zarrstream_tests
fi
sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
# The suites that need a GPU (they skip without one). The tests of what happens without a GPU
# (CudaDriverTest, LoaderTest.GpuBatchesWithoutAGpuAreAClearError) skip where there is one: they
# are not among them.
gpu_filter='*GpuTest.*'
summary=()
failed=0
step() {  # step NAME COMMAND...: runs it, records PASS/FAIL
  local name=$1
  shift
  echo "=== $name"
  if "$@"; then summary+=("PASS  $name"); else summary+=("FAIL  $name"); failed=1; fi
}

gpu_python_tests() {  # gpu_python_tests MARKER_EXPRESSION
  local log
  log=$(mktemp)
  "$python" -m pytest -q -rs -m "$1" tests/ -p no:cacheprovider 2>&1 | tee "$log" | tail -15
  local status=${PIPESTATUS[0]}
  # A GPU machine must run them, not skip them.
  # (conftest.py counts the skipped GPU-marked tests; a module skipped for a missing optional
  # package holds none.)
  if grep -q "GPU tests SKIPPED" "$log"; then
    echo "gpu-test: GPU tests were skipped (a GPU machine runs every one; see the reasons above)"
    status=1
  fi
  rm -f "$log"
  return "$status"
}

gpu_cpp_tests() {  # gpu_cpp_tests COMMAND...: runs the C++ GPU tests (under COMMAND's tool)
  local log
  log=$(mktemp)
  "$@" --gtest_filter="$gpu_filter" --gtest_color=no 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  # A GPU machine must run them, not skip them (gtest exits 0 when tests skip).
  if grep -q "^\[  SKIPPED \]" "$log"; then
    echo "gpu-test: C++ GPU tests were skipped (a GPU machine runs every one; see the reasons above)"
    status=1
  elif ! grep -qE "^\[  PASSED  \] [1-9]" "$log"; then
    echo "gpu-test: no C++ GPU test ran (the filter $gpu_filter matched none?)"
    status=1
  fi
  rm -f "$log"
  return "$status"
}

step "doctor" zarrstream doctor
step "C++ GPU tests" gpu_cpp_tests "$tests"
step "Python GPU tests" gpu_python_tests "gpu and not jax and not multi_gpu"
# Batches on a second GPU (data-parallel ranks): where the machine has two or more.
gpus=$("$python" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${gpus:-0}" -ge 2 ]; then
  step "multi-GPU tests ($gpus GPUs)" gpu_python_tests multi_gpu
else
  summary+=("SKIP  multi-GPU tests (this machine has ${gpus:-0} GPU)")
fi
# The JAX consumer needs JAX with its CUDA plugin, which GPU images seldom have.
if "$python" -c "import jax" 2>/dev/null; then
  step "JAX consumer" gpu_python_tests jax
else
  summary+=("SKIP  JAX consumer (jax is not installed)")
fi
# API errors off: the driver tests provoke some on purpose (double registration, ...). racecheck
# covers zarrstream's kernels (zs_*): nvCOMP's inflate kernel reports shared-memory hazards of
# its own (nvCOMP 6.0.0) that are not ours to fix; memcheck and synccheck cover every kernel.
for tool in memcheck racecheck synccheck; do
  filter=()
  [ "$tool" = racecheck ] && filter=(--kernel-name kns=zs_)
  step "compute-sanitizer $tool" gpu_cpp_tests "$sanitizer" --tool "$tool" --error-exitcode 99 \
    --report-api-errors no "${filter[@]}" "$tests"
done
step "GPU benchmark (quick)" "$python" bench/gpu_bench.py --quick

echo
echo "=== make gpu-test summary"
printf '%s\n' "${summary[@]}"
exit "$failed"
