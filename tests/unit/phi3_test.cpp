// SPDX-License-Identifier: MIT
// Phi-3's hyper-parameters as llama.cpp's converter writes them into GGUF:
// LongRoPE's two factor tensors with the original context and the attention
// factor, partial rotary, the window. Its outputs are checked against
// llama.cpp and a numpy forward pass on synthetic models (forward.phi3_*),
// its HF folders and GPTQ checkpoints by hf.phi3_*, gptq.phi3_* and
// quantize.phi3_* (tests/python/).
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/graph/op_params.h"
#include "core/model/model_spec.h"
#include "tests/unit/gguf_builder.h"

namespace basalt {
namespace {

constexpr uint32_t kF32 = 0;

test::GgufBuilder phi3_keys() {  // Phi-4-mini's shape, fewer layers
  test::GgufBuilder g;
  g.kv_str("general.architecture", "phi3").kv_u32("phi3.block_count", 2);
  g.kv_u32("phi3.embedding_length", 3072).kv_u32("phi3.feed_forward_length", 8192);
  g.kv_u32("phi3.attention.head_count", 24).kv_u32("phi3.attention.head_count_kv", 8);
  g.kv_u32("phi3.context_length", 131072).kv_u32("phi3.rope.dimension_count", 96);
  return g;
}

std::string error_of(const test::GgufBuilder& g) {
  try {
    spec_from_gguf(GgufFile::from_memory(g.bytes(), "phi.gguf"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Phi3, SpecReadsLongRopeAndPartialRotary) {
  test::GgufBuilder g = phi3_keys();
  g.kv_u32("phi3.rope.scaling.original_context_length", 4096).kv_f32("phi3.rope.scaling.attn_factor", 1.19f);
  g.kv_u32("phi3.attention.sliding_window", 262144);
  g.tensor("rope_factors_long.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 8.0f)));
  g.tensor("rope_factors_short.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 1.5f)));
  const ModelSpec s = spec_from_gguf(GgufFile::from_memory(g.bytes()));
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.rope_dim, 96);
  EXPECT_EQ(s.rope_style, RopeStyle::neox);
  EXPECT_EQ(s.sliding_window, 0);  // past the context
  EXPECT_EQ(s.rope_long_context, 4096);
  EXPECT_FLOAT_EQ(s.rope_attn_factor, 1.19f);
  const float base = static_cast<float>(std::pow(10000.0, -2.0 / 96));  // pair 1, unscaled
  EXPECT_FLOAT_EQ(make_rope(24, s, 1e4f, 1, true, 4096).freqs[1], base / 1.5f);
  EXPECT_FLOAT_EQ(make_rope(24, s, 1e4f, 1, true, 8192).freqs[1], base / 8.0f);
  EXPECT_FLOAT_EQ(make_rope(24, s, 1e4f, 1, true, 8192).mscale, 1.19f);
}

TEST(Phi3, SpecReadsTheMini4kWindow) {
  test::GgufBuilder g = phi3_keys();
  g.kv_u32("phi3.attention.sliding_window", 2047);
  const ModelSpec s = spec_from_gguf(GgufFile::from_memory(g.bytes()));
  EXPECT_EQ(s.sliding_window, 2047);
  EXPECT_EQ(s.swa_period, 0);  // every layer
  EXPECT_TRUE(s.rope_long_factors.empty());
  EXPECT_FLOAT_EQ(s.rope_attn_factor, 1);
}

TEST(Phi3, BrokenLongRopeIsAnError) {
  test::GgufBuilder no_short = phi3_keys();
  no_short.kv_u32("phi3.rope.scaling.original_context_length", 4096);
  no_short.tensor("rope_factors_long.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 8.0f)));
  EXPECT_NE(error_of(no_short).find("rope_factors_long.weight without rope_factors_short.weight"), std::string::npos)
      << error_of(no_short);

  test::GgufBuilder no_context = phi3_keys();
  no_context.tensor("rope_factors_long.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 8.0f)));
  no_context.tensor("rope_factors_short.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 1.0f)));
  EXPECT_NE(error_of(no_context).find("need rope.scaling.original_context_length"), std::string::npos) << error_of(no_context);

  test::GgufBuilder wrong_size = phi3_keys();
  wrong_size.kv_u32("phi3.rope.scaling.original_context_length", 4096);
  wrong_size.tensor("rope_factors_long.weight", {64}, kF32, test::f32_bytes(std::vector<float>(64, 8.0f)));
  wrong_size.tensor("rope_factors_short.weight", {64}, kF32, test::f32_bytes(std::vector<float>(64, 1.0f)));
  EXPECT_NE(error_of(wrong_size).find("64 RoPE frequency factors for 48 pairs"), std::string::npos) << error_of(wrong_size);

  test::GgufBuilder negative = phi3_keys();
  negative.kv_u32("phi3.rope.scaling.original_context_length", 4096);
  negative.tensor("rope_factors_long.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, -2.0f)));
  negative.tensor("rope_factors_short.weight", {48}, kF32, test::f32_bytes(std::vector<float>(48, 1.0f)));
  EXPECT_NE(error_of(negative).find("a RoPE frequency factor of -2"), std::string::npos) << error_of(negative);
}

}  // namespace
}  // namespace basalt
