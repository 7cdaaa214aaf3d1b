#!/usr/bin/env bash
# Installs what Parallax needs on a Debian/Ubuntu machine (as root) and builds the release binary.
# CUDA and NCCL are used when the CUDA toolkit is installed (CMake finds nvcc); otherwise the CUDA
# parts are skipped with a message. With --sanitizers it also installs clang and its runtime
# libraries (ASan, UBSan, libFuzzer), which the asan preset and fuzz/ need.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libeigen3-dev nlohmann-json3-dev libtbb-dev
          libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--sanitizers" ]; then
  packages+=(clang libclang-rt-dev python3)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# nvcc is usually not on PATH; let CMake find the toolkit where it is installed.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
echo "setup: built build/release/cli/parallax"
