// SPDX-License-Identifier: MIT
// The OpenAI API's side of `basalt serve`, without HTTP: request bodies of
// /v1/completions and /v1/chat/completions checked and turned into generation
// options (every bad field is an ApiError naming it), and the response,
// stream chunk, usage and error objects, shaped as OpenAI's clients expect.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/error.h"
#include "core/runtime/generation.h"
#include "tools/serve/tool_calls.h"

namespace basalt::serve {

// An HTTP status and OpenAI's error object ({"error": {message, type, param, code}}).
class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {})
      : Error(message), status(status), type(std::move(type)), param(std::move(param)) {}
  int status;
  std::string type;   // "invalid_request_error", "not_found_error", "rate_limit_error", ...
  std::string param;  // the field at fault, or ""
};

// A 400 naming the field at fault.
inline ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

// A present, non-null member of a JSON object (json or ordered_json), or nullptr.
template <class J>
const J* json_field(const J& j, const char* name) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

struct ApiLimits {
  size_t max_prompt_bytes = 1 << 20;  // prompt or all message contents together
  int32_t max_tokens = 4096;          // the most a request may ask for
  size_t max_stop = 4, max_stop_bytes = 128;
  size_t max_messages = 1024;
  size_t max_logit_bias = 1024;
  size_t max_tools = 128;  // OpenAI's
  size_t max_choices = 64;  // prompts x n: each is a request of the scheduler's
};

struct CompletionRequest {
  bool chat = false;
  std::string model;                   // as the client named it ("" when absent)
  std::vector<std::string> prompts;    // /v1/completions: one or several (a choice each), as text
  std::vector<std::vector<int32_t>> prompt_ids;  // ... or as token ids (then prompts is empty)
  int32_t n = 1;                       // choices for each prompt (their seeds: the seed, then one up each)
  bool echo = false;                   // the prompt before the completion (with logprobs: the prompt's too)
  std::vector<ChatMessage> messages;   // /v1/chat/completions (earlier tool calls written as text; results too, or role "tool")
  ToolRequest tools;                   // function calling (chat)
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();  // chat_template_kwargs (chat)
  GenerateOptions options;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
};

// Parses a request body. defaults: the server's sampling defaults (the
// model's generation config, else basalt's); default_max_tokens when the
// client gives none. served_model: the one model name this server answers to.
// tool_style: how the served model writes tool calls (its template's).
CompletionRequest parse_completion_request(std::string_view body, bool chat, const SamplingParams& defaults,
                                           int32_t default_max_tokens, const std::string& served_model,
                                           const ApiLimits& limits, const ToolStyle& tool_style = {});

// "stop" (end of generation or a stop string) or "length" (max tokens, full context).
const char* finish_reason(const GenerationStats& st);
// The same, "tool_calls" where the reply called tools.
const char* finish_reason(const GenerationStats& st, const std::vector<ToolCall>& calls);

nlohmann::json usage_json(const GenerationStats& st);
// A request's usage over its choices, n of them for each prompt (whose tokens count once).
nlohmann::json usage_json(const std::vector<GenerationStats>& choices, int32_t n);
// A choice's logprobs for these generated tokens, in the endpoint's shape:
// chat {"content": [{token, logprob, bytes, top_logprobs}]}, completions
// {tokens, token_logprobs, top_logprobs (piece -> logprob), text_offset}
// (text_offset counts bytes from the first token's; it carries across a stream's chunks).
nlohmann::json logprobs_json(const CompletionRequest& r, const std::vector<TokenLogprob>& tokens, const Tokenizer& tok,
                             size_t* text_offset);
// The completions API's logprobs of an echoed prompt and its completion:
// the prompt's first token has no logprob (null), each later one the one
// given those before it (scored), then the generated tokens'.
nlohmann::json echo_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<TokenLogprob>& scored,
                                  const std::vector<TokenLogprob>& generated, const Tokenizer& tok);
// One choice's outcome; with calls, the message has tool_calls, and as content the text before them or null.
struct ChoiceResult {
  std::string text;
  GenerationStats stats;
  nlohmann::json logprobs;  // null unless asked for
  std::vector<ToolCall> calls;
  std::string reasoning = {};  // chat: message.reasoning_content (tools/serve/reasoning.h), "" when none
};
// The whole response of a request that did not stream, its choices in order.
nlohmann::json completion_json(const CompletionRequest& r, const std::string& id, int64_t created,
                               const std::string& model, const std::vector<ChoiceResult>& choices);
nlohmann::json completion_json(const CompletionRequest& r, const std::string& id, int64_t created,
                               const std::string& model, const std::string& text, const GenerationStats& st,
                               const nlohmann::json& logprobs = nullptr, const std::vector<ToolCall>& calls = {});
// One server-sent event's data for choice index: text (may be empty), and the finish reason in its last one.
nlohmann::json chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                          std::string_view text, const char* finish, bool first, const nlohmann::json& logprobs = nullptr,
                          size_t index = 0);
// A chat chunk of the reply's reasoning (delta.reasoning_content).
nlohmann::json reasoning_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                                    std::string_view reasoning, bool first, const nlohmann::json& logprobs = nullptr,
                                    size_t index = 0);
// A chat chunk of the reply's tool calls, each whole (the finish reason follows in the next one).
nlohmann::json tool_calls_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created,
                                     const std::string& model, const std::vector<ToolCall>& calls, bool first,
                                     size_t index = 0);
// The final chunk with usage and no choices (stream_options.include_usage).
nlohmann::json usage_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created,
                                const std::string& model, const nlohmann::json& usage);
nlohmann::json error_json(const ApiError& e);
nlohmann::json models_json(const std::string& model, int64_t created);

}  // namespace basalt::serve
