// SPDX-License-Identifier: MIT
// basalt run: one prompt in, streamed text out, then the speed.
#include <cstdio>

#include "core/chat/chat_template.h"
#include "core/error.h"
#include "core/runtime/session.h"
#include "tools/basalt/chat_prompt.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {
struct RunOptions {
  ModelOptions model;
  std::string prompt, system, template_vars;
  bool chat = false;
  GenerateOptions gen;
  SamplingFlags sampling_given;
  OutputFormat format;
};

void run(const RunOptions& o) {
  GenerateOptions gen = o.gen;
  gen.grammar = output_grammar(o.format);  // before the model loads: a bad schema fails at once
  auto model = load_model(o.model);
  gen.sampling = with_model_defaults(o.gen.sampling, o.sampling_given, *model);
  std::vector<int32_t> prompt;
  if (o.chat) {
    ChatPrompter chat(*model, o.system, parse_template_vars(o.template_vars, "--chat-template-kwargs"));
    prompt = chat.tokens_for({{"user", o.prompt}});
  } else {
    prompt = model->tokenizer().encode(o.prompt, true, true);
  }
  auto session_ptr = make_session(o.model, *model, context_size(o.model, *model));
  Session& session = *session_ptr;
  GenerationStats st = generate(session, prompt, gen, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fprintf(stdout, "\n");
  std::fprintf(stderr, "basalt: prefill %lld tokens in %.3f s (%.1f tokens/s) | decode %lld tokens in %.3f s (%.1f tokens/s) | stop: %s\n",
               static_cast<long long>(st.n_prefilled), st.prefill_s, st.prefill_tps(),
               static_cast<long long>(st.n_generated), st.decode_s, st.decode_tps(), st.stop_reason.c_str());
  if (gen.grammar)
    std::fprintf(stderr, "basalt: %lld of %lld draws missed the grammar and were made again\n",
                 static_cast<long long>(st.n_redrawn), static_cast<long long>(st.n_generated));
}
}  // namespace

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run", "generate text from a prompt");
  add_model_options(*sub, o->model);
  sub->add_option("-p,--prompt", o->prompt, "the prompt")->required();
  sub->add_option("-n,--n-predict", o->gen.max_tokens, "tokens to generate; -1 = until the end or the context is full")
      ->check(CLI::Range(-1, 1 << 24));
  CLI::Option* chat = sub->add_flag("--chat", o->chat, "wrap the prompt in the model's chat template as a user message");
  sub->add_option("--system", o->system, "system message (with --chat)")->needs(chat);
  add_template_vars_option(*sub, o->template_vars)->needs(chat);
  sub->add_option("--stop", o->gen.stop, "stop when this text appears (repeatable)");
  o->sampling_given = add_sampling_options(*sub, o->gen.sampling);
  add_output_format_options(*sub, o->format);
  sub->callback([o] { run(*o); });
}

}  // namespace basalt::cli
