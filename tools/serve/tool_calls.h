// SPDX-License-Identifier: MIT
// Function calling for `basalt serve`, in one format that any model can
// follow: the tools are described in the system message, and a grammar holds
// the reply to either a call, {"name": ..., "arguments": {...}} with the
// arguments an instance of that tool's parameters schema (several calls as a
// JSON array where parallel calls are allowed), or, under tool_choice "auto",
// plain text that starts with none of "{", "[" or a blank. Earlier turns'
// calls and the tools' results go back into the conversation in that form.
// (llama.cpp's "generic" format works the same way. A model trained on a
// format of its own, such as Hermes' <tool_call> tags, reads this one as
// instructions: docs/LIMITS.md.)
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/grammar/grammar.h"

namespace basalt::serve {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's API carries it
};

// The tools a request offers and what it asks of them.
struct ToolRequest {
  enum class Choice { none, automatic, required };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // [{name, description?, parameters}]
  Choice choice = Choice::none;
  std::string forced;    // the one function tool_choice names, or ""
  bool parallel = true;  // parallel_tool_calls: an array of calls allowed
  bool active() const { return choice != Choice::none && !tools.empty(); }
};

// OpenAI's tools, tool_choice and parallel_tool_calls, or the older functions
// and function_call. Every tool's parameters must compile to a grammar
// (core/grammar/json_schema.h: a keyword it cannot enforce is refused).
// Throws ApiError naming the field at fault.
ToolRequest parse_tool_request(const nlohmann::ordered_json& body, size_t max_tools);

// What the system message says of the tools, and the reply's grammar (active requests only).
std::string tools_prompt(const ToolRequest& t);
std::shared_ptr<const Grammar> tools_grammar(const ToolRequest& t);

// An assistant turn's tool_calls (OpenAI's [{id, type, function: {name,
// arguments}}]) as the text the model would have written; ApiError naming param if malformed.
std::string tool_calls_text(const nlohmann::json& tool_calls, const std::string& param);
// A tool's result as the model reads it.
std::string tool_result_text(const std::string& name, const std::string& content);

// The calls in a reply, or none where it is text (or was cut short); ids are id_prefix + their index.
std::vector<ToolCall> read_tool_calls(std::string_view reply, const std::string& id_prefix);
// Whether a reply that begins so may still be a call: blanks only, or a "{" or "[" first.
bool may_be_tool_call(std::string_view reply_start);

}  // namespace basalt::serve
