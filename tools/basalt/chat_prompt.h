// SPDX-License-Identifier: MIT
// Turns a conversation into prompt tokens through the model's chat template.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/model.h"

namespace basalt::cli {

// Extra variables for the template, as llama-server's chat_template_kwargs
// ({"enable_thinking": false} starts Qwen3's reply past its thinking): a JSON
// object that sets neither messages nor add_generation_prompt. Error naming
// `what` otherwise; "" parses to no variables.
void check_template_vars(const nlohmann::ordered_json& vars, const std::string& what);
nlohmann::ordered_json parse_template_vars(const std::string& text, const std::string& what);

class ChatPrompter {
 public:
  // Error if the model's template cannot be parsed. A model without a
  // template gets Gemma's turns where its vocabulary has their tokens, else
  // ChatML, and a note on stderr. vars: the template's extra variables.
  ChatPrompter(const Model& model, std::string system, nlohmann::ordered_json vars = nlohmann::ordered_json::object());
  // The tokens of system + messages, ending with the assistant's turn opened;
  // request_vars (checked by the caller) over the prompter's own.
  std::vector<int32_t> tokens_for(const std::vector<ChatMessage>& messages,
                                  const nlohmann::ordered_json& request_vars = nlohmann::ordered_json::object()) const;

 private:
  const Model& model_;
  std::string system_;
  nlohmann::ordered_json vars_;
  ChatTemplate template_;
};

}  // namespace basalt::cli
