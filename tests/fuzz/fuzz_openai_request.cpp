// SPDX-License-Identifier: MIT
// The server's request bodies: /v1/completions and /v1/chat/completions JSON
// through parse_completion_request's validation (the first byte picks the
// endpoint), and a valid chat request's messages through a chat template.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/chat/chat_template.h"
#include "core/error.h"
#include "tools/serve/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace basalt;
  using namespace basalt::serve;
  if (size < 1) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  ApiLimits limits;
  limits.max_prompt_bytes = 1 << 16;
  try {
    CompletionRequest r = parse_completion_request(body, chat, SamplingParams{}, 16, "basalt-fuzz", limits);
    if (chat) {
      static const ChatTemplate t = ChatTemplate::chatml();
      (void)t.render(r.messages, true);
    }
  } catch (const Error&) {
  }
  return 0;
}
