// SPDX-License-Identifier: MIT
// The Vulkan backend against the CPU: device discovery, and every shader
// against the CPU reference on odd shapes (NMSE bounds per op; a NaN or Inf
// where the reference has none fails). CI runs these on lavapipe (Mesa's CPU
// Vulkan driver); without any device they skip and say why, unless
// BASALT_REQUIRE_GPU=1 (scripts/test.sh sets it), where that is a failure.
#include <gtest/gtest.h>

#if defined(BASALT_VULKAN)

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"
#include "cpu/ops.h"
#include "gpu/auto_placement.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu/stream.h"
#include "core/util/half.h"
#include "quant/qa_layout.h"
#include "tests/unit/gpu_testing.h"
#include "tests/unit/paged_kv.h"
#include "tests/unit/random_weights.h"

namespace basalt {
namespace {

using testutil::nmse;
using testutil::random_floats;

TEST(GpuDevice, ListsDevicesAndNeverAutoPicksACpuDriver) {
  std::string why;
  const std::vector<gpu::GpuInfo> gpus = gpu::list_gpus(&why);
  if (gpus.empty()) {
    if (std::getenv("BASALT_REQUIRE_GPU")) FAIL() << "no GPU: " << why;
    GTEST_SKIP() << "no GPU: " << why;
  }
  bool only_cpu = true;
  for (const gpu::GpuInfo& g : gpus) {
    EXPECT_FALSE(g.describe().empty());
    if (!g.software()) only_cpu = false;
  }
  const int any = gpu::pick_gpu(gpus, true), hardware = gpu::pick_gpu(gpus, false);
  EXPECT_GE(any, 0);
  if (only_cpu) EXPECT_EQ(hardware, -1) << "auto must not pick " << gpus[0].describe();
  else EXPECT_FALSE(gpus[static_cast<size_t>(hardware)].software());
  EXPECT_THROW(gpu::Device::open(static_cast<int>(gpus.size())), gpu::GpuError);
}

// BASALT_GPU_PORTABLE: 1 for the portable shaders, or the features to turn off.
TEST(GpuDevice, PortableNamesTheFeaturesToTurnOff) {
  auto allowed = [](const char* v) {
    const gpu::Device::Allowed a = gpu::Device::parse_allowed(v);
    return std::string(a.subgroups ? "s" : "-") + (a.integer_dot ? "d" : "-") + (a.float16 ? "h" : "-") +
           (a.storage16 ? "w" : "-");
  };
  EXPECT_EQ(allowed(""), "sdhw");
  EXPECT_EQ(allowed("0"), "sdhw");
  EXPECT_EQ(allowed("1"), "----");
  EXPECT_EQ(allowed("integer_dot"), "s-hw");
  EXPECT_EQ(allowed("float16,subgroups"), "-d-w");
  EXPECT_EQ(allowed("storage16"), "sdh-");
  EXPECT_THROW(gpu::Device::parse_allowed("integer_dot,bogus"), gpu::GpuError);
  EXPECT_THROW(gpu::Device::parse_allowed("yes"), gpu::GpuError);
}

// auto's estimate: attention goes to a discrete GPU at long context only, and
// never to an integrated one (same memory, plus the per-node cost).
TEST(GpuAuto, OffloadsOnlyWhereTheEstimateWins) {
  ModelSpec spec;  // TinyLlama's attention
  spec.n_layer = 22;
  spec.n_head = 32;
  spec.n_head_kv = 4;
  spec.head_dim = 64;
  spec.n_embd = 2048;
  Graph g;
  for (int l = 0; l < spec.n_layer; ++l) g.nodes.push_back(Node{Op::attention});
  gpu::GpuInfo discrete, integrated;
  discrete.kind = gpu::GpuKind::discrete;
  integrated.kind = gpu::GpuKind::integrated;
  gpu::Throughputs t;
  t.cpu_read_gbs = 20;
  const gpu::AutoPlan long_ctx = gpu::choose_auto(discrete, spec, g, 32768, t);
  EXPECT_TRUE(long_ctx.placement.attn) << long_ctx.why;
  EXPECT_FALSE(long_ctx.placement.experts);
  EXPECT_NE(long_ctx.why.find("attention on the GPU"), std::string::npos) << long_ctx.why;
  const gpu::AutoPlan short_ctx = gpu::choose_auto(discrete, spec, g, 256, t);
  EXPECT_FALSE(short_ctx.placement.any()) << short_ctx.why;
  const gpu::AutoPlan shared = gpu::choose_auto(integrated, spec, g, 32768, t);
  EXPECT_FALSE(shared.placement.any()) << shared.why;
}

// auto takes the whole model when it fits the device and the device reads
// its weights much faster; not when it does not fit, reads no faster, or
// spends longer dispatching the nodes than the CPU takes to run them.
TEST(GpuAuto, TakesTheWholeModelWhereItFitsAndWins) {
  ModelSpec spec;  // a TinyLlama-like shape, f16 weights (2.2 GB)
  spec.n_layer = 22;
  spec.n_head = 32;
  spec.n_head_kv = 4;
  spec.head_dim = 64;
  spec.n_embd = 2048;
  spec.n_vocab = 32000;
  std::vector<Weight> weights(static_cast<size_t>(spec.n_layer) * 3 + 1);
  auto f16 = [](Weight& w, int64_t rows, int64_t cols) {
    w.format = WeightFormat::f16;
    w.rows = w.mat_rows = rows;
    w.cols = cols;
    w.row_bytes = static_cast<size_t>(cols) * 2;
    return &w;
  };
  Graph g;
  for (int l = 0; l < spec.n_layer; ++l) {
    g.nodes.push_back(Node{Op::matmul});
    g.nodes.back().weight = f16(weights[l * 3], 3 * 2048, 2048);  // q, k, v, o as one
    g.nodes.push_back(Node{Op::attention});
    g.nodes.push_back(Node{Op::matmul});
    g.nodes.back().weight = f16(weights[l * 3 + 1], 2 * 5632, 2048);  // gate and up
    g.nodes.push_back(Node{Op::matmul});
    g.nodes.back().weight = f16(weights[l * 3 + 2], 2048, 5632);
  }
  g.nodes.push_back(Node{Op::matmul});
  g.nodes.back().weight = f16(weights.back(), 32000, 2048);
  gpu::GpuInfo discrete;
  discrete.kind = gpu::GpuKind::discrete;
  discrete.device_local_bytes = uint64_t{24} << 30;
  gpu::Throughputs t;
  t.cpu_read_gbs = 20, t.gpu_read_gbs = 900, t.link_gbs = 20, t.node_us = 50;
  const gpu::AutoPlan fits = gpu::choose_auto(discrete, spec, g, 4096, t);
  EXPECT_TRUE(fits.placement.all) << fits.why;
  EXPECT_NE(fits.why.find("the whole model on the GPU"), std::string::npos) << fits.why;
  const gpu::AutoPlan capped = gpu::choose_auto(discrete, spec, g, 4096, t, uint64_t{1} << 30);  // --gpu-memory 1024
  EXPECT_FALSE(capped.placement.all) << capped.why;
  EXPECT_NE(capped.why.find("does not fit"), std::string::npos) << capped.why;
  gpu::Throughputs slow = t;
  slow.gpu_read_gbs = 22;  // an integrated GPU: the same memory as the CPU
  const gpu::AutoPlan same_memory = gpu::choose_auto(discrete, spec, g, 4096, slow);
  EXPECT_FALSE(same_memory.placement.any()) << same_memory.why;
  gpu::Throughputs costly = t;
  costly.dispatch_us = 2000;  // 89 nodes of 2 ms: slower than reading the weights on the CPU
  const gpu::AutoPlan dispatch_bound = gpu::choose_auto(discrete, spec, g, 4096, costly);
  EXPECT_FALSE(dispatch_bound.placement.all) << dispatch_bound.why;
}

TEST(GpuAuto, MeasuresTheDevice) {
  NEED_DEVICE(dev);
  gpu::Throughputs t;
  gpu::measure_device(*dev, t);
  EXPECT_GT(t.gpu_read_gbs, 0.1);
  EXPECT_GT(t.link_gbs, 0.01);
  EXPECT_GT(t.node_us, 0.0);
  EXPECT_LT(t.node_us, 1e6);
  EXPECT_GT(t.dispatch_us, 0.0);
  EXPECT_LT(t.dispatch_us, t.node_us * 64);
}

// y = W x on the device and by the reference decoding (dequantize_row, double
// sums); where the device takes integer dot products (the tiled GEMM of qa
// weights), the reference takes the inputs the shader quantizes. The squared
// error is normalized by the sum of the products' squares (what sum y^2 is on
// average for random data), not by sum y^2 itself: a matrix of one row and
// one token has a single output, and when that random dot product lands near
// zero its relative error says nothing about the shader (an H200 case, 4.1b).
void check_matmul(gpu::Device& dev, const Weight& w, int64_t mat, int64_t n_tok, std::mt19937& rng,
                  size_t max_part_bytes = 0) {
  const int64_t rows = w.mat_rows, cols = w.cols, ldx = cols + 3, ldy = rows + 5;
  const std::vector<float> x = random_floats(static_cast<size_t>(n_tok * ldx), rng);
  const bool tiled = n_tok >= gpu::kTiledMatmulTokens, int8_inputs = testutil::int8_inputs(dev, w, tiled);
  const std::vector<float> xr = int8_inputs ? testutil::int8_blocks(x, n_tok, ldx, cols) : x;
  std::vector<float> want(static_cast<size_t>(n_tok * ldy), 0.0f), got(want.size(), 0.0f), row(static_cast<size_t>(cols));
  double terms2 = 0;  // sum over outputs and k of (w_rk x_tk)^2
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(w, mat * w.mat_rows + r, row.data());
    for (int64_t t = 0; t < n_tok; ++t) {
      double s = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double term = static_cast<double>(row[k]) * xr[t * ldx + k];
        s += term, terms2 += term * term;
      }
      want[t * ldy + r] = static_cast<float>(s);
    }
  }
  const gpu::GpuMatrix m = gpu::upload_matrix(dev, w, max_part_bytes);
  if (max_part_bytes) {
    EXPECT_GT(m.parts.size(), 1u);
  }
  gpu::Buffer xb(dev, x.size() * 4, gpu::Memory::device, "x"), yb(dev, got.size() * 4, gpu::Memory::device, "y");
  gpu::Stream s(dev);
  s.upload(xb, x.data(), x.size() * 4);
  s.fill_zero(yb, 0, got.size() * 4);
  gpu::matmul(dev, s, {&m, mat, &xb, 0, ldx, &yb, 0, ldy, n_tok});
  s.download(yb, got.data(), got.size() * 4);
  s.finish();
  double err2 = 0;
  for (size_t i = 0; i < got.size(); ++i) err2 += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
  EXPECT_LT(err2 / terms2, testutil::matmul_nmse_bound(dev, w, tiled))
      << w.describe() << " " << rows << "x" << cols << " tokens " << n_tok << " matrix " << mat
      << (int8_inputs ? " (integer dot products)" : testutil::f16_arithmetic(dev, w, tiled) ? " (f16 arithmetic)" : "");
}

