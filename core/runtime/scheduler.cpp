// SPDX-License-Identifier: MIT
#include "core/runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/util/thread_pool.h"

namespace basalt {

namespace {
constexpr int64_t B = KvCache::kBlock;
// The most positions of one sequence a step runs.
int64_t run_tokens(const SchedulerOptions& opt) { return std::max<int64_t>(opt.step_tokens, opt.max_running); }
// The KV pool's blocks, and the rings' (sliding-window layers,
// core/graph/kv_cache.h): a ring per running request, and as many again for
// the prefix cache to keep the windows of earlier prompts in.
int64_t pool_blocks(const SchedulerOptions& opt) {
  return opt.kv_blocks > 0 ? opt.kv_blocks : std::max(1, opt.max_running) * KvCache::blocks_for(std::max<int64_t>(1, opt.slot_ctx));
}
int64_t ring_pool(const ModelSpec& spec, const SchedulerOptions& opt) {
  const int64_t ring = KvCache::ring_blocks_for(spec, std::max<int64_t>(1, opt.slot_ctx), run_tokens(opt));
  return (opt.prefix_cache ? 2 : 1) * std::max(1, opt.max_running) * ring;
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

struct Scheduler::Sequence {
  int64_t id;
  int64_t order;  // admission order: the youngest is preempted first
  int slot = -1;  // -1: waiting (preempted)
  ScheduledRequest request;
  std::unique_ptr<Generation> gen;
  // The tokens whose keys and values the request needs: its prompt, then
  // each generated token as it runs. A preempted request computes them again.
  std::vector<int32_t> context;
  int64_t computed = 0;     // of context, in the cache
  int32_t next_token = -1;  // sampled, to run at the next step; -1 until the prompt's end
  int64_t prompt_scored = 1;  // with request.prompt_logprobs: prompt positions whose logprob went out (the first has none)
  PrefixCache::Cursor cursor;
  std::chrono::steady_clock::time_point admitted, first_token;
};

namespace {
constexpr int64_t kScoredRows = 64;  // 64 x 262k vocabulary x 4 bytes: 64 MiB of logits for Gemma 3
}  // namespace

size_t Scheduler::kv_bytes(const ModelSpec& spec, const SchedulerOptions& opt) {
  return KvCache::bytes(spec, std::max<int64_t>(1, opt.slot_ctx), std::max(1, opt.max_running), pool_blocks(opt), opt.kv_type,
                        run_tokens(opt), ring_pool(spec, opt));
}

Scheduler::Scheduler(const Model& model, const SchedulerOptions& opt)
    : model_(model),
      opt_(opt),
      kv_(model.spec(), std::max<int64_t>(1, opt.slot_ctx), std::max(1, opt.max_running), pool_blocks(opt), opt.kv_type,
          run_tokens(opt), ring_pool(model.spec(), opt)),
      executor_(model, kv_, run_tokens(opt), opt.offload) {
  if (opt.max_running < 1 || opt.slot_ctx < 1 || opt.step_tokens < 1)
    throw Error("scheduler: max_running, slot_ctx and step_tokens must be at least 1");
  if (opt.prefix_cache) prefix_ = std::make_unique<PrefixCache>(kv_);
  for (int s = opt.max_running - 1; s >= 0; --s) free_slots_.push_back(s);
  counts_.kv_blocks = kv_.n_blocks();
  publish();
}

Scheduler::~Scheduler() {
  prefix_.reset();  // its references, before the cache they are in
}

int64_t Scheduler::submit(ScheduledRequest r) {
  std::vector<ScheduledRequest> one;
  one.push_back(std::move(r));
  return submit(std::move(one))[0];
}

std::vector<int64_t> Scheduler::submit(std::vector<ScheduledRequest> rs) {
  for (const ScheduledRequest& r : rs) check(r);
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.size() + rs.size() > opt_.max_queued)
    throw QueueFull("the server is busy: " + std::to_string(queue_.size()) + " requests are waiting already" +
                    (rs.size() > 1 ? " (this one would add " + std::to_string(rs.size()) + ")" : ""));
  std::vector<int64_t> ids;
  for (ScheduledRequest& r : rs) {
    ids.push_back(next_id_++);
    queue_.push_back({ids.back(), std::move(r)});
  }
  return ids;
}

void Scheduler::check(const ScheduledRequest& r) const {
  if (r.prompt.empty()) throw Error("the prompt is empty");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const int64_t max_tokens = std::max<int64_t>(0, r.options.max_tokens);
  const int64_t room = std::min(opt_.slot_ctx, kv_.n_blocks() * B);
  if (n_prompt + max_tokens > room)
    throw Error("the prompt (" + std::to_string(n_prompt) + " tokens) and max_tokens (" + std::to_string(max_tokens) +
                ") do not fit in the context of " + std::to_string(room) + " tokens per request");
  Sampler sampler(r.options.sampling);  // bad sampling parameters are the caller's error, now
  (void)sampler;
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
  return queue_.size() + preempted_count_;
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.running;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  SchedulerStats s = stats_;
  s.queued = queue_.size() + preempted_count_;
  return s;
}

int64_t Scheduler::available_blocks() const { return kv_.free_blocks() + (prefix_ ? prefix_->evictable() : 0); }

void Scheduler::finish(Sequence& s) {
  // From the end of the prompt on; none when it ended before (a cancel while prefilling).
  const bool decoded = s.first_token != std::chrono::steady_clock::time_point{};
  s.gen->stats().decode_s = decoded ? seconds_since(s.first_token) : 0;
  if (s.request.on_done) s.request.on_done(s.gen->stats());
  if (s.slot < 0) return;
  if (prefix_) prefix_->insert_tail(s.cursor, s.context.data(), s.computed, kv_.table(s.slot));
  release_slot(s);
}

void Scheduler::release_slot(Sequence& s) {
  kv_.release(s.slot);
  free_slots_.push_back(s.slot);
  s.slot = -1;
  s.computed = 0;
  s.cursor = {};
}

bool Scheduler::fits(int64_t n_context) const {
  // The whole context and the next token must fit now (what the cache holds already needs no new block).
  return !free_slots_.empty() && (running_.empty() || available_blocks() >= KvCache::blocks_for(n_context + 1));
}

void Scheduler::start(Sequence& s) {
  s.slot = free_slots_.back();
  free_slots_.pop_back();
  if (!prefix_ || s.request.prompt_logprobs >= 0) return;  // a scored prompt is computed whole
  // A prompt not yet begun computes at least its last token (its logits give the first output token).
  const int64_t n = static_cast<int64_t>(s.context.size()), cacheable = s.next_token >= 0 ? n : n - 1;
  s.cursor = prefix_->attach(s.slot, s.context.data(), n, cacheable / B);
  s.computed = s.cursor.blocks * B;
  if (!kv_.hold_window(s.slot, s.computed, s.computed))  // the ring blocks attach() found: none new
    throw Error("internal: the prefix cache's window needs new ring blocks");
  // Then a copy of the cached block that starts most like the rest, into a
  // free block or one the cache lets go (its least recently used: the
  // prefill would evict it for this block anyway), and the same for a ring block.
  const PrefixCache::Partial part = prefix_->partial(s.cursor, s.context.data() + s.computed, cacheable - s.computed);
  if (part.tokens == 0) return;
  kv_.ref(part.block);  // the source is not evicted for its own copy
  const bool ring = kv_.has_ring(part.block);
  if (ring) kv_.ref_ring(part.block);
  bool grown, held = false;
  while (!(grown = kv_.grow(s.slot)) && prefix_->evict()) {
  }
  while (grown && !(held = kv_.hold_window(s.slot, s.computed, s.computed + 1)) && prefix_->evict_ring()) {
  }
  if (held) {
    executor_.copy_kv_block(part.block, kv_.table(s.slot).back());
    s.computed += part.tokens;
  }
  if (ring) kv_.unref_ring(part.block);
  kv_.unref(part.block);
}

// A prompt whose first block a running request is still computing (the n
// choices of one prompt, a chat's users sharing a system prompt that
// arrive together): admitted once those blocks are in the prefix cache, it
// takes them instead of computing the same prompt again beside it.
bool Scheduler::shares_a_prefill(const ScheduledRequest& r) const {
  if (!prefix_ || r.prompt_logprobs >= 0 || static_cast<int64_t>(r.prompt.size()) < B) return false;
  for (const auto& s : running_) {
    const auto& p = s->request.prompt;
    if (s->request.prompt_logprobs < 0 && s->computed < static_cast<int64_t>(p.size()) &&
        static_cast<int64_t>(p.size()) >= B && std::equal(p.begin(), p.begin() + B, r.prompt.begin()))
      return true;
  }
  return false;
}

void Scheduler::admit() {
  std::vector<int64_t> cancels;
  std::vector<Waiting> dropped;
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
  }
  for (Waiting& w : dropped) {
    GenerationStats st;
    st.n_prompt = static_cast<int64_t>(w.request.prompt.size());
    st.stop_reason = "cancelled";
    if (w.request.on_done) w.request.on_done(st);
  }
  auto is_cancelled = [&](const Sequence& s) { return std::find(cancels.begin(), cancels.end(), s.id) != cancels.end(); };
  for (auto& s : running_)
    if (is_cancelled(*s)) s->gen->cancel();
  for (auto it = preempted_.begin(); it != preempted_.end();) {
    if (is_cancelled(**it)) {
      (*it)->gen->cancel();
      finish(**it);
      it = preempted_.erase(it);
    } else {
      ++it;
    }
  }
  retire_done();  // cancelled ones free their blocks before anyone new starts

