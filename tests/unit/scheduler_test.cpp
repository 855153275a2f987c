// SPDX-License-Identifier: MIT
// The batching scheduler without HTTP: batched greedy output equals each
// request run alone, with the prefix cache and with preemption too; a long
// prompt arriving during decodes is prefilled in chunks within the step
// budget and delays no decode by more than a step; the bounded queue,
// admission, cancellation, and every KV block back in the pool at the end.
#include "core/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/runtime/executor.h"
#include "core/runtime/session.h"
#include "tests/unit/test_paths.h"
#if defined(BASALT_VULKAN)
#include "tests/unit/gpu_testing.h"
#endif

namespace basalt {
namespace {

GenerateOptions greedy(int32_t max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = 0;
  o.stop_at_end_of_generation = false;
  return o;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> id(1, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = id(rng);
  return p;
}

struct Outcome {
  GenerationStats stats;
  std::string text;
  int64_t done_at_step = -1;
};

// Runs the prompts through one scheduler, all submitted at once; returns each one's text and stats.
std::vector<Outcome> run_all(Scheduler& sched, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt) {
  std::vector<Outcome> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ScheduledRequest r;
    r.prompt = prompts[i];
    r.options = opt;
    r.on_text = [&out, i](std::string_view t) { return out[i].text += t, true; };
    r.on_done = [&out, i](const GenerationStats& st) { out[i].stats = st; };
    sched.submit(std::move(r));
  }
  sched.run_until_idle();
  return out;
}

// The options the tests vary; the rest at their defaults.
SchedulerOptions options(int max_running, int64_t slot_ctx, int64_t step_tokens = SchedulerOptions{}.step_tokens) {
  SchedulerOptions so;
  so.max_running = max_running;
  so.slot_ctx = slot_ctx;
  so.step_tokens = step_tokens;
  return so;
}

// Each prompt's text generated alone, through a Session.
std::vector<std::string> texts_alone(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerateOptions& opt) {
  std::vector<std::string> texts;
  for (const auto& p : prompts) {
    Session s(model, 512, 512);
    std::string text;
    generate(s, p, opt, [&](std::string_view t) { return text += t, true; });
    texts.push_back(text);
  }
  return texts;
}

// Every block is free, or held by the prefix cache alone.
void expect_blocks_returned(const Scheduler& sched) {
  const KvCache& kv = sched.kv();
  int64_t cached_only = 0;
  for (int32_t b = 0; b < kv.n_blocks(); ++b) {
    EXPECT_LE(kv.refs(b), 1) << "block " << b << " still held by a request";
    cached_only += kv.refs(b);
  }
  EXPECT_EQ(kv.free_blocks() + cached_only, kv.n_blocks());
  EXPECT_EQ(cached_only, sched.stats().kv_cached_blocks);
  for (int seq = 0; seq < kv.n_seq(); ++seq) EXPECT_EQ(kv.capacity(seq), 0) << "sequence " << seq;
  int64_t cached_rings = 0;  // ring blocks: only the cache's are left, on blocks it holds
  for (int32_t b = 0; b < kv.n_blocks(); ++b) {
    EXPECT_LE(kv.ring_refs(b), kv.refs(b)) << "block " << b;
    cached_rings += kv.has_ring(b);
  }
  EXPECT_EQ(kv.free_ring_blocks() + cached_rings, kv.ring_pool_blocks());
}

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(test::make_tiny_model("scheduler")); }
  static void TearDownTestSuite() { model_.reset(); }
  // n prompts of random tokens, of first_len tokens and then step more each.
  static std::vector<std::vector<int32_t>> random_prompts(uint32_t seed, int n, int64_t first_len, int64_t step) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < n; ++i)
      prompts.push_back(random_prompt(rng, first_len + step * i, static_cast<int32_t>(model_->tokenizer().n_vocab())));
    return prompts;
  }
  static std::unique_ptr<Model> model_;
};
std::unique_ptr<Model> SchedulerTest::model_;

