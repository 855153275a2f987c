#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The unit tests under the sanitizers:
#
#   scripts/sanitize.sh [asan] [tsan]   both when none is named, as CI (scripts/test.sh) does
#
# asan: the quick suite built with clang, AddressSanitizer and UndefinedBehavior
#       Sanitizer in the fuzzers' tree (build-fuzz/, scripts/fuzz_tree.sh), so
#       CI builds one clang tree for both.
# tsan: the threading, HTTP worker, rate limiter, prefix cache and scheduler
#       tests built with ThreadSanitizer (build-tsan/, gcc -O1), without oneDNN
#       (its OpenMP runtime is not instrumented) and with the portable kernels
#       that ARM machines build (the threads are the same; it also proves that
#       build). Only those tests are built (basalt_tsan_tests): about 4
#       minutes in all, so CI runs it. Left out by default, as they take
#       minutes each under TSan: the scheduler's tests on a real model
#       (SchedulerModel) and its 4000-token prompt (LongPromptIsChunked..., one
#       thread's arithmetic; the same pool and scheduler paths run in the
#       others). Run them by hand with TSAN_FILTER='*'.
# Extra arguments after -- go to ctest (asan).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
which=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do which+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#which[@]} -eq 0 ] && which=(asan tsan)

for w in "${which[@]}"; do
  case $w in
    asan)
      ./scripts/fuzz_tree.sh build-fuzz
      cmake --build build-fuzz -j "$jobs" --target basalt_tests
      # ctest starts the costliest tests first by its record of earlier runs: where this tree
      # has none yet (a clean checkout, as in CI), the release tree's, or the longest would end the run alone.
      costs=build-fuzz/Testing/Temporary/CTestCostData.txt
      if [ ! -f "$costs" ] && [ -f build/Testing/Temporary/CTestCostData.txt ]; then
        mkdir -p "$(dirname "$costs")" && cp build/Testing/Temporary/CTestCostData.txt "$costs"
      fi
      # Left out (ASAN_EXCLUDE= keeps them): accuracy checks whose code the
      # other kernel tests run under ASan too, a minute of the 2 CPUs together.
      exclude=${ASAN_EXCLUDE-'^(Attention\.(Q4|Q8)CacheStaysCloseToF16|Attention\.ScalarRunsTheReference|AttentionIsa\.OneThreadMatchesReference/.*|Sampler\.WithoutTopKTheHeadSortedHoldsTheCut)$'}
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --test-dir build-fuzz -L quick --no-tests=error --output-on-failure -j "$jobs" ${exclude:+-E "$exclude"} "$@"
      ;;
    tsan)
      cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
        -DBASALT_TSAN=ON -DBASALT_ISA_KERNELS=OFF -DBASALT_ONEDNN=OFF -DBASALT_VULKAN=OFF -DBASALT_BUILD_BENCH=OFF >/dev/null
      cmake --build build-tsan -j "$jobs" --target basalt_tsan_tests
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ./build-tsan/bin/basalt_tsan_tests \
        --gtest_filter="${TSAN_FILTER:--SchedulerModel.*:SchedulerTest.LongPromptIsChunkedAndDecodesKeepGoing}"
      ;;
    *) echo "sanitize.sh: unknown sanitizer '$w' (asan, tsan)" >&2; exit 2 ;;
  esac
done
