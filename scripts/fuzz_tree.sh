#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures the clang tree that scripts/fuzz.sh and scripts/sanitize.sh asan
# share (default build-fuzz/): the whole engine built with ASan, UBSan and the
# fuzzers' coverage (BASALT_FUZZ), at OSS-Fuzz's -O1 with line tables only,
# which compiles in about half the time of -O2 -g.
#
#   fuzz_tree.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CC=clang CXX=clang++ cmake -S "$root" -B "${1:-$root/build-fuzz}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DBASALT_FUZZ=ON -DBASALT_BUILD_TESTS=ON -DBASALT_BUILD_BENCH=OFF -DBASALT_VULKAN=OFF -DBASALT_ONEDNN=OFF >/dev/null