TEST(GpuOps, MatmulMatchesReference) {
  NEED_DEVICE(dev);
  std::mt19937 rng(7);
  testutil::for_each_variant(*dev, [&] {  // the tiled GEMM: integer dot products, f16 and f32 arithmetic
    int checked = 0;
    for (const testutil::Format& f : testutil::kFormats) {
      Weight probe = testutil::random_weight(f, 16, 256, rng);
      if (gpu::matmul_shader(probe).empty()) continue;
      const bool k_type = f.scales == QaScales::kquant || f.scales == QaScales::q6k;
      for (int64_t cols : {32, 96, 2048})
        for (int64_t rows : {1, 17, 100}) {
          if (k_type && cols % 256) continue;
          const Weight w = testutil::random_weight(f, rows, cols, rng);
          // Few tokens (matmul_qa or matmul_dense), then the tiled GEMM: one partial
          // token group, and two groups the second of which is partial.
          for (int64_t n_tok : {int64_t{1}, int64_t{3}, gpu::kTiledMatmulTokens - 1, gpu::kTiledMatmulTokens, int64_t{45}})
            check_matmul(*dev, w, 0, n_tok, rng), ++checked;
        }
    }
    // Every format: f32, f16, bf16 and 6 qa formats of groups of 32 at 3 widths, 3 K-quants (rows of 256) at one.
    EXPECT_EQ(checked, (9 * 3 + 3 * 1) * 3 * 5);
  }, /*matmuls=*/true);
}