// 16 requests of different prompt lengths, four at a time in 64-token steps,
// give each the tokens it gets alone (SmolLM2, greedy).
// 16 requests through a scheduler running 4 at a time give each the text it gets alone (SmolLM2).
void expect_concurrent_equals_each_alone(const GenerateOptions& opt) {
  auto model = Model::load(test::smollm2_path());
  const Tokenizer& tok = model->tokenizer();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    std::string text = "Question " + std::to_string(i) + ": what is " + std::to_string(7 * i + 3) + " plus " +
                       std::to_string(i * i) + "? Explain";
    for (int k = 0; k < i % 5; ++k) text += " step by step, with care and in plain words";
    prompts.push_back(tok.encode(text, true, false));
  }
  const std::vector<std::string> alone = texts_alone(*model, prompts, opt);
  Scheduler sched(*model, options(4, 512, 64));
  const std::vector<Outcome> out = run_all(sched, prompts, opt);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out[i].stats.stop_reason, "length") << "request " << i;
    EXPECT_EQ(out[i].stats.n_generated, 24) << "request " << i;
    EXPECT_EQ(out[i].text, alone[i]) << "request " << i << " batched differs from alone";
  }
}

TEST(SchedulerModel, ConcurrentGreedyEqualsEachAlone) { expect_concurrent_equals_each_alone(greedy(24)); }

// Sampled (the default top-k, top-p, min-p at temperature 0.8, one seed): the
// step's samplers run on the engine's threads, each request's on its own logits
// row and its own random stream, so each request draws what it draws alone.
TEST(SchedulerModel, ConcurrentSampledEqualsEachAlone) {
  GenerateOptions opt = greedy(24);
  opt.sampling = SamplingParams{};
  opt.sampling.seed = 42;
  expect_concurrent_equals_each_alone(opt);
}

// Requests that share a long system prompt: with the prefix cache, all but
// the first take its blocks instead of computing them; with a pool too
// small for them all, requests are preempted and recomputed. Either way each
// gets the tokens it gets alone (SmolLM2, greedy).
TEST(SchedulerModel, PrefixCacheAndPreemptionKeepGreedyOutput) {
  auto model = Model::load(test::smollm2_path());
  const Tokenizer& tok = model->tokenizer();
  std::string system = "You are a careful assistant for a library. Answer in plain words, cite the shelf, and say when you "
                       "do not know. The library opens at nine and closes at six; the reading room is on the second floor; "
                       "rare books need a librarian. Patrons may borrow up to five books for three weeks. Late books cost ten "
                       "cents a day, lost books their price. Children under twelve come with an adult. The catalogue is on the "
                       "computers by the door; maps of the shelves hang beside the stairs. Quiet study rooms can be booked at the "
                       "front desk for two hours at a time, and the printers on the ground floor take coins and cards. Food stays "
                       "outside; water in a closed bottle is fine. Be brief and kind.";
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i)
    prompts.push_back(tok.encode(system + " Question " + std::to_string(i) + ": where are the books on " +
                                     std::vector<std::string>{"birds", "ships", "rivers", "stars", "bread", "glass"}[i] + "?",
                                 true, false));
  ASSERT_GE(prompts[0].size(), 2 * KvCache::kBlock);  // two shared blocks at least
  const GenerateOptions opt = greedy(40);
  const std::vector<std::string> alone = texts_alone(*model, prompts, opt);

  SchedulerOptions so = options(3, 512, 64);
  {
    Scheduler sched(*model, so);
    const std::vector<Outcome> out = run_all(sched, prompts, opt);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out[i].text, alone[i]) << "request " << i << ", prefix cache";
    const SchedulerStats st = sched.stats();
    EXPECT_GE(st.prefix_hits, 3);  // the first three start together; the others find the blocks
    EXPECT_GE(st.prefix_hit_tokens, 3 * 2 * KvCache::kBlock);
    expect_blocks_returned(sched);
  }
  so.kv_blocks = 6;  // each request needs 3 or 4 blocks: three at once cannot all fit
  so.prefix_cache = false;
  {
    Scheduler sched(*model, so);
    const std::vector<Outcome> out = run_all(sched, prompts, opt);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out[i].text, alone[i]) << "request " << i << ", preempted";
      EXPECT_EQ(out[i].stats.n_generated, 40) << "request " << i;
    }
    EXPECT_GT(sched.stats().preemptions, 0);
    expect_blocks_returned(sched);
  }
}

