// SPDX-License-Identifier: MIT
// Continuous batching over one model: requests join and leave the running
// batch at every step. Each step runs one batch: the next token of every
// decoding request first, then prompt tokens of the requests still
// prefilling, oldest first, up to a per-step token budget, so a long prompt
// delays the decoding requests by at most one chunk per step. A request holds
// one sequence slot of the KV cache from admission to its end; requests
// beyond the slots wait in a bounded queue.
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

namespace basalt {

struct SchedulerOptions {
  int max_running = 4;          // requests in the running batch (KV cache slots)
  int64_t slot_ctx = 2048;      // context of each slot: prompt plus generated tokens
  int64_t step_tokens = 256;    // tokens per step (decode tokens count one each)
  size_t max_queued = 64;       // requests waiting for a slot
  KvType kv_type = KvType::f16;
  OffloadOptions offload;
};

struct ScheduledRequest {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  TextSink on_text;                                      // complete UTF-8 pieces; false cancels
  std::function<void(const GenerationStats&)> on_done;  // once, when the request ends
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
  // cannot fit in a slot.
  int64_t submit(ScheduledRequest r);
  // Ends a queued or running request at the next step, stop reason
  // "cancelled" (its on_done still runs). False when the id is not waiting or running.
  bool cancel(int64_t id);
  // Cancels every queued and running request (a shutdown's grace has run out).
  void cancel_all();

  // Admits waiting requests into free slots, then runs one batch. False when
  // there was nothing to run.
  bool step();
  // Steps until no request waits or runs.
  void run_until_idle();

  size_t queued() const;
  int running() const;
  // Tokens in the batch of the last step (tests check the budget).
  int64_t last_batch_tokens() const { return last_batch_tokens_; }
  const SchedulerOptions& options() const { return opt_; }
  size_t kv_bytes() const { return kv_.bytes(); }

 private:
  struct Sequence;

  void admit();
  void finish(Sequence& s);
  void publish_running();  // running_ids_ from running_
  void retire_done();      // ends (on_done, slot freed) the running requests that are done

  const Model& model_;
  SchedulerOptions opt_;
  KvCache kv_;
  Executor executor_;
  Batch batch_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<int> free_slots_;
  int64_t last_batch_tokens_ = 0;

  mutable std::mutex mutex_;  // guards the queue, ids and cancellations
  struct Waiting {
    int64_t id;
    ScheduledRequest request;
  };
  std::deque<Waiting> queue_;
  std::vector<int64_t> cancelled_;  // ids to cancel at the next step
  int64_t next_id_ = 1;
  std::vector<int64_t> running_ids_;  // of running_, readable under mutex_
};

}  // namespace basalt
