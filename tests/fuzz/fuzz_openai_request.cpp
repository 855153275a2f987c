// SPDX-License-Identifier: MIT
// The server's request bodies: /v1/completions and /v1/chat/completions JSON
// through parse_completion_request's validation (the first byte picks the
// endpoint; the second the served template's tool style: bit 0 Hermes, else
// bit 4 Llama 3, bits 1-3 what the template knows), a valid
// chat request's messages through a chat template (with its
// chat_template_kwargs), its tools' grammar over the body's text, and the body
// read as a reply's tool calls (whole and streamed) and as a reply that may
// think first.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/chat/chat_template.h"
#include "core/error.h"
#include "tools/serve/openai_api.h"
#include "tools/serve/reasoning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  using namespace basalt::serve;
  if (size < 2) return 0;
  const bool chat = data[0] & 1;
  const ToolFormat format = data[1] & 1 ? ToolFormat::hermes : data[1] & 16 ? ToolFormat::llama3 : ToolFormat::json;
  const ToolStyle style{format, (data[1] & 2) != 0, (data[1] & 4) != 0, (data[1] & 8) != 0};
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  ApiLimits limits;
  limits.max_prompt_bytes = 1 << 16;
  try {
    CompletionRequest r = parse_completion_request(body, chat, SamplingParams{}, 16, "basalt-fuzz", limits, style);
    if (chat) {
      static const ChatTemplate t = ChatTemplate::chatml();
      nlohmann::ordered_json turns = nlohmann::ordered_json::array();
      for (const ChatMessage& m : r.messages) turns.push_back({{"role", m.role}, {"content", m.content}});
      (void)t.render_json(turns, true, r.template_vars);
    }
    if (r.tools.active()) {
      GrammarMatcher m(*r.options.grammar);
      (void)m.accept(body.substr(0, 256));
    }
  } catch (const Error&) {
  }
  (void)read_tool_calls(body, "call_", style.format);
  ToolCallHold hold(style.format);
  std::string sent;
  for (size_t at = 0; at < body.size(); at += 7) sent += hold.feed(body.substr(at, 7));
  if (sent + hold.held() != body) __builtin_trap();  // the hold loses nothing
  (void)split_reasoning(body, chat);
  return 0;
}
