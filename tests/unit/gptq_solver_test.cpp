// SPDX-License-Identifier: MIT
// The GPTQ solver: with H = I it is round-to-nearest exactly; on correlated
// inputs its output error is well below round-to-nearest's (act-order too);
// dead columns quantize to zero; a Hessian that cannot be factored is an Error.
// Packed as a checkpoint (quant/gptq_pack.h), the engine weight is the layer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/gptq_pack.h"
#include "quant/gptq_solver.h"
#include "core/util/half.h"

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

// The textbook form of the algorithm (the paper's equations, before the
// Cholesky and lazy-batch reformulation): quantize column i, move the others
// by err * Hinv[i][j] / Hinv[i][i], remove i from Hinv (Schur complement).
GptqLayer textbook_gptq(const Problem& p, const GptqOptions& o) {
  const int64_t n = p.n_in, gs = o.group_size == -1 ? n : o.group_size;
  const int maxq = (1 << o.bits) - 1;
  std::vector<double> h = p.h, w(p.w.begin(), p.w.end());
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += h[static_cast<size_t>(i * n + i)] / n;
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i * n + i)] += o.damp * mean;
  // Hinv by Gauss-Jordan.
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) inv[static_cast<size_t>(i * n + i)] = 1;
  for (int64_t c = 0; c < n; ++c) {
    const double piv = h[static_cast<size_t>(c * n + c)];
    for (int64_t j = 0; j < n; ++j) h[static_cast<size_t>(c * n + j)] /= piv, inv[static_cast<size_t>(c * n + j)] /= piv;
    for (int64_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = h[static_cast<size_t>(r * n + c)];
      for (int64_t j = 0; j < n; ++j)
        h[static_cast<size_t>(r * n + j)] -= f * h[static_cast<size_t>(c * n + j)],
            inv[static_cast<size_t>(r * n + j)] -= f * inv[static_cast<size_t>(c * n + j)];
    }
  }
  GptqLayer out = rtn_quantize(p.w.data(), p.n_out, n, o);  // for the shapes; every value is overwritten
  std::vector<int> zero(static_cast<size_t>(p.n_out));
  for (int64_t i = 0; i < n; ++i) {
    if (i % gs == 0) {  // the group's grid on the columns as updated so far
      std::vector<float> cols(static_cast<size_t>(p.n_out * gs));
      for (int64_t r = 0; r < p.n_out; ++r)
        for (int64_t j = 0; j < gs; ++j) cols[static_cast<size_t>(r * gs + j)] = static_cast<float>(w[static_cast<size_t>(r * n + i + j)]);
      const GptqLayer g = rtn_quantize(cols.data(), p.n_out, gs, {o.bits, -1, o.sym, false});
      for (int64_t r = 0; r < p.n_out; ++r) {
        out.scales[static_cast<size_t>(i / gs * p.n_out + r)] = g.scales[static_cast<size_t>(r)];
        out.zeros[static_cast<size_t>(i / gs * p.n_out + r)] = zero[static_cast<size_t>(r)] = g.zeros[static_cast<size_t>(r)];
      }
    }
    const double d = inv[static_cast<size_t>(i * n + i)];
    for (int64_t r = 0; r < p.n_out; ++r) {
      const double x = w[static_cast<size_t>(r * n + i)];
      const int64_t g = i / gs;
      const float s = f16_to_f32(out.scales[static_cast<size_t>(g * p.n_out + r)]);
      const int q = static_cast<int>(std::clamp(std::nearbyint(x / s) + zero[static_cast<size_t>(r)], 0.0, double(maxq)));
      out.q[static_cast<size_t>(r * n + i)] = q;
      const double e = (x - s * (q - zero[static_cast<size_t>(r)])) / d;
      for (int64_t j = i + 1; j < n; ++j) w[static_cast<size_t>(r * n + j)] -= e * inv[static_cast<size_t>(i * n + j)];
    }
    for (int64_t a = i + 1; a < n; ++a)  // Hinv without i
      for (int64_t b = i + 1; b < n; ++b)
        inv[static_cast<size_t>(a * n + b)] -= inv[static_cast<size_t>(a * n + i)] * inv[static_cast<size_t>(i * n + b)] / d;
  }
  return out;
}

