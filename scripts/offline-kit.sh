#!/usr/bin/env bash
# Gathers what a GPU machine with no network needs to build and test zarrstream, into .deps/
# (ignored by git; docs/gpu-machines.md). Run it on a Debian bookworm machine with apt and PyPI:
#
#   scripts/offline-kit.sh [--with-kvikio] [--with-object-stores] [--with-virtual] [PYTHON_VERSION]
#
# PYTHON_VERSION is the offline machine's Python, default 3.12.
#
# .deps/debs/   the Debian packages of the C and C++ libraries (headers, pkg-config files, and
#               the runtimes an Ubuntu or Debian image may lack); scripts/offline-build.sh unpacks
#               them into .deps/root and links them against the machine's own runtimes where it
#               has them.
# .deps/wheels/ PyPI wheels for that Python of the packages the tests and benchmarks import that
#               CUDA/PyTorch images usually lack (zarr-python and its codecs, xbatcher and Dask,
#               nvCOMP). Versions follow requirements-dev.txt where it pins them.
#               With --with-kvikio also KvikIO for CUDA 13 (bench/gpu_bench.py's kvikio row):
#               kvikio-cu13 and libkvikio-cu13 and rapids-logger, the one library they load that a
#               PyTorch + CuPy image lacks (CuPy 14 brings cuda-pathfinder, PyTorch's CUDA 13
#               wheels nvidia-cufile): about 4 MB more; left out by default, as nothing but
#               that benchmark row needs it.
# --with-object-stores adds what bench/object_store_bench.py needs: nginx with its echo module and
#               wrk (Debian packages, with the LuaJIT runtime wrk loads) to .deps/debs, and
#               zarr-python's remote stores (obstore; fsspec with aiohttp and what it imports) to
#               .deps/wheels: about 10 MB more.
# --with-virtual adds what bench/virtual_bench.py and the Icechunk and Kerchunk tests need:
#               icechunk 2.x (spec 2; icechunk 1.x does not install on Python 3.12), kerchunk with
#               fsspec and ujson, h5py and h5netcdf: about 23 MB more.
set -euo pipefail
cd "$(dirname "$0")/.."

with_kvikio=0
with_object_stores=0
with_virtual=0
python_version=3.12
for arg in "$@"; do
  case "$arg" in
    --with-kvikio) with_kvikio=1 ;;
    --with-object-stores) with_object_stores=1 ;;
    --with-virtual) with_virtual=1 ;;
    -*) echo "offline-kit: unknown option $arg (known: --with-kvikio, --with-object-stores, --with-virtual)" >&2
        exit 2 ;;
    *) python_version=$arg ;;
  esac
done
debs=.deps/debs
wheels=.deps/wheels
rm -rf "$debs" "$wheels"
mkdir -p "$debs" "$wheels"

# Header packages and the runtimes that go with them. libcurl and OpenSSL are headers only: their
# runtimes pull in much of a distribution, and every CUDA image has its own libcurl.so.4 and
# libssl.so.3, which offline-build.sh links instead.
packages=(
  libblosc-dev libblosc1 libsnappy1v5
  libdeflate-dev libdeflate0
  libzstd-dev liblz4-dev zlib1g-dev libbz2-dev
  libcurl4-openssl-dev libssl-dev
  nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev
  libflatbuffers-dev libflatbuffers2 libyaml-cpp-dev libyaml-cpp0.7  # Icechunk repositories
)
if [ "$with_object_stores" = 1 ]; then
  # The loopback HTTP server with an object store's latency, and the load generator.
  packages+=(nginx libnginx-mod-http-echo wrk libluajit-5.1-2)
fi
(cd "$debs" && apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
for p in "${packages[@]}"; do
  ls "$debs/${p}"_*.deb >/dev/null 2>&1 || { echo "offline-kit: apt did not download $p" >&2; exit 1; }
done

pinned() {  # the version requirements-dev.txt pins for $1, else $2
  local v
  v=$(sed -n "s/^$1==\\([^ ]*\\).*/\\1/p" requirements-dev.txt)
  echo "${v:-$2}"
}
requirements=(
  "zarr==$(pinned zarr)" "numcodecs==$(pinned numcodecs)" "crc32c==$(pinned crc32c)"
  "cftime==$(pinned cftime)" "xbatcher==$(pinned xbatcher)" "netCDF4==$(pinned netCDF4)"
  # What those need beyond a PyTorch image's packages.
  donfig==0.8.1.post1 google-crc32c==1.9.0 dask==2026.8.0 partd==1.4.2 locket==1.0.0 certifi==2026.10.19.post1
  # The GPU codecs (nvCOMP's batched API, loaded at run time).
  nvidia-libnvcomp-cu13==6.0.0.12
)
if [ "$with_kvikio" = 1 ]; then
  # kvikio.zarr.GDSStore (cuFile reads into GPU memory) for zarr-python 3.
  requirements+=(kvikio-cu13==26.10.0 libkvikio-cu13==26.10.0 rapids-logger==0.3.0)
fi
if [ "$with_object_stores" = 1 ]; then
  # zarr-python's remote stores, the object-store benchmark's peers.
  requirements+=("obstore==$(pinned obstore)" "fsspec==$(pinned fsspec)" "aiohttp==$(pinned aiohttp)"
    aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1
    propcache==0.5.4 yarl==1.25.1 idna==3.20)
fi
if [ "$with_virtual" = 1 ]; then
  # Icechunk repositories, Kerchunk references to netCDF4 files, and xarray's h5netcdf engine.
  requirements+=(icechunk==2.3.0 "kerchunk==$(pinned kerchunk)" ujson==6.1.0 "h5py==$(pinned h5py)"
    "h5netcdf==$(pinned h5netcdf)")
  [ "$with_object_stores" = 1 ] || requirements+=("fsspec==$(pinned fsspec)")  # unless listed above
fi
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 \
  --platform any -d "$wheels" "${requirements[@]}"

du -sh .deps
echo "offline-kit: .deps/ is ready; on the offline machine run scripts/offline-build.sh"
