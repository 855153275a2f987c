// SPDX-License-Identifier: MIT
// What the kernel tests share about instruction sets: each (test, ISA) is its
// own test case, skipped where the CPU lacks the ISA and failed instead where
// BASALT_REQUIRE_ISA names it (scripts/test.sh sets it from the CPU's flags),
// so a CI that claims a kernel set cannot pass without running it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/isa.h"

namespace basalt::testutil {

// This architecture's (cpu/isa.h): x86 builds never name the ARM ones, nor ARM builds the x86 ones.
#if defined(__aarch64__)
inline constexpr Isa kEveryIsa[] = {Isa::scalar, Isa::neon, Isa::dotprod};
#else
inline constexpr Isa kEveryIsa[] = {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::amx};
#endif

// Whether the tests can run isa's kernels here: the CPU has it and BASALT_ISA,
// if set, does not cap below it (BASALT_ISA=avx2 stands in for an AVX2-only
// machine). *why says what is missing otherwise.
bool isa_testable(Isa isa, std::string* why);
// Whether BASALT_REQUIRE_ISA (a comma list, or "all") names isa, or a CPU
// feature some kernels add to an ISA (avx512bf16: scripts/cpu_isas.sh).
bool isa_required(Isa isa);
bool name_required(const std::string& name);
// The ISAs the tests run here, for a test that compares them with each other.
std::vector<Isa> testable_isas();

// Built with AddressSanitizer (scripts/sanitize.sh asan): the kernel tests
// leave out their largest shapes there, whose code paths the smaller ones
// take too and whose reference arithmetic, instrumented, took most of the
// sanitizer run (docs/PERFORMANCE.md 6).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// For INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(kEveryIsa), isa_test_name).
inline std::string isa_test_name(const ::testing::TestParamInfo<Isa>& info) { return isa_name(info.param); }

}  // namespace basalt::testutil

// Skips the test where isa's kernels cannot run here, or fails it where
// BASALT_REQUIRE_ISA names that ISA.
#define NEED_ISA(isa)                                                                   \
  do {                                                                                  \
    std::string why_not_testable;                                                       \
    if (!::basalt::testutil::isa_testable(isa, &why_not_testable)) {                    \
      if (::basalt::testutil::isa_required(isa))                                        \
        FAIL() << "BASALT_REQUIRE_ISA names " << ::basalt::isa_name(isa) << ", but "    \
               << why_not_testable;                                                     \
      GTEST_SKIP() << why_not_testable;                                                 \
    }                                                                                   \
  } while (0)