TEST(GpuOps, MatmulOfOneStackedExpert) {
  NEED_DEVICE(dev);
  std::mt19937 rng(8);
  const testutil::Format& q4 = testutil::kFormats[3];
  const int64_t experts = 3, mat_rows = 20, cols = 64;
  const std::vector<uint8_t> rm = testutil::random_rowmajor(q4, experts * mat_rows, cols, rng);
  const Weight w = qa_weight_from_rows("experts", q4.bits, q4.scales, experts * mat_rows, cols, rm.data(), mat_rows);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t e = 0; e < experts; ++e) check_matmul(*dev, w, e, 2, rng);
    // Split into buffers of 1 and of 2 tiles (a device whose bindings are small): tiles cross expert boundaries.
    for (size_t tiles : {1, 2})
      for (int64_t e = 0; e < experts; ++e)
        for (int64_t n_tok : {int64_t{3}, gpu::kTiledMatmulTokens}) check_matmul(*dev, w, e, n_tok, rng, tiles * w.tile_bytes);
  }, /*matmuls=*/true);
  // A dense weight in buffers of 3 rows.
  const Weight f16 = testutil::random_weight(testutil::kFormats[1], 20, 64, rng);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t n_tok : {int64_t{5}, gpu::kTiledMatmulTokens}) check_matmul(*dev, f16, 0, n_tok, rng, 3 * f16.row_bytes);
  });
}

TEST(GpuOps, CopyGathersRows) {  // gather_out on the device: the rows that want logits; KV block copies
  NEED_DEVICE(dev);
  std::vector<float> x(7 * 5), got(3 * 5, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  gpu::Buffer xb(*dev, x.size() * 4, gpu::Memory::device, "x"), yb(*dev, got.size() * 4, gpu::Memory::device, "y");
  gpu::Stream s(*dev);
  s.upload(xb, x.data(), x.size() * 4);
  const size_t row = 5 * 4;
  s.copy(xb, yb, {{6 * row, 0, row}, {2 * row, row, row}, {6 * row, 2 * row, row}});
  s.download(yb, got.data(), got.size() * 4);
  s.finish();
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(got[j], x[6 * 5 + j]);
    EXPECT_EQ(got[5 + j], x[2 * 5 + j]);
    EXPECT_EQ(got[10 + j], x[6 * 5 + j]);
  }
  EXPECT_THROW(s.copy(xb, yb, {{6 * row, 2 * row, 2 * row}}), gpu::GpuError);  // past y's end
  // Within one buffer (a KV block copied to another): no range may read what one writes.
  s.copy(xb, xb, {{0, row, row}, {0, 3 * row, row}});
  std::vector<float> back(x.size());
  s.download(xb, back.data(), back.size() * 4);
  s.finish();
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(back[5 + j], x[j]);
    EXPECT_EQ(back[15 + j], x[j]);
    EXPECT_EQ(back[10 + j], x[10 + j]);
  }
  EXPECT_THROW(s.copy(xb, xb, {{0, row / 2, row}}), gpu::GpuError);
  EXPECT_THROW(s.copy(xb, xb, {{0, row, row}, {row, 2 * row, row}}), gpu::GpuError);
}