TEST(GptqSolver, EqualsTheTextbookAlgorithm) {
  const Problem p = make_problem(16, 192, 256, 4);
  for (GptqOptions o : {GptqOptions{4, 64, false, false, 0.01, 64}, GptqOptions{4, 32, true, false, 0.01, 128},
                        GptqOptions{8, 192, false, false, 0.01, 48}}) {
    const GptqLayer fast = gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, o);
    const GptqLayer slow = textbook_gptq(p, o);
    int64_t same = 0;
    for (size_t i = 0; i < fast.q.size(); ++i) same += fast.q[i] == slow.q[i];
    // Rounding ties may fall either way after different summation orders; nothing else may differ.
    EXPECT_GE(same, static_cast<int64_t>(fast.q.size()) * 995 / 1000) << o.bits << " bits, group " << o.group_size;
    EXPECT_NEAR(output_error(p, fast), output_error(p, slow), 1e-3 * output_error(p, slow));
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

TEST(GptqPack, EngineWeightIsTheLayerAndOutputsReorder) {
  const Problem p = make_problem(16, 192, 64, 5);
  for (GptqOptions o : {GptqOptions{4, 64, true, true}, GptqOptions{4, 32, false, true}, GptqOptions{8, -1, false, false}}) {
    const GptqLayer l = gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, o);
    const GptqPacked packed = gptq_pack(l, o, !o.sym);
    const Weight w = gptq_packed_weight(packed, "layer");
    EXPECT_EQ(w.input_perm.empty(), !o.act_order || o.group_size == -1);
    std::vector<float> row(static_cast<size_t>(p.n_in));
    for (int64_t r = 0; r < p.n_out; ++r) {
      dequantize_row(w, r, row.data());
      for (int64_t k = 0; k < p.n_in; ++k) {
        const int64_t i = w.input_perm.empty() ? k : w.input_perm[static_cast<size_t>(k)];
        ASSERT_EQ(row[static_cast<size_t>(k)], l.weight(r, i)) << "row " << r << " input " << i;
      }
    }
    std::vector<int32_t> order(static_cast<size_t>(p.n_out));
    for (int64_t r = 0; r < p.n_out; ++r) order[static_cast<size_t>(r)] = static_cast<int32_t>((r * 5 + 3) % p.n_out);
    const Weight moved = gptq_packed_weight(gptq_reorder_outputs(packed, order), "moved");
    std::vector<float> a(static_cast<size_t>(p.n_in)), b(static_cast<size_t>(p.n_in));
    for (int64_t r = 0; r < p.n_out; ++r) {
      dequantize_row(moved, r, a.data());
      dequantize_row(w, order[static_cast<size_t>(r)], b.data());
      ASSERT_EQ(a, b) << "row " << r;
    }
  }
  // Experts stack when format and shape agree (rows of expert e at e * rows), each keeping its input order.
  {
    const GptqOptions o{4, 64, false, false};
    const GptqLayer l = rtn_quantize(p.w.data(), p.n_out, p.n_in, o);
    std::vector<Weight> parts;
    parts.push_back(gptq_packed_weight(gptq_pack(l, o, true), "e0"));
    parts.push_back(gptq_packed_weight(gptq_pack(l, o, true), "e1"));
    const Weight stacked = stack_weights(std::move(parts), "experts");
    EXPECT_EQ(stacked.rows, 2 * p.n_out);
    EXPECT_EQ(stacked.mat_rows, p.n_out);
    std::vector<float> a(static_cast<size_t>(p.n_in));
    dequantize_row(stacked, p.n_out + 3, a.data());
    for (int64_t i = 0; i < p.n_in; ++i) ASSERT_EQ(a[static_cast<size_t>(i)], l.weight(3, i));
    const GptqOptions ao{4, 64, true, true};
    std::vector<Weight> mixed;
    mixed.push_back(gptq_packed_weight(gptq_pack(gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, ao), ao, true), "a0"));
    mixed.push_back(gptq_packed_weight(gptq_pack(gptq_quantize(p.w.data(), p.n_out, p.n_in, p.h, ao), ao, true), "a1"));
    const GptqOptions so{4, 64, true, false};
    mixed.push_back(gptq_packed_weight(gptq_pack(rtn_quantize(p.w.data(), p.n_out, p.n_in, so), so, true), "plain"));  // identity order
    const std::vector<int32_t> first_order = mixed[0].input_perm;
    const Weight act = stack_weights(std::move(mixed), "experts");
    ASSERT_EQ(act.input_perm.size(), static_cast<size_t>(3 * p.n_in));
    EXPECT_TRUE(std::equal(first_order.begin(), first_order.end(), act.perm_of(1)));
    for (int64_t k = 0; k < p.n_in; ++k) ASSERT_EQ(act.perm_of(2)[k], k);
    std::vector<Weight> shapes;
    shapes.push_back(gptq_packed_weight(gptq_pack(l, o, true), "e0"));
    const GptqLayer half = rtn_quantize(p.w.data(), p.n_out / 2, p.n_in, o);
    shapes.push_back(gptq_packed_weight(gptq_pack(half, o, true), "e1"));
    EXPECT_THROW(stack_weights(std::move(shapes), "experts"), Error);
  }
  // The gptq format stores zero - 1: an asymmetric zero of 0 needs gptq_v2.
  GptqLayer z = rtn_quantize(p.w.data(), p.n_out, p.n_in, {4, 64, false, false});
  z.zeros[0] = 0;
  EXPECT_THROW(gptq_pack(z, {4, 64, false, false}, false), Error);
  EXPECT_NO_THROW(gptq_pack(z, {4, 64, false, false}, true));
}

}  // namespace
}  // namespace basalt
