// SPDX-License-Identifier: MIT
// Gemma 2's hyper-parameters as llama.cpp reads them from GGUF: its defaults
// where a file says nothing, and the file's values where it does. Its outputs
// are checked against llama.cpp and a numpy forward pass on synthetic models
// (forward.gemma2_*, tests/python/forward_cases.py), on the CPU and the GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "core/model/model_spec.h"
#include "tests/unit/gguf_builder.h"

namespace basalt {
namespace {

test::GgufBuilder gemma2_keys(uint32_t n_layer) {
  test::GgufBuilder g;
  g.kv_str("general.architecture", "gemma2").kv_u32("gemma2.block_count", n_layer);
  g.kv_u32("gemma2.embedding_length", 2304).kv_u32("gemma2.feed_forward_length", 9216);
  g.kv_u32("gemma2.attention.head_count", 8).kv_u32("gemma2.attention.head_count_kv", 4);
  g.kv_u32("gemma2.attention.key_length", 256).kv_u32("gemma2.context_length", 8192);
  return g;
}

TEST(Gemma2, SpecTakesLlamaCppsDefaults) {
  const ModelSpec s = spec_from_gguf(GgufFile::from_memory(gemma2_keys(26).bytes()));
  EXPECT_EQ(s.sliding_window, 4096);
  EXPECT_EQ(s.swa_period, 2);
  for (int64_t i = 0; i < s.n_layer; ++i) EXPECT_EQ(s.layer_windowed(i), i % 2 == 0) << "layer " << i;
  EXPECT_EQ(s.attn_softcap, 50.0f);
  EXPECT_EQ(s.final_softcap, 30.0f);
  EXPECT_EQ(s.rope_style, RopeStyle::neox);
  EXPECT_EQ(s.rope_theta_swa, 0.0f);  // one RoPE base for every layer
  EXPECT_FLOAT_EQ(s.query_scale(), 1.0f / 16);  // query_pre_attn_scalar = head_dim 256
}

TEST(Gemma2, SpecReadsTheFilesValues) {
  test::GgufBuilder g = gemma2_keys(46);  // the 27B's depth: its queries scaled by n_embd / n_head
  g.kv_u32("gemma2.attention.sliding_window", 1024);
  g.kv_f32("gemma2.attn_logit_softcapping", 20.0f).kv_f32("gemma2.final_logit_softcapping", 0.0f);
  const ModelSpec s = spec_from_gguf(GgufFile::from_memory(g.bytes()));
  EXPECT_EQ(s.sliding_window, 1024);
  EXPECT_EQ(s.attn_softcap, 20.0f);
  EXPECT_EQ(s.final_softcap, 0.0f);  // 0: none
  EXPECT_FLOAT_EQ(s.query_scale(), 1.0f / std::sqrt(2304.0f / 8));
}

TEST(Gemma2, NegativeSoftCapIsAnError) {
  test::GgufBuilder g = gemma2_keys(26);
  g.kv_f32("gemma2.attn_logit_softcapping", -1.0f);
  try {
    spec_from_gguf(GgufFile::from_memory(g.bytes(), "bad.gguf"));
    FAIL() << "a negative soft-cap was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("soft-capping"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace basalt
