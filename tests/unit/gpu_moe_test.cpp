// SPDX-License-Identifier: MIT
// MoE experts on the device: the route (shaders/moe_route.comp) against
// cpu::route_top_k, grouped matmuls against each expert's reference, and a
// whole expert layer against a float64 reference.
#include <gtest/gtest.h>

#if defined(BASALT_VULKAN)

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/moe.h"
#include "gpu/ops.h"
#include "gpu/stream.h"
#include "quant/qa_layout.h"
#include "tests/unit/gpu_testing.h"
#include "tests/unit/random_weights.h"

namespace basalt {
namespace {

using testutil::nmse;
using testutil::random_floats;

// The route's words, read back (shaders/moe_route.comp gives the layout).
struct Route {
  std::vector<uint32_t> first, active, row_token, slot_row, ids;
  std::vector<float> weights;
};

Route parse_route(const std::vector<uint32_t>& words, int64_t n_tok, int64_t n_expert, int64_t k) {
  const size_t E = static_cast<size_t>(n_expert), T = static_cast<size_t>(n_tok * k);
  Route r;
  auto at = words.begin();
  r.first.assign(at, at + E + 1);
  at += E + 1;
  r.active.assign(at, at + E);
  at += E;
  r.row_token.assign(at, at + T);
  r.slot_row.assign(at + T, at + 2 * T);
  r.ids.assign(at + 2 * T, at + 3 * T);
  for (size_t i = 0; i < T; ++i) r.weights.push_back(std::bit_cast<float>(at[3 * T + i]));
  return r;
}

// Routes the logits on the device into `route` (recorded on s, not yet run).
void record_route(gpu::Device& dev, gpu::Stream& s, const gpu::Buffer& logits_buf, const gpu::Buffer& route,
                  const std::vector<float>& logits, int64_t n_tok, int64_t n_expert, int64_t k) {
  s.upload(logits_buf, logits.data(), logits.size() * 4);
  gpu::moe_route(dev, s, logits_buf, route, n_tok, n_expert, k);
}

Route route_on_device(gpu::Device& dev, const std::vector<float>& logits, int64_t n_tok, int64_t n_expert, int64_t k) {
  gpu::Buffer lb(dev, logits.size() * 4, gpu::Memory::device, "logits");
  const size_t words = gpu::moe_route_words(n_tok, n_expert, k);
  gpu::Buffer rb(dev, words * 4, gpu::Memory::device, "route");
  std::vector<uint32_t> got(words);
  gpu::Stream s(dev);
  record_route(dev, s, lb, rb, logits, n_tok, n_expert, k);
  s.download(rb, got.data(), words * 4);
  s.finish();
  return parse_route(got, n_tok, n_expert, k);
}

// Experts' matrices stacked, each rows x cols, in a test format.
Weight stacked_experts(const testutil::Format& f, int64_t experts, int64_t rows, int64_t cols, std::mt19937& rng) {
  if (f.format == WeightFormat::qa) {
    const std::vector<uint8_t> rm = testutil::random_rowmajor(f, experts * rows, cols, rng);
    return qa_weight_from_rows(f.name, f.bits, f.scales, experts * rows, cols, rm.data(), rows);
  }
  Weight w = testutil::random_weight(f, experts * rows, cols, rng);
  w.mat_rows = rows;
  return w;
}

struct RouteCase {
  int64_t n_expert, k, n_tok;
  bool ties;  // logits of few distinct values: the order of equal logits matters
};

TEST(GpuMoe, RouteMatchesCpuTopK) {
  NEED_DEVICE(dev);
  std::mt19937 rng(21);
  const RouteCase cases[] = {{8, 2, 1, false},   {8, 2, 37, false}, {60, 4, 300, false},
                             {3, 3, 5, false},   {16, 2, 50, true}, {1024, 8, 3, false}};
  for (const RouteCase& c : cases) {
    std::vector<float> logits = random_floats(static_cast<size_t>(c.n_tok * c.n_expert), rng);
    if (c.ties)
      for (float& l : logits) l = std::floor(l * 2) / 2;
    const Route r = route_on_device(*dev, logits, c.n_tok, c.n_expert, c.k);
    const std::string what = std::to_string(c.k) + " of " + std::to_string(c.n_expert) + ", " + std::to_string(c.n_tok) + " tokens";
    std::vector<int32_t> ids(static_cast<size_t>(c.k));
    std::vector<float> weights(static_cast<size_t>(c.k));
    std::vector<uint32_t> count(static_cast<size_t>(c.n_expert), 0);
    for (int64_t t = 0; t < c.n_tok; ++t) {
      cpu::route_top_k(logits.data() + t * c.n_expert, c.n_expert, c.k, ids.data(), weights.data());
      for (int64_t j = 0; j < c.k; ++j) {
        const size_t s = static_cast<size_t>(t * c.k + j);
        ASSERT_EQ(r.ids[s], static_cast<uint32_t>(ids[j])) << what << ": token " << t << " choice " << j;
        EXPECT_NEAR(r.weights[s], weights[j], 1e-6) << what << ": token " << t << " choice " << j;
        ++count[static_cast<size_t>(ids[j])];
      }
    }
    // Rows grouped by expert, in token order, and each slot knows its row;
    // the experts with rows listed first.
    ASSERT_EQ(r.first[0], 0u) << what;
    size_t active = 0;
    for (int64_t e = 0; e < c.n_expert; ++e)
      if (count[e]) {
        EXPECT_EQ(r.active[active++], e) << what;
      }
    for (; active < r.active.size(); ++active) EXPECT_EQ(r.active[active], c.n_expert) << what;
    for (int64_t e = 0; e < c.n_expert; ++e) {
      ASSERT_EQ(r.first[e + 1] - r.first[e], count[e]) << what << ": expert " << e;
      for (uint32_t row = r.first[e] + 1; row < r.first[e + 1]; ++row)
        EXPECT_LT(r.row_token[row - 1], r.row_token[row]) << what << ": expert " << e;
    }
    for (size_t s = 0; s < r.ids.size(); ++s) {
      const uint32_t row = r.slot_row[s];
      ASSERT_GE(row, r.first[r.ids[s]]) << what;
      ASSERT_LT(row, r.first[r.ids[s] + 1]) << what;
      EXPECT_EQ(r.row_token[row], s / c.k) << what;
    }
  }
}

// grouped_matmul against each expert's rows decoded on the host, x read per
// token (gather) or per sorted row (quantized as the device does, where it does).
void check_grouped(gpu::Device& dev, const Weight& w, int64_t n_tok, int64_t k, bool gather, std::mt19937& rng,
                   size_t max_part_bytes = 0) {
  const int64_t E = w.rows / w.mat_rows, T = n_tok * k, ldx = w.cols + 1, ldy = w.mat_rows + 2;
  const std::vector<float> logits = random_floats(static_cast<size_t>(n_tok * E), rng);
  const std::vector<float> x = random_floats(static_cast<size_t>((gather ? n_tok : T) * ldx), rng);
  const bool tiled = w.format != WeightFormat::qa || n_tok >= gpu::kTiledMatmulTokens;  // dense: no grouped GEMV
  const std::vector<float> xq =
      testutil::int8_inputs(dev, w, tiled) ? testutil::int8_blocks(x, gather ? n_tok : T, ldx, w.cols) : x;
  const gpu::GpuMatrix m = gpu::upload_matrix(dev, w, max_part_bytes);
  if (max_part_bytes) {
    EXPECT_GT(m.parts.size(), 1u);
  }
  const size_t words = gpu::moe_route_words(n_tok, E, k);
  gpu::Buffer lb(dev, logits.size() * 4, gpu::Memory::device, "logits"), rb(dev, words * 4, gpu::Memory::device, "route");
  gpu::Buffer xb(dev, x.size() * 4, gpu::Memory::device, "x"), yb(dev, static_cast<size_t>(T * ldy) * 4, gpu::Memory::device, "y");
  std::vector<uint32_t> route_words(words);
  std::vector<float> got(static_cast<size_t>(T * ldy)), want(got.size(), 0.0f), row(static_cast<size_t>(w.cols));
  gpu::Stream s(dev);
  record_route(dev, s, lb, rb, logits, n_tok, E, k);
  s.upload(xb, x.data(), x.size() * 4);
  s.fill_zero(yb, 0, got.size() * 4);
  gpu::grouped_matmul(dev, s, {&m, &rb, E, n_tok, k, gather, &xb, ldx, &yb, ldy});
  s.download(rb, route_words.data(), words * 4);
  s.download(yb, got.data(), got.size() * 4);
  s.finish();
  const Route r = parse_route(route_words, n_tok, E, k);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < w.mat_rows; ++i) {
      dequantize_row(w, e * w.mat_rows + i, row.data());
      for (uint32_t sorted = r.first[e]; sorted < r.first[e + 1]; ++sorted) {
        const float* xr = xq.data() + (gather ? r.row_token[sorted] : sorted) * ldx;
        double acc = 0;
        for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xr[c];
        want[sorted * ldy + i] = static_cast<float>(acc);
      }
    }
  EXPECT_LT(nmse(got, want), testutil::matmul_nmse_bound(dev, w, tiled))
      << w.describe() << ", " << E << " experts of " << w.mat_rows << "x" << w.cols << ", "
                                    << n_tok << " tokens, gather " << gather << ", parts " << m.parts.size();
}

TEST(GpuMoe, GroupedMatmulMatchesEachExpert) {
  NEED_DEVICE(dev);
  std::mt19937 rng(22);
  for (const int f : {1, 3, 5, 7}) {  // f16 (tiled only), q4_0, q8_0, q5_k
    const testutil::Format& format = testutil::kFormats[f];
    const int64_t cols = format.scales == QaScales::kquant ? 256 : 64;
    const Weight w = stacked_experts(format, 5, 20, cols, rng);
    testutil::for_each_variant(*dev, [&] {
      for (int64_t n_tok : {int64_t{1}, int64_t{6}, gpu::kTiledMatmulTokens + 25})
        for (bool gather : {true, false}) check_grouped(*dev, w, n_tok, 2, gather, rng);
      // In buffers of 1 and 3 tiles (rows for f16): an expert's tiles lie in several.
      for (size_t units : {1, 3})
        for (int64_t n_tok : {int64_t{3}, gpu::kTiledMatmulTokens})
          check_grouped(*dev, w, n_tok, 2, true, rng, units * w.tile_bytes);
    }, /*matmuls=*/true);
  }
}

// A whole expert layer: route, gate and up, SwiGLU, down, combine, against
// float64 sums over the decoded weights with the CPU's choice of experts (and
// the inputs of each matmul quantized as the device does, where it does).
TEST(GpuMoe, LayerMatchesReference) {
  NEED_DEVICE(dev);
  std::mt19937 rng(23);
  const int64_t E = 4, K = 2, d = 64, F = 96, y_offset = 5, ldy = d + 3;
  const testutil::Format& q4 = testutil::kFormats[3];
  const Weight gate = stacked_experts(q4, E, F, d, rng), up = stacked_experts(q4, E, F, d, rng),
               down = stacked_experts(q4, E, d, F, rng);
  const gpu::GpuMatrix gm = gpu::upload_matrix(*dev, gate), um = gpu::upload_matrix(*dev, up), dm = gpu::upload_matrix(*dev, down);
  auto decoded = [](const Weight& w) {
    std::vector<float> all(static_cast<size_t>(w.rows * w.cols));
    for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, all.data() + r * w.cols);
    return all;
  };
  const std::vector<float> G = decoded(gate), U = decoded(up), D = decoded(down);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t n_tok : {1, 7, 40}) {
      const int64_t T = n_tok * K;
      const std::vector<float> logits = random_floats(static_cast<size_t>(n_tok * E), rng), x0 = random_floats(static_cast<size_t>(n_tok * d), rng);
      const bool tiled = n_tok >= gpu::kTiledMatmulTokens, int8 = testutil::int8_inputs(*dev, gate, tiled);
      const std::vector<float> x = int8 ? testutil::int8_blocks(x0, n_tok, d, d) : x0;
      std::vector<float> want(static_cast<size_t>(y_offset + n_tok * ldy), 0.0f), got(want.size(), 0.0f);
      std::vector<int32_t> ids(K);
      std::vector<float> weights(K);
      std::vector<double> h(F);
      for (int64_t t = 0; t < n_tok; ++t) {
        cpu::route_top_k(logits.data() + t * E, E, K, ids.data(), weights.data());
        for (int64_t j = 0; j < K; ++j) {
          const int64_t e = ids[j];
          for (int64_t f = 0; f < F; ++f) {
            double g = 0, u = 0;
            for (int64_t c = 0; c < d; ++c) {
              g += static_cast<double>(G[(e * F + f) * d + c]) * x[t * d + c];
              u += static_cast<double>(U[(e * F + f) * d + c]) * x[t * d + c];
            }
            h[f] = g / (1 + std::exp(-g)) * u;
          }
          if (int8) {  // the down matmul's input, as the device quantizes it
            std::vector<float> hf(h.begin(), h.end());
            hf = testutil::int8_blocks(hf, 1, F, F);
            h.assign(hf.begin(), hf.end());
          }
          for (int64_t i = 0; i < d; ++i) {
            double o = 0;
            for (int64_t f = 0; f < F; ++f) o += D[(e * d + i) * F + f] * h[f];
            want[y_offset + t * ldy + i] += static_cast<float>(weights[j] * o);
          }
        }
      }
      auto buffer = [&](size_t floats, const char* what) { return gpu::Buffer(*dev, floats * 4, gpu::Memory::device, what); };
      gpu::Buffer lb = buffer(logits.size(), "logits"), rb = buffer(gpu::moe_route_words(n_tok, E, K), "route"),
                  xb = buffer(x.size(), "x"), gb = buffer(T * F, "gate"), ub = buffer(T * F, "up"), eb = buffer(T * d, "expert rows"),
                  yb = buffer(got.size(), "y");
      gpu::Stream s(*dev);
      record_route(*dev, s, lb, rb, logits, n_tok, E, K);
      s.upload(xb, x0.data(), x0.size() * 4);
      s.fill_zero(yb, 0, got.size() * 4);
      gpu::grouped_matmul(*dev, s, {&gm, &rb, E, n_tok, K, true, &xb, d, &gb, F});
      gpu::grouped_matmul(*dev, s, {&um, &rb, E, n_tok, K, true, &xb, d, &ub, F});
      gpu::swiglu(*dev, s, gb, ub, gb, T * F);
      gpu::grouped_matmul(*dev, s, {&dm, &rb, E, n_tok, K, false, &gb, F, &eb, d});
      gpu::moe_combine(*dev, s, eb, rb, yb, y_offset, ldy, n_tok, d, E, K);
      s.download(yb, got.data(), got.size() * 4);
      s.finish();
      // int8: h is rounded to int8 from the device's f32 and the reference's float64, which may differ by a step
      const double bound = int8 ? 1e-7 : testutil::matmul_nmse_bound(*dev, gate, tiled);
      EXPECT_LT(nmse(got, want), bound) << n_tok << " tokens";
    }
  }, /*matmuls=*/true);
}

TEST(GpuMoe, RouteRejectsTooManyExperts) {
  NEED_DEVICE(dev);
  gpu::Buffer b(*dev, 1 << 16, gpu::Memory::device, "b");
  gpu::Stream s(*dev);
  EXPECT_THROW(gpu::moe_route(*dev, s, b, b, 1, gpu::kMaxRoutedExperts + 1, 2), gpu::GpuError);
  EXPECT_THROW(gpu::moe_route(*dev, s, b, b, 1, 4, 5), gpu::GpuError);
}

}  // namespace
}  // namespace basalt

#endif
