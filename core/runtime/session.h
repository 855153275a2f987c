// SPDX-License-Identifier: MIT
// One sequence over a model: its KV cache, chunked prefill, and generation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/executor.h"
#include "core/model/model.h"
#include "core/graph/kv_cache.h"
#include "core/runtime/generation.h"

namespace basalt {

class Session {
 public:
  // n_ctx: tokens the cache holds; ubatch: tokens per prefill chunk; offload: GPU placement; kv_type: the cache's.
  Session(const Model& model, int64_t n_ctx, int64_t ubatch = 512, const OffloadOptions& offload = {},
          KvType kv_type = KvType::f16);

  // Makes the context exactly `tokens`: keeps the prefix already in the cache
  // and prefills the rest in chunks. Returns the logits of the last token.
  // Error if the tokens do not fit in the context.
  const float* set_context(const std::vector<int32_t>& tokens);
  // How many of tokens' first positions set_context(tokens) keeps from the cache.
  size_t kept_prefix(const std::vector<int32_t>& tokens) const;
  // Appends one token; returns its logits. Error when the context is full.
  const float* append(int32_t token);

  // The most memory the cache may come to hold (0: no limit). The cache is
  // sized for n_ctx but holds memory only for the positions in use (core/util/
  // aligned.h), so a context can be as long as the model's training length;
  // this turns the machine running out of memory as it fills into an Error
  // before the position that would pass the budget.
  void set_kv_budget(size_t bytes) { kv_budget_ = bytes; }

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  int64_t ubatch() const { return executor_.max_batch(); }
  const Model& model() const { return model_; }
  const std::string& offload_plan() const { return executor_.offload_plan(); }

 private:
  const Model& model_;
  KvCache kv_;
  Executor executor_;
  Batch batch_;
  std::vector<int32_t> tokens_;
  size_t kv_budget_ = 0;

  void check_kv_budget(int64_t positions) const;
};

// Runs the prompt (context = prompt) then samples; each complete piece of
// UTF-8 text goes to on_text as it comes. on_text returns false to cancel.
GenerationStats generate(Session& session, const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                         const TextSink& on_text, std::vector<int32_t>* generated = nullptr);

}  // namespace basalt
