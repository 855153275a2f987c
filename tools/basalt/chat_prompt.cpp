// SPDX-License-Identifier: MIT
#include "tools/basalt/chat_prompt.h"

#include <cstdio>

namespace basalt::cli {

namespace {
ChatTemplate template_of(const Model& m) {
  const Tokenizer& tok = m.tokenizer();
  auto text = [&](int32_t id) { return id >= 0 ? tok.token_to_piece(id, true) : std::string(); };
  if (m.chat_template().empty()) {
    if (tok.find("<start_of_turn>") >= 0 && tok.find("<end_of_turn>") >= 0) {  // Gemma's turn tokens: its format
      std::fprintf(stderr, "basalt: the model has no chat template; using Gemma's turns (its vocabulary has them)\n");
      return ChatTemplate::gemma_turns(text(tok.bos_id()));
    }
    std::fprintf(stderr, "basalt: the model has no chat template; using ChatML\n");
    return ChatTemplate::chatml();
  }
  return ChatTemplate(m.chat_template(), text(tok.bos_id()), text(tok.eos_id()));
}
}  // namespace

ChatPrompter::ChatPrompter(const Model& model, std::string system)
    : model_(model), system_(std::move(system)), template_(template_of(model)) {}

std::vector<int32_t> ChatPrompter::tokens_for(const std::vector<ChatMessage>& messages) const {
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  all.insert(all.end(), messages.begin(), messages.end());
  const std::string text = template_.render(all, true);
  const Tokenizer& tok = model_.tokenizer();
  // Templates usually write the BOS text themselves; don't add a second one.
  const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  const bool has_bos = !bos.empty() && text.compare(0, bos.size(), bos) == 0;
  return tok.encode(text, !has_bos, true);
}

}  // namespace basalt::cli