// Uploads through two streams in turn (the host fills one chunk while the
// device copies the other): odd sizes and offsets, chunks of odd length,
// several destinations, then read back.
TEST(GpuOps, UploaderCopiesEveryChunk) {
  NEED_DEVICE(dev);
  std::vector<uint8_t> a(100003), b(5000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
  gpu::Buffer ab(*dev, a.size() + 16, gpu::Memory::device, "a"), bb(*dev, b.size(), gpu::Memory::device, "b");
  {
    gpu::Uploader up(*dev, 4099, /*always_stage=*/true);
    up.write(ab, a.data(), 40000, 5);  // the first part, then the rest: chunks alternate between the streams
    up.write(bb, b.data(), b.size());
    up.write(ab, a.data() + 40000, a.size() - 40000, 40005);
    up.finish();
    EXPECT_THROW(up.write(bb, b.data(), b.size(), 1), gpu::GpuError);  // past the end
  }
  std::vector<uint8_t> got_a(a.size()), got_b(b.size());
  gpu::Stream s(*dev);
  s.download(ab, got_a.data(), a.size(), 5);
  s.download(bb, got_b.data(), b.size());
  s.finish();
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
}

TEST(GpuOps, SwigluMatchesCpu) {
  NEED_DEVICE(dev);
  std::mt19937 rng(10);
  for (int64_t n : {1, 255, 256, 1000, 70000}) {
    std::vector<float> g = random_floats(static_cast<size_t>(n), rng), u = random_floats(static_cast<size_t>(n), rng);
    for (size_t i = 0; i < g.size(); i += 97) g[i] *= 40;  // large magnitudes: exp overflows to inf, silu to 0 or x
    std::vector<float> want(g.size()), got(g.size());
    cpu::swiglu(g.data(), u.data(), want.data(), 1, n);
    gpu::Buffer gb(*dev, g.size() * 4, gpu::Memory::device, "g"), ub(*dev, u.size() * 4, gpu::Memory::device, "u");
    gpu::Stream s(*dev);
    s.upload(gb, g.data(), g.size() * 4);
    s.upload(ub, u.data(), u.size() * 4);
    gpu::swiglu(*dev, s, gb, ub, gb, n);
    s.download(gb, got.data(), got.size() * 4);
    s.finish();
    EXPECT_LT(nmse(got, want), 1e-12) << n << " elements";
  }
}

TEST(GpuOps, AddRmsNormAndRopeMatchCpu) {
  NEED_DEVICE(dev);
  std::mt19937 rng(12);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t d : {1, 64, 300, 2048}) {  // rms_norm rows of odd and large widths, in place and not
      const int64_t n = 5;
      const std::vector<float> x = random_floats(static_cast<size_t>(n * d), rng), w = random_floats(static_cast<size_t>(d), rng);
      std::vector<float> want(x.size()), got(x.size()), got_in_place(x.size());
      cpu::rms_norm(x.data(), w.data(), want.data(), n, d, 1e-5f);
      gpu::Buffer xb(*dev, x.size() * 4 + 12, gpu::Memory::device, "x"), wb(*dev, w.size() * 4, gpu::Memory::device, "w"),
          yb(*dev, x.size() * 4, gpu::Memory::device, "y");
      gpu::Stream s(*dev);
      s.upload(xb, x.data(), x.size() * 4, 12);  // at an offset of 3 floats
      s.upload(wb, w.data(), w.size() * 4);
      gpu::rms_norm(*dev, s, xb, 3, wb, yb, 0, n, d, 1e-5f);
      gpu::rms_norm(*dev, s, xb, 3, wb, xb, 3, n, d, 1e-5f);
      s.download(yb, got.data(), got.size() * 4);
      s.download(xb, got_in_place.data(), got.size() * 4, 12);
      s.finish();
      EXPECT_LT(nmse(got, want), 1e-12) << "rms_norm width " << d;
      EXPECT_LT(nmse(got_in_place, want), 1e-12) << "rms_norm in place, width " << d;
    }
  });
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox})
    for (int64_t rope_dim : {64, 32}) {  // whole heads, and partial rotation
      ModelSpec spec;
      spec.head_dim = 64, spec.rope_dim = rope_dim, spec.rope_style = style;
      spec.yarn_orig_ctx = 4096;  // YaRN's mix and attention factor too
      const RopeParams p = make_rope(3, spec, 10000.0f, 0.25f, true, 0);
      const std::vector<int32_t> pos = {0, 1, 17, 4095, 40000};
      const int64_t n = static_cast<int64_t>(pos.size()), width = p.n_head * p.head_dim;
      std::vector<float> want = random_floats(static_cast<size_t>(n * width), rng), got(want.size());
      const std::vector<float> x = want, tables = rope_tables(pos.data(), n, p);
      cpu::rope(want.data(), n, tables.data(), p);
      gpu::Buffer xb(*dev, x.size() * 4, gpu::Memory::device, "x"), tb(*dev, tables.size() * 4, gpu::Memory::device, "t");
      gpu::Stream s(*dev);
      s.upload(xb, x.data(), x.size() * 4);
      s.upload(tb, tables.data(), tables.size() * 4);
      gpu::rope(*dev, s, xb, 0, tb, n, p);
      s.download(xb, got.data(), got.size() * 4);
      s.finish();
      EXPECT_LT(nmse(got, want), 1e-12) << "rope style " << static_cast<int>(style) << " rope_dim " << rope_dim;
    }
  for (int64_t n : {1, 1000, 70000}) {
    const std::vector<float> a = random_floats(static_cast<size_t>(n), rng), b = random_floats(static_cast<size_t>(n), rng);
    std::vector<float> want(a.size()), got(a.size());
    cpu::add(a.data(), b.data(), want.data(), n);
    gpu::Buffer ab(*dev, a.size() * 4, gpu::Memory::device, "a"), bb(*dev, b.size() * 4, gpu::Memory::device, "b");
    gpu::Stream s(*dev);
    s.upload(ab, a.data(), a.size() * 4);
    s.upload(bb, b.data(), b.size() * 4);
    gpu::add(*dev, s, ab, bb, ab, n);  // in place, as the residual adds are
    s.download(ab, got.data(), got.size() * 4);
    s.finish();
    EXPECT_EQ(got, want) << "add of " << n;
  }
  for (int64_t width : {1, 7, 896}) {  // a bias on every row (Qwen2's q, k, v), into another buffer
    const int64_t rows = 5, n = rows * width;
    const std::vector<float> a = random_floats(static_cast<size_t>(n), rng), b = random_floats(static_cast<size_t>(width), rng);
    std::vector<float> want(a.size()), got(a.size(), NAN);
    for (int64_t r = 0; r < rows; ++r) cpu::add(a.data() + r * width, b.data(), want.data() + r * width, width);
    gpu::Buffer ab(*dev, a.size() * 4, gpu::Memory::device, "a"), bb(*dev, b.size() * 4, gpu::Memory::device, "b"),
        yb(*dev, a.size() * 4, gpu::Memory::device, "y");
    gpu::Stream s(*dev);
    s.upload(ab, a.data(), a.size() * 4);
    s.upload(bb, b.data(), b.size() * 4);
    gpu::add(*dev, s, ab, bb, yb, n, width);
    s.download(yb, got.data(), got.size() * 4);
    s.finish();
    EXPECT_EQ(got, want) << "bias of width " << width;
  }
}