// A pool of four blocks for four requests of three blocks each: they are
// preempted again and again, every one completes with the output it gets
// alone, and every block comes back.
TEST_F(SchedulerTest, TinyPoolPreemptsAndEveryRequestCompletes) {
  const auto prompts = random_prompts(3, 4, 70, 5);
  const GenerateOptions opt = greedy(50);
  SchedulerOptions so = options(1, 192, 32);
  so.prefix_cache = false;
  std::vector<Outcome> alone;
  {
    Scheduler sched(*model_, so);
    alone = run_all(sched, prompts, opt);
    EXPECT_EQ(sched.stats().preemptions, 0);
  }
  for (bool prefix : {false, true}) {
    so.max_running = 4;
    so.kv_blocks = 4;
    so.prefix_cache = prefix;
    Scheduler sched(*model_, so);
    const std::vector<Outcome> out = run_all(sched, prompts, opt);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(out[i].stats.n_generated, 50) << "request " << i;
      EXPECT_EQ(out[i].text, alone[i].text) << "request " << i << (prefix ? ", prefix cache" : "");
    }
    EXPECT_GT(sched.stats().preemptions, 0);
    expect_blocks_returned(sched);
  }
}

// A windowed model (the tiny one with a window of 40 and 4 attention sinks)
// keeps rings (3 blocks and the sinks' for 32-token steps, where a request
// reaches 270 positions), with the prefix cache off and on: each request's
// greedy text is the one it gets where steps are too long for rings (every
// position kept). With the prefix cache, the requests after the first take
// the blocks of their shared 150-token system prompt and, from the cache's
// ring blocks, the window before its end.
TEST_F(SchedulerTest, WindowedModelRingsGiveTheSameText) {
  LoadOptions load;
  load.attention_sinks = 4, load.window = 40;
  const auto windowed = Model::load(test::make_tiny_model("scheduler_rings"), load);
  std::mt19937 rng(5);
  const int32_t vocab = static_cast<int32_t>(windowed->tokenizer().n_vocab());
  const std::vector<int32_t> system = random_prompt(rng, 150, vocab);
  std::vector<std::vector<int32_t>> first{system}, rest;
  for (int i = 0; i < 4; ++i) {
    rest.push_back(system);
    const std::vector<int32_t> question = random_prompt(rng, 4 + 7 * i, vocab);
    rest.back().insert(rest.back().end(), question.begin(), question.end());
  }
  rest.push_back(random_prompt(rng, 60, vocab));  // and one that shares nothing
  const GenerateOptions opt = greedy(60);
  SchedulerOptions whole = options(3, 512, 512);  // a ring would need more blocks than a context
  whole.prefix_cache = false;
  Scheduler kept(*windowed, whole);
  ASSERT_EQ(kept.kv().ring_blocks(), 0);
  const std::vector<Outcome> want_first = run_all(kept, first, opt), want = run_all(kept, rest, opt);
  for (bool prefix : {false, true}) {
    SchedulerOptions so = options(3, 512, 32);
    so.prefix_cache = prefix;
    Scheduler ringed(*windowed, so);
    ASSERT_EQ(ringed.kv().ring_blocks(), 1 + 3);
    EXPECT_EQ(ringed.kv().ring_pool_blocks(), (prefix ? 2 : 1) * 3 * (1 + 3));  // a ring per request, twice with the cache
    if (!prefix) {
      EXPECT_EQ(ringed.kv_bytes() * 2, kept.kv_bytes());  // every layer windowed: 12 blocks, not 24
    }
    EXPECT_EQ(run_all(ringed, first, opt)[0].text, want_first[0].text);
    const std::vector<Outcome> got = run_all(ringed, rest, opt);
    for (size_t i = 0; i < rest.size(); ++i) {
      EXPECT_EQ(got[i].stats.n_generated, 60) << "request " << i;
      EXPECT_EQ(got[i].text, want[i].text) << "request " << i << (prefix ? ", prefix cache" : "");
    }
    if (prefix) {
      EXPECT_EQ(ringed.stats().prefix_hits, 4);
      EXPECT_GE(ringed.stats().prefix_hit_tokens, 4 * 150);  // whole blocks and a copy of the third
    }
    expect_blocks_returned(ringed);
  }
}

