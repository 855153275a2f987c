// SPDX-License-Identifier: MIT
#include "core/runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace basalt {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

struct Scheduler::Sequence {
  int64_t id;
  int slot;
  ScheduledRequest request;
  std::unique_ptr<Generation> gen;
  int64_t prefilled = 0;    // prompt tokens in the cache
  int64_t n_past = 0;       // positions in the cache
  int32_t next_token = -1;  // to run at the next step (decoding); -1 while prefilling
  std::chrono::steady_clock::time_point admitted, first_token;
};

Scheduler::Scheduler(const Model& model, const SchedulerOptions& opt)
    : model_(model),
      opt_(opt),
      kv_(model.spec(), std::max<int64_t>(1, opt.slot_ctx), std::max(1, opt.max_running), opt.kv_type),
      executor_(model, kv_, std::max<int64_t>(opt.step_tokens, opt.max_running), opt.offload) {
  if (opt.max_running < 1 || opt.slot_ctx < 1 || opt.step_tokens < 1)
    throw Error("scheduler: max_running, slot_ctx and step_tokens must be at least 1");
  for (int s = opt.max_running - 1; s >= 0; --s) free_slots_.push_back(s);
}

Scheduler::~Scheduler() = default;

int64_t Scheduler::submit(ScheduledRequest r) {
  if (r.prompt.empty()) throw Error("the prompt is empty");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t max_tokens = std::max<int64_t>(0, r.options.max_tokens);
  if (n_prompt + max_tokens > opt_.slot_ctx)
    throw Error("the prompt (" + std::to_string(n_prompt) + " tokens) and max_tokens (" + std::to_string(max_tokens) +
                ") do not fit in the context of " + std::to_string(opt_.slot_ctx) + " tokens per request");
  Sampler check(r.options.sampling);  // bad sampling parameters are the caller's error, now
  (void)check;
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.size() >= opt_.max_queued)
    throw QueueFull("the server is busy: " + std::to_string(queue_.size()) + " requests are waiting already");
  const int64_t id = next_id_++;
  queue_.push_back({id, std::move(r)});
  return id;
}

bool Scheduler::cancel(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool known = std::any_of(queue_.begin(), queue_.end(), [&](const Waiting& w) { return w.id == id; }) ||
                     std::find(running_ids_.begin(), running_ids_.end(), id) != running_ids_.end();
  if (known) cancelled_.push_back(id);
  return known;
}

void Scheduler::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Waiting& w : queue_) cancelled_.push_back(w.id);
  cancelled_.insert(cancelled_.end(), running_ids_.begin(), running_ids_.end());
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(running_ids_.size());
}

void Scheduler::finish(Sequence& s) {
  // From the end of the prompt on; none when it ended before (a cancel while prefilling).
  const bool decoded = s.first_token != std::chrono::steady_clock::time_point{};
  s.gen->stats().decode_s = decoded ? seconds_since(s.first_token) : 0;
  if (s.request.on_done) s.request.on_done(s.gen->stats());
  free_slots_.push_back(s.slot);
}

void Scheduler::admit() {
  std::vector<int64_t> cancels;
  std::vector<Waiting> admitted, dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancels.swap(cancelled_);
    // Cancelled while waiting: ended without running.
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (std::find(cancels.begin(), cancels.end(), it->id) != cancels.end()) {
        dropped.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    while (!queue_.empty() && free_slots_.size() > admitted.size()) {
      running_ids_.push_back(queue_.front().id);  // cancellable while it moves over
      admitted.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  for (Waiting& w : dropped) {
    GenerationStats st;
    st.n_prompt = static_cast<int64_t>(w.request.prompt.size());
    st.stop_reason = "cancelled";
    if (w.request.on_done) w.request.on_done(st);
  }
  for (auto& s : running_)
    if (std::find(cancels.begin(), cancels.end(), s->id) != cancels.end()) s->gen->cancel();
  for (Waiting& w : admitted) {
    auto s = std::make_unique<Sequence>();
    s->id = w.id;
    s->slot = free_slots_.back();
    free_slots_.pop_back();
    s->request = std::move(w.request);
    s->gen = std::make_unique<Generation>(model_.tokenizer(), s->request.options, s->request.prompt,
                                          model_.tokenizer().n_vocab(), s->request.on_text);
    s->gen->stats().n_prefilled = static_cast<int64_t>(s->request.prompt.size());
    s->admitted = std::chrono::steady_clock::now();
    running_.push_back(std::move(s));
  }
}

bool Scheduler::step() {
  admit();
  retire_done();  // cancelled by the caller or by their text sink: they end before the batch
  publish_running();
  if (running_.empty()) return false;

  // The batch: every decoding request's next token, then prompt chunks, oldest first.
  batch_.clear();
  std::vector<Sequence*> outputs;  // in the order of the logits rows
  int64_t budget = opt_.step_tokens;
  for (auto& s : running_) {
    if (s->next_token < 0) continue;
    batch_.add(s->next_token, static_cast<int32_t>(s->n_past), s->slot, true);
    outputs.push_back(s.get());
    ++s->n_past;
    --budget;
  }
  for (auto& s : running_) {
    const int64_t n_prompt = static_cast<int64_t>(s->request.prompt.size());
    if (s->next_token >= 0 || s->prefilled == n_prompt || budget <= 0) continue;
    const int64_t take = std::min(budget, n_prompt - s->prefilled);
    for (int64_t j = s->prefilled; j < s->prefilled + take; ++j)
      batch_.add(s->request.prompt[static_cast<size_t>(j)], static_cast<int32_t>(j), s->slot, j + 1 == n_prompt);
    s->prefilled += take;
    s->n_past = s->prefilled;
    budget -= take;
    if (s->prefilled == n_prompt) outputs.push_back(s.get());
  }
  last_batch_tokens_ = batch_.size();
  if (batch_.size() == 0) return false;

  const float* logits = executor_.run(batch_);
  const int64_t n_vocab = model_.spec().n_vocab;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Sequence& s = *outputs[i];
    if (s.next_token < 0) {  // its prompt just ended
      s.gen->stats().prefill_s = seconds_since(s.admitted);
      s.first_token = std::chrono::steady_clock::now();
    }
    s.next_token = s.gen->step(logits + static_cast<int64_t>(i) * n_vocab, opt_.slot_ctx - s.n_past);
  }
  retire_done();
  publish_running();
  return true;
}

void Scheduler::retire_done() {
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->gen->done()) {
      finish(**it);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
}

void Scheduler::publish_running() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ids_.clear();
  for (const auto& s : running_) running_ids_.push_back(s->id);
}

void Scheduler::run_until_idle() {
  while (step() || queued() > 0) {
  }
}

}  // namespace basalt
