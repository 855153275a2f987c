// SPDX-License-Identifier: MIT
// The executor and session on a small synthetic model: chunked prefill, a
// batch holding several sequences, cache reuse and the context limit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/runtime/executor.h"
#include "core/runtime/session.h"
#include "cpu/isa.h"
#include "cpu/matmul.h"
#include "tests/unit/isa_testing.h"
#if defined(BASALT_VULKAN)
#include "gpu/stream.h"
#include "tests/unit/gpu_testing.h"
#endif
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { path_ = test::make_tiny_model("session"); }
  static std::string path_;
};
std::string SessionTest::path_;

std::vector<float> run_all(const Model& m, const std::vector<int32_t>& ids, int64_t ubatch) {
  KvCache kv(m.spec(), 64, 1);
  Executor ex(m, kv, ubatch);
  const int64_t V = m.spec().n_vocab;
  std::vector<float> out;
  for (size_t i = 0; i < ids.size(); i += static_cast<size_t>(ubatch)) {
    Batch b;
    for (size_t j = i; j < std::min(ids.size(), i + static_cast<size_t>(ubatch)); ++j)
      b.add(ids[j], static_cast<int32_t>(j), 0, true);
    const float* l = ex.run(b);
    out.insert(out.end(), l, l + b.size() * V);
  }
  return out;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;  // std::max would skip it
    worst = std::max(worst, d), scale = std::max(scale, std::fabs(double(b[i])));
  }
  return worst / scale;
}

