// SPDX-License-Identifier: MIT
#include "core/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"

namespace basalt {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Sliding-window layers keep rings sized for the chunks (KvCache), so a long
// context costs their window, not its length.
Session::Session(const Model& model, int64_t n_ctx, int64_t ubatch, const OffloadOptions& offload, KvType kv_type)
    : model_(model),
      kv_(model.spec(), n_ctx, 1, kv_type, std::max<int64_t>(1, std::min(ubatch, n_ctx))),
      executor_(model, kv_, kv_.run_tokens(), offload) {}

void Session::check_kv_budget(int64_t positions) const {
  const size_t need = kv_.bytes_for(positions);
  if (kv_budget_ == 0 || need <= kv_budget_) return;
  throw Error("a context of " + std::to_string(positions) + " tokens needs " + std::to_string((need + (size_t{1} << 20) - 1) >> 20) +
              " MiB of KV cache, more than its budget of " + std::to_string(kv_budget_ >> 20) +
              " MiB (--kv-budget; by default 90% of the memory available at start): use --kv-type q8, a shorter "
              "input, or a larger budget");
}

size_t Session::kept_prefix(const std::vector<int32_t>& tokens) const {
  size_t keep = 0;
  while (keep < tokens_.size() && keep < tokens.size() && tokens_[keep] == tokens[keep]) ++keep;
  if (keep == tokens.size() && keep > 0) --keep;  // recompute the last token to get its logits
  if (!kv_.can_resume(0, static_cast<int64_t>(keep))) keep = 0;  // a ring let go of the window before keep
  return keep;
}

const float* Session::set_context(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw Error("the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > n_ctx())
    throw Error("the prompt is " + std::to_string(tokens.size()) + " tokens, more than the context of " +
                std::to_string(n_ctx()) + " (raise it with --ctx-size)");
  check_kv_budget(static_cast<int64_t>(tokens.size()));
  const size_t keep = kept_prefix(tokens);
  tokens_.resize(keep);
  const float* logits = nullptr;
  for (size_t i = keep; i < tokens.size();) {
    batch_.clear();
    const size_t end = std::min(tokens.size(), i + static_cast<size_t>(ubatch()));
    for (size_t j = i; j < end; ++j) batch_.add(tokens[j], static_cast<int32_t>(j), 0, j + 1 == tokens.size());
    logits = executor_.run(batch_);
    tokens_.insert(tokens_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens.begin() + static_cast<std::ptrdiff_t>(end));
    i = end;
  }
  return logits;
}

const float* Session::append(int32_t token) {
  if (static_cast<int64_t>(tokens_.size()) >= n_ctx()) throw Error("the context of " + std::to_string(n_ctx()) + " tokens is full");
  check_kv_budget(static_cast<int64_t>(tokens_.size()) + 1);
  batch_.clear();
  batch_.add(token, static_cast<int32_t>(tokens_.size()), 0, true);
  const float* logits = executor_.run(batch_);
  tokens_.push_back(token);
  return logits;
}

GenerationStats generate(Session& session, const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                         const TextSink& on_text, std::vector<int32_t>* generated) {
  // Only ids the tokenizer knows (an HF embedding may be padded past it).
  Generation gen(session.model().tokenizer(), opt, prompt, session.model().tokenizer().n_vocab(), on_text);
  GenerationStats& st = gen.stats();

  st.n_prefilled = static_cast<int64_t>(prompt.size() - session.kept_prefix(prompt));  // the rest is in the cache
  auto t0 = std::chrono::steady_clock::now();
  const float* logits = session.set_context(prompt);
  st.prefill_s = seconds_since(t0);

  auto t1 = std::chrono::steady_clock::now();
  for (int32_t id; (id = gen.step(logits, session.n_ctx() - static_cast<int64_t>(session.tokens().size()))) >= 0;)
    logits = session.append(id);
  st.decode_s = seconds_since(t1);
  if (generated) generated->insert(generated->end(), gen.generated().begin(), gen.generated().end());
  return st;
}

}  // namespace basalt
