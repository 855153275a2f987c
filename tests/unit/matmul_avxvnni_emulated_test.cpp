// SPDX-License-Identifier: MIT
// The AVX-VNNI qa kernels where the CPU lacks AVX-VNNI: the same source with
// vpdpbusd done in AVX2 (matmul_qa_avxvnni_emulated_avx2.cpp), against the scalar
// reference and against the AVX2 kernels, whose exact int32 sums and rounding
// it shares for every format but Q6_K (whose halves it scales in f32) and Q4_K
// (whose super-blocks AVX2 scales once: HalfScales::kSuper). Where
// the CPU has AVX-VNNI, the emulation must give the real kernels' bits: that
// is what lets it stand for them on the machines that have none.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "cpu/matmul.h"
#include "quant/qa_layout.h"
#include "tests/unit/isa_testing.h"
#include "tests/unit/matmul_avxvnni_emulated.h"
#include "tests/unit/matmul_testing.h"
#include "tests/unit/random_weights.h"

#if defined(BASALT_X86)

namespace basalt {
namespace {

using testutil::Format;
using testutil::kFormats;

// The emulated kernel on one thread, its inputs prepared as matmul() would.
void run_emulated(const MatmulArgs& a) {
  const MatmulKernel k = kernels::matmul_qa_avxvnni_emulated(*a.w);
  ASSERT_NE(k, nullptr) << a.w->name;
  if (const int tokens = kernels::qa_avxvnni_emulated_pass_tokens(*a.w, a.n_tok)) a.xq->make_passes(tokens, a.n_tok);
  k(a);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Decode (1 token) and prefill (passes of up to 8, of unequal sizes at 9, 13,
// 17 and 67), short and long rows, rows that end mid-tile.
TEST(MatmulAvxVnniEmulated, MatchesTheReferenceAndTheAvx2Kernels) {
  NEED_ISA(Isa::avx2);
  std::mt19937 rng(42);
  int checked = 0;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    const bool k_type = f.scales == QaScales::kquant || f.scales == QaScales::q6k;
    for (int64_t cols : {32, 96, 256, 768, 4096}) {
      if (k_type && cols % 256) continue;
      for (int64_t rows : {1, 15, 33}) {
        const Weight w = testutil::random_weight(f, rows, cols, rng);
        for (int64_t n_tok : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 67}) {
          const std::vector<float> x = testutil::normal_inputs(n_tok * cols, rng);
          const std::string what = std::string(f.name) + " rows " + std::to_string(rows) + " cols " +
                                   std::to_string(cols) + " tokens " + std::to_string(n_tok);
          QuantizedActs xq;
          std::vector<float> ref, got(static_cast<size_t>(n_tok * rows), NAN), avx2(got);
          const double bound = 2e-5 * std::max(1.0, testutil::reference(w, x, n_tok, xq, ref));
          run_emulated({&w, x.data(), &xq, n_tok, got.data(), rows, 0, rows});
          EXPECT_LE(testutil::max_abs_diff(got, ref, ref.size()), bound) << what;
          const bool avx2_rounding = f.scales != QaScales::q6k && !(f.scales == QaScales::kquant && f.bits == 4);
          if (avx2_rounding) {
            matmul({&w, x.data(), &xq, n_tok, avx2.data(), rows, 0, rows}, Isa::avx2);
            EXPECT_TRUE(same_bits(got, avx2)) << what << ": not the AVX2 kernel's bits";
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 600);
}

// Every code at its extreme against inputs at +-127: the int32 sums and the
// 8-bit weights' zero point (they stay unsigned, q + 128) must stay exact.
TEST(MatmulAvxVnniEmulated, ExtremeCodesAndInputsStayExact) {
  NEED_ISA(Isa::avx2);
  std::mt19937 rng(7);
  const int64_t rows = 33, cols = 512, n_tok = 17;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    for (int fill : {0xFF, 0x80, 0x7F, 0x00}) {
      const Weight w = qa_weight_from_rows(f.name, f.bits, f.scales, rows, cols,
                                           testutil::random_rowmajor(f, rows, cols, rng, fill).data());
      for (float sign : {1.0f, -1.0f}) {
        const std::vector<float> x(static_cast<size_t>(n_tok * cols), sign);
        QuantizedActs xq;
        std::vector<float> ref;
        const double bound = 2e-5 * std::max(1.0, testutil::reference(w, x, n_tok, xq, ref));
        for (int64_t t : {int64_t{1}, int64_t{3}, n_tok}) {
          std::vector<float> got(static_cast<size_t>(t * rows), NAN);
          run_emulated({&w, x.data(), &xq, t, got.data(), rows, 0, rows});
          EXPECT_LE(testutil::max_abs_diff(got, ref, got.size()), bound)
              << f.name << " fill " << fill << " sign " << sign << " tokens " << t;
        }
      }
    }
  }
}

TEST(MatmulAvxVnniEmulated, GivesTheBitsOfTheRealKernels) {
  NEED_ISA(Isa::avxvnni);
  std::mt19937 rng(3);
  const int64_t rows = 37, cols = 768;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    const Weight w = testutil::random_weight(f, rows, cols, rng);
    for (int64_t n_tok : {1, 2, 4, 6, 7, 9, 13, 67}) {
      const std::vector<float> x = testutil::normal_inputs(n_tok * cols, rng);
      QuantizedActs xq;
      quantize_activations(x.data(), n_tok, cols, xq);
      std::vector<float> emulated(static_cast<size_t>(n_tok * rows), NAN), real(emulated);
      run_emulated({&w, x.data(), &xq, n_tok, emulated.data(), rows, 0, rows});
      matmul({&w, x.data(), &xq, n_tok, real.data(), rows, 0, rows}, Isa::avxvnni);
      EXPECT_TRUE(same_bits(emulated, real)) << f.name << " tokens " << n_tok;
    }
  }
}

}  // namespace
}  // namespace basalt

#endif  // BASALT_X86
