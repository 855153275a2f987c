// SPDX-License-Identifier: MIT
// Continuous batching over one model: requests join and leave the running
// batch at every step. Each step runs one batch: the next token of every
// decoding request first, then prompt tokens of the requests still
// prefilling, oldest first, up to a per-step token budget, so a long prompt
// delays the decoding requests by at most one chunk per step.
//
// KV memory is one paged pool (core/graph/kv_cache.h): a request holds a
// sequence slot (a block table) while it runs and takes blocks of 64
// positions as it grows; its blocks go back when it ends. A request waits
// until the pool can hold its prompt. When a running request needs a block
// and none is free, the prefix cache gives up its least recently used blocks
// first, then the youngest running request is preempted: its blocks are
// freed and it waits at the head of the queue, to be recomputed (prompt and
// tokens so far) when there is room; its output goes on where it stopped.
// With the prefix cache (core/runtime/prefix_cache.h), a request whose
// prompt starts with blocks an earlier one computed takes them instead.
// Sliding-window layers keep rings (their own pool of blocks, a ring per
// request and as many again for the prefix cache): their memory stops at the
// window whatever the context.
//
// submit() and cancel() may be called from any thread; step() from one
// thread at a time (the text and done callbacks run on it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"
#include "core/graph/offload.h"
#include "core/model/model.h"
#include "core/runtime/executor.h"
#include "core/runtime/generation.h"
#include "core/runtime/prefix_cache.h"

namespace basalt {

struct SchedulerOptions {
  int max_running = 4;          // requests in the running batch (sequence slots)
  int64_t slot_ctx = 2048;      // the most positions one request fills: prompt plus generated tokens
  int64_t kv_blocks = 0;        // the KV pool in blocks of 64 positions; 0: max_running full slot_ctx
  bool prefix_cache = true;     // reuse earlier requests' blocks for prompts that start alike
  int64_t step_tokens = 256;    // tokens per step (decode tokens count one each)
  size_t max_queued = 64;       // requests waiting to run
  KvType kv_type = KvType::f16;
  OffloadOptions offload;
};

struct ScheduledRequest {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  TextSink on_text;                                      // complete UTF-8 pieces; false cancels
  std::function<void()> on_start;                        // once, when it first joins the running batch
  std::function<void(const GenerationStats&)> on_done;  // once, when the request ends
  LogprobSink on_logprob;                                // each generated token's, before its text (options.logprobs >= 0)
  // >= 0: each prompt token after the first gets its TokenLogprob given the
  // ones before it (with this many alternatives), in order, to
  // on_prompt_logprob (the completions API's echo). Such a request computes
  // its whole prompt (no prefix cache).
  int32_t prompt_logprobs = -1;
  LogprobSink on_prompt_logprob;
};

// What /metrics shows of the scheduler, as of its last step.
struct SchedulerStats {
  size_t queued = 0;                // waiting, preempted ones included
  int running = 0;                  // in the running batch
  int64_t kv_blocks = 0, kv_free_blocks = 0, kv_largest_free_run = 0;
  int64_t kv_cached_blocks = 0;     // listed by the prefix cache (some also held by requests)
  int64_t kv_ring_blocks = 0, kv_free_ring_blocks = 0;  // the sliding-window layers' rings (0: none)
  int64_t kv_used_positions = 0;    // positions the running requests hold
  int64_t preemptions = 0;          // so far
  int64_t prefix_hits = 0;          // requests that took blocks from the prefix cache, so far
  int64_t prefix_hit_tokens = 0;    // prompt tokens they did not compute, so far
};

// The queue is full: try again later (a server answers 429).
class QueueFull : public Error {
 public:
  using Error::Error;
};

class Scheduler {
 public:
  Scheduler(const Model& model, const SchedulerOptions& opt);
  ~Scheduler();

  // Queues a request and returns its id. QueueFull when max_queued wait
  // already; Error for an empty prompt or one whose prompt and max_tokens
  // cannot fit in slot_ctx or in the whole pool.
  int64_t submit(ScheduledRequest r);
  // Several at once (one HTTP request's choices), all or none: QueueFull
  // when they would take the queue past max_queued; ids in their order.
  std::vector<int64_t> submit(std::vector<ScheduledRequest> rs);
  // Ends a queued or running request at the next step, stop reason
  // "cancelled" (its on_done still runs). False when the id is not waiting or running.
  bool cancel(int64_t id);
  // Cancels every queued and running request (a shutdown's grace has run out).
  void cancel_all();

  // Admits waiting requests while slots and blocks allow, then runs one
  // batch. False when there was nothing to run.
  bool step();
  // Steps until no request waits or runs.
  void run_until_idle();

  size_t queued() const;
  int running() const;
  SchedulerStats stats() const;
  // Tokens in the batch of the last step (tests check the budget).
  int64_t last_batch_tokens() const { return last_batch_tokens_; }
  const SchedulerOptions& options() const { return opt_; }
  size_t kv_bytes() const { return kv_.bytes(); }
  // What a scheduler made with these options allocates for its KV pool.
  static size_t kv_bytes(const ModelSpec& spec, const SchedulerOptions& opt);
  const KvCache& kv() const { return kv_; }  // tests read its reference counts

 private:
  struct Sequence;

  void check(const ScheduledRequest& r) const;  // Error where submit() refuses it whatever the queue
  void admit();
  bool shares_a_prefill(const ScheduledRequest& r) const;  // a running request is computing its first block
  bool fits(int64_t n_context) const;  // a slot is free and the pool can hold this context now
  void start(Sequence& s);             // a slot, and the blocks the prefix cache has of its context
  void release_slot(Sequence& s);      // its blocks and slot go back; it computes everything again
  void finish(Sequence& s);
  // Grows s's table to hold `positions` (and holds the ring blocks of its
  // sliding-window layers for them), evicting cached blocks and then
  // preempting running requests younger than admission order `limit` (never
  // s itself) for them. Returns the positions it can run to now (s.computed: none).
  int64_t reserve(Sequence& s, int64_t positions, int64_t limit);
  // Evicts a cached block (ring: a cached ring block) or preempts; false when neither can.
  bool free_a_block(int64_t younger_than, bool ring);
  void preempt(Sequence& s);
  void publish();      // running_ids_ and stats_ from the state
  void retire_done();  // ends (on_done, blocks freed) the running requests that are done
  int64_t available_blocks() const;  // free, or freed by evicting the prefix cache

  const Model& model_;
  SchedulerOptions opt_;
  KvCache kv_;
  std::unique_ptr<PrefixCache> prefix_;
  Executor executor_;
  Batch batch_;
  std::vector<int32_t> picks_;  // the step's sampled tokens, in the order of its outputs
  std::vector<std::unique_ptr<Sequence>> running_;    // oldest first
  std::deque<std::unique_ptr<Sequence>> preempted_;   // oldest first; they go before the queue
  std::vector<int> free_slots_;
  int64_t last_batch_tokens_ = 0, next_order_ = 0;
  SchedulerStats counts_;  // the step thread's running totals

  mutable std::mutex mutex_;  // guards the queue, ids and cancellations
  struct Waiting {
    int64_t id;
    ScheduledRequest request;
  };
  std::deque<Waiting> queue_;
  std::vector<int64_t> cancelled_;  // ids to cancel at the next step
  int64_t next_id_ = 1;
  std::vector<int64_t> running_ids_;  // of running_ and preempted_, readable under mutex_
  size_t preempted_count_ = 0;
  SchedulerStats stats_;
};

}  // namespace basalt
