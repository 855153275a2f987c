// SPDX-License-Identifier: MIT
// The golden-token tests on the default model and Gemma 3 against llama.cpp
// (tests/data/greedy/*.json, made by tests/python/make_greedy_refs.py).
//
// llama.cpp's greedy tokens are fed back through basalt (teacher forcing).
// At every step llama.cpp's token must be a near-tie at worst in basalt's own
// logits (within kMaxRegret of basalt's best), and basalt must pick exactly
// llama.cpp's token at kMinAgreement of the steps. Why not "identical for 32
// tokens": two int8-activation engines round differently, and this 30-layer
// Q4_1 model amplifies it; llama.cpp itself, with flash attention on versus
// off, picks a different token at 13 of these 399 steps (margins up to 0.34).
// basalt's logits are as close to an exact float64 forward pass (NMSE ~1e-3)
// as llama.cpp's are.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "core/runtime/executor.h"
#include "core/runtime/session.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

constexpr float kMaxRegret = 1.0f;
constexpr double kMinAgreement = 0.95;
// Below this lead of its own top logit, basalt's pick may flip between a one-batch
// run and token-by-token decoding (other summation orders, AMX against AVX-512).
constexpr float kOwnTie = 0.05f;

// The cases of tests/data/greedy/NAME.json on the model at path.
void expect_llama_cpp_greedy(const std::string& name, const std::string& path) {
  std::ifstream f(test::data_path("greedy/" + name + ".json"));
  ASSERT_TRUE(f) << "missing tests/data/greedy/" << name << ".json";
  const nlohmann::json ref = nlohmann::json::parse(f);
  const bool add_bos = ref.value("add_bos", false);
  auto model = Model::load(path);
  const int64_t V = model->spec().n_vocab;
  int steps = 0, agree = 0;
  float worst_regret = 0;
  for (const auto& c : ref["cases"]) {
    SCOPED_TRACE(c["kind"].get<std::string>() + ": " + c["prompt"].get<std::string>());
    const auto prompt = model->tokenizer().encode(c["text"].get<std::string>(), add_bos, true);
    ASSERT_EQ(prompt, c["prompt_ids"].get<std::vector<int32_t>>());
    const auto expected = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto margins = c["top2_margins"].get<std::vector<float>>();

    std::vector<int32_t> ids = prompt;
    ids.insert(ids.end(), expected.begin(), expected.end() - 1);
    KvCache kv(model->spec(), static_cast<int64_t>(ids.size()), 1);
    Executor ex(*model, kv, static_cast<int64_t>(ids.size()));
    Batch b;
    for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, i + 1 >= prompt.size());
    const float* logits = ex.run(b);
    size_t settled = expected.size();  // steps before basalt's first pick other than llama.cpp's or a near tie of its own
    for (size_t i = 0; i < expected.size(); ++i, ++steps) {
      const float* l = logits + i * V;
      const int32_t choice = static_cast<int32_t>(std::max_element(l, l + V) - l);
      float second = -INFINITY;
      for (int64_t v = 0; v < V; ++v)
        if (v != choice) second = std::max(second, l[v]);
      if (settled == expected.size() && (choice != expected[i] || l[choice] - second < kOwnTie)) settled = i;
      const float regret = l[choice] - l[expected[i]];
      worst_regret = std::max(worst_regret, regret);
      agree += choice == expected[i];
      EXPECT_LE(regret, kMaxRegret) << "step " << i << ": basalt picks " << choice << ", llama.cpp " << expected[i]
                                    << " (llama.cpp's lead " << margins[i] << ")";
    }
    // Free-running greedy (prefill, then one token at a time through the KV
    // cache) must follow llama.cpp's tokens as long as the teacher-forced run
    // above picked them with a clear lead.
    Session s(*model, 512, 512);
    GenerateOptions o;
    o.max_tokens = static_cast<int32_t>(expected.size());
    o.sampling.temperature = 0;
    o.stop_at_end_of_generation = false;
    std::vector<int32_t> got;
    generate(s, prompt, o, [](std::string_view) { return true; }, &got);
    size_t same = 0;
    while (same < got.size() && same < expected.size() && got[same] == expected[same]) ++same;
    EXPECT_GE(same, settled) << "free-running output leaves llama.cpp's at step " << same
                             << " though the one-batch run picked its token there with a clear lead";
    std::printf("[ info ] free-running: the first %zu of %zu tokens equal llama.cpp's (settled: %zu)\n", same,
                expected.size(), settled);
  }
  std::printf("[ info ] teacher-forced: %d of %d steps pick llama.cpp's token; largest regret %.3f\n", agree, steps,
              worst_regret);
  EXPECT_GE(agree, kMinAgreement * steps);
}

TEST(Greedy, MatchesLlamaCppOnSmolLM2) { expect_llama_cpp_greedy("smollm2", test::smollm2_path()); }

// Gemma 3: per-head Q/K norms, post norms, GeGLU, local and global layers
// (each prompt and its 48 tokens lie inside the 512-token window).
TEST(Greedy, MatchesLlamaCppOnGemma3) { expect_llama_cpp_greedy("gemma3", test::gemma3_path()); }

}  // namespace
}  // namespace basalt