// A prompt that starts with an earlier one's full blocks computes only the
// rest; one that shares part of a block (a full one, or an ended request's
// last) takes a copy of it; a prompt that is all cached still computes its
// last token.
TEST_F(SchedulerTest, SharedPrefixTakesCachedBlocks) {
  std::mt19937 rng(4);
  const int32_t vocab = static_cast<int32_t>(model_->tokenizer().n_vocab());
  const std::vector<int32_t> first = random_prompt(rng, 200, vocab);
  std::vector<int32_t> longer = first;
  for (int i = 0; i < 10; ++i) longer.push_back(5 + i);
  const std::vector<int32_t> exact(first.begin(), first.begin() + 3 * KvCache::kBlock);
  const SchedulerOptions so = options(2, 512);
  Scheduler sched(*model_, so);
  Scheduler plain(*model_, [&] { SchedulerOptions p = so; p.prefix_cache = false; return p; }());
  const GenerateOptions opt = greedy(8);
  auto one = [&](Scheduler& s, const std::vector<int32_t>& prompt) { return run_all(s, {prompt}, opt)[0]; };
  one(sched, first);
  EXPECT_EQ(sched.stats().prefix_hits, 0);
  const Outcome a = one(sched, longer);
  EXPECT_EQ(sched.stats().prefix_hits, 1);
  // Three blocks, and a copy of the last one `first` filled in part: all of `first`'s prompt.
  EXPECT_EQ(sched.stats().prefix_hit_tokens, 200);
  EXPECT_EQ(a.stats.n_prefilled, 10);
  EXPECT_EQ(a.stats.n_prompt, 210);
  EXPECT_EQ(a.text, one(plain, longer).text);
  const Outcome b = one(sched, exact);
  // Two more blocks, and a copy of the third but for the last token, which is computed.
  EXPECT_EQ(sched.stats().prefix_hit_tokens, 200 + 3 * KvCache::kBlock - 1);
  EXPECT_EQ(b.stats.n_prefilled, 1);
  EXPECT_EQ(b.text, one(plain, exact).text);
  // 150 tokens in common, then others: two blocks, and 22 positions of a copy of the third.
  std::vector<int32_t> forked(first.begin(), first.begin() + 150);
  for (int i = 0; i < 30; ++i) forked.push_back(7 + i);
  const Outcome c = one(sched, forked);
  EXPECT_EQ(sched.stats().prefix_hit_tokens, 200 + 3 * KvCache::kBlock - 1 + 150);
  EXPECT_EQ(c.stats.n_prefilled, 30);
  EXPECT_EQ(c.text, one(plain, forked).text);
  expect_blocks_returned(sched);
  expect_blocks_returned(plain);
}

// Requests of one prompt submitted together (a request's n choices): the
// first computes it, the others wait for its blocks in the prefix cache
// rather than computing the same prompt beside it, and generate the same.
TEST_F(SchedulerTest, ChoicesOfOnePromptComputeItOnce) {
  std::mt19937 rng(6);
  const std::vector<int32_t> prompt = random_prompt(rng, 200, static_cast<int32_t>(model_->tokenizer().n_vocab()));
  const SchedulerOptions so = options(3, 512);
  Scheduler sched(*model_, so);
  Scheduler plain(*model_, [&] { SchedulerOptions p = so; p.prefix_cache = false; return p; }());
  const std::vector<Outcome> out = run_all(sched, {prompt, prompt, prompt}, greedy(8));
  const std::vector<Outcome> alone = run_all(plain, {prompt, prompt, prompt}, greedy(8));
  EXPECT_EQ(out[0].stats.n_prefilled, 200);
  for (int i : {1, 2}) {
    // Three blocks from the cache; the fourth, which the first is still writing, computed.
    EXPECT_EQ(out[i].stats.n_prefilled, 200 - 3 * KvCache::kBlock) << i;
    EXPECT_EQ(out[i].text, alone[i].text) << i;
    EXPECT_EQ(alone[i].stats.n_prefilled, 200) << i;
  }
  EXPECT_EQ(out[0].text, alone[0].text);
  expect_blocks_returned(sched);
  expect_blocks_returned(plain);
}

