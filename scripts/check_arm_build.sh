#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-builds `basalt` for aarch64 (the portable kernels; oneDNN off) and runs
# it under qemu-user on the default model: the ARM build links and generates
# the same text as the native one. Not part of CI (about 3 minutes of build
# and a minute of emulation on 2 cores). Needs root or sudo for apt-get.
#   scripts/check_arm_build.sh [BUILD_DIR]   (default build-arm)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$ROOT/build-arm}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
# The arm64 libraries the build links (cpp-httplib for `basalt serve`, with its OpenSSL, zlib and brotli).
ARM_LIBS="libpcre2-dev:arm64 libcpp-httplib-dev:arm64"
if ! dpkg-query -W -f='${Status}\n' $ARM_LIBS 2>/dev/null | grep -c "install ok installed" | grep -qx 2; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    g++-aarch64-linux-gnu qemu-user $ARM_LIBS
fi
mkdir -p "$OUT"
cat > "$OUT/aarch64.cmake" <<TOOLCHAIN
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
TOOLCHAIN
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
  cmake -S "$ROOT" -B "$OUT" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$OUT/aarch64.cmake" \
  -DBASALT_BUILD_TESTS=OFF -DBASALT_BUILD_BENCH=OFF -DBASALT_ONEDNN=OFF >/dev/null
cmake --build "$OUT" --target basalt -j "$(nproc)"
MODEL="$("$ROOT/.venv/bin/python" "$ROOT/scripts/default_model.py")"
run_arm() { QEMU_LD_PREFIX=/usr/aarch64-linux-gnu LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu OMP_NUM_THREADS=1 \
  qemu-aarch64 "$OUT/bin/basalt" "$@"; }
ARGS=(run -m "$MODEL" -p "The capital of France is" -n 3 --temp 0 -t 1 -c 64)
arm="$(run_arm "${ARGS[@]}" 2>/dev/null)"
native="$("$ROOT/build/bin/basalt" "${ARGS[@]}" 2>/dev/null)"
echo "aarch64: '$arm'  native: '$native'"
[ "$arm" = "$native" ] || { echo "check_arm_build: the aarch64 build generates other text" >&2; exit 1; }
echo "check_arm_build: ok"
