#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what the tests need, builds, and runs the whole test suite.
# Arguments go to ctest: `scripts/test.sh -L quick` runs the quick set only.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time, so that a CI log shows where its minutes went (CI's limit: 30 of them).
step() { local t=$SECONDS; "$@"; echo "test.sh: ${*:1:2}: $((SECONDS - t)) s (total $SECONDS s)"; }
step ./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
step cmake --build build -j "$(nproc)"
# Every kernel set this CPU has must run: a test that would skip for a missing
# ISA fails instead (tests/unit/isa_testing.h). BASALT_ISA=avx2 stands in for a
# CPU without the sets above it; BASALT_REQUIRE_ISA, if given, wins.
: "${BASALT_REQUIRE_ISA:=$(./scripts/cpu_isas.sh)}"
export BASALT_REQUIRE_ISA
echo "test.sh: kernel sets required: ${BASALT_REQUIRE_ISA} ($(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs))"
# The Vulkan tests run on Mesa's lavapipe (installed above): a missing device is a failure here, not a skip.
BASALT_REQUIRE_GPU=1 step ctest --test-dir build --no-tests=error --output-on-failure -j "$(nproc)" "$@"
# On the full run only (no ctest arguments): the sanitizers and the fuzzers.
if [ $# -eq 0 ]; then
  # The quick suite under ASan + UBSan (clang, build-fuzz/), then the threading
  # and scheduler tests under TSan (build-tsan/). SANITIZE=0 skips both.
  if [ "${SANITIZE:-1}" = 1 ]; then step ./scripts/sanitize.sh asan; step ./scripts/sanitize.sh tsan; fi
  # Every fuzzer (ASan + UBSan, the same tree) on the same inputs every time (a
  # fixed seed and count, whatever the machine's speed; 60 s at most each): a
  # crash fails it. FUZZ_SECONDS=0 skips this; docs/FUZZING.md has the long runs.
  if [ "${FUZZ_SECONDS:-60}" -gt 0 ]; then
    FUZZ_SEED=1 FUZZ_RUNS="${FUZZ_RUNS:-10000}" step ./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
  fi
  # The ARM kernels (NEON, SDOT): an aarch64 cross build whose kernel tests and
  # text generation run under qemu-user, about 6 minutes on 2 cores. ARM=0
  # skips it; on an ARM machine the suite above ran them natively.
  if [ "${ARM:-1}" = 1 ] && [ "$(uname -m)" = x86_64 ]; then step ./scripts/check_arm_build.sh; fi
fi
