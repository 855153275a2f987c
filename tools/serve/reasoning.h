// SPDX-License-Identifier: MIT
// A reply's reasoning apart from its answer, as llama-server's
// --reasoning-format deepseek and vLLM's reasoning parsers return it
// (message.reasoning_content): models that think first (Qwen3, DeepSeek-R1
// and its distills) write "<think>...</think>" before the answer, or start
// inside it where their template opened <think> in the prompt.
#pragma once

#include <string>
#include <string_view>

namespace basalt::serve {

struct ReplyParts {
  std::string reasoning, content;
};

// Whether a prompt (its text's end) leaves the reply inside <think>.
bool prompt_opens_reasoning(std::string_view prompt_tail);

// The reply's pieces as they come, split into reasoning and content: a tag
// cut between two pieces is held back until the next one says what it is.
// The reasoning is what comes between <think> (at the start, after blanks) or
// the reply's start, for one that starts inside, and </think>; the blanks
// after </think> are dropped. A reply that never closes it is all reasoning.
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_inside) : state_(starts_inside ? State::inside : State::before) {}
  ReplyParts feed(std::string_view piece);
  ReplyParts finish();  // what is held back

 private:
  enum class State { before, inside, after_close, content };
  State state_;
  std::string held_;
};

// The whole reply at once.
ReplyParts split_reasoning(std::string_view reply, bool starts_inside);

}  // namespace basalt::serve
