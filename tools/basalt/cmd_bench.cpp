// SPDX-License-Identifier: MIT
// basalt bench: prefill and decode speed, measured like llama-bench: pp of P
// random tokens, tg of N tokens after D tokens of context, repeated.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/runtime/scheduler.h"
#include "core/runtime/session.h"
#include "core/util/threads.h"
#include "cpu/attention.h"
#include "cpu/isa.h"
#include "cpu/peaks.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {
struct BenchOptions {
  ModelOptions model;
  int64_t n_prompt = 512, n_gen = 128, depth = 0;
  int reps = 5;
  bool json = false;
  bool roofline = false;  // the read bandwidth measured beside each decode repetition
  int sequences = 1;      // decoded together, as a server's running batch
  int vs_depth0 = 0;      // pairs of decodes at depth 0 and at depth, alternating after one fill
};

struct Stat {
  double mean = 0, sd = 0;
};
Stat stats(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Bytes a decode step reads: the weights it streams (all but the embedding
// table, of which one row, unless the output layer is that table; of stacked
// experts the share a token uses), and the KV cache of `positions` positions.
double decode_step_bytes(const Model& model, KvType kv_type, double positions) {
  const ModelSpec& spec = model.spec();
  double bytes = 0;
  for (const Weight* w : model.weights()) {
    if (w == &model.token_embd() && !spec.tied_output) continue;
    const bool experts = w->mat_rows < w->rows;
    bytes += static_cast<double>(w->total_bytes()) * (experts ? static_cast<double>(spec.n_expert_used) / spec.n_expert : 1.0);
  }
  const double kv_position = static_cast<double>(spec.n_layer * KvCache::position_bytes(spec.n_head_kv, spec.head_dim, kv_type));
  return bytes + kv_position * positions;
}

// Decode speed of o.sequences requests decoding together through the
// server's scheduler: the tokens of all of them a second. Each has depth
// random tokens of context (at least 1), prefilled before the clock starts
// (in one step up to 4096 tokens in all; past that the clock sees the rest).
double batched_decode_rate(const Model& model, const BenchOptions& o, const std::vector<std::vector<int32_t>>& prompts) {
  SchedulerOptions so;
  so.max_running = o.sequences;
  so.slot_ctx = static_cast<int64_t>(prompts[0].size()) + o.n_gen + 1;
  so.step_tokens = std::min<int64_t>(4096, o.sequences * static_cast<int64_t>(prompts[0].size()));
  so.kv_type = parse_kv_type(o.model.kv_type);
  so.offload = o.model.offload;
  so.prefix_cache = false;
  Scheduler sched(model, so);
  GenerateOptions g;
  g.max_tokens = static_cast<int32_t>(o.n_gen);
  g.sampling.temperature = 0;
  g.stop_at_end_of_generation = false;
  for (const auto& p : prompts) {
    ScheduledRequest r;
    r.prompt = p;
    r.options = g;
    sched.submit(std::move(r));
  }
  sched.step();  // the prompts, and each one's first token
  const double t0 = now();
  sched.run_until_idle();
  return static_cast<double>(o.sequences * (o.n_gen - 1)) / (now() - t0);
}

void bench(const BenchOptions& o) {
  if (o.vs_depth0 > 0 && (o.depth == 0 || o.n_gen == 0 || o.sequences > 1))
    throw Error("--vs-depth0 needs a depth (-d) and tokens to decode (-n), and one sequence");
  auto model = load_model(o.model, !o.json);
  const int64_t V = model->spec().n_vocab;
  std::mt19937 rng(1);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % V);
    return t;
  };
  const int64_t n_ctx = std::max(o.n_prompt, o.depth + o.n_gen * (1 + o.vs_depth0)) + 1;
  const KvType kv_type = parse_kv_type(o.model.kv_type);
  // --roofline: a read of a buffer past the caches right before each decode
  // repetition, on the same threads, so each ratio compares like with like
  // on a machine whose bandwidth drifts (shared machines do).
  cpu::ReadBuffer read_buf;
  if (o.roofline && o.n_gen > 0) read_buf = cpu::make_read_buffer(thread_count());
  const double step_bytes = decode_step_bytes(*model, kv_type, static_cast<double>(o.depth) + (o.n_gen - 1) / 2.0);
  std::vector<double> pp, tg, fill, read_gbs, roofline;  // fill: the depth's prefill, tokens/s
  std::vector<double> tg_depth0, tg_paired, depth_ratio;   // --vs-depth0's pairs
  std::string plan;  // the GPU placement ("" when none was asked for)
  for (int r = -1; r < o.reps; ++r) {  // r = -1: warm-up, not counted
    if (o.n_prompt > 0) {
      auto fresh_ptr = make_session(o.model, *model, n_ctx, !o.json && r < 0);
      Session& fresh = *fresh_ptr;
      if (plan.empty()) plan = fresh.offload_plan();
      const auto prompt = random_tokens(o.n_prompt);
      const double t0 = now();
      fresh.set_context(prompt);
      if (r >= 0) pp.push_back(static_cast<double>(o.n_prompt) / (now() - t0));
    }
    if (o.n_gen > 1 && o.sequences > 1) {
      std::vector<std::vector<int32_t>> prompts;
      for (int i = 0; i < o.sequences; ++i) prompts.push_back(random_tokens(std::max<int64_t>(1, o.depth)));
      const double rate = batched_decode_rate(*model, o, prompts);
      if (r >= 0) tg.push_back(rate);
    } else if (o.n_gen > 0) {
      auto s_ptr = make_session(o.model, *model, n_ctx, !o.json && r < 0 && o.n_prompt == 0);
      Session& s = *s_ptr;
      if (plan.empty()) plan = s.offload_plan();
      // The warm-up fills at most 1024 tokens: a 32k fill takes many minutes and warms nothing more.
      auto ctx = random_tokens(std::max<int64_t>(1, r < 0 ? std::min<int64_t>(o.depth, 1024) : o.depth));
      const double f0 = now();
      s.set_context(ctx);
      if (r >= 0 && o.depth > 0) fill.push_back(static_cast<double>(o.depth) / (now() - f0));
      const double peak = read_buf.bytes ? cpu::read_gbs(read_buf, thread_count()) : 0;
      auto decode_rate = [&](Session& session) {
        const double t0 = now();
        for (int64_t i = 0; i < o.n_gen; ++i) session.append(static_cast<int32_t>(rng() % V));
        return static_cast<double>(o.n_gen) / (now() - t0);
      };
      const double rate = decode_rate(s);
      if (r >= 0) tg.push_back(rate);
      // --vs-depth0: decode at depth 0 (a session of its own) and at the depth
      // in turn, so that each ratio compares two runs a second apart: on a
      // shared machine the bandwidth drifts more between processes than that.
      if (r >= 0 && o.vs_depth0 > 0) {
        auto shallow_ptr = make_session(o.model, *model, o.n_gen * (o.vs_depth0 + 1) + 2, false);
        shallow_ptr->set_context(random_tokens(1));
        decode_rate(*shallow_ptr);  // its first tokens, not counted
        for (int k = 0; k < o.vs_depth0; ++k) {
          const double shallow = decode_rate(*shallow_ptr), deep = decode_rate(s);
          tg_depth0.push_back(shallow), tg_paired.push_back(deep), depth_ratio.push_back(deep / shallow);
        }
      }
      // Against the CPU's bandwidth only when the CPU reads the bytes.
      if (r >= 0 && peak > 0 && plan.empty()) read_gbs.push_back(peak), roofline.push_back(100 * rate * step_bytes / 1e9 / peak);
    }
  }
  const Stat p = pp.empty() ? Stat{} : stats(pp), g = tg.empty() ? Stat{} : stats(tg);
  const ModelSpec& spec = model->spec();
  const double decode_bytes = decode_step_bytes(*model, kv_type, 0);  // the weights
  // What a decode step reads of the cache per position of context (every layer's keys and values).
  const int64_t kv_position_bytes = spec.n_layer * KvCache::position_bytes(spec.n_head_kv, spec.head_dim, kv_type);
  const std::string kv_label = kv_type == KvType::f16 ? "" : std::string(" kv ") + kv_type_name(kv_type);
  if (o.json) {
    nlohmann::json j = {{"model", spec.name},
                              {"arch", spec.arch},
                              {"params", model->n_params()},
                              {"weight_bytes", model->weight_bytes()},
                              {"threads", thread_count()},
                              {"isa", isa_name(selected_isa())},
                              {"attention_bf16_dots", cpu::attention_bf16_dots()},  // cpu/attention.h
                              {"attention_dots", cpu::attention_dots_name(cpu::attention_dots(selected_isa(), kv_type, spec.head_dim))},
                              {"n_prompt", o.n_prompt},
                              {"n_gen", o.n_gen},
                              {"depth", o.depth},
                              {"sequences", o.sequences},
                              {"reps", o.reps},
                              {"decode_bytes", decode_bytes},
                              {"kv_type", kv_type_name(kv_type)},
                              {"kv_position_bytes", kv_position_bytes},
                              // What one sequence's cache holds at the deepest point (rings included).
                              {"kv_bytes", KvCache::bytes(spec, std::max(o.n_prompt, o.depth + o.n_gen), kv_type, o.model.ubatch)},
                              {"pp_tokens_per_s", p.mean},
                              {"pp_sd", p.sd},
                              {"tg_tokens_per_s", g.mean},
                              {"tg_sd", g.sd},
                              {"gpu", o.model.offload.gpu},
                              {"gpu_plan", plan}};
    // The prefill of the depth's context (from empty, in --ubatch chunks): long-context prefill speed.
    if (!fill.empty()) j["depth_fill_tokens_per_s"] = median(fill);
    if (!depth_ratio.empty()) {  // medians of the pairs: decode at depth 0, at the depth, and their ratio
      j["tg_depth0_tokens_per_s"] = median(tg_depth0);
      j["tg_paired_tokens_per_s"] = median(tg_paired);
      j["depth_vs_depth0"] = median(depth_ratio);
      j["depth_vs_depth0_all"] = depth_ratio;
    }
    if (!roofline.empty()) {
      j["decode_step_bytes"] = step_bytes;  // weights and the cache at the mean decode position
      j["read_gbs"] = median(read_gbs);
      j["tg_roofline_pct"] = median(roofline);  // of each repetition's adjacent read bandwidth
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (!plan.empty()) std::printf("placement: %s\n", plan.c_str());
    std::printf("%-28s %8s %6s %10s %18s\n", "model", "threads", "isa", "test", "tokens/s");
    if (!pp.empty())
      std::printf("%-28s %8d %6s %10s %10.2f +- %.2f\n", model->spec().name.c_str(), thread_count(), isa_name(selected_isa()),
                  ("pp" + std::to_string(o.n_prompt) + kv_label).c_str(), p.mean, p.sd);
    if (!tg.empty())
      std::printf("%-28s %8d %6s %10s %10.2f +- %.2f\n", model->spec().name.c_str(), thread_count(), isa_name(selected_isa()),
                  ("tg" + std::to_string(o.n_gen) + (o.depth ? "@d" + std::to_string(o.depth) : "") +
                   (o.sequences > 1 ? "x" + std::to_string(o.sequences) : "") + kv_label)
                      .c_str(),
                  g.mean, g.sd);
    if (!depth_ratio.empty())
      std::printf("decode at depth %lld against depth 0, %zu pairs in turn: %.0f%% (median; %.0f%%-%.0f%%), %.2f against %.2f tokens/s\n",
                  static_cast<long long>(o.depth), depth_ratio.size(), 100 * median(depth_ratio),
                  100 * *std::min_element(depth_ratio.begin(), depth_ratio.end()),
                  100 * *std::max_element(depth_ratio.begin(), depth_ratio.end()), median(tg_paired), median(tg_depth0));
    if (!roofline.empty())
      std::printf("decode: %.0f%% of the read bandwidth measured beside it (median of %zu; %.1f GB/s, %.0f MB a token)\n",
                  median(roofline), roofline.size(), median(read_gbs), step_bytes / 1e6);
  }
}
}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "measure prefill and decode speed");
  add_model_options(*sub, o->model);
  sub->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens to prefill (0: skip)")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("-n,--n-gen", o->n_gen, "tokens to decode (0: skip)")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("-d,--depth", o->depth, "context tokens before decoding")->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("-r,--repetitions", o->reps, "repetitions")->check(CLI::Range(1, 1000));
  sub->add_option("--sequences", o->sequences,
                  "decode this many sequences together, as basalt serve's running batch (tg counts all their tokens)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--vs-depth0", o->vs_depth0,
                  "after the fill, K pairs of -n token decodes at depth 0 (a second session) and at -d, in turn: "
                  "decode at depth against depth 0, robust to a machine whose bandwidth drifts")
      ->check(CLI::Range(0, 1000));
  sub->add_flag("--json", o->json, "one JSON object per line");
  sub->add_flag("--roofline", o->roofline,
                "measure the read bandwidth before each decode repetition (a 1 GiB buffer, BASALT_BENCH_MEM_MIB) "
                "and report decode against it (CPU only: not with a GPU placement)");
  sub->callback([o] { bench(*o); });
}

}  // namespace basalt::cli
