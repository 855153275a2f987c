// SPDX-License-Identifier: MIT
// The row kernels (cpu/rows.h) of every ISA against the reference: int8
// quantization byte for byte, SwiGLU within the vector exp's error; and the
// fused ops (rms_norm / swiglu / geglu making the int8 form as they go)
// against the two-pass result; GeGLU against its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <vector>

#include "cpu/activations.h"
#include "cpu/ops.h"
#include "cpu/rows.h"
#include "tests/unit/isa_testing.h"

namespace basalt::cpu {
namespace {

// Each test once per ISA (RowKernelsIsa.NAME/ISA): skipped where the CPU
// lacks it, failed where BASALT_REQUIRE_ISA names it.
class RowKernelsIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { NEED_ISA(GetParam()); }
};
#if defined(__aarch64__)
INSTANTIATE_TEST_SUITE_P(, RowKernelsIsa, ::testing::Values(Isa::neon), testutil::isa_test_name);
#else
INSTANTIATE_TEST_SUITE_P(, RowKernelsIsa, ::testing::Values(Isa::avx2, Isa::avx512), testutil::isa_test_name);
#endif

// Values that exercise the rounding: ties (x * id = k + 0.5), zeros, one huge outlier per block, tiny rows.
std::vector<float> tricky_row(int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x(static_cast<size_t>(cols));
  for (float& v : x) v = nd(rng);
  for (int64_t b = 0; b < cols / 32; ++b) {
    float* xb = x.data() + b * 32;
    switch (b % 5) {
      case 1:  // exact halves: amax 127 gives id 1
        for (int j = 0; j < 32; ++j) xb[j] = static_cast<float>(j - 16) + 0.5f;
        xb[31] = 127;
        break;
      case 2:  // all zero
        for (int j = 0; j < 32; ++j) xb[j] = 0;
        break;
      case 3:  // an outlier, and denormal-sized values
        xb[7] = -3e4f;
        xb[8] = 1e-40f;
        break;
      case 4:  // tiny: d a subnormal in f16
        for (int j = 0; j < 32; ++j) xb[j] *= 1e-6f;
        break;
    }
  }
  return x;
}

TEST_P(RowKernelsIsa, QuantizeIsBitExact) {
  std::mt19937 rng(7);
  for (int64_t cols : {32, 64, 96, 160, 2048, 5632}) {  // AVX-512 takes blocks 4 at a time: 160 has one over
    const std::vector<float> x = tricky_row(cols, rng);
    std::vector<int8_t> q_ref(static_cast<size_t>(cols)), q(q_ref.size());
    std::vector<float> d_ref(static_cast<size_t>(cols / 32)), d(d_ref.size());
    std::vector<int16_t> s_ref(static_cast<size_t>(cols / 16)), s(s_ref.size());
    kernels::rows_ref.quantize(x.data(), cols, q_ref.data(), d_ref.data(), s_ref.data());
    for (Isa isa : {GetParam()}) {
      row_kernels(isa).quantize(x.data(), cols, q.data(), d.data(), s.data());
      EXPECT_EQ(q, q_ref) << isa_name(isa) << " cols " << cols;
      EXPECT_EQ(d, d_ref) << isa_name(isa) << " cols " << cols;
      EXPECT_EQ(s, s_ref) << isa_name(isa) << " cols " << cols;
    }
  }
}

// A gated activation's inputs for each length: gate and up drawn from N(0, 4),
// and from 8 values on, the gate's first six the edges given (the tail loop
// below 8 or 16, both SIMD widths, a long row).
template <typename Check>
void for_gated_inputs(uint32_t seed, std::initializer_list<float> edges, Check check) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 4);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 100, 9216}) {
    std::vector<float> g(static_cast<size_t>(n)), u(g.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = nd(rng), u[i] = nd(rng);
    if (n >= 8) std::copy(edges.begin(), edges.end(), g.begin());
    check(g, u);
  }
}

TEST_P(RowKernelsIsa, SwigluMatchesReference) {
  for_gated_inputs(8, {-120, 120, 0, -1e-30f, 88, -88}, [&](const std::vector<float>& g, const std::vector<float>& u) {
    const auto n = static_cast<int64_t>(g.size());
    std::vector<float> ref(g.size()), got(g.size());
    kernels::rows_ref.swiglu(g.data(), u.data(), ref.data(), n);
    row_kernels(GetParam()).swiglu(g.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-6f * std::fabs(ref[i]) + 1e-30f) << isa_name(GetParam()) << " n " << n << " g " << g[i];
  });
}

