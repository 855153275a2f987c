// SPDX-License-Identifier: MIT
// Function calling for `basalt serve`, in one of two formats, each held to a
// grammar so that every call is well formed and its arguments an instance of
// its tool's parameters schema:
// - json, which any model can follow: the tools are described in the system
//   message, and the reply is either a call, {"name": ..., "arguments": {...}}
//   (several as a JSON array where parallel calls are allowed), or, under
//   tool_choice "auto", plain text that starts with none of "{", "[" or a
//   blank (llama.cpp's "generic" format works the same way);
// - hermes, the format Qwen 2.5, Qwen3 and Hermes models are trained on:
//   their template lists the tools (its `tools` variable), and the reply is
//   text, then calls in <tool_call>{"name": ..., "arguments": {...}}</tool_call>
//   tags, results coming back in <tool_response> tags; a model that thinks
//   (its template writes <think>) may think first;
// - llama3, Llama 3.1's, 3.2's and 3.3's: the template lists the tools, and
//   the reply is one call, {"name": ..., "parameters": {...}}, or text as in
//   json; results go back as the template's "tool" (ipython) turns.
// Earlier turns' calls and the tools' results go back into the conversation
// in the same format.
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

enum class ToolFormat { json, hermes, llama3 };
const char* tool_format_name(ToolFormat f);

// How the served model writes calls, from its chat template.
struct ToolStyle {
  ToolFormat format = ToolFormat::json;
  bool template_lists_tools = false;  // hermes, llama3: the template writes the tools from its `tools` variable
  bool template_has_tool_role = false;  // hermes, llama3: results go to the template as role "tool" messages
  bool thinks = false;                // the template writes <think>: a reply may think before it calls,
                                      // and an earlier turn's reasoning_content goes back in the tags
};
// hermes where the template writes <tool_call> tags, llama3 where it asks for
// {"name": ..., "parameters": ...} and has an ipython role (what else it
// knows then: the tools, a "tool" role), else json.
ToolStyle tool_style_of(std::string_view chat_template);

// The tools a request offers and what it asks of them.
struct ToolRequest {
  enum class Choice { none, automatic, required };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // [{name, description?, parameters}]
  Choice choice = Choice::none;
  std::string forced;    // the one function tool_choice names, or ""
  bool parallel = true;  // parallel_tool_calls: an array of calls allowed
  ToolStyle style;       // the served model's
  bool active() const { return choice != Choice::none && !tools.empty(); }
};

// OpenAI's tools, tool_choice and parallel_tool_calls, or the older functions
// and function_call. Every tool's parameters must compile to a grammar
// (core/grammar/json_schema.h: a keyword it cannot enforce is refused).
// Throws ApiError naming the field at fault.
ToolRequest parse_tool_request(const nlohmann::ordered_json& body, size_t max_tools, const ToolStyle& style = {});

// What the system message says of the tools ("" where the template lists
// them: hermes), and the reply's grammar (active requests only).
std::string tools_prompt(const ToolRequest& t);
std::shared_ptr<const Grammar> tools_grammar(const ToolRequest& t);
// The template's `tools` variable: OpenAI's [{type: function, function: {...}}].
nlohmann::ordered_json tools_variable(const ToolRequest& t);

// An assistant turn's tool_calls (OpenAI's [{id, type, function: {name,
// arguments}}]) as the text the model would have written after its content;
// ApiError naming param if malformed.
std::string tool_calls_text(const nlohmann::json& tool_calls, const std::string& param, ToolFormat f = ToolFormat::json);
// The turn's content and its calls' text, joined as the format writes them
// (llama3: the calls alone, as its templates write a turn that calls).
std::string with_tool_calls(const std::string& content, const std::string& calls_text, ToolFormat f);
// A tool's result as the model reads it.
std::string tool_result_text(const std::string& name, const std::string& content, ToolFormat f = ToolFormat::json);

// A reply read for calls: the text before them (json: none) and the calls;
// no calls where the reply is text, or a call in it was cut short (all of it
// is text then). Ids are id_prefix + their index.
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolReply read_tool_calls(std::string_view reply, const std::string& id_prefix, ToolFormat f = ToolFormat::json);

// A streamed reply's text, let out as soon as it cannot be part of a call
// (json, llama3: a reply that starts with a blank, "{" or "[" is held until
// it is known to be text; hermes: from a "<tool_call>" tag on, and while the
// text ends with what may start one). What is held is read for calls at the end.
class ToolCallHold {
 public:
  explicit ToolCallHold(ToolFormat f) : format_(f) {}
  std::string feed(std::string_view piece);  // what can be sent now
  const std::string& held() const { return held_; }

 private:
  ToolFormat format_;
  bool decided_ = false;  // json: the reply is text; hermes: a tag has begun
  std::string held_;
};

}  // namespace basalt::serve
