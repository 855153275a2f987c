// SPDX-License-Identifier: MIT
// basalt perplexity: the model's perplexity over a text file
// (core/runtime/perplexity.h), with a progress line and its ETA on stderr.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/runtime/perplexity.h"
#include "core/util/utf8.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {
struct PerplexityOptions {
  ModelOptions model;
  std::string file;
  int64_t ctx = 512, stride = 0;  // 0: ctx / 2
  bool json = false;
};

void run_perplexity(const PerplexityOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) throw Error("cannot read " + o.file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (!is_valid_utf8(text)) throw Error(o.file + " is not valid UTF-8");
  auto model = load_model(o.model, !o.json);
  const std::vector<int32_t> tokens = model->tokenizer().encode(text, true, false);
  const int64_t stride = o.stride > 0 ? o.stride : std::max<int64_t>(1, o.ctx / 2);
  const auto t0 = std::chrono::steady_clock::now();
  auto progress = [&](int64_t done, int64_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta = done > 0 ? s * static_cast<double>(total - done) / static_cast<double>(done) : 0;
    std::fprintf(stderr, "\rbasalt: perplexity %lld/%lld tokens, %.0f s, ETA %.0f s   ", static_cast<long long>(done),
                 static_cast<long long>(total), s, eta);
  };
  const PerplexityResult r = perplexity(*model, tokens, o.ctx, stride, o.model.ubatch, parse_kv_type(o.model.kv_type), progress);
  std::fprintf(stderr, "\n");
  if (o.json)
    std::printf("{\"file\": \"%s\", \"tokens\": %zu, \"scored\": %lld, \"ctx\": %lld, \"stride\": %lld, \"nll\": %.9g, \"perplexity\": %.9g}\n",
                o.file.c_str(), tokens.size(), static_cast<long long>(r.scored), static_cast<long long>(o.ctx),
                static_cast<long long>(stride), r.nll, r.ppl());
  else
    std::printf("perplexity %.4f over %lld tokens (context %lld, stride %lld)\n", r.ppl(), static_cast<long long>(r.scored),
                static_cast<long long>(o.ctx), static_cast<long long>(stride));
}
}  // namespace

void register_perplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* sub = app.add_subcommand("perplexity", "perplexity of the model over a text file");
  add_model_options(*sub, o->model);
  sub->add_option("-f,--file", o->file, "UTF-8 text file")->required();
  sub->add_option("--ctx", o->ctx, "tokens per window")->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  sub->add_option("--stride", o->stride, "tokens between window starts (default: ctx / 2)")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_flag("--json", o->json, "one JSON object with the result");
  sub->callback([o] { run_perplexity(*o); });
}

}  // namespace basalt::cli
