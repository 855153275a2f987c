// SPDX-License-Identifier: MIT
// One request's side of generating text, whoever runs the model: from each
// step's logits it samples the next token, decides whether the request has
// ended (end of generation, a stop string, max tokens, a full context, a
// cancel), and turns tokens into complete UTF-8 pieces with stop strings held
// back until they can no longer match. Session's generate() and the batching
// scheduler both drive one per request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/grammar/token_constraint.h"
#include "core/runtime/sampler.h"
#include "core/tokenizer/tokenizer.h"

namespace basalt {

// A generated token's log-probability under the model (the log-softmax of
// its raw logits: before temperature, penalties, bias or a grammar, as
// OpenAI's logprobs), and the most likely tokens' at that step, best first.
struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
using LogprobSink = std::function<void(const TokenLogprob&)>;
// id's TokenLogprob under these logits, with the top (<= kMaxTopLogprobs) likeliest beside it.
TokenLogprob token_logprob(const float* logits, int64_t n_vocab, int32_t id, int32_t top);

struct GenerateOptions {
  int32_t max_tokens = 256;         // < 0: until the context is full
  std::vector<std::string> stop;    // stop strings (not included in the output)
  SamplingParams sampling;
  bool stop_at_end_of_generation = true;
  // Output held to this grammar (JSON, or JSON of a schema: core/grammar):
  // a sampled token that does not fit is drawn again from the tokens that
  // do; the request ends when the grammar does (stop reason "grammar") or at
  // an end-of-generation token where it may.
  std::shared_ptr<const Grammar> grammar;
  // >= 0: each generated token's TokenLogprob goes to the Generation's
  // logprob sink before its text, with this many alternatives.
  int32_t logprobs = -1;
  static constexpr int32_t kMaxTopLogprobs = 20;
};

struct GenerationStats {
  int64_t n_prompt = 0, n_prefilled = 0, n_generated = 0;
  int64_t n_redrawn = 0;  // draws that missed the grammar and were made again from the tokens that fit
  double prefill_s = 0, decode_s = 0;
  std::string stop_reason;  // "eos", "stop string", "grammar", "no token fits", "length", "context full", "cancelled"
  double prefill_tps() const { return prefill_s > 0 ? n_prefilled / prefill_s : 0; }
  double decode_tps() const { return decode_s > 0 && n_generated > 1 ? (n_generated - 1) / decode_s : 0; }
};

// Text pieces go to on_text as they are complete; it returns false to cancel.
using TextSink = std::function<bool(std::string_view)>;

class Generation {
 public:
  // n_vocab: the ids sampling may pick (an HF embedding may be padded past the tokenizer).
  Generation(const Tokenizer& tok, const GenerateOptions& opt, const std::vector<int32_t>& prompt, int64_t n_vocab,
             TextSink on_text);

  // The logits after the last token (prompt or generated). Returns the token
  // to run next, or -1 when the request has ended (stats().stop_reason says
  // why; the held-back text has been emitted). context_left: positions the
  // request may still fill after this token's.
  int32_t step(const float* logits, int64_t context_left);
  // step in two halves, for a caller with several requests: pick samples the
  // token (-1 where the request ends without one) and touches nothing but
  // this request's sampler, so different requests' picks may run at once;
  // accept then takes it as step does (ends the request, or emits its text).
  int32_t pick(const float* logits);
  int32_t accept(int32_t id, int64_t context_left);
  // Ends the request from outside (a cancel): emits nothing more.
  void cancel();
  // Where each generated token's log-probability goes (options.logprobs >= 0), before its text.
  void set_logprob_sink(LogprobSink sink) { logprob_sink_ = std::move(sink); }

  bool done() const { return !stats_.stop_reason.empty(); }
  const GenerationStats& stats() const { return stats_; }
  GenerationStats& stats() { return stats_; }
  const std::vector<int32_t>& generated() const { return generated_; }

 private:
  int32_t pick_in_grammar(const float* logits);
  bool length_reached() const { return opt_.max_tokens >= 0 && stats_.n_generated >= opt_.max_tokens; }
  void finish(const char* reason);
  void emit(const std::string& s);
  std::string release(std::string_view text, bool* stopped);

  const Tokenizer& tok_;
  GenerateOptions opt_;
  int64_t n_vocab_;
  TextSink on_text_;
  Sampler sampler_;
  std::unique_ptr<TokenConstraint> constraint_;  // with opt_.grammar
  std::vector<float> masked_;                    // the logits with the rest at -inf
  LogprobSink logprob_sink_;
  TokenLogprob pending_logprob_;                 // pick's, for accept
  StreamDecoder decoder_;
  std::vector<int32_t> history_;  // prompt and generated tokens (the repetition penalty reads it)
  std::vector<int32_t> generated_;
  std::string pending_;  // text held back: it may still become a stop string
  bool cancelled_ = false;
  GenerationStats stats_;
};

}  // namespace basalt
