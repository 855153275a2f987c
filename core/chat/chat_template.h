// SPDX-License-Identifier: MIT
// Chat templates: turns a conversation into the prompt text a model was trained on.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/chat/jinja.h"

namespace basalt {

struct ChatMessage {
  std::string role;
  std::string content;
};

// A GGUF's tokenizer.chat_template, rendered as transformers'
// apply_chat_template does: the variables are messages, add_generation_prompt,
// bos_token, eos_token, tools (none) and documents (none).
class ChatTemplate {
 public:
  // source: the Jinja template; bos/eos tokens' text are passed to it as
  // bos_token/eos_token. Parses once; a basalt::Error if it cannot.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);

  // A basalt::Error on failure, with the template's own message when it
  // rejects the conversation (raise_exception).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  // The general form: messages as JSON objects (tool_calls, content parts...)
  // and extra variables as a JSON object (tools, date_string,
  // enable_thinking...), which override the defaults above.
  std::string render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                          const nlohmann::ordered_json& extra) const;

  // The fallbacks when a model has no template: ChatML, or Gemma's turns
  // (<start_of_turn>role ... <end_of_turn>, the assistant's role "model", a
  // system message put before the first user message) where the vocabulary
  // has Gemma's turn tokens. bos: the model's BOS text (Gemma's turns start with it).
  static ChatTemplate chatml();
  static ChatTemplate gemma_turns(std::string bos);

  const std::string& source() const { return source_; }
  // Runaway limits, and the clock strftime_now() reads (tests fix it).
  void set_options(const jinja::RenderOptions& options) { options_ = options; }

 private:
  std::string render_context(jinja::DictData context) const;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  std::shared_ptr<const jinja::Template> template_;
  jinja::RenderOptions options_;
};

// A JSON value as a template value; objects keep their key order.
jinja::Value json_to_value(const nlohmann::ordered_json& j);

}  // namespace basalt