// GeGLU's vector form, x sigmoid(2u), against the reference's 0.5 x (1 + tanh u) and a
// double-precision GELU: where 1 + tanh u cancels (x below about -3) the reference
// keeps ~6e-8 of absolute precision in the factor, the vector form its relative one,
// within the float rounding of its exponent 2u (tens there: ~1e-6 relative).
TEST_P(RowKernelsIsa, GegluMatchesReference) {
  for_gated_inputs(9, {-120, 120, 0, -1e-30f, 9, -9}, [&](const std::vector<float>& g, const std::vector<float>& u) {
    const auto n = static_cast<int64_t>(g.size());
    std::vector<float> ref(g.size()), got(g.size());
    kernels::rows_ref.geglu(g.data(), u.data(), ref.data(), n);
    row_kernels(GetParam()).geglu(g.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[i], want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
      const double scale = std::fabs(x * u[i]);
      EXPECT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-7 * scale + 1e-30) << isa_name(GetParam()) << " n " << n << " g " << g[i];
      EXPECT_NEAR(got[i], want, 4e-6 * std::fabs(want) + 1e-12 * scale + 1e-30) << isa_name(GetParam()) << " n " << n << " g " << g[i];
    }
  });
}

// Logit soft-capping against the reference (std::tanh): within cap x 3e-7 near
// 0 (the vector form's e - 1), 1e-6 relative elsewhere; +-1 at the extremes.
TEST_P(RowKernelsIsa, SoftcapMatchesReference) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0, 40);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 100, 262144}) {
    std::vector<float> x(static_cast<size_t>(n)), ref(x.size()), got(x.size());
    for (float& v : x) v = nd(rng);
    if (n >= 8) std::copy_n(std::initializer_list<float>{0, -1e-30f, 1e30f, -1e30f, 2000, -2000, 1e-3f, -30}.begin(), 8, x.begin());
    kernels::rows_ref.softcap(x.data(), ref.data(), n, 30);
    row_kernels(GetParam()).softcap(x.data(), got.data(), n, 30);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 30 * 3e-7) << isa_name(GetParam()) << " n " << n << " x " << x[i];
  }
}

// Bit for bit the reference's rounding: halfway cases (to even), values that
// round into and out of f16's subnormals, overflow to infinity, signed zeros.
TEST_P(RowKernelsIsa, ToF16IsBitExact) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> x;
  for (int e = -30; e <= 17; ++e)
    for (float m : {1.0f, 1.0004883f, 1.0009766f, 1.0014648f, 1.5f, 1.9995117f, 1.9997559f})
      for (float sign : {1.0f, -1.0f}) x.push_back(sign * std::ldexp(m, e));
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e30f, -1e30f, INFINITY, -INFINITY, 5.9604645e-8f,
                  2.9802322e-8f, 2.9802326e-8f, 8.940697e-8f, 1e-40f})
    x.push_back(v);
  for (int i = 0; i < 1000; ++i) x.push_back(nd(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 25));
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> ref(static_cast<size_t>(n)), got(ref.size());
    kernels::rows_ref.to_f16(x.data(), ref.data(), n);
    row_kernels(GetParam()).to_f16(x.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], ref[i]) << isa_name(GetParam()) << " x " << x[i];
  }
}

TEST_P(RowKernelsIsa, SumSquaresMatchesReference) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0, 3);
  for (int64_t n : {0, 1, 7, 15, 16, 31, 32, 33, 100, 2048, 5632}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    const double ref = kernels::rows_ref.sum_squares(x.data(), n);
    for (Isa isa : {GetParam()})
      EXPECT_NEAR(row_kernels(isa).sum_squares(x.data(), n), ref, 1e-13 * ref) << isa_name(isa) << " n " << n;
  }
  // Squares beyond float's range (1e40) stay finite and exact in double, in the vector body and the tail.
  std::vector<float> big(37, 0.5f);
  big[3] = 1e20f, big[36] = -1e20f;
  const double ref = kernels::rows_ref.sum_squares(big.data(), 37);
  EXPECT_NEAR(ref, 2.0 * 1e20f * static_cast<double>(1e20f), 1e26);
  for (Isa isa : {GetParam()}) EXPECT_NEAR(row_kernels(isa).sum_squares(big.data(), 37), ref, 1e-15 * ref) << isa_name(isa);
}

void expect_same(const QuantizedActs& a, const QuantizedActs& b, const char* what) {
  EXPECT_EQ(a.n_tok, b.n_tok) << what;
  EXPECT_EQ(a.stride, b.stride) << what;
  EXPECT_EQ(a.q, b.q) << what;
  EXPECT_EQ(a.d, b.d) << what;
  EXPECT_EQ(a.sum16, b.sum16) << what;
  EXPECT_EQ(a.dsum, b.dsum) << what;
  EXPECT_EQ(a.q6k_zero, b.q6k_zero) << what;
  EXPECT_EQ(a.neg_sum, b.neg_sum) << what;
  // Each block's d x (sum of q), the affine kernels' offset term, as they formed it.
  for (size_t i = 0; i < a.d.size(); ++i)
    ASSERT_EQ(a.dsum[i], a.d[i] * static_cast<float>(a.sum16[2 * i] + a.sum16[2 * i + 1])) << what << " block " << i;
  // Each half block's Q6_K zero-point term (the padding's too: zero).
  ASSERT_EQ(a.q6k_zero.size(), a.sum16.size()) << what;
  for (size_t i = 0; i < a.sum16.size(); ++i) ASSERT_EQ(a.q6k_zero[i], -32 * a.sum16[i]) << what << " half block " << i;
  ASSERT_EQ(a.neg_sum.size(), a.d.size()) << what;
  for (size_t i = 0; i < a.d.size(); ++i) ASSERT_EQ(a.neg_sum[i], -(a.sum16[2 * i] + a.sum16[2 * i + 1])) << what << " block " << i;
}