// The copy of a partly shared block is made when the pool holds nothing but
// cached blocks too: the least recently used one is evicted for it (before,
// the copy was skipped and its tokens computed again: a busy server, whose
// pool is always full of cached blocks, lost every partial match).
TEST_F(SchedulerTest, SharedPrefixIsCopiedWhenThePoolIsFullOfCachedBlocks) {
  std::mt19937 rng(5);
  const int32_t vocab = static_cast<int32_t>(model_->tokenizer().n_vocab());
  SchedulerOptions so = options(1, 512);
  so.kv_blocks = 8;
  Scheduler sched(*model_, so);
  const GenerateOptions opt = greedy(8);
  auto one = [&](const std::vector<int32_t>& prompt) { return run_all(sched, {prompt}, opt)[0]; };
  one(random_prompt(rng, 200, vocab));  // two others fill the pool with cached blocks
  one(random_prompt(rng, 200, vocab));
  const std::vector<int32_t> first = random_prompt(rng, 200, vocab);
  one(first);
  EXPECT_EQ(sched.stats().kv_free_blocks, 0);
  std::vector<int32_t> longer = first;
  for (int i = 0; i < 10; ++i) longer.push_back(5 + i);
  const int64_t hit_before = sched.stats().prefix_hit_tokens;
  const Outcome a = one(longer);
  EXPECT_EQ(sched.stats().prefix_hit_tokens - hit_before, 200);  // three blocks and a copy of the fourth
  EXPECT_EQ(a.stats.n_prefilled, 10);
  expect_blocks_returned(sched);
}

// A scored prompt (the completions API's echo) gets the logprob of each of
// its tokens after the first, equal to the log-softmax of logits computed
// for the whole prompt at once; over several steps (64 rows a step at most)
// and beside another request, whose text is the same as alone.
TEST_F(SchedulerTest, PromptLogprobsAreThoseOfTheWholePromptsLogits) {
  std::mt19937 rng(8);
  const int32_t vocab = static_cast<int32_t>(model_->tokenizer().n_vocab());
  const std::vector<int32_t> prompt = random_prompt(rng, 150, vocab), other = random_prompt(rng, 40, vocab);
  // The reference: every position's logits in one pass.
  std::vector<float> all;
  {
    KvCache kv(model_->spec(), 256, 1);
    Executor ex(*model_, kv, 256);
    Batch b;
    for (size_t j = 0; j < prompt.size(); ++j) b.add(prompt[j], static_cast<int32_t>(j), 0, true);
    const float* l = ex.run(b);
    all.assign(l, l + prompt.size() * model_->spec().n_vocab);
  }
  const GenerateOptions opt = greedy(6);
  const std::string other_alone = [&] {
    Scheduler sched(*model_, options(2, 512));
    return run_all(sched, {other}, opt)[0].text;
  }();
  Scheduler sched(*model_, options(2, 512, 100));
  std::vector<TokenLogprob> got;
  std::string other_text;
  ScheduledRequest r;
  r.prompt = prompt;
  r.options = opt;
  r.prompt_logprobs = 3;
  r.on_prompt_logprob = [&](const TokenLogprob& t) { got.push_back(t); };
  sched.submit(std::move(r));
  ScheduledRequest o;
  o.prompt = other;
  o.options = opt;
  o.on_text = [&](std::string_view t) { return other_text += t, true; };
  sched.submit(std::move(o));
  sched.run_until_idle();
  ASSERT_EQ(got.size(), prompt.size() - 1);
  const int64_t V = model_->spec().n_vocab;
  for (size_t j = 0; j + 1 < prompt.size(); ++j) {
    const TokenLogprob want = token_logprob(all.data() + j * V, V, prompt[j + 1], 3);
    EXPECT_EQ(got[j].id, prompt[j + 1]) << j;
    EXPECT_NEAR(got[j].logprob, want.logprob, 2e-3) << "position " << j;
    ASSERT_EQ(got[j].top.size(), 3u);
    EXPECT_EQ(got[j].top[0].first, want.top[0].first) << "position " << j;
  }
  EXPECT_EQ(other_text, other_alone);
  expect_blocks_returned(sched);
}

#if defined(BASALT_VULKAN)
// The same under --gpu attn: the Vulkan attention stores and reads the pool
// through the batch's block tables (several sequences a batch, tables
// interleaved by preemption); its text equals the CPU's.
TEST_F(SchedulerTest, GpuAttentionReadsThroughBlockTables) {
  NEED_DEVICE(dev);
  (void)dev;
  const auto prompts = random_prompts(6, 4, 90, 7);
  const GenerateOptions opt = greedy(40);
  SchedulerOptions so = options(4, 192, 32);
  so.kv_blocks = 6;
  std::vector<Outcome> cpu;
  {
    Scheduler sched(*model_, so);
    cpu = run_all(sched, prompts, opt);
  }
  so.offload.gpu = "attn";
  Scheduler sched(*model_, so);
  const std::vector<Outcome> gpu = run_all(sched, prompts, opt);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(gpu[i].stats.n_generated, 40) << "request " << i;
    EXPECT_EQ(gpu[i].text, cpu[i].text) << "request " << i;
  }
  EXPECT_GT(sched.stats().preemptions, 0);
  expect_blocks_returned(sched);
}