  // The preempted first, then the queue, in order: one that does not fit yet holds up those behind it.
  while (!preempted_.empty() && fits(static_cast<int64_t>(preempted_.front()->context.size()))) {
    start(*preempted_.front());
    running_.push_back(std::move(preempted_.front()));
    preempted_.pop_front();
  }
  if (!preempted_.empty()) return;
  for (;;) {
    auto s = std::make_unique<Sequence>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || !fits(static_cast<int64_t>(queue_.front().request.prompt.size()))) return;
      if (shares_a_prefill(queue_.front().request)) return;  // its blocks come from the prefix cache a step or two later
      s->id = queue_.front().id;
      s->request = std::move(queue_.front().request);
      queue_.pop_front();
      running_ids_.push_back(s->id);  // cancellable while it moves over
    }
    s->context = s->request.prompt;
    start(*s);
    s->gen = std::make_unique<Generation>(model_.tokenizer(), s->request.options, s->request.prompt,
                                          model_.tokenizer().n_vocab(), s->request.on_text);
    if (s->request.on_logprob) s->gen->set_logprob_sink(s->request.on_logprob);
    s->gen->stats().n_prefilled = static_cast<int64_t>(s->context.size()) - s->computed;
    if (s->computed > 0) {
      ++counts_.prefix_hits;
      counts_.prefix_hit_tokens += s->computed;
    }
    s->order = next_order_++;
    s->admitted = std::chrono::steady_clock::now();
    if (s->request.on_start) s->request.on_start();
    running_.push_back(std::move(s));
  }
}

