// SPDX-License-Identifier: MIT
// The GPTQ solver: with H = I it is round-to-nearest exactly; on correlated
// inputs its output error is well below round-to-nearest's (act-order too);
// dead columns quantize to zero; a Hessian that cannot be factored is an Error.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"
#include "quant/gptq_solver.h"

namespace basalt {
namespace {

struct Problem {
  int64_t n_out, n_in, n_samples;
  std::vector<float> w;       // [n_out][n_in]
  std::vector<double> x;      // [n_samples][n_in]
  std::vector<double> h;      // 2 X^T X / n
};

// Inputs with correlated channels and a few large ones, as real activations have.
Problem make_problem(int64_t n_out, int64_t n_in, int64_t n_samples, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  Problem p{n_out, n_in, n_samples, {}, {}, {}};
  p.w.resize(static_cast<size_t>(n_out * n_in));
  for (float& v : p.w) v = static_cast<float>(0.05 * nd(rng));
  const int64_t rank = n_in / 4;
  std::vector<double> mix(static_cast<size_t>(rank * n_in)), scale(static_cast<size_t>(n_in));
  for (double& v : mix) v = nd(rng);
  for (int64_t i = 0; i < n_in; ++i) scale[static_cast<size_t>(i)] = i % 17 == 0 ? 8.0 : 1.0;
  p.x.resize(static_cast<size_t>(n_samples * n_in));
  for (int64_t s = 0; s < n_samples; ++s) {
    std::vector<double> z(static_cast<size_t>(rank));
    for (double& v : z) v = nd(rng);
    for (int64_t i = 0; i < n_in; ++i) {
      double v = 0.3 * nd(rng);
      for (int64_t r = 0; r < rank; ++r) v += z[static_cast<size_t>(r)] * mix[static_cast<size_t>(r * n_in + i)] / 4;
      p.x[static_cast<size_t>(s * n_in + i)] = v * scale[static_cast<size_t>(i)];
    }
  }
  p.h.assign(static_cast<size_t>(n_in * n_in), 0.0);
  for (int64_t s = 0; s < n_samples; ++s)
    for (int64_t i = 0; i < n_in; ++i)
      for (int64_t j = 0; j < n_in; ++j)
        p.h[static_cast<size_t>(i * n_in + j)] += 2 * p.x[static_cast<size_t>(s * n_in + i)] * p.x[static_cast<size_t>(s * n_in + j)] / n_samples;
  return p;
}

// Mean squared change of the layer's outputs over the samples.
double output_error(const Problem& p, const GptqLayer& q) {
  double e = 0;
  for (int64_t o = 0; o < p.n_out; ++o)
    for (int64_t s = 0; s < p.n_samples; ++s) {
      double d = 0;
      for (int64_t i = 0; i < p.n_in; ++i)
        d += (p.w[static_cast<size_t>(o * p.n_in + i)] - q.weight(o, i)) * p.x[static_cast<size_t>(s * p.n_in + i)];
      e += d * d;
    }
  return e / static_cast<double>(p.n_out * p.n_samples);
}

TEST(GptqSolver, IdentityHessianIsRoundToNearest) {
  Problem p = make_problem(24, 200, 1, 1);
  for (GptqOptions o : {GptqOptions{4, 64, true, false}, GptqOptions{4, -1, false, false}, GptqOptions{8, 32, false, true},
                        GptqOptions{4, 128, false, true, 0.01, 64}}) {
    std::vector<double> eye(static_cast<size_t>(p.n_in * p.n_in), 0.0);
    for (int64_t i = 0; i < p.n_in; ++i) eye[static_cast<size_t>(i * p.n_in + i)] = 1;
    const GptqLayer g = gptq_quantize(p.w.data(), p.n_out, p.n_in, eye, o);
    const GptqLayer r = rtn_quantize(p.w.data(), p.n_out, p.n_in, o);
    EXPECT_EQ(g.q, r.q) << o.bits << " bits, group " << o.group_size;
    EXPECT_EQ(g.scales, r.scales);
    EXPECT_EQ(g.zeros, r.zeros);
    EXPECT_EQ(g.g_idx, r.g_idx);
  }
}

TEST(GptqSolver, BeatsRoundToNearestOnCorrelatedInputs) {
  const Problem p = make_problem(32, 256, 512, 2);
  for (GptqOptions o : {GptqOptions{4, 128, true, false}, GptqOptions{4, 64, false, false}, GptqOptions{4, 128, false, true},
                        GptqOptions{8, 128, true, false}, GptqOptions{4, -1, true, true, 0.01, 32}}) {
    const double rtn = output_error(p, rtn_quantize(p.w.data(), p.n_out, p.n_in, o));
    const GptqLayer g = gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, o);
    const double gptq = output_error(p, g);
    EXPECT_LT(gptq, 0.8 * rtn) << o.bits << " bits, group " << o.group_size << (o.act_order ? ", act-order" : "");
    // Every group holds group_size inputs (act-order permutes which).
    std::vector<int64_t> count(static_cast<size_t>(g.n_groups), 0);
    for (int32_t gi : g.g_idx) ++count[static_cast<size_t>(gi)];
    for (int64_t c : count) EXPECT_EQ(c, o.group_size == -1 ? p.n_in : o.group_size);
  }
}

TEST(GptqSolver, DeadColumnsAndBadHessians) {
  Problem p = make_problem(8, 64, 128, 3);
  for (int64_t i = 0; i < p.n_in; ++i) p.h[static_cast<size_t>(5 * p.n_in + i)] = p.h[static_cast<size_t>(i * p.n_in + 5)] = 0;
  const GptqLayer g = gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, {4, 32, false, true});
  for (int64_t o = 0; o < p.n_out; ++o) EXPECT_EQ(g.weight(o, 5), 0.0f);
  std::vector<double> bad(static_cast<size_t>(p.n_in * p.n_in), 0.0);
  for (int64_t i = 0; i < p.n_in; ++i) bad[static_cast<size_t>(i * p.n_in + i)] = i == 3 ? -50.0 : 1.0;
  EXPECT_THROW(gptq_quantize(p.w.data(), p.n_out, p.n_in, bad, {4, 32, true, false}), Error);
  EXPECT_THROW(gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, {9, 32, true, false}), Error);
  EXPECT_THROW(gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, {4, 100, true, false}), Error);
}

}  // namespace
}  // namespace basalt