// Prompts sharing 100, 130 and 160 tokens of an earlier one's blocks under
// --gpu attn: the device's copy of the cache gets the block copies too (each
// text equals the CPU's without a prefix cache); with rings (`ringed`), the
// ring blocks of the sliding-window layers too (their own ids).
void expect_gpu_forks_match(const Model& model, const std::vector<int32_t>& base, bool ringed) {
  std::vector<std::vector<int32_t>> forks;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p(base.begin(), base.begin() + 100 + 30 * i);
    for (int j = 0; j < 12; ++j) p.push_back(3 + 5 * i + j);
    forks.push_back(p);
  }
  const GenerateOptions opt = greedy(24);
  SchedulerOptions so = options(2, 320, 64);
  SchedulerOptions plain = so;
  plain.prefix_cache = false;
  std::vector<Outcome> want;
  {
    Scheduler sched(model, plain);
    want = run_all(sched, forks, opt);
  }
  so.offload.gpu = "attn";
  Scheduler sched(model, so);
  ASSERT_EQ(sched.kv().ring_blocks() > 0, ringed);
  run_all(sched, {base}, opt);
  for (size_t i = 0; i < forks.size(); ++i) EXPECT_EQ(run_all(sched, {forks[i]}, opt)[0].text, want[i].text) << "fork " << i;
  EXPECT_EQ(sched.stats().prefix_hit_tokens, 100 + 130 + 160);  // whole blocks and copies
  expect_blocks_returned(sched);
}

TEST_F(SchedulerTest, GpuAttentionCopiesPartlySharedBlocks) {
  NEED_DEVICE(dev);
  (void)dev;
  expect_gpu_forks_match(*model_, random_prompts(9, 1, 200, 0)[0], false);
}

TEST_F(SchedulerTest, GpuAttentionCopiesRingBlocks) {
  NEED_DEVICE(dev);
  (void)dev;
  LoadOptions load;
  load.attention_sinks = 4, load.window = 40;
  const auto windowed = Model::load(test::make_tiny_model("scheduler_gpu_rings"), load);
  std::mt19937 rng(9);
  expect_gpu_forks_match(*windowed, random_prompt(rng, 200, static_cast<int32_t>(windowed->tokenizer().n_vocab())), true);
}
#endif

TEST_F(SchedulerTest, LongPromptIsChunkedAndDecodesKeepGoing) {
  std::mt19937 rng(1);
  const int32_t vocab = static_cast<int32_t>(model_->tokenizer().n_vocab());
  constexpr int kShort = 8, kLong = 4000;
  const SchedulerOptions so = options(kShort + 1, kLong + 16, 128);
  Scheduler sched(*model_, so);
  int64_t step = 0;
  std::vector<Outcome> out(kShort + 1);
  for (int i = 0; i <= kShort; ++i) {
    ScheduledRequest r;
    r.prompt = random_prompt(rng, i < kShort ? 6 : kLong, vocab);  // eight short ones, then a 4k-token one
    r.options = greedy(i < kShort ? 20 : 4);
    // on_done runs inside the step: step counts the ones before it.
    r.on_done = [&out, &step, i](const GenerationStats& st) { out[i].stats = st, out[i].done_at_step = step + 1; };
    sched.submit(std::move(r));
    if (i == kShort - 1) {  // the short ones prefill and start decoding first
      ASSERT_TRUE(sched.step());
      ++step;
    }
  }
  int64_t steps = 0;
  while (sched.step()) {
    ++step, ++steps;
    EXPECT_LE(sched.last_batch_tokens(), so.step_tokens) << "step " << step;
    ASSERT_LT(steps, 1000);
  }
  // The short ones decoded one token per step beside the long prompt's
  // chunks: 20 tokens end at step 20 however long the other prompt is.
  for (int i = 0; i < kShort; ++i) {
    EXPECT_EQ(out[i].stats.n_generated, 20);
    EXPECT_EQ(out[i].done_at_step, 20) << "request " << i;
  }
  // 4000 prompt tokens in chunks of what the budget left: at least 4000 / 128 steps.
  EXPECT_EQ(out[kShort].stats.n_generated, 4);
  EXPECT_GE(out[kShort].done_at_step, kLong / so.step_tokens);
}

