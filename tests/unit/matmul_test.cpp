// SPDX-License-Identifier: MIT
// Every matmul kernel variant (format x ISA) against the scalar reference, on
// odd shapes: rows not a multiple of the tile, 1 to 17 tokens, long rows.
// From onednn_min_tokens() tokens the non-scalar variants of dense formats run
// through oneDNN (cpu/onednn_matmul.h) in builds that have it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "cpu/matmul.h"
#include "cpu/onednn_matmul.h"
#include "cpu/work_shares.h"
#include "core/util/half.h"
#include "core/util/threads.h"
#include "quant/qa_layout.h"
#include "tests/unit/isa_testing.h"
#include "tests/unit/matmul_testing.h"
#include "tests/unit/random_weights.h"

namespace basalt {
namespace {

using testutil::Format;
using testutil::kFormats;
using testutil::max_abs_diff;
using testutil::reference;
using testutil::random_rowmajor;
using testutil::random_weight;

// Each test below runs once per ISA (MatmulIsa.NAME/ISA): skipped where the
// CPU lacks it, failed where BASALT_REQUIRE_ISA names it.
// On AMX the tiles run from 16 tokens while one of these lives, for every
// format, so that the tests' 17 tokens and more take them (the defaults
// start at 32 to 512 tokens: cpu/matmul.h).
struct AmxFrom16Tokens {
#if defined(BASALT_X86)
  AmxFrom16Tokens() { kernels::set_amx_min_tokens(16); }
  ~AmxFrom16Tokens() { kernels::set_amx_min_tokens(0); }
#endif
};

class MatmulIsa : public ::testing::TestWithParam<Isa> {
  AmxFrom16Tokens amx_;
};
INSTANTIATE_TEST_SUITE_P(, MatmulIsa, ::testing::ValuesIn(testutil::kEveryIsa), testutil::isa_test_name);

TEST_P(MatmulIsa, EveryFormatMatchesReference) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(42);
  int checked = 0;
  for (const Format& f : kFormats) {
    const bool k_type = f.scales == QaScales::kquant || f.scales == QaScales::q6k;
    for (int64_t cols : {32, 96, 256, 768, 4096}) {
      if (k_type && cols % 256) continue;
      for (int64_t rows : {1, 15, 33}) {
        Weight w = random_weight(f, rows, cols, rng);
        for (int64_t n_tok : {1, 2, 3, 4, 5, 6, 7, 8, 10, 16, 17, 33, 67, 131}) {
          // f16 reaches oneDNN from 128 tokens on CPUs without AVX-512 (onednn_min_tokens); scalar never does
          if (n_tok > 67 && (f.format == WeightFormat::qa || isa == Isa::scalar)) continue;
          // Under ASan, long rows with many tokens: the paths of the shorter ones (17 tokens: three 8-token passes)
          if (testutil::kSanitized && cols * n_tok > 4096 * 17) continue;
          std::vector<float> x(static_cast<size_t>(n_tok * cols));
          std::normal_distribution<float> nd(0, 1);
          for (float& v : x) v = nd(rng);
          // oneDNN takes bf16 activations with bf16 weights: values it can hold exactly keep the bound tight.
          if (f.format == WeightFormat::bf16)
            for (float& v : x) v = bf16_to_f32(f32_to_bf16(v));
          QuantizedActs xq;
          std::vector<float> ref, got(static_cast<size_t>(n_tok * rows));
          const double ref_norm = reference(w, x, n_tok, xq, ref);
          {
            std::fill(got.begin(), got.end(), NAN);
            matmul({&w, x.data(), &xq, n_tok, got.data(), rows, 0, rows}, isa);
            const double worst = max_abs_diff(got, ref, ref.size());
            EXPECT_LE(worst, 2e-5 * std::max(1.0, ref_norm))
                << f.name << " " << isa_name(isa) << (onednn_wanted(w, n_tok, isa) ? " (oneDNN)" : "")
                << " rows " << rows << " cols " << cols << " tokens " << n_tok;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 60);
}

// Dense rows of any length (the kernels' 8-wide steps leave a tail), row
// counts whose ranges split into 4 or 2 read streams with rows left over,
// decode (1-3 tokens) and prefill tiles, on 1 and 3 threads, for the whole
// matrix and for rows [1, rows - 1) only, whose neighbours must stay unwritten.
TEST_P(MatmulIsa, DenseOddShapesMatchReference) {
  const Isa isa = GetParam();
  if (isa == Isa::scalar) GTEST_SKIP() << "the scalar kernels are the reference";
  NEED_ISA(isa);
  std::mt19937 rng(7);
  const int threads_before = thread_count();
  int checked = 0;
  for (const Format& f : kFormats) {
    if (f.format == WeightFormat::qa) continue;
    for (int64_t cols : {1, 7, 13, 100}) {
      for (int64_t rows : {3, 4, 5, 70, 131}) {
        Weight w = random_weight(f, rows, cols, rng);
        for (int64_t n_tok : {1, 2, 3, 4, 5, 7}) {
          std::vector<float> x(static_cast<size_t>(n_tok * cols));
          std::normal_distribution<float> nd(0, 1);
          for (float& v : x) v = nd(rng);
          QuantizedActs xq;
          std::vector<float> ref, got(static_cast<size_t>(n_tok * rows));
          const double bound = 2e-5 * std::max(1.0, reference(w, x, n_tok, xq, ref));
          if (!onednn_wanted(w, n_tok, isa)) {
            for (int threads : {1, 3}) {
              const std::string what = f.name + std::string(" ") + isa_name(isa) + " rows " + std::to_string(rows) +
                                       " cols " + std::to_string(cols) + " tokens " + std::to_string(n_tok) +
                                       " threads " + std::to_string(threads);
              set_thread_count(threads);
              std::fill(got.begin(), got.end(), NAN);
              matmul({&w, x.data(), &xq, n_tok, got.data(), rows, 0, rows}, isa);
              EXPECT_LE(max_abs_diff(got, ref, got.size()), bound) << what;
              std::fill(got.begin(), got.end(), NAN);
              matmul({&w, x.data(), &xq, n_tok, got.data() + 1, rows, 1, rows - 1}, isa);
              set_thread_count(threads_before);
              for (int64_t t = 0; t < n_tok; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                  const float g = got[static_cast<size_t>(t * rows + r)], want = ref[static_cast<size_t>(t * rows + r)];
                  if (r == 0 || r == rows - 1)
                    EXPECT_TRUE(std::isnan(g)) << what << ": row " << r << " is outside the range, yet written";
                  else
                    EXPECT_LE(std::fabs(static_cast<double>(g) - want), bound) << what << ": row " << r << " of [1, rows - 1)";
                }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 50);
}

// The largest codes against the largest inputs: the kernels' int16 partial
// sums (AVX2 adds several vpmaddubsw results before widening) must not wrap.
TEST_P(MatmulIsa, ExtremeCodesAndInputsStayExact) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(7);
  const int64_t rows = 33, cols = 512;
  int checked = 0;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    // 0xFF: every code at its maximum; 0x80 and 0x7F: the 8-bit extremes -128 and 127.
    for (int fill : {0xFF, 0x80, 0x7F}) {
      const Weight w = qa_weight_from_rows(f.name, f.bits, f.scales, rows, cols,
                                           testutil::random_rowmajor(f, rows, cols, rng, fill).data());
      for (float sign : {1.0f, -1.0f}) {
        const int64_t n_tok = 17;  // from 16: the AMX prefill path
        std::vector<float> x(static_cast<size_t>(n_tok * cols), sign);  // every input quantizes to +-127
        QuantizedActs xq;
        std::vector<float> ref, got(static_cast<size_t>(n_tok * rows));
        const double ref_norm = reference(w, x, n_tok, xq, ref);
        {
          for (int64_t t : {int64_t{1}, int64_t{3}, n_tok}) {  // decode and prefill paths
            std::fill(got.begin(), got.end(), NAN);
            matmul({&w, x.data(), &xq, t, got.data(), rows, 0, rows}, isa);
            const double worst = max_abs_diff(got, ref, static_cast<size_t>(t * rows));
            EXPECT_LE(worst, 2e-5 * std::max(1.0, ref_norm))
                << f.name << " " << isa_name(isa) << " fill " << fill << " sign " << sign << " tokens " << t;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// A token's outputs come out with the same bits whether it runs alone (decode's
// kernel) or among others (prefill's): a prompt's last token and the tokens
// decoded after it must round alike, and a server's sequences must not
// depend on who shares their step. For every qa format and token counts that
// take each prefill path (AMX's tiles from 16 tokens here).
TEST_P(MatmulIsa, TokenAloneGivesTheBitsOfItsRowInABatch) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(12);
  const int64_t rows = 40, cols = 512;
  int checked = 0;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    Weight w = random_weight(f, rows, cols, rng);
    for (int64_t n_tok : {3, 9, 17, 40}) {
      const std::vector<float> x = testutil::normal_inputs(n_tok * cols, rng);
      QuantizedActs xq;
      quantize_activations(x.data(), n_tok, cols, xq);
      std::vector<float> all(static_cast<size_t>(n_tok * rows)), one(static_cast<size_t>(rows));
      matmul({&w, x.data(), &xq, n_tok, all.data(), rows, 0, rows}, isa);
      for (int32_t t : {0, static_cast<int32_t>(n_tok - 1)}) {
        QuantizedActs alone;
        alone.gather(xq, &t, 1);
        matmul({&w, x.data() + t * cols, &alone, 1, one.data(), rows, 0, rows}, isa);
        ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * rows, sizeof(float) * rows))
            << f.name << " " << isa_name(isa) << " tokens " << n_tok << " token " << t;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 30);
}

// The integer path must agree with the float definition of the format within
// what int8 activations lose.
TEST(Matmul, QuantizedMatchesDequantizedFloat) {
  std::mt19937 rng(7);
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    const int64_t rows = 8, cols = 512;
    Weight w = random_weight(f, rows, cols, rng);
    std::vector<float> x(cols);
    std::normal_distribution<float> nd(0, 1);
    for (float& v : x) v = nd(rng);
    QuantizedActs xq;
    quantize_activations(x.data(), 1, cols, xq);
    std::vector<float> y(rows), row(cols);
    matmul({&w, x.data(), &xq, 1, y.data(), rows, 0, rows}, Isa::scalar);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(w, r, row.data());
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < cols; ++i) exact += static_cast<double>(row[i]) * x[i], mag += std::fabs(row[i] * x[i]);
      EXPECT_NEAR(y[r], exact, 0.02 * mag) << f.name;
    }
  }
}

// Stacked matrices (MoE experts) whose row count is not a multiple of the
// 16-row tile: each expert starts a fresh tile, and each expert's row range
// computed alone equals the reference.
TEST_P(MatmulIsa, StackedExpertsWithPartialTiles) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(3);
  const int64_t experts = 3, mat_rows = 20, cols = 256;
  for (int64_t n_tok : {3, 17}) {  // 17: AMX's prefill path where the CPU has it
    for (const Format& f : kFormats) {
      if (f.format != WeightFormat::qa) continue;
      const auto rm = random_rowmajor(f, experts * mat_rows, cols, rng);
      Weight w = qa_weight_from_rows(f.name, f.bits, f.scales, experts * mat_rows, cols, rm.data(), mat_rows);
      Weight flat = qa_weight_from_rows(f.name, f.bits, f.scales, experts * mat_rows, cols, rm.data());
      ASSERT_EQ(w.tiles_per_mat(), 2);
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> nd(0, 1);
      for (float& v : x) v = nd(rng);
      QuantizedActs xq;
      quantize_activations(x.data(), n_tok, cols, xq);
      for (int64_t e = 0; e < experts; ++e) {
        std::vector<float> ref(n_tok * mat_rows), got(ref.size());
        // The same rows in an unstacked weight are the reference.
        kernels::matmul_ref({&flat, x.data(), &xq, n_tok, ref.data(), mat_rows, e * mat_rows, (e + 1) * mat_rows});
        {
          std::fill(got.begin(), got.end(), NAN);
          matmul({&w, x.data(), &xq, n_tok, got.data(), mat_rows, e * mat_rows, (e + 1) * mat_rows}, isa);
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 1e-4 * (1 + std::fabs(ref[i]))) << f.name << " expert " << e << " " << isa_name(isa);
        }
      }
    }
  }
}

// Prefill on AMX takes the tokens in runs whose activations fit in L2 and in
// 16s within a run: a long row (large stride) and token counts around those
// edges, against the scalar reference.
TEST(Matmul, AmxRunsOfTokensMatchReference) {
  NEED_ISA(Isa::amx);
  [[maybe_unused]] AmxFrom16Tokens amx;  // empty outside x86
  std::mt19937 rng(11);
  const int64_t rows = 37, cols = 8192;  // 1 MB of activations is a run of 128 tokens
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    Weight w = random_weight(f, rows, cols, rng);
    for (int64_t n_tok : {16, 127, 128, 129, 150}) {
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> nd(0, 1);
      for (float& v : x) v = nd(rng);
      QuantizedActs xq;
      std::vector<float> ref, got(static_cast<size_t>(n_tok * rows), NAN);
      const double ref_norm = reference(w, x, n_tok, xq, ref);
      matmul({&w, x.data(), &xq, n_tok, got.data(), rows, 0, rows}, Isa::amx);
      const double worst = max_abs_diff(got, ref, ref.size());
      EXPECT_LE(worst, 2e-5 * std::max(1.0, ref_norm)) << f.name << " tokens " << n_tok;
    }
  }
}

// Kernels may read the activations in another layout made from them and
// kept with them (QuantizedActs::Passes): quantizing new values into the same
// object, of the same size or not, must leave nothing of the old, and a call
// over fewer tokens than it holds must read the right ones.
TEST_P(MatmulIsa, ActivationsQuantizedAgainAreReadAfresh) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(11);
  const int64_t rows = 33, cols = 256;
  int checked = 0;
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    Weight w = random_weight(f, rows, cols, rng);
    QuantizedActs kept;
    for (int64_t n_tok : {12, 12, 17, 3, 17}) {
      const std::vector<float> x = testutil::normal_inputs(n_tok * cols, rng);
      QuantizedActs fresh;
      quantize_activations(x.data(), n_tok, cols, fresh);
      quantize_activations(x.data(), n_tok, cols, kept);
      std::vector<float> want(static_cast<size_t>(n_tok * rows)), got(want.size());
      matmul({&w, x.data(), &fresh, n_tok, want.data(), rows, 0, rows}, isa);
      matmul({&w, x.data(), &kept, n_tok, got.data(), rows, 0, rows}, isa);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * want.size()))
          << f.name << " " << isa_name(isa) << " tokens " << n_tok;
      // A call may take fewer tokens than were quantized: the first ones. It
      // is compared with a call on those tokens alone, so that this checks
      // what is read (that the paths for more and fewer tokens round alike is
      // TokenAloneGivesTheBitsOfItsRowInABatch's to check).
      const int64_t fewer = n_tok - 2;
      QuantizedActs first;
      quantize_activations(x.data(), fewer, cols, first);
      matmul({&w, x.data(), &first, fewer, want.data(), rows, 0, rows}, isa);
      std::fill(got.begin(), got.end(), NAN);
      matmul({&w, x.data(), &kept, fewer, got.data(), rows, 0, rows}, isa);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * static_cast<size_t>(fewer * rows)))
          << f.name << " " << isa_name(isa) << " " << fewer << " of " << n_tok << " tokens";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// Threads share a call's rows and take over each other's (cpu/work_shares.h):
// whoever computes a row, it must come out with the same bits as on one thread.
TEST_P(MatmulIsa, SharedRowsGiveTheBitsOfOneThread) {
  const Isa isa = GetParam();
  NEED_ISA(isa);
  std::mt19937 rng(5);
  const int64_t rows = 16 * 37 + 5, cols = 256;
  const int threads_before = thread_count();
  const int64_t steals_before = WorkShares::steals_so_far();
  for (const Format& f : kFormats) {
    if (f.format != WeightFormat::qa) continue;
    Weight w = random_weight(f, rows, cols, rng);
    for (int64_t n_tok : {1, 2, 3, 5}) {
      std::vector<float> x(static_cast<size_t>(n_tok * cols));
      std::normal_distribution<float> nd(0, 1);
      for (float& v : x) v = nd(rng);
      QuantizedActs xq;
      quantize_activations(x.data(), n_tok, cols, xq);
      std::vector<float> one(static_cast<size_t>(n_tok * rows)), got(one.size());
      const MatmulArgs all{&w, x.data(), &xq, n_tok, one.data(), rows, 0, rows};
      const MatmulKernel k = find_matmul_kernel(w, isa);
      prepare_activations(all, k);
      k(all);
      for (int threads : {2, 3, 5}) {
        // Resized once per count: a pool made afresh for every call has its
        // workers still starting while the caller does the whole call alone.
        set_thread_count(threads);
        for (int rep = 0; rep < (testutil::kSanitized ? 4 : 20); ++rep) {  // the timings vary the split; ASan's are slow
          std::fill(got.begin(), got.end(), NAN);
          matmul({&w, x.data(), &xq, n_tok, got.data(), rows, 0, rows}, isa);
          ASSERT_EQ(0, std::memcmp(got.data(), one.data(), sizeof(float) * one.size()))
              << f.name << " " << isa_name(isa) << " tokens " << n_tok << " threads " << threads;
        }
      }
      set_thread_count(threads_before);
    }
  }
  if (isa == Isa::scalar) return;  // the scalar reference kernel keeps its own rows
  // 3 threads on this machine's cores: one always finishes first and takes
  // over another's rows. A steal is a matter of timing, so the hunt for one
  // is bounded in calls, not in a single try.
  const Format& q4_0 = *std::find_if(std::begin(kFormats), std::end(kFormats), [](const Format& f) { return f.bits == 4; });
  Weight w = random_weight(q4_0, rows, 4096, rng);
  std::vector<float> x(4096), y(static_cast<size_t>(rows));
  std::normal_distribution<float> nd(0, 1);
  for (float& v : x) v = nd(rng);
  QuantizedActs xq;
  quantize_activations(x.data(), 1, 4096, xq);
  set_thread_count(3);
  for (int call = 0; call < 20000 && WorkShares::steals_so_far() == steals_before; ++call)
    matmul({&w, x.data(), &xq, 1, y.data(), rows, 0, rows}, isa);
  set_thread_count(threads_before);
  EXPECT_GT(WorkShares::steals_so_far(), steals_before) << "no thread ever took over another's rows";
}

}  // namespace
}  // namespace basalt
