// SPDX-License-Identifier: MIT
// Turns a conversation into prompt tokens through the model's chat template.
#pragma once

#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/model.h"

namespace basalt::cli {

class ChatPrompter {
 public:
  // Error if the model's template cannot be parsed. A model without a
  // template gets Gemma's turns where its vocabulary has their tokens, else
  // ChatML, and a note on stderr.
  ChatPrompter(const Model& model, std::string system);
  // The tokens of system + messages, ending with the assistant's turn opened.
  std::vector<int32_t> tokens_for(const std::vector<ChatMessage>& messages) const;

 private:
  const Model& model_;
  std::string system_;
  ChatTemplate template_;
};

}  // namespace basalt::cli