// One layer of n_head query heads over n_kv KV heads of head_dim.
ModelSpec one_layer_spec(int64_t n_head, int64_t n_kv, int64_t head_dim) {
  ModelSpec spec;
  spec.n_layer = 1;
  spec.n_head = n_head;
  spec.n_head_kv = n_kv;
  spec.head_dim = spec.rope_dim = head_dim;
  spec.n_embd = n_head * head_dim;
  return spec;
}

struct AttnCase {
  int64_t head_dim, n_kv, ratio, depth, n_tok;
};

// cpu::attention writes the batch's keys and values into the cache and
// cpu::attention_ref gives the reference; the device reads that cache.
// `ringed`: the layer keeps its window in a ring of blocks (KvCache, runs of 256).
// `sinks` (with a window): the first positions, seen too. `softcap`: scores soft-capped (Gemma 2).
void check_attention(gpu::Device& dev, const AttnCase& c, std::mt19937& rng, int64_t window = 0,
                     KvType type = KvType::f16, bool ringed = false, int64_t sinks = 0, float softcap = 0) {
  ModelSpec spec = one_layer_spec(c.n_kv * c.ratio, c.n_kv, c.head_dim);
  spec.attn_softcap = softcap;
  const int64_t n_ctx = c.depth + c.n_tok, qd = spec.q_dim(), kvd = spec.kv_dim();
  if (ringed) spec.sliding_window = window, spec.attention_sinks = sinks;
  KvCache kv = ringed ? KvCache(spec, n_ctx, 1, type, 256) : testutil::interleaved_kv_cache(spec, n_ctx, 1, type);
  ASSERT_EQ(kv.ringed(0), ringed);
  for (int64_t p0 = 0; p0 < c.depth; p0 += 256) {  // the past, through the op itself
    Batch b;
    for (int64_t p = p0; p < std::min(c.depth, p0 + 256); ++p) b.add(0, static_cast<int32_t>(p), 0, false);
    const auto q = random_floats(b.size() * qd, rng), k = random_floats(b.size() * kvd, rng), v = random_floats(b.size() * kvd, rng);
    std::vector<float> o(q.size());
    ASSERT_TRUE(kv.hold_windows(b));  // as the executor does: a ring's blocks for the batch
    cpu::attention(q.data(), k.data(), v.data(), o.data(), b, kv, 0, spec);
  }
  Batch b;
  for (int64_t t = 0; t < c.n_tok; ++t) b.add(0, static_cast<int32_t>(c.depth + t), 0, true);
  const auto q = random_floats(c.n_tok * qd, rng), k = random_floats(c.n_tok * kvd, rng), v = random_floats(c.n_tok * kvd, rng);
  std::vector<float> want(q.size()), got(q.size());
  // The reference, not the vector kernels: those may round the f16 cache's dots to bf16 (cpu/attention.h).
  ASSERT_TRUE(kv.hold_windows(b));
  cpu::attention_ref(q.data(), k.data(), v.data(), want.data(), b, kv, 0, spec);
  if (window > 0) {  // a float64 windowed attention over the cache's contents
    const int64_t hd = c.head_dim, group = c.ratio;
    for (int64_t t = 0; t < c.n_tok; ++t)
      for (int64_t h = 0; h < spec.n_head; ++h) {
        const int64_t pos = b.pos[t], first = std::max<int64_t>(0, pos + 1 - window), kvh = h / group;
        std::vector<int64_t> seen;  // the sinks before the window, then the window
        for (int64_t p = 0; p < std::min(sinks, first); ++p) seen.push_back(p);
        for (int64_t p = first; p <= pos; ++p) seen.push_back(p);
        std::vector<double> sc;
        double mx = -INFINITY;
        for (int64_t p : seen) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += q[t * qd + h * hd + d] * kv.key(0, 0, p, kvh * hd + d);
          sc.push_back(dot / std::sqrt(static_cast<double>(hd)));
          if (softcap > 0) sc.back() = softcap * std::tanh(sc.back() / softcap);
          mx = std::max(mx, sc.back());
        }
        double l = 0;
        for (double& x : sc) l += (x = std::exp(x - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double o = 0;
          for (size_t i = 0; i < seen.size(); ++i) o += sc[i] * kv.value(0, 0, seen[i], kvh * hd + d);
          want[t * qd + h * hd + d] = static_cast<float>(o / l);
        }
      }
  }

  const size_t key_bytes = static_cast<size_t>(kv.layer_blocks(0) * kv.block_bytes(0));
  const size_t value_bytes = static_cast<size_t>(kv.layer_blocks(0) * kv.block_bytes(1));
  // The table at an offset in its buffer, as the backend packs the batch's tables.
  std::vector<int32_t> table(3, -1);
  table.insert(table.end(), kv.blocks(0, 0), kv.blocks(0, 0) + KvCache::blocks_for(n_ctx));
  gpu::Buffer qb(dev, q.size() * 4, gpu::Memory::device, "q"), ob(dev, got.size() * 4, gpu::Memory::device, "o");
  gpu::Buffer kb(dev, key_bytes, gpu::Memory::device, "k"), vb(dev, value_bytes, gpu::Memory::device, "v");
  gpu::Buffer pb(dev, b.pos.size() * 4, gpu::Memory::device, "pos"), tb(dev, table.size() * 4, gpu::Memory::device, "table");
  gpu::Stream s(dev);
  s.upload(qb, q.data(), q.size() * 4);
  s.upload(kb, kv.key_pool(0), key_bytes);
  s.upload(vb, kv.value_pool(0), value_bytes);
  s.upload(pb, b.pos.data(), b.pos.size() * 4);
  s.upload(tb, table.data(), table.size() * 4);
  gpu::Buffer partial(dev, gpu::attention_partial_bytes(c.head_dim), gpu::Memory::device, "partials");
  for (bool split : {false, true}) {  // one workgroup per (token, head), and split-K where it applies
    gpu::AttentionOp op{&qb, 0, qd, &kb, &vb, type, &tb, 3, kv.block_bytes(), &pb, 0, &ob, 0, qd,
                        c.n_tok, spec.n_head, spec.n_head_kv, spec.head_dim, window};
    op.sinks = sinks;
    op.softcap = softcap;
    if (split) op.partial = &partial, op.max_pos = c.depth + c.n_tok - 1;
    s.fill_zero(ob, 0, got.size() * 4);
    // q4 values are stored rotated: the output rotated back (as the backend does).
    const bool rotate_o = kv_side_type(type, 1) == KvType::q4;
    gpu::attention(dev, s, op);
    if (rotate_o) gpu::kv_rotate_rows(dev, s, ob, 0, qd, c.n_tok, spec.n_head, spec.head_dim);
    s.download(ob, got.data(), got.size() * 4);
    s.finish();
    EXPECT_LT(nmse(got, want), 1e-9) << "head_dim " << c.head_dim << " kv heads " << c.n_kv << " ratio " << c.ratio
                                     << " depth " << c.depth << " tokens " << c.n_tok << " window " << window << " sinks " << sinks
                                     << (split ? " split-K" : "") << " kv " << kv_type_name(type) << " softcap " << softcap;
  }
}