TEST_F(SchedulerTest, QueueBoundAndRequestsThatCannotFit) {
  SchedulerOptions so = options(1, 64);
  so.max_queued = 2;
  Scheduler sched(*model_, so);
  auto request = [](int64_t n_prompt, int32_t max_tokens) {
    ScheduledRequest r;
    r.prompt.assign(static_cast<size_t>(n_prompt), 5);
    r.options = greedy(max_tokens);
    return r;
  };
  EXPECT_THROW(sched.submit(request(0, 4)), Error);    // empty
  EXPECT_THROW(sched.submit(request(60, 8)), Error);   // 68 > 64
  {
    SchedulerOptions small = so;
    small.slot_ctx = 1024;
    small.kv_blocks = 2;  // the pool holds 128 positions, whatever one request may have
    Scheduler tiny(*model_, small);
    EXPECT_THROW(tiny.submit(request(100, 40)), Error);
    EXPECT_NO_THROW(tiny.submit(request(100, 28)));
  }
  sched.submit(request(8, 4));
  sched.submit(request(8, 4));
  EXPECT_THROW(sched.submit(request(8, 4)), QueueFull);
  EXPECT_EQ(sched.queued(), 2u);
  ASSERT_TRUE(sched.step());  // one admitted: room in the queue again
  EXPECT_EQ(sched.running(), 1);
  EXPECT_EQ(sched.queued(), 1u);
  sched.submit(request(8, 4));
  sched.run_until_idle();
  EXPECT_EQ(sched.running(), 0);
  EXPECT_EQ(sched.queued(), 0u);

  // Several at once (a request's choices): all or none, whatever the order the step thread takes them.
  auto several = [&](size_t n, int64_t n_prompt) {
    std::vector<ScheduledRequest> rs;
    for (size_t i = 0; i < n; ++i) rs.push_back(request(n_prompt, 4));
    return rs;
  };
  EXPECT_THROW(sched.submit(several(3, 8)), QueueFull);
  EXPECT_EQ(sched.queued(), 0u);
  std::vector<ScheduledRequest> bad = several(2, 8);
  bad[1].prompt.clear();
  EXPECT_THROW(sched.submit(std::move(bad)), Error);
  EXPECT_EQ(sched.queued(), 0u);
  const std::vector<int64_t> ids = sched.submit(several(2, 8));
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], ids[0] + 1);
  EXPECT_EQ(sched.queued(), 2u);
  sched.run_until_idle();
}

TEST_F(SchedulerTest, CancelEndsARequestAndFreesItsSlot) {
  Scheduler sched(*model_, options(1, 256));
  std::vector<Outcome> out(3);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ScheduledRequest r;
    r.prompt.assign(8, 7);
    r.options = greedy(100);
    r.on_done = [&out, i](const GenerationStats& st) { out[i].stats = st; };
    // The third stops itself through its text sink after a few pieces.
    if (i == 2) r.on_text = [n = 0](std::string_view) mutable { return ++n < 3; };
    ids.push_back(sched.submit(std::move(r)));
  }
  ASSERT_TRUE(sched.step());  // request 0 runs, 1 and 2 wait
  EXPECT_TRUE(sched.cancel(ids[0]));
  EXPECT_TRUE(sched.cancel(ids[1]));  // while it waits
  EXPECT_FALSE(sched.cancel(12345));
  sched.run_until_idle();
  EXPECT_EQ(out[0].stats.stop_reason, "cancelled");
  EXPECT_LT(out[0].stats.n_generated, 100);
  EXPECT_EQ(out[1].stats.stop_reason, "cancelled");
  EXPECT_EQ(out[1].stats.n_generated, 0);
  EXPECT_EQ(out[2].stats.stop_reason, "cancelled");  // got the slot once 0 was gone
  EXPECT_GE(out[2].stats.n_generated, 3);
  EXPECT_LT(out[2].stats.n_generated, 100);
  EXPECT_FALSE(sched.cancel(ids[2]));  // ended
}

}  // namespace
}  // namespace basalt
