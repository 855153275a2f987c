// SPDX-License-Identifier: MIT
// basalt info: what a model is and what running it takes.
#include <cstdio>
#include <map>

#include "core/graph/kv_cache.h"
#if defined(BASALT_VULKAN)
#include "gpu/device.h"
#endif
#include "tools/basalt/common.h"
#include "tools/serve/tool_calls.h"

namespace basalt::cli {

namespace {
std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

void info(const ModelOptions& o) {
  auto m = load_model(o, false);
  const ModelSpec& s = m->spec();
  const int64_t n_ctx = context_size(o, *m);
  std::printf("source          %s\n", m->source().c_str());
  std::printf("name            %s\n", s.name.c_str());
  std::printf("architecture    %s%s\n", s.arch.c_str(), s.is_moe() ? " (mixture of experts)" : "");
  std::printf("parameters      %.2fM\n", m->n_params() / 1e6);
  std::printf("layers          %lld\n", static_cast<long long>(s.n_layer));
  std::printf("embedding       %lld\n", static_cast<long long>(s.n_embd));
  std::printf("feed-forward    %lld%s\n", static_cast<long long>(s.n_ff), s.is_moe() ? " (each expert)" : "");
  std::printf("heads           %lld query, %lld key/value (head dim %lld)\n", static_cast<long long>(s.n_head),
              static_cast<long long>(s.n_head_kv), static_cast<long long>(s.head_dim));
  if (s.is_moe())
    std::printf("experts         %lld, %lld per token\n", static_cast<long long>(s.n_expert), static_cast<long long>(s.n_expert_used));
  std::printf("vocabulary      %lld\n", static_cast<long long>(s.n_vocab));
  std::printf("context         %lld trained\n", static_cast<long long>(s.n_ctx_train));
  std::printf("rope            theta %g, %s ordering, dims %lld, freq scale %g\n", s.rope_theta,
              s.rope_style == RopeStyle::normal ? "normal" : "neox", static_cast<long long>(s.rope_dim), s.rope_freq_scale);
  if (s.yarn_orig_ctx > 0)
    std::printf("rope scaling    YaRN from %lld tokens (beta fast %g, slow %g)\n", static_cast<long long>(s.yarn_orig_ctx),
                s.yarn_beta_fast, s.yarn_beta_slow);
  if (!s.rope_long_factors.empty())
    std::printf("rope scaling    LongRoPE: short factors up to %lld tokens of context, long ones past it (attention factor %g)\n",
                static_cast<long long>(s.rope_long_context), s.rope_attn_factor);
  else if (!s.rope_freq_factors.empty()) std::printf("rope scaling    a factor per dimension pair (Llama 3.1's llama3)\n");
  if (s.sliding_window > 0) {
    if (s.swa_period > 0)
      std::printf("attention       a window of %lld positions, but every %lld%s layer global\n",
                  static_cast<long long>(s.sliding_window), static_cast<long long>(s.swa_period),
                  s.swa_period == 2 ? "nd" : s.swa_period == 3 ? "rd" : "th");
    else std::printf("attention       a window of %lld positions on every layer\n", static_cast<long long>(s.sliding_window));
  }
  if (s.attn_softcap > 0 || s.final_softcap > 0)
    std::printf("soft-capping    scores %g, logits %g (0: none)\n", s.attn_softcap, s.final_softcap);
  std::printf("rms norm eps    %g\n", s.rms_eps);
  std::printf("output          %s\n", s.tied_output ? "tied to the token embedding" : "separate");
  const GenerationDefaults& g = m->generation_defaults();
  if (g.temperature || g.top_k || g.top_p || g.repeat_penalty || g.do_sample) {
    std::printf("sampling        from generation_config.json:");
    if (g.do_sample) std::printf(" do_sample %s", *g.do_sample ? "true" : "false");
    if (g.temperature) std::printf(" temperature %g", *g.temperature);
    if (g.top_k) std::printf(" top_k %d", *g.top_k);
    if (g.top_p) std::printf(" top_p %g", *g.top_p);
    if (g.repeat_penalty) std::printf(" repetition_penalty %g", *g.repeat_penalty);
    std::printf("\n");
  }
  std::printf("tensor types    ");
  for (auto& [name, count] : m->file_types()) std::printf("%s x%d  ", name.c_str(), count);
  std::printf("\n");
  std::map<std::string, int> engine_formats;
  for (const Weight* w : m->weights()) engine_formats[w->describe()]++;
  std::printf("engine formats  ");
  for (auto& [name, count] : engine_formats) std::printf("%s x%d  ", name.c_str(), count);
  std::printf("\n");
  // What `basalt serve` makes of the chat template (tools/serve/tool_calls.h).
  const serve::ToolStyle chat = serve::tool_style_of(m->chat_template());
  if (m->chat_template().empty())
    std::printf("chat template   none (ChatML, or Gemma's turns where the vocabulary has them)\n");
  else
    std::printf("chat template   its own; tool calls in %s format%s\n", serve::tool_format_name(chat.format),
                chat.thinks ? "; thinks first (<think>)" : "");
  const size_t weights = m->weight_bytes();
  const size_t kv = KvCache::bytes(s, n_ctx, KvType::f16, o.ubatch);
  const size_t kv8 = KvCache::bytes(s, n_ctx, KvType::q8, o.ubatch);
  const std::string q4 = kv_type_unsupported(KvType::q4, s.head_dim).empty()
                             ? ", " + human_bytes(KvCache::bytes(s, n_ctx, KvType::q4, o.ubatch)) + " with q4"
                             : "";
  std::printf("memory          %s weights + %s KV cache (f16, %lld tokens; %s with --kv-type q8%s) = %s\n",
              human_bytes(weights).c_str(), human_bytes(kv).c_str(), static_cast<long long>(n_ctx), human_bytes(kv8).c_str(),
              q4.c_str(), human_bytes(weights + kv).c_str());
}

// The Vulkan devices, in --gpu-device's numbering, and the one each --gpu choice would take.
void gpus() {
#if defined(BASALT_VULKAN)
  std::string why;
  const std::vector<gpu::GpuInfo> list = gpu::list_gpus(&why);
  if (list.empty()) {
    std::printf("no Vulkan device: %s\n", why.c_str());
    return;
  }
  for (const gpu::GpuInfo& g : list)
    std::printf("%d  %s\n   driver %s\n", g.index, g.describe().c_str(), g.driver.c_str());
  const int all = gpu::pick_gpu(list, true), hardware = gpu::pick_gpu(list, false);
  std::printf("--gpu all/attn/experts takes device %d; --gpu auto %s\n", all,
              hardware >= 0 ? ("considers device " + std::to_string(hardware)).c_str() : "stays on the CPU (no real GPU)");
#else
  std::printf("this build has no Vulkan backend (BASALT_VULKAN off)\n");
#endif
}

struct InfoOptions {
  ModelOptions model;
  bool gpus = false;
};
}  // namespace

void register_info(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "print a model's architecture, sizes and memory needs; or the GPUs");
  add_model_options(*sub, o->model, true);
  sub->add_flag("--gpus", o->gpus, "list the Vulkan devices instead");
  sub->callback([o] {
    if (o->gpus) return gpus();
    info(o->model);
  });
}

}  // namespace basalt::cli
