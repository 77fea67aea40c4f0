#!/usr/bin/env bash
# Runs every fuzz target of a fuzz build for a fixed time and fails if any reports a problem.
#
#   fuzz/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
#
# Per target: first replays fuzz/regressions/<target>/ (inputs that once crashed it), then fuzzes
# for SECONDS starting from BUILD_DIR/corpus/<target> (kept between runs, so coverage accumulates)
# and the seeds in BUILD_DIR/seeds/<target>. A crash, leak, sanitizer report, timeout (an input
# taking more than 10 s: a hang) or out-of-memory leaves the input in BUILD_DIR/artifacts/<target>/
# and fails the run. Prints one summary line per target. Targets run one after another: the
# machines this runs on have few cores, and each target is measured alone. FUZZ_ARGS adds libFuzzer
# flags to every run (e.g. FUZZ_ARGS="-jobs=4 -workers=4").
set -uo pipefail

build_dir=${1:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in "$repo"/fuzz/*_fuzzer.cc; do targets+=("$(basename "$src" .cc)"); done
fi

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

failed=()
summaries=()
for target in "${targets[@]}"; do
  binary="$build_dir/fuzz/$target"
  corpus="$build_dir/corpus/$target"
  artifacts="$build_dir/artifacts/$target"
  log="$build_dir/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  if [ ! -x "$binary" ]; then
    summaries+=("$target: FAILED (no binary at $binary; build the zarrstream_fuzzers target)")
    failed+=("$target")
    continue
  fi

  # A regression that still fails is reported, and the target is fuzzed all the same: one known
  # bug must not hide the next.
  regression_failure=""
  regressions=("$repo/fuzz/regressions/$target"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$binary" -timeout=10 -rss_limit_mb=2048 "${regressions[@]}" >"$log.regressions" 2>&1; then
      regression_failure="; FAILED replaying fuzz/regressions/$target (log $log.regressions)"
    fi
  fi

  seeds=()
  [ -d "$build_dir/seeds/$target" ] && seeds=("$build_dir/seeds/$target")
  options=()
  # The metadata parsers compare against field and codec names; the dictionary lets mutations
  # produce them instead of rediscovering them byte by byte.
  [[ $target == *metadata_fuzzer ]] && options+=(-dict="$repo/fuzz/zarr_metadata.dict")
  # shellcheck disable=SC2206  # FUZZ_ARGS is a list of flags
  options+=(${FUZZ_ARGS:-})
  "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${options[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1
  status=$?

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  features=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  units=$(find "$corpus" -type f | wc -l)
  line="$target: ${execs:-?} execs (${rate:-?}/s), cov ${cov:-?} edges, ft ${features:-?},"
  line+=" corpus $units, peak rss ${rss:-?} MB"
  if [ $status -ne 0 ]; then
    reason=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz property violated|ALARM|out-of-memory' "$log")
    line="$line; FAILED (exit $status: ${reason:-see log}; log $log)"
  fi
  line+=$regression_failure
  [ $status -ne 0 ] || [ -n "$regression_failure" ] && failed+=("$target")
  summaries+=("$line")
  echo "$line"
done

echo
echo "fuzz summary (${seconds}s per target):"
printf '  %s\n' "${summaries[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (inputs in $build_dir/artifacts/<target>/)"
  exit 1
fi