TEST(GpuOps, AttentionMatchesCpu) {
  NEED_DEVICE(dev);
  std::mt19937 rng(9);
  const AttnCase cases[] = {
      {64, 3, 3, 0, 1},     // SmolLM2's shape, first token
      {64, 3, 3, 0, 17},    // causal prefill inside one block and past it
      {64, 4, 8, 63, 2},    // TinyLlama's GQA, across the first block boundary
      {64, 4, 8, 4099, 1},  // decode past 4k positions
      {128, 2, 4, 300, 5},
      {80, 2, 1, 100, 3},   // head_dim not a multiple of 64
      {256, 1, 2, 70, 2},   // the largest head the shader takes
      {32, 1, 1, 5, 7},
      {64, 2, 6, 130, 2},   // a group the shader's 8 heads per workgroup hold with room to spare
      {64, 1, 16, 200, 3},  // two workgroups per KV head
  };
  testutil::for_each_variant(*dev, [&] {
    for (const AttnCase& c : cases)
      for (KvType type : {KvType::f16, KvType::q8, KvType::q4, KvType::k8v4})
        if (kv_type_unsupported(type, c.head_dim).empty()) check_attention(*dev, c, rng, 0, type);
  });
}

TEST(GpuOps, SlidingWindowAttentionMatchesFloat64) {
  NEED_DEVICE(dev);
  std::mt19937 rng(11);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t window : {1, 50, 64, 130, 1000}) check_attention(*dev, {64, 2, 2, 200, 3}, rng, window);
    check_attention(*dev, {128, 1, 4, 4100, 2}, rng, 4096);  // the window past 4k positions
    check_attention(*dev, {64, 2, 2, 200, 3}, rng, 50, KvType::q8);
    for (KvType type : {KvType::f16, KvType::q8, KvType::k8v4})  // rings of 6 blocks over 1003 positions
      check_attention(*dev, {64, 2, 2, 1000, 3}, rng, 50, type, true);
    check_attention(*dev, {96, 1, 2, 300, 4}, rng, 70, KvType::q4);  // rotated in blocks of 32
  });
}

// Gemma 2's soft-capped scores (cap 0.3 bends these, of order 0.3): prefill,
// a split decode past 4k, a window (in rings), each cache type.
TEST(GpuOps, SoftCappedAttentionMatchesCpu) {
  NEED_DEVICE(dev);
  std::mt19937 rng(13);
  testutil::for_each_variant(*dev, [&] {
    for (KvType type : {KvType::f16, KvType::q8, KvType::q4, KvType::k8v4}) {
      check_attention(*dev, {64, 3, 3, 0, 17}, rng, 0, type, false, 0, 0.3f);
      check_attention(*dev, {64, 2, 2, 1000, 3}, rng, 50, type, type != KvType::q4, 0, 0.3f);  // rings but q4's
    }
    check_attention(*dev, {64, 4, 8, 4099, 1}, rng, 0, KvType::f16, false, 0, 0.3f);
  });
}

// Attention sinks (--attention-sinks with --window): the first positions
// beside the window, in a plain cache and in rings with the sinks' own blocks.
TEST(GpuOps, AttentionSinksMatchFloat64) {
  NEED_DEVICE(dev);
  std::mt19937 rng(12);
  testutil::for_each_variant(*dev, [&] {
    for (int64_t sinks : {1, 4, 64, 70}) check_attention(*dev, {64, 2, 2, 300, 3}, rng, 100, KvType::f16, false, sinks);
    check_attention(*dev, {64, 2, 2, 40, 3}, rng, 100, KvType::f16, false, 4);  // the window still reaches them
    for (KvType type : {KvType::f16, KvType::q8, KvType::k8v4})
      check_attention(*dev, {64, 2, 2, 1000, 3}, rng, 50, type, true, 4);
    check_attention(*dev, {64, 1, 4, 2000, 1}, rng, 128, KvType::f16, true, 70);  // decode, split-K over sinks and window
  });
}