void Scheduler::preempt(Sequence& s) {
  release_slot(s);
  ++counts_.preemptions;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.get() == &s; });
  // Victims go youngest first, so each new one is older than those waiting already.
  preempted_.push_front(std::move(*it));
  running_.erase(it);
}

bool Scheduler::free_a_block(int64_t younger_than, bool ring) {
  if (prefix_ && (ring ? prefix_->evict_ring() : prefix_->evict())) return true;
  Sequence* victim = nullptr;
  for (auto& r : running_)
    if (r->order > younger_than && (!victim || r->order > victim->order)) victim = r.get();
  if (!victim) return false;
  preempt(*victim);
  return true;
}

int64_t Scheduler::reserve(Sequence& s, int64_t positions, int64_t limit) {
  while (kv_.capacity(s.slot) < positions)
    if (!kv_.grow(s.slot) && !free_a_block(limit, false)) break;
  const int64_t end = std::min(positions, kv_.capacity(s.slot));
  while (!kv_.hold_window(s.slot, s.computed, end))  // the sliding-window layers' ring blocks for them
    if (!free_a_block(limit, true)) return s.computed;
  return end;
}

bool Scheduler::step() {
  admit();
  publish();
  if (running_.empty()) return false;

  // Blocks for this step, oldest request first: each decoding request's next
  // position (a younger one, or the request itself, is preempted for it),
  // then prompt chunks within the token budget (one preempts only younger ones).
  std::vector<Sequence*> order;
  for (auto& r : running_) order.push_back(r.get());  // running_ changes as requests are preempted
  auto alive = [](const Sequence* s) { return s->slot >= 0; };
  auto decoding = [](const Sequence& s) { return s.next_token >= 0 && s.computed == static_cast<int64_t>(s.context.size()); };
  for (Sequence* s : order)
    if (alive(s) && decoding(*s) && reserve(*s, s->computed + 1, s->order) <= s->computed) preempt(*s);
  int64_t budget = opt_.step_tokens;
  for (Sequence* s : order)
    if (alive(s) && decoding(*s)) --budget;
  std::vector<std::pair<Sequence*, int64_t>> chunks;
  for (Sequence* s : order) {
    const int64_t left = static_cast<int64_t>(s->context.size()) - s->computed;
    if (!alive(s) || left == 0 || budget <= 0) continue;
    // A scored prompt takes at most kScoredRows a step: each row's logits (the
    // vocabulary's width) are written, where a prompt chunk writes one row.
    const int64_t cap = s->request.prompt_logprobs >= 0 ? kScoredRows : budget;
    const int64_t want = reserve(*s, s->computed + std::min({budget, left, cap}), s->order) - s->computed;  // as much as it can get
    if (want <= 0) continue;
    chunks.emplace_back(s, want);
    budget -= want;
  }

  // The batch: every decoding request's next token, then the prompt chunks.
  batch_.clear();
  std::vector<Sequence*> outputs;  // the requests that sample, in the order of their logits rows
  std::vector<int64_t> output_rows;
  struct Scored {  // a prompt position whose next token's logprob goes out
    Sequence* s;
    int64_t pos, row;
  };
  std::vector<Scored> scored;
  int64_t rows = 0;
  for (auto& s : running_) {
    if (!decoding(*s)) continue;
    batch_.add(s->next_token, static_cast<int32_t>(s->computed), s->slot, true);
    s->context.push_back(s->next_token);
    ++s->computed;
    outputs.push_back(s.get());
    output_rows.push_back(rows++);
  }
  for (auto& [s, take] : chunks) {
    if (!alive(s)) continue;  // a younger request's chunk, preempted for an older one's
    const int64_t end = s->computed + take, n = static_cast<int64_t>(s->context.size());
    const int64_t n_prompt = static_cast<int64_t>(s->request.prompt.size());
    const bool fresh_prompt_end = end == n && s->next_token < 0;
    for (int64_t j = s->computed; j < end; ++j) {
      const bool samples = fresh_prompt_end && j + 1 == n;
      const bool scores = s->request.prompt_logprobs >= 0 && j + 1 < n_prompt && j + 1 >= s->prompt_scored;
      batch_.add(s->context[static_cast<size_t>(j)], static_cast<int32_t>(j), s->slot, samples || scores);
      if (scores) scored.push_back({s, j, rows});
      if (samples) outputs.push_back(s), output_rows.push_back(rows);
      if (samples || scores) ++rows;
    }
    s->computed = end;
  }
  last_batch_tokens_ = batch_.size();
  if (batch_.size() == 0) {
    publish();
    return !running_.empty();
  }

  const float* logits = executor_.run(batch_);
  const int64_t n_vocab = model_.spec().n_vocab;
  for (Sequence* s : outputs)
    if (s->next_token < 0) {  // its prompt just ended
      s->gen->stats().prefill_s = seconds_since(s->admitted);
      s->first_token = std::chrono::steady_clock::now();
    }
  // The requests' samplers run on the engine's threads (a 262k-token
  // vocabulary's top-k, 16 requests a step: docs/PERFORMANCE.md 9.10); their
  // tokens are then taken in order on this one, which sends their text.
  picks_.resize(outputs.size());
  parallel_for(static_cast<int64_t>(outputs.size()), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      picks_[static_cast<size_t>(i)] = outputs[static_cast<size_t>(i)]->gen->pick(logits + output_rows[static_cast<size_t>(i)] * n_vocab);
  });
  // Scored prompt positions: the logprob of each one's next prompt token (a
  // log-softmax over the vocabulary each: on the engine's threads), then
  // handed over in order on this one.
  if (!scored.empty()) {
    std::vector<TokenLogprob> lp(scored.size());
    parallel_for(static_cast<int64_t>(scored.size()), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const Scored& sc = scored[static_cast<size_t>(i)];
        lp[static_cast<size_t>(i)] = token_logprob(logits + sc.row * n_vocab, n_vocab, sc.s->context[static_cast<size_t>(sc.pos + 1)],
                                                   sc.s->request.prompt_logprobs);
      }
    });
    for (size_t i = 0; i < scored.size(); ++i) {
      Sequence& s = *scored[i].s;
      if (s.request.on_prompt_logprob) s.request.on_prompt_logprob(lp[i]);
      s.prompt_scored = scored[i].pos + 2;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i]->next_token = outputs[i]->gen->accept(picks_[i], opt_.slot_ctx - outputs[i]->computed);
  if (prefix_)
    for (auto& s : running_) prefix_->insert(s->cursor, s->context.data(), s->computed, kv_.table(s->slot));
  retire_done();
  publish();
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

void Scheduler::publish() {
  SchedulerStats st = counts_;
  st.running = static_cast<int>(running_.size());
  st.kv_free_blocks = kv_.free_blocks();
  st.kv_largest_free_run = kv_.largest_free_run();
  st.kv_cached_blocks = prefix_ ? prefix_->blocks() : 0;
  st.kv_ring_blocks = kv_.ring_pool_blocks();
  st.kv_free_ring_blocks = kv_.free_ring_blocks();
  st.kv_used_positions = 0;
  for (const auto& s : running_) st.kv_used_positions += s->computed;
  std::lock_guard<std::mutex> lock(mutex_);
  running_ids_.clear();
  for (const auto& s : running_) running_ids_.push_back(s->id);
  for (const auto& s : preempted_) running_ids_.push_back(s->id);
  preempted_count_ = preempted_.size();
  stats_ = st;
}

void Scheduler::run_until_idle() {
  while (step() || queued() > 0) {
  }
}

}  // namespace basalt
