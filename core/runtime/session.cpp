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

// Holds back the end of the text that may still grow into a stop string.
class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {}

  // Adds text; returns what can be emitted now. Sets stopped when a stop string appeared.
  std::string push(std::string_view text) {
    pending_ += text;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      if (s.empty()) continue;
      size_t at = pending_.find(s);
      if (at != std::string::npos) cut = std::min(cut, at);
    }
    if (cut != std::string::npos) {
      stopped = true;
      std::string out = pending_.substr(0, cut);
      pending_.clear();
      return out;
    }
    size_t keep = 0;  // longest suffix of pending_ that is a prefix of a stop string
    for (const std::string& s : stops_)
      for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); len > keep; --len)
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }
  std::string flush() { return std::exchange(pending_, {}); }
  bool stopped = false;

 private:
  const std::vector<std::string>& stops_;
  std::string pending_;
};
}  // namespace

Session::Session(const Model& model, int64_t n_ctx, int64_t ubatch, const OffloadOptions& offload, KvType kv_type)
    : model_(model),
      kv_(model.spec(), n_ctx, 1, kv_type),
      executor_(model, kv_, std::max<int64_t>(1, std::min(ubatch, n_ctx)), offload) {}

const float* Session::set_context(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw Error("the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > n_ctx())
    throw Error("the prompt is " + std::to_string(tokens.size()) + " tokens, more than the context of " +
                std::to_string(n_ctx()) + " (raise it with --ctx-size)");
  size_t keep = 0;
  while (keep < tokens_.size() && keep < tokens.size() && tokens_[keep] == tokens[keep]) ++keep;
  if (keep == tokens.size()) --keep;  // recompute the last token to get its logits
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
  batch_.clear();
  batch_.add(token, static_cast<int32_t>(tokens_.size()), 0, true);
  const float* logits = executor_.run(batch_);
  tokens_.push_back(token);
  return logits;
}

GenerationStats generate(Session& session, const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                         const std::function<bool(std::string_view)>& on_text, std::vector<int32_t>* generated) {
  GenerationStats st;
  st.n_prompt = static_cast<int64_t>(prompt.size());
  const Tokenizer& tok = session.model().tokenizer();
  // Only ids the tokenizer knows (an HF embedding may be padded past it).
  const int64_t n_vocab = session.model().tokenizer().n_vocab();
  Sampler sampler(opt.sampling);
  StreamDecoder decoder(tok);
  StopMatcher stops(opt.stop);

  size_t common = 0;  // tokens already in the cache are not computed again
  const std::vector<int32_t>& cached = session.tokens();
  while (common < cached.size() && common < prompt.size() && cached[common] == prompt[common]) ++common;
  if (common == prompt.size() && common > 0) --common;
  st.n_prefilled = static_cast<int64_t>(prompt.size() - common);
  auto t0 = std::chrono::steady_clock::now();
  const float* logits = session.set_context(prompt);
  st.prefill_s = seconds_since(t0);

  std::vector<int32_t> history = prompt;
  auto t1 = std::chrono::steady_clock::now();
  bool cancelled = false;
  auto emit = [&](const std::string& s) {
    if (!s.empty() && !cancelled && !on_text(s)) cancelled = true;
  };
  while (true) {
    if (opt.max_tokens >= 0 && st.n_generated >= opt.max_tokens) {
      st.stop_reason = "length";
      break;
    }
    const int32_t id = sampler.sample(logits, n_vocab, history);
    if (opt.stop_at_end_of_generation && tok.is_end_of_generation(id)) {
      st.stop_reason = "eos";
      break;
    }
    ++st.n_generated;
    history.push_back(id);
    if (generated) generated->push_back(id);
    emit(stops.push(decoder.feed(id)));
    if (stops.stopped) {
      st.stop_reason = "stop string";
      break;
    }
    if (cancelled) {
      st.stop_reason = "cancelled";
      break;
    }
    if (static_cast<int64_t>(session.tokens().size()) >= session.n_ctx()) {
      st.stop_reason = "context full";
      break;
    }
    if (opt.max_tokens >= 0 && st.n_generated >= opt.max_tokens) {
      st.stop_reason = "length";
      break;
    }
    logits = session.append(id);
  }
  if (!stops.stopped) emit(stops.push(decoder.flush()) + stops.flush());
  st.decode_s = seconds_since(t1);
  return st;
}

}  // namespace basalt