// The device side of a kv_store test: the batch's keys k and values v, its
// positions, each token's block offset in want's keys, and zeroed caches of
// want's sizes, uploaded on s.
// The batch's keys, values, positions, blocks and sequences on the device, an
// empty device cache, and q4 keys' stage filled as the backend fills it
// (gpu::kv_stage_fill, from `want` before it stored the batch).
struct DeviceKvStore {
  int64_t n, key_bytes, value_bytes;
  gpu::Buffer kb, vb, pb, bb, kc, vc, stage, sb;
  DeviceKvStore(gpu::Device& dev, gpu::Stream& s, const KvCache& want, const Batch& b, const std::vector<float>& k,
                const std::vector<float>& v)
      : n(b.size()), key_bytes(want.n_blocks() * want.block_bytes(0)), value_bytes(want.n_blocks() * want.block_bytes(1)),
        kb(dev, k.size() * 4, gpu::Memory::device, "k"), vb(dev, v.size() * 4, gpu::Memory::device, "v"),
        pb(dev, static_cast<size_t>(n) * 4, gpu::Memory::device, "pos"), bb(dev, static_cast<size_t>(n) * 4, gpu::Memory::device, "base"),
        kc(dev, static_cast<size_t>(key_bytes), gpu::Memory::device, "keys"),
        vc(dev, static_cast<size_t>(value_bytes), gpu::Memory::device, "values"),
        stage(dev, gpu::kv_stage_bytes(want.n_seq(), want.kv_dim()), gpu::Memory::device, "stage"),
        sb(dev, static_cast<size_t>(n) * 4, gpu::Memory::device, "seq") {
    std::vector<uint32_t> base(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) base[t] = static_cast<uint32_t>(want.key_block(0, b.seq[t], b.pos[t]) - want.key_pool(0));
    s.upload(kb, k.data(), k.size() * 4);
    s.upload(vb, v.data(), v.size() * 4);
    s.upload(pb, b.pos.data(), static_cast<size_t>(n) * 4);
    s.upload(bb, base.data(), static_cast<size_t>(n) * 4);
    s.upload(sb, b.seq.data(), static_cast<size_t>(n) * 4);
    s.fill_zero(kc, 0, static_cast<size_t>(key_bytes));
    s.fill_zero(vc, 0, static_cast<size_t>(value_bytes));
    if (kv_side_type(want.type(), 0) == KvType::q4) gpu::kv_stage_fill(s, stage, want, 0, b.seq.data(), b.pos.data(), n);
  }
  gpu::KvStoreOp op(int64_t kv_dim, int64_t head_dim, KvType type) {
    gpu::KvStoreOp o{&kb, &vb, &pb, &bb, &kc, &vc, n, kv_dim, head_dim, type};
    o.stage = &stage, o.seq = &sb;
    return o;
  }
};

// kv_store writes what KvCache::store writes: f16 the same bits; q8 the same
// int8 values and scales, but for GLSL's division (an ulp off at most), which
// may move a rare element by one step. Two sequences, adjacent positions
// (q8 keys of neighbouring tokens share words, and f16 ones without 16-bit
// storage), a block boundary.
TEST(GpuOps, KvStoreMatchesCpuCache) {
  NEED_DEVICE(dev);
  std::mt19937 rng(13);
  testutil::for_each_variant(*dev, [&] {  // f16: 16-bit stores, or halves of words with atomics (portable)
    for (KvType type : {KvType::f16, KvType::q8})
      for (int64_t head_dim : {64, 128, 34}) {  // 34: q8 refused; f16 words spanning two heads
        const ModelSpec spec = one_layer_spec(3, 3, head_dim);
        const int64_t n_ctx = 150, kvd = spec.kv_dim();
        KvCache want = testutil::interleaved_kv_cache(spec, n_ctx, 2, type);
        Batch b;
        for (int32_t p = 60; p < 70; ++p) b.add(0, p, 0, false);  // across the first block's end
        for (int32_t p : {3, 4, 5, 140}) b.add(0, p, 1, false);
        const int64_t n = b.size();
        const auto k = random_floats(static_cast<size_t>(n * kvd), rng), v = random_floats(static_cast<size_t>(n * kvd), rng);
        for (int64_t t = 0; t < n; ++t) want.store(0, b.seq[t], b.pos[t], &k[t * kvd], &v[t * kvd]);

        const size_t pool = static_cast<size_t>(want.n_blocks() * want.block_bytes());
        gpu::Stream s(*dev);
        DeviceKvStore d(*dev, s, want, b, k, v);
        const bool q8 = type == KvType::q8;
        if (q8 && head_dim % 4) {
          EXPECT_THROW(gpu::kv_store(*dev, s, d.op(kvd, head_dim, type)), gpu::GpuError);
          continue;
        }
        gpu::kv_store(*dev, s, d.op(kvd, head_dim, type));
        std::vector<uint8_t> keys(pool), values(pool);
        s.download(d.kc, keys.data(), keys.size());
        s.download(d.vc, values.data(), values.size());
        s.finish();
        int64_t off_by_one = 0;
        const int64_t elements = 2 * n * kvd;  // written: keys and values of the batch's tokens
        for (int kvi = 0; kvi < 2; ++kvi) {  // the whole pool: the blocks of both sequences, the rest untouched zeros
            const uint8_t* w = kvi == 0 ? want.key_pool(0) : want.value_pool(0);
            const uint8_t* g = kvi == 0 ? keys.data() : values.data();
            for (size_t i = 0; i < pool; ++i) {
              if (!q8 || static_cast<int64_t>(i % want.block_bytes()) < want.scales_offset()) {
                if (q8) {
                  const int diff = std::abs(int{static_cast<int8_t>(w[i])} - int{static_cast<int8_t>(g[i])});
                  ASSERT_LE(diff, 1) << "byte " << i << " head_dim " << head_dim;
                  off_by_one += diff;
                } else {
                  ASSERT_EQ(w[i], g[i]) << "byte " << i << " head_dim " << head_dim;
                }
                continue;
              }
              float ws, gs;  // a scale
              std::memcpy(&ws, w + i, 4);
              std::memcpy(&gs, g + i, 4);
              // GLSL's division: 2.5 ulp
              EXPECT_NEAR(gs, ws, std::fabs(ws) * 5e-7f) << "scale at byte " << i << " head_dim " << head_dim;
              i += 3;
            }
          }
        if (q8) {
          EXPECT_LE(off_by_one, elements / 1000) << "head_dim " << head_dim;
        }
      }
  });
}