// A model whose converted weights need more memory than the machine has is
// refused before anything is allocated, with the sizes in the message.
TEST_F(SessionTest, LoadRefusesAModelTheMemoryCannotHold) {
  ASSERT_EQ(setenv("BASALT_MEMORY_AVAILABLE", "4096", 1), 0);
  std::string msg;
  try {
    (void)Model::load(path_);
  } catch (const Error& e) {
    msg = e.what();
  }
  unsetenv("BASALT_MEMORY_AVAILABLE");
  EXPECT_NE(msg.find(path_ + ": converting its weights needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("and only 0 MiB of memory is available"), std::string::npos) << msg;
  EXPECT_NO_THROW((void)Model::load(path_));
}

TEST_F(SessionTest, ChunkedPrefillEqualsOneBatch) {
  auto m = Model::load(path_);
  std::vector<int32_t> ids = {1, 40, 41, 42, 100, 200, 300, 7, 8, 9, 10, 11, 12};
  auto whole = run_all(*m, ids, 16);
  for (int64_t ub : {1, 3, 5}) EXPECT_LT(max_rel_diff(run_all(*m, ids, ub), whole), 1e-5) << "ubatch " << ub;
}

// A prompt prefilled in one batch on AMX's tiles (from 16 tokens here) and in
// chunks of 5 (the AVX-512 kernel's, decode's) gives the same logits: a
// server's chunking, which follows its load, must not change a request's
// text. The matmuls round alike bit for bit (MatmulIsa.
// TokenAloneGivesTheBitsOfItsRowInABatch), the attention to 1e-12
// (AttentionIsa.ChunkedPrefillEqualsOneBatch).
#if defined(BASALT_X86)
TEST_F(SessionTest, PrefillOnTheTilesEqualsChunksBelowThem) {
  NEED_ISA(Isa::amx);
  auto m = Model::load(path_);
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 40; ++t) ids.push_back(1 + (t * 37) % 200);
  kernels::set_amx_min_tokens(16);
  const auto whole = run_all(*m, ids, 64), chunks = run_all(*m, ids, 5);
  kernels::set_amx_min_tokens(0);
  EXPECT_LT(max_rel_diff(chunks, whole), 1e-12);  // the tiles' old rounding: 6e-8
}
#endif

TEST_F(SessionTest, BatchOfSeveralSequencesEqualsSeparateRuns) {
  auto m = Model::load(path_);
  const int64_t V = m->spec().n_vocab;
  std::vector<int32_t> a = {1, 50, 60, 70, 80}, b = {1, 90, 91};
  auto ra = run_all(*m, a, 8), rb = run_all(*m, b, 8);
  KvCache kv(m->spec(), 64, 2);
  Executor ex(*m, kv, 16);
  Batch batch;  // interleaved tokens of two sequences
  for (size_t i = 0; i < 5; ++i) {
    batch.add(a[i], static_cast<int32_t>(i), 0, true);
    if (i < b.size()) batch.add(b[i], static_cast<int32_t>(i), 1, true);
  }
  const float* l = ex.run(batch);
  std::vector<float> ga, gb;
  for (int64_t r = 0; r < batch.size(); ++r) (batch.seq[r] == 0 ? ga : gb).insert((batch.seq[r] == 0 ? ga : gb).end(), l + r * V, l + (r + 1) * V);
  EXPECT_LT(max_rel_diff(ga, ra), 1e-5);
  EXPECT_LT(max_rel_diff(gb, rb), 1e-5);
}

TEST_F(SessionTest, GreedyTokensAreTheSameOnEveryIsa) {
  auto m = Model::load(path_);
  std::vector<std::vector<int32_t>> outs;
  const std::vector<Isa> isas = testutil::testable_isas();
  for (Isa isa : isas) {
    set_isa(isa);
    Session s(*m, 64, 32);
    GenerateOptions o;
    o.max_tokens = 20;
    o.sampling.temperature = 0;
    o.stop_at_end_of_generation = false;
    std::vector<int32_t> got;
    std::vector<int32_t> prompt{1};  // 24 tokens: prefill in one batch (AMX takes 16 and more)
    for (int32_t t = 40; t < 63; ++t) prompt.push_back(t);
    generate(s, prompt, o, [](std::string_view) { return true; }, &got);
    outs.push_back(got);
  }
  set_isa(best_isa());
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << isa_name(isas[i]) << " against scalar";
}

TEST_F(SessionTest, ReusesTheCachedPrefix) {
  auto m = Model::load(path_);
  Session s(*m, 64, 8);
  const float* l1 = s.set_context({1, 2, 3, 4, 5});
  std::vector<float> first(l1, l1 + m->spec().n_vocab);
  s.set_context({1, 2, 3, 4, 5, 6, 7});
  const float* l2 = s.set_context({1, 2, 3, 4, 5});  // shrink back: recomputes only the last token
  EXPECT_LT(max_rel_diff(std::vector<float>(l2, l2 + m->spec().n_vocab), first), 1e-5);
  EXPECT_EQ(s.tokens().size(), 5u);
}

TEST_F(SessionTest, ContextLimitIsAClearError) {
  auto m = Model::load(path_);
  Session s(*m, 8, 4);
  try {
    s.set_context(std::vector<int32_t>(9, 5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the context of 8"), std::string::npos) << e.what();
  }
  GenerateOptions o;
  o.max_tokens = 100;
  o.sampling.temperature = 0;
  o.stop_at_end_of_generation = false;
  GenerationStats st = generate(s, {1, 2, 3}, o, [](std::string_view) { return true; });
  EXPECT_EQ(st.stop_reason, "context full");
  EXPECT_EQ(s.tokens().size(), 8u);
}

// The cache's budget: a context that would hold more KV memory than it is an
// Error naming --kv-budget, before the position past it is computed.
TEST_F(SessionTest, KvBudgetIsAClearError) {
  auto m = Model::load(path_);
  const ModelSpec& sp = m->spec();
  Session s(*m, 256, 16);
  s.set_kv_budget(static_cast<size_t>(2 * sp.n_layer * KvCache::block_bytes(sp.n_head_kv, sp.head_dim, KvType::f16)));
  const std::vector<int32_t> block(KvCache::kBlock, 5);  // one block of positions: within the budget
  s.set_context(block);
  for (const auto& grow : {std::function<void()>([&] { s.append(7); }),
                           std::function<void()>([&] { s.set_context(std::vector<int32_t>(KvCache::kBlock + 1, 5)); })}) {
    try {
      grow();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--kv-budget"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.tokens().size(), block.size());  // nothing computed past the budget
  }
}

TEST_F(SessionTest, StopStringEndsAndIsNotEmitted) {
  auto m = Model::load(path_);
  GenerateOptions o;
  o.max_tokens = 30;
  o.sampling.temperature = 0;
  o.stop_at_end_of_generation = false;
  std::string full;
  {
    Session s(*m, 64, 8);
    generate(s, {1, 40, 41}, o, [&](std::string_view p) { return full += p, true; });
  }
  ASSERT_GE(full.size(), 4u);
  o.stop = {full.substr(full.size() / 2, 2)};
  std::string cut;
  Session s(*m, 64, 8);
  GenerationStats st = generate(s, {1, 40, 41}, o, [&](std::string_view p) { return cut += p, true; });
  EXPECT_EQ(st.stop_reason, "stop string");
  EXPECT_EQ(cut, full.substr(0, full.find(o.stop[0])));
}

TEST_F(SessionTest, BadTokensAndPositionsAreErrors) {
  auto m = Model::load(path_);
  KvCache kv(m->spec(), 16, 1);
  Executor ex(*m, kv, 4);
  Batch b;
  b.add(static_cast<int32_t>(m->spec().n_vocab), 0, 0, true);
  EXPECT_THROW(ex.run(b), Error);
  b.clear();
  b.add(1, 16, 0, true);
  EXPECT_THROW(ex.run(b), Error);
  b.clear();
  for (int i = 0; i < 5; ++i) b.add(1, i, 0, true);
  EXPECT_THROW(ex.run(b), Error);
}

// The quantizer's calibration runs one block at a time (Executor::run_layers):
// block by block from the embedding, the residual stream must be the one a
// whole run leaves, bit for bit (same kernels, same order).
TEST_F(SessionTest, RunningBlockByBlockEqualsAWholeRun) {
  auto m = Model::load(path_);
  const std::vector<int32_t> ids = {1, 40, 41, 42, 100, 200, 300, 7, 8};
  Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, i + 1 == ids.size());
  KvCache kv1(m->spec(), 64, 1), kv2(m->spec(), 64, 1);
  Executor whole(*m, kv1, 16), blocks(*m, kv2, 16);
  const int x = whole.graph().tokens_out;
  const int64_t E = m->spec().n_embd;
  whole.run(b);
  for (size_t t = 0; t < ids.size(); ++t) dequantize_row(m->token_embd(), ids[t], blocks.tensor(x) + t * E);
  size_t seen = 0;
  blocks.set_before_node([&](size_t, const RunContext&) { ++seen; });
  for (int l = 0; l < m->spec().n_layer; ++l) blocks.run_layers(b, l, l);
  EXPECT_EQ(0, std::memcmp(whole.tensor(x), blocks.tensor(x), sizeof(float) * ids.size() * E));
  EXPECT_EQ(seen + 4, whole.graph().nodes.size());  // each block node once; not embed, gather_out, the final norm, the output
  EXPECT_THROW(blocks.run_layers(b, 0, static_cast<int>(m->spec().n_layer)), Error);
}

// A sliding-window model past its window (an HF Mistral folder: window 40 on
// every other layer; or, `streaming`, the GGUF loaded with 4 attention sinks
// and a window of 40 on every layer): a Session's rings (runs of 16) must
// give the logits of a CPU cache that keeps every position, within `bound`
// (a resumed context's chunks start elsewhere than a fresh run's: other sums,
// not other values); going back in the context keeps what the rings still
// hold, else starts over, either way as a fresh run.
void check_rings(const std::string& name, const OffloadOptions& offload, double bound, bool streaming = false) {
  const std::string dir = test::temp_dir(name), gguf = dir + "/tiny.gguf", hf = dir + "/hf";
  const std::string py = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/";
  std::string out;
  ASSERT_EQ(test::run_command(py + "make_model.py --vocab tiny --type f32 --n-embd 64 --n-ff 128 --n-head 4 --n-head-kv 2 "
                              "--n-layer 2 --n-ctx 512 " + gguf + " 2>&1 && " + py + "make_hf_folder.py " + gguf + " " + hf +
                              " --sliding-window 40 --global-every 2 2>&1", &out), 0) << out;
  LoadOptions load;
  load.attention_sinks = 4, load.window = 40;
  auto m = streaming ? Model::load(gguf, load) : Model::load(hf);
  ASSERT_EQ(m->spec().sliding_window, 40);
  ASSERT_EQ(m->spec().attention_sinks, streaming ? 4 : 0);
  ASSERT_TRUE(m->spec().layer_windowed(0));
  ASSERT_EQ(m->spec().layer_windowed(1), streaming);
  if (streaming) {  // for models without a window of their own, and with one
    EXPECT_THROW(Model::load(hf, load), Error);
    load.window = 0;
    EXPECT_THROW(Model::load(gguf, load), Error);
  }
  const int64_t V = m->spec().n_vocab;
  std::vector<int32_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37 + 11) % 500);
  auto whole_cache = [&](const std::vector<int32_t>& tokens) {  // the last token's logits, every position kept
    KvCache kv(m->spec(), 400, 1);
    Executor ex(*m, kv, 16);
    const float* l = nullptr;
    for (size_t i = 0; i < tokens.size(); i += 16) {
      Batch b;
      for (size_t j = i; j < std::min(tokens.size(), i + 16); ++j) b.add(tokens[j], static_cast<int32_t>(j), 0, j + 1 == tokens.size());
      l = ex.run(b);
    }
    return std::vector<float>(l, l + V);
  };
  auto logits = [&](const float* l) { return std::vector<float>(l, l + V); };

  Session s(*m, 400, 16, offload);
  if (parse_placement(offload.gpu).any()) {
    ASSERT_NE(s.offload_plan().find("attention"), std::string::npos) << s.offload_plan();
  }
  EXPECT_LE(max_rel_diff(logits(s.set_context(ids)), whole_cache(ids)), bound);
  std::vector<int32_t> more = ids;
  for (int32_t t : {5, 6, 7}) {  // decode steps
    more.push_back(t);
    EXPECT_LE(max_rel_diff(logits(s.append(t)), whole_cache(more)), bound);
  }
  // Back to 290 (its window, 251-289, is still in the rings), then to 200
  // (let go of: from the start); back to 30 after going on to 300 again: the
  // attention sinks' block holds its window, so streaming keeps it.
  for (size_t keep : {size_t{290}, size_t{200}, size_t{0}, size_t{30}}) {
    if (keep == 0) {
      EXPECT_LE(max_rel_diff(logits(s.set_context(ids)), whole_cache(ids)), bound);
      continue;
    }
    std::vector<int32_t> edited(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep));
    edited.insert(edited.end(), {9, 10, 11});
    EXPECT_EQ(s.kept_prefix(edited), keep == 290 || (keep == 30 && streaming) ? keep : 0u);
    EXPECT_LE(max_rel_diff(logits(s.set_context(edited)), whole_cache(edited)), bound) << keep;
  }
}

