#!/usr/bin/env bash
# Installs the Debian packages zarrstream builds and tests with, when any is missing.
# With arguments, installs those packages instead (e.g. what `make fuzz` needs on top).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libzstd-dev liblz4-dev libblosc-dev libdeflate-dev zlib1g-dev libbz2-dev
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libflatbuffers-dev libyaml-cpp-dev  # Icechunk repositories
  python3-venv
  clang-format clang-tidy  # make lint
  libcurl4-openssl-dev libssl-dev nginx libnginx-mod-http-echo wrk
)
if [ $# -gt 0 ]; then packages=("$@"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