// kv_store into q4 and k8v4 caches, read back through the CPU cache's own
// decoding: what the device stored is what KvCache::store would have, in its
// layout. Values: each head rotated (the same rotation, bit for bit); keys:
// each (head, dim) over its group of 32 positions from the stage, two
// batches in turn (the second's groups continue the first's on the device's
// stage; sequence 1's resumes past its stage, which the host fills). GLSL's division may move a rare code by one step, and put a head's
// q8 scale an ulp off the CPU's (as on an H200: every value of that head then
// differs in its last bits).
TEST(GpuOps, KvStoreQ4MatchesCpuCache) {
  NEED_DEVICE(dev);
  std::mt19937 rng(17);
  for (KvType type : {KvType::q4, KvType::k8v4})
    for (int64_t head_dim : {64, 128, 96}) {  // 96: rotated in blocks of 32
      const ModelSpec spec = one_layer_spec(3, 3, head_dim);
      const int64_t n_ctx = 150, kvd = spec.kv_dim();
      KvCache want = testutil::interleaved_kv_cache(spec, n_ctx, 2, type), got = testutil::interleaved_kv_cache(spec, n_ctx, 2, type);
      Batch first, b;
      for (int32_t p = 0; p < 30; ++p) first.add(0, p, 0, false);
      for (int32_t p = 128; p < 136; ++p) first.add(0, p, 1, false);
      for (int32_t p = 30; p < 70; ++p) b.add(0, p, 0, false);  // positions j and j + 32 share key bytes; a block's end
      // Sequence 1 goes on at 140, past what its stage holds (to 135): the
      // host fills the device's stage with 128..139 as the CPU's cache holds them.
      for (int32_t p = 140; p < 146; ++p) b.add(0, p, 1, false);
      gpu::Stream s(*dev);
      std::vector<std::unique_ptr<DeviceKvStore>> kept;  // until the stream has run
      DeviceKvStore* d = nullptr;
      std::vector<float> k, v;
      for (const Batch* batch : {&first, &b}) {
        const int64_t n = batch->size();
        k = random_floats(static_cast<size_t>(n * kvd), rng), v = random_floats(static_cast<size_t>(n * kvd), rng);
        if (batch == &first && type == KvType::q4) k[5 * kvd + 3] = NAN;  // a group's NaN: skipped by its range, code 0
        auto next = std::make_unique<DeviceKvStore>(*dev, s, want, *batch, k, v);
        if (d) {  // the cache and stage the first batch left
          s.copy(d->kc, next->kc, {{0, 0, static_cast<size_t>(d->key_bytes)}});
          s.copy(d->vc, next->vc, {{0, 0, static_cast<size_t>(d->value_bytes)}});
          if (kv_side_type(type, 0) == KvType::q4)  // sequence 0 continues its group: its stage is the device's
            s.copy(d->stage, next->stage, {{0, 0, static_cast<size_t>(kvd * KvCache::kKeyGroup * 4)}});
        }
        d = kept.emplace_back(std::move(next)).get();
        for (int64_t t = 0; t < n; ++t) want.store(0, batch->seq[t], batch->pos[t], &k[t * kvd], &v[t * kvd]);
        gpu::kv_store(*dev, s, d->op(kvd, head_dim, type));
      }
      Batch all = first;  // every position: a group's earlier codes change with its range
      for (int64_t t = 0; t < b.size(); ++t) all.add(0, b.pos[t], b.seq[t], false);
      const int64_t n = all.size();
      s.download(d->kc, const_cast<uint8_t*>(got.key_pool(0)), static_cast<size_t>(d->key_bytes));
      s.download(d->vc, const_cast<uint8_t*>(got.value_pool(0)), static_cast<size_t>(d->value_bytes));
      s.finish();
      int64_t same = 0, total = 0;
      std::vector<float> w(static_cast<size_t>(head_dim)), g(w.size());
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < spec.n_head_kv; ++h)
          for (int side = 0; side < 2; ++side) {
            if (side == 0) want.key_head(0, all.seq[t], all.pos[t], h, w.data()), got.key_head(0, all.seq[t], all.pos[t], h, g.data());
            else want.value_head(0, all.seq[t], all.pos[t], h, w.data()), got.value_head(0, all.seq[t], all.pos[t], h, g.data());
            double err = 0, norm = 0;
            for (int64_t d = 0; d < head_dim; ++d) {
              err += (g[d] - w[d]) * (g[d] - w[d]), norm += w[d] * w[d];
              same += std::fabs(g[d] - w[d]) <= 5e-7f * std::fabs(w[d]), ++total;
            }
            ASSERT_LE(err, 1e-4 * norm) << kv_type_name(type) << " head_dim " << head_dim << " token " << t << " side " << side;
          }
      EXPECT_GE(same, total * 99 / 100) << kv_type_name(type) << " head_dim " << head_dim;
    }
}

}  // namespace
}  // namespace basalt

#else

TEST(GpuDevice, BuiltWithoutVulkan) {
  if (std::getenv("BASALT_REQUIRE_GPU")) FAIL() << "BASALT_REQUIRE_GPU is set, but this build has no Vulkan backend";
  GTEST_SKIP() << "this build has no Vulkan backend (BASALT_VULKAN off)";
}

#endif
