// SPDX-License-Identifier: MIT
// basalt chat: an interactive conversation through the model's chat template.
// The KV cache keeps the conversation, so each turn only computes what is new.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/runtime/session.h"
#include "tools/basalt/chat_prompt.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {
struct ChatOptions {
  ModelOptions model;
  std::string system;
  std::string template_vars;
  GenerateOptions gen;
  SamplingFlags sampling_given;
};

void chat(const ChatOptions& o) {
  auto model = load_model(o.model);
  GenerateOptions gen = o.gen;
  gen.sampling = with_model_defaults(o.gen.sampling, o.sampling_given, *model);
  ChatPrompter prompter(*model, o.system, parse_template_vars(o.template_vars, "--chat-template-kwargs"));
  auto session_ptr = make_session(o.model, *model, context_size(o.model, *model));
  Session& session = *session_ptr;
  const bool interactive = isatty(STDIN_FILENO);
  if (interactive) std::fprintf(stderr, "basalt: chat with %s; /exit or Ctrl-D to quit\n", model->spec().name.c_str());
  std::vector<ChatMessage> messages;
  std::string line;
  while (true) {
    if (interactive) std::fprintf(stdout, "> "), std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    messages.push_back({"user", line});
    std::vector<int32_t> prompt;
    try {
      prompt = prompter.tokens_for(messages);
      std::string reply;
      GenerationStats st = generate(session, prompt, gen, [&](std::string_view piece) {
        reply += piece;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      });
      std::fprintf(stdout, "\n");
      if (interactive)
        std::fprintf(stderr, "[%lld new prompt tokens at %.1f t/s, %lld generated at %.1f t/s]\n",
                     static_cast<long long>(st.n_prefilled), st.prefill_tps(), static_cast<long long>(st.n_generated),
                     st.decode_tps());
      messages.push_back({"assistant", reply});
    } catch (const Error& e) {
      // The conversation no longer fits (or the template refused it): say so and go on.
      std::fprintf(stderr, "basalt: %s\n", e.what());
      messages.pop_back();
    }
  }
}
}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->gen.max_tokens = -1;
  CLI::App* sub = app.add_subcommand("chat", "interactive multi-turn chat");
  add_model_options(*sub, o->model);
  sub->add_option("--system", o->system, "system message");
  add_template_vars_option(*sub, o->template_vars);
  sub->add_option("-n,--n-predict", o->gen.max_tokens, "most tokens per reply; -1 = until the end of the turn")
      ->check(CLI::Range(-1, 1 << 24));
  o->sampling_given = add_sampling_options(*sub, o->gen.sampling);
  sub->callback([o] { chat(*o); });
}

}  // namespace basalt::cli