TEST(SessionRings, WindowedModelPastItsWindowEqualsTheWholeCache) { check_rings("session_rings", {}, 1e-5); }
TEST(SessionRings, AttentionSinksWithAWindowEqualTheWholeCache) { check_rings("session_sinks", {}, 1e-5, true); }

#if defined(BASALT_VULKAN)
// The same with attention on the GPU (lavapipe in CI): its copy of the cache
// has the rings too (the backend's second kind of block table).
TEST(GpuRings, WindowedModelPastItsWindowEqualsTheWholeCache) {
  NEED_DEVICE(dev);
  (void)dev;
  OffloadOptions offload;
  offload.gpu = "attn";
  check_rings("gpu_rings", offload, 1e-4);
}

// And attention sinks (--attention-sinks 4 --window 40) on the GPU: the shader
// reads the sinks' blocks before the window's.
TEST(GpuRings, AttentionSinksWithAWindowEqualTheWholeCache) {
  NEED_DEVICE(dev);
  (void)dev;
  OffloadOptions offload;
  offload.gpu = "attn";
  check_rings("gpu_sinks", offload, 1e-4, true);
}

// A synthetic model with a tiny vocabulary (make_model.py ARGS), or nullptr and a failure.
std::unique_ptr<Model> small_model(const std::string& name, const std::string& args) {
  const std::string gguf = test::temp_dir(name) + "/m.gguf";
  std::string out;
  if (test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_model.py --vocab tiny " +
                            "--n-ctx 512 " + args + " " + gguf + " 2>&1", &out) != 0) {
    ADD_FAILURE() << out;
    return nullptr;
  }
  return Model::load(gguf);
}

