// SPDX-License-Identifier: MIT
#include "tools/basalt/chat_prompt.h"

#include <cstdio>

#include "core/error.h"

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

void check_template_vars(const nlohmann::ordered_json& vars, const std::string& what) {
  if (!vars.is_object()) throw Error(what + " must be a JSON object, e.g. {\"enable_thinking\": false}");
  for (const char* own : {"messages", "add_generation_prompt"})
    if (vars.contains(own)) throw Error(what + " cannot set " + own + ": the conversation sets it");
}

nlohmann::ordered_json parse_template_vars(const std::string& text, const std::string& what) {
  if (text.empty()) return nlohmann::ordered_json::object();
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(text, nullptr, false);
  if (vars.is_discarded()) throw Error(what + " is not valid JSON: " + text);
  check_template_vars(vars, what);
  return vars;
}

ChatPrompter::ChatPrompter(const Model& model, std::string system, nlohmann::ordered_json vars)
    : model_(model), system_(std::move(system)), vars_(std::move(vars)), template_(template_of(model)) {}

std::vector<int32_t> ChatPrompter::tokens_for(const std::vector<ChatMessage>& messages,
                                              const nlohmann::ordered_json& request_vars) const {
  std::vector<ChatMessage> all;
  if (!system_.empty()) all.push_back({"system", system_});
  all.insert(all.end(), messages.begin(), messages.end());
  nlohmann::ordered_json turns = nlohmann::ordered_json::array(), vars = vars_;
  for (const ChatMessage& m : all) turns.push_back({{"role", m.role}, {"content", m.content}});
  vars.update(request_vars);
  const std::string text = template_.render_json(turns, true, vars);
  const Tokenizer& tok = model_.tokenizer();
  // Templates usually write the BOS text themselves; don't add a second one.
  const std::string bos = tok.bos_id() >= 0 ? tok.token_to_piece(tok.bos_id(), true) : "";
  const bool has_bos = !bos.empty() && text.compare(0, bos.size(), bos) == 0;
  return tok.encode(text, !has_bos, true);
}

}  // namespace basalt::cli
