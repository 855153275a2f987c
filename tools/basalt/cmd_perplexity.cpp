// SPDX-License-Identifier: MIT
// basalt perplexity: the model's perplexity over a text file
// (core/runtime/perplexity.h), with a progress line and its ETA on stderr;
// with --kl-base, also the KL divergence from another KV cache type's
// predictions, both run in this process on the same windows.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/graph/kv_cache.h"
#include "core/runtime/perplexity.h"
#include "core/util/utf8.h"
#include "cpu/attention.h"
#include "cpu/isa.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {
struct PerplexityOptions {
  ModelOptions model;
  std::string file;
  int64_t ctx = 512, stride = 0;  // 0: ctx / 2
  std::string kl_base;            // "": no KL
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
  const KvType kv_type = parse_kv_type(o.model.kv_type);
  std::optional<KvType> kl_base;
  if (!o.kl_base.empty()) kl_base = parse_kv_type(o.kl_base);
  const PerplexityResult r = perplexity(*model, tokens, o.ctx, stride, o.model.ubatch, kv_type, kl_base, progress);
  const double same_top = r.kl ? static_cast<double>(r.kl->same_top) / static_cast<double>(r.scored) : 0;
  std::fprintf(stderr, "\n");
  // What the attention kernels round with each cache (cpu/attention.h), by the reference's names.
  auto dots_of = [&](KvType t) { return cpu::attention_dots_name(cpu::attention_dots(selected_isa(), t, model->spec().head_dim)); };
  if (o.json) {
    nlohmann::json j = {{"file", o.file}, {"tokens", tokens.size()}, {"scored", r.scored}, {"ctx", o.ctx},
                        {"stride", stride}, {"kv_type", kv_type_name(kv_type)},
                        {"attention_dots", dots_of(kv_type)},
                        {"nll", r.nll}, {"perplexity", r.ppl()}};
    if (r.kl)
      j.update({{"kl_base", kv_type_name(*kl_base)}, {"base_attention_dots", dots_of(*kl_base)}, {"base_perplexity", r.base_ppl()}, {"kl_mean", r.kl->mean()},
                {"kl_median", r.kl->quantile(0.5)}, {"kl_p99", r.kl->quantile(0.99)}, {"kl_max", r.kl->quantile(1)},
                {"same_top", same_top}});
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("perplexity %.4f over %lld tokens (context %lld, stride %lld)\n", r.ppl(), static_cast<long long>(r.scored),
              static_cast<long long>(o.ctx), static_cast<long long>(stride));
  if (r.kl)
    std::printf("against the %s cache (perplexity %.4f, %+.2f%%): KL mean %.6f, median %.6f, 99%% %.6f, max %.6f; "
                "same top token %.2f%%\n", kv_type_name(*kl_base), r.base_ppl(), 100 * (r.ppl() / r.base_ppl() - 1),
                r.kl->mean(), r.kl->quantile(0.5), r.kl->quantile(0.99), r.kl->quantile(1),
                100 * same_top);
}
}  // namespace

void register_perplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* sub = app.add_subcommand("perplexity", "perplexity of the model over a text file");
  add_model_options(*sub, o->model);
  sub->add_option("-f,--file", o->file, "UTF-8 text file")->required();
  sub->add_option("--ctx", o->ctx, "tokens per window")->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  sub->add_option("--stride", o->stride, "tokens between window starts (default: ctx / 2)")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--kl-base", o->kl_base,
                  "also run each window with this KV cache type (f16, q8, q4, k8v4) and report the KL divergence "
                  "from its predictions (twice the time)")
      ->check(CLI::IsMember({"f16", "q8", "q4", "k8v4"}));
  sub->add_flag("--json", o->json, "one JSON object with the result");
  sub->callback([o] { run_perplexity(*o); });
}

}  // namespace basalt::cli
