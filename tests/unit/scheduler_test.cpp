// SPDX-License-Identifier: MIT
// The batching scheduler without HTTP: batched greedy output equals each
// request run alone; a long prompt arriving during decodes is prefilled in
// chunks within the step budget and delays no decode by more than a step;
// the bounded queue, admission, and cancellation.
#include "core/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "core/runtime/session.h"
#include "tests/unit/test_paths.h"

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

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(test::make_tiny_model("scheduler")); }
  static void TearDownTestSuite() { model_.reset(); }
  static std::unique_ptr<Model> model_;
};
std::unique_ptr<Model> SchedulerTest::model_;

// 16 requests of different prompt lengths, four at a time in 64-token steps,
// give each the tokens it gets alone (SmolLM2, greedy).
TEST(SchedulerModel, ConcurrentGreedyEqualsEachAlone) {
  auto model = Model::load(test::smollm2_path());
  const Tokenizer& tok = model->tokenizer();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    std::string text = "Question " + std::to_string(i) + ": what is " + std::to_string(7 * i + 3) + " plus " +
                       std::to_string(i * i) + "? Explain";
    for (int k = 0; k < i % 5; ++k) text += " step by step, with care and in plain words";
    prompts.push_back(tok.encode(text, true, false));
  }
  const GenerateOptions opt = greedy(24);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    Session s(*model, 512, 512);
    std::vector<int32_t> got;
    generate(s, p, opt, [](std::string_view) { return true; }, &got);
    alone.push_back(got);
  }

  SchedulerOptions so;
  so.max_running = 4;
  so.slot_ctx = 512;
  so.step_tokens = 64;
  Scheduler sched(*model, so);
  std::map<int64_t, size_t> index;
  std::vector<std::string> texts(prompts.size());
  std::vector<GenerationStats> stats(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ScheduledRequest r;
    r.prompt = prompts[i];
    r.options = opt;
    r.on_text = [&texts, i](std::string_view t) { return texts[i] += t, true; };
    r.on_done = [&stats, i](const GenerationStats& st) { stats[i] = st; };
    index[sched.submit(std::move(r))] = i;
  }
  sched.run_until_idle();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(stats[i].stop_reason, "length") << "request " << i;
    EXPECT_EQ(stats[i].n_generated, 24) << "request " << i;
    std::string want;
    StreamDecoder dec(tok);
    for (int32_t id : alone[i]) want += dec.feed(id);
    want += dec.flush();
    EXPECT_EQ(texts[i], want) << "request " << i << " batched differs from alone";
  }
}

TEST_F(SchedulerTest, LongPromptIsChunkedAndDecodesKeepGoing) {
  std::mt19937 rng(1);
  const int32_t vocab = static_cast<int32_t>(model_->tokenizer().n_vocab());
  SchedulerOptions so;
  so.max_running = 4;
  so.slot_ctx = 1024;
  so.step_tokens = 32;
  Scheduler sched(*model_, so);
  int64_t step = 0;
  std::vector<Outcome> out(4);
  for (int i = 0; i < 4; ++i) {
    ScheduledRequest r;
    r.prompt = random_prompt(rng, i < 3 ? 6 : 600, vocab);  // three short ones, then a long one
    r.options = greedy(i < 3 ? 20 : 4);
    // on_done runs inside the step: step counts the ones before it.
    r.on_done = [&out, &step, i](const GenerationStats& st) { out[i].stats = st, out[i].done_at_step = step + 1; };
    sched.submit(std::move(r));
    if (i == 2) {  // the short ones prefill and start decoding first
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
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].stats.n_generated, 20);
    EXPECT_EQ(out[i].done_at_step, 20) << "request " << i;
  }
  // 600 prompt tokens in chunks of what the budget left: at least 600 / 32 steps.
  EXPECT_EQ(out[3].stats.n_generated, 4);
  EXPECT_GE(out[3].done_at_step, 600 / so.step_tokens);
}

TEST_F(SchedulerTest, QueueBoundAndRequestsThatCannotFit) {
  SchedulerOptions so;
  so.max_running = 1;
  so.slot_ctx = 64;
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
}

TEST_F(SchedulerTest, CancelEndsARequestAndFreesItsSlot) {
  SchedulerOptions so;
  so.max_running = 1;
  so.slot_ctx = 256;
  Scheduler sched(*model_, so);
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