TEST(RowKernels, FusedOpsMakeTheSameInt8FormAsTwoPasses) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0, 1);
  for (int64_t n : {1, 3, 40}) {
    for (int64_t d : {96, 2048, 4128, 5632}) {  // 96, 4128: a padding block; 4128, 5632: decode splits swiglu by columns
      std::vector<float> x(static_cast<size_t>(n * d)), w(static_cast<size_t>(d)), u(x.size()), y(x.size()), y2(x.size());
      for (float& v : x) v = nd(rng);
      for (float& v : w) v = nd(rng);
      for (float& v : u) v = nd(rng);
      QuantizedActs fused, two_pass;
      rms_norm(x.data(), w.data(), y.data(), n, d, 1e-5f, &fused);
      rms_norm(x.data(), w.data(), y2.data(), n, d, 1e-5f);
      EXPECT_EQ(y, y2);
      quantize_activations(y2.data(), n, d, two_pass);
      expect_same(fused, two_pass, "rms_norm");
      swiglu(x.data(), u.data(), y.data(), n, d, &fused);
      swiglu(x.data(), u.data(), y2.data(), n, d);
      EXPECT_EQ(y, y2);
      quantize_activations(y2.data(), n, d, two_pass);
      expect_same(fused, two_pass, "swiglu");
      geglu(x.data(), u.data(), y.data(), n, d, &fused);
      geglu(x.data(), u.data(), y2.data(), n, d);
      EXPECT_EQ(y, y2);
      quantize_activations(y2.data(), n, d, two_pass);
      expect_same(fused, two_pass, "geglu");
    }
  }
}

// The MoE's rows for one expert: gathered from the whole batch's int8 form,
// every field as quantizing those rows alone gives it.
TEST(RowKernels, GatheredRowsAreThoseRowsQuantized) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0, 1);
  const int64_t n = 9, d = 4128;  // a padding block
  std::vector<float> x(static_cast<size_t>(n * d));
  for (float& v : x) v = nd(rng);
  QuantizedActs all, gathered, alone;
  quantize_activations(x.data(), n, d, all);
  const std::vector<int32_t> rows = {7, 0, 3, 3};
  gathered.gather(all, rows.data(), static_cast<int64_t>(rows.size()));
  std::vector<float> picked;
  for (int32_t r : rows) picked.insert(picked.end(), x.begin() + r * d, x.begin() + (r + 1) * d);
  quantize_activations(picked.data(), static_cast<int64_t>(rows.size()), d, alone);
  expect_same(gathered, alone, "gather");
}

// Rows are whole cache lines, never a whole number of pages (a register
// block's rows would share one L1 set), and their padding reads as zeros.
TEST(RowKernels, ActivationRowsAvoidPageStrides) {
  for (int64_t cols : {32, 2048, 4064, 4096, 5632, 8192}) {
    std::vector<float> x(static_cast<size_t>(3 * cols), 1.5f);
    QuantizedActs xq;
    quantize_activations(x.data(), 3, cols, xq);
    EXPECT_GE(xq.stride, cols);
    EXPECT_EQ(xq.stride % 64, 0) << cols;
    EXPECT_NE(xq.stride % 4096, 0) << cols;
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = cols; c < xq.stride; ++c) ASSERT_EQ(xq.q_row(t)[c], 0) << cols << " column " << c;
  }
}

// GeGLU against GELU's tanh form in double precision (HF's gelu_pytorch_tanh,
// Gemma's activation), and a few values of GELU itself.
TEST(RowKernels, GegluMatchesTheFormula) {
  EXPECT_EQ(gelu_tanh(0.0f), 0.0f);
  EXPECT_NEAR(gelu_tanh(1.0f), 0.8411920, 1e-6);
  EXPECT_NEAR(gelu_tanh(-1.0f), -0.1588080, 1e-6);
  EXPECT_NEAR(gelu_tanh(-10.0f), 0.0, 1e-6);
  EXPECT_NEAR(gelu_tanh(10.0f), 10.0, 1e-5);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0, 3);
  const int64_t n = 5, d = 300;
  std::vector<float> g(static_cast<size_t>(n * d)), u(g.size()), y(g.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = nd(rng), u[i] = nd(rng);
  geglu(g.data(), u.data(), y.data(), n, d);
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i], want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
    EXPECT_NEAR(y[i], want, 1e-5 * (1 + std::fabs(want))) << "gate " << g[i] << " up " << u[i];
  }
}

}  // namespace
}  // namespace basalt::cpu
