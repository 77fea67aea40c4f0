#!/usr/bin/env bash
# The wheel in dist/ (`make wheel`) as a user gets it: installed with plain pip into a fresh virtual
# environment (its Python dependencies from the package index, nothing compiled), then a smoke subset
# of the Python tests run against that install, not the build tree. pytest runs from outside the
# source tree, so `import zarrstream` can only find the installed package, and the tests' `zarrstream`
# command is the one beside the environment's Python (tests/conftest.py); both are checked first.
#
# The subset touches every bundled library: reads of zarr-python's fixtures through each codec
# (blosc, zstd, lz4, gzip/zlib, bz2, crc32c), HTTP through libcurl (nginx, from
# scripts/install-deps.sh), S3 with SigV4 signing (libcrypto, against moto), and the CLI.
#
# Usage: scripts/wheel-smoke.sh [VENV]   (default: build/wheel-smoke-venv)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

shopt -s nullglob
wheels=("$root"/dist/zarrstream-*.whl)
if [ ${#wheels[@]} -ne 1 ]; then
  echo "wheel-smoke: expected one dist/zarrstream-*.whl (make wheel), found ${#wheels[@]}" >&2
  exit 1
fi

# Left in place afterwards: removing its ~25,000 files takes longer than the tests on a slow disk,
# and CI's checkout is thrown away anyway. The next run starts it afresh.
venv="${1:-$root/build/wheel-smoke-venv}"
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
py="$venv/bin/python"

# --only-binary: a dependency that would have to be compiled is a failure, not a slow install.
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q --only-binary=:all: "${wheels[0]}"
# The tests' own dependencies, at the versions `make test` uses.
mapfile -t test_requirements < <(grep -E '^(pytest|zarr|numcodecs|crc32c|moto\[server\])==' \
  "$root/requirements-dev.txt")
"$py" -m pip install -q --only-binary=:all: "${test_requirements[@]}"

cd "$venv"
"$py" - "$venv" "${wheels[0]}" <<'EOF'
import os, subprocess, sys, sysconfig, zipfile
import zarrstream
venv = os.path.realpath(sys.argv[1])
# The CUDA driver and nvCOMP are loaded at run time from the machine (or the [gpu] extra), never
# carried: a copied libcuda would not match the machine's kernel driver.
carried = [n for n in zipfile.ZipFile(sys.argv[2]).namelist()
           if os.path.basename(n).startswith(("libcuda", "libnvcomp", "libcudart"))]
assert not carried, f"the wheel carries CUDA libraries: {carried}"
site = os.path.realpath(sysconfig.get_path("platlib"))
module = os.path.realpath(zarrstream._zarrstream.__file__)
assert module.startswith(site + os.sep), f"zarrstream imported from {module}, not from {site}"
cli = os.path.join(venv, "bin", "zarrstream")
assert os.access(cli, os.X_OK), f"no zarrstream command at {cli}"
# Every library the module and the CLI load is in the wheel, except those manylinux lets a wheel
# take from the system (the machine's own libraries would hide a missing one from the tests).
system = ("libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "libz.so", "libpthread.so",
          "libdl.so", "librt.so", "libresolv.so", "ld-linux")
real_cli = os.path.join(site, "zarrstream.scripts", "zarrstream")
for binary in (module, real_cli):
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    outside = [line.split()[0] for line in ldd.splitlines()
               if "=> /" in line and "/zarrstream.libs/" not in line
               and not line.split()[0].startswith(system)]
    assert not outside, f"{binary} loads {outside} from the system, not from the wheel"
    assert "not found" not in ldd, f"{binary}: {ldd}"
print(f"wheel-smoke: zarrstream {zarrstream.__version__} from {module}")
EOF

"$py" -m pytest -q -p no:cacheprovider --rootdir="$root" -c "$root/pyproject.toml" \
  "$root/tests/test_read_matrix.py" \
  "$root/tests/test_filters.py" \
  "$root/tests/test_object_stores.py::test_http_reads_equal_zarr_python" \
  "$root/tests/test_object_stores.py::test_faults_are_retried_and_reads_stay_exact" \
  "$root/tests/test_object_stores.py::test_s3_reads_equal_zarr_python" \
  "$root/tests/test_cli.py::test_inspect_prints_tree" \
  "$root/tests/test_cli.py::test_doctor_reports_the_environment"