// With the whole model on the GPU a decode step is one submission and one
// wait (for the logits): the graph reuses its tensors in every layer, and a
// wait per reuse cost a real GPU (an H200) 15 ms a token where lavapipe
// showed nothing.
TEST(GpuSubmissions, ADecodeStepWaitsOnceWithTheWholeModelOnTheGpu) {
  NEED_DEVICE(dev);
  (void)dev;
  auto m = small_model("gpu_submissions", "--type q4_0 --n-embd 256 --n-ff 512 --n-head 4 --n-head-kv 2 --n-layer 3");
  ASSERT_TRUE(m);
  OffloadOptions gpu;
  gpu.gpu = "all";
  Session s(*m, 256, 64, gpu);
  ASSERT_NE(s.offload_plan().find("attention of 3 layers"), std::string::npos) << s.offload_plan();
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % 500);
  s.set_context(ids);
  const uint64_t before = gpu::Stream::submissions();
  for (int32_t t : {5, 6, 7, 8}) s.append(t);
  EXPECT_EQ(gpu::Stream::submissions() - before, 4u);
}

// 4-bit caches with attention on the GPU: the device stores and reads its own
// copy (keys per channel through its own stage, across chunks and decode
// steps; rotated values; k8v4's two block sizes), whose logits must be the CPU
// session's within the rounding of a rare code (GLSL's division), and for
// k8v4 within the CPU's int8 queries against its q8 keys (cpu/attention.h;
// measured 1.3e-3 where the rest is <1e-3). A wrong layout gives ~1.
TEST(GpuQ4Cache, SessionMatchesTheCpu) {
  NEED_DEVICE(dev);
  (void)dev;
  auto m = small_model("gpu_q4", "--type f32 --n-embd 256 --n-ff 256 --n-head 4 --n-head-kv 2 --n-layer 2");
  ASSERT_TRUE(m);
  const int64_t V = m->spec().n_vocab;
  std::vector<int32_t> ids;
  for (int i = 0; i < 150; ++i) ids.push_back((i * 37 + 11) % 500);
  OffloadOptions gpu;
  gpu.gpu = "attn";
  for (KvType type : {KvType::q4, KvType::k8v4}) {
    Session cpu_s(*m, 256, 64, {}, type), gpu_s(*m, 256, 64, gpu, type);
    ASSERT_NE(gpu_s.offload_plan().find("attention"), std::string::npos) << gpu_s.offload_plan();
    const float* c = cpu_s.set_context(ids);
    std::vector<float> want(c, c + V);
    const float* g = gpu_s.set_context(ids);
    const double bound = type == KvType::k8v4 ? 3e-3 : 1e-3;
    EXPECT_LE(max_rel_diff(std::vector<float>(g, g + V), want), bound) << kv_type_name(type);
    for (int32_t t : {5, 6}) {
      c = cpu_s.append(t);
      want.assign(c, c + V);
      g = gpu_s.append(t);
      EXPECT_LE(max_rel_diff(std::vector<float>(g, g + V), want), bound) << kv_type_name(type);
    }
  }
}
#endif

}  // namespace
}  // namespace basalt
