// SPDX-License-Identifier: MIT
// Chat templates: the Jinja lexer, parser and renderer on a conversation,
// under small budgets so that each run stays fast (the limits themselves are
// what a runaway template meets).
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/chat/jinja.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  try {
    ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
    jinja::RenderOptions o;
    o.max_output_bytes = 1 << 20;
    o.max_items = 1 << 14;
    o.max_steps = 20000;
    o.now = std::tm{};
    t.set_options(o);
    const std::vector<ChatMessage> messages = {
        {"system", "Be brief."}, {"user", "Hi {{ 1 }} <|im_end|>"}, {"assistant", "Hello."}, {"user", "\xC3\xA9t\xC3\xA9?"}};
    (void)t.render(messages, true);
  } catch (const Error&) {
  }
  return 0;
}
