// SPDX-License-Identifier: MIT
// basalt serve: the OpenAI-compatible HTTP server (tools/serve/). SIGTERM and
// SIGINT stop it gracefully: no new requests, the ones in flight finish.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/graph/kv_cache.h"
#include "core/util/memory.h"
#include "tools/basalt/common.h"
#include "tools/serve/server.h"

namespace basalt::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  serve::ServerOptions server;
  std::string alias;
  std::string api_key_file;
  std::string template_vars;  // --chat-template-kwargs: what requests' chat_template_kwargs go over
  std::string reasoning_format = "auto";
  std::string tool_format = "auto";
  uint64_t memory_limit = 0;
  int parallel = 16;  // at 16 clients on SmolLM2 the most tokens/s and the lowest TTFT P99 (PERFORMANCE.md 9.2)
  int64_t request_ctx = 0;  // 0: the model's context, at most 4096
  SamplingFlags sampling_given;
};

// The KV pool when --ctx-size is not given: three quarters of a full context
// per running request (requests seldom fill theirs; a pool that runs dry
// preempts, it does not fail), at most half the memory available now (and
// half of what --memory-limit leaves), and at least one full context. The
// sliding-window layers' rings cost the same whatever the pool
// (Scheduler::kv_bytes): the pool shrinks by what the rest costs.
int64_t default_pool_positions(const Model& m, SchedulerOptions so, int64_t memory_limit) {
  auto bytes = [&](int64_t blocks) {
    so.kv_blocks = blocks;
    return static_cast<int64_t>(Scheduler::kv_bytes(m.spec(), so));
  };
  int64_t cap = INT64_MAX;
  if (const int64_t avail = available_memory_bytes(); avail > 0) cap = avail / 2;
  if (memory_limit > 0) cap = std::min(cap, (memory_limit - resident_memory_bytes()) / 2);
  // The most blocks within the cap, between one context and three quarters of all (bytes grow with blocks).
  int64_t lo = KvCache::blocks_for(so.slot_ctx), hi = std::max(lo, KvCache::blocks_for(3 * so.slot_ctx * so.max_running / 4));
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (bytes(mid) <= cap) lo = mid;
    else hi = mid - 1;
  }
  return lo * KvCache::kBlock;
}

std::vector<std::string> read_keys(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read the API key file " + file);
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty() && line[0] != '#') keys.push_back(line);
  }
  if (keys.empty()) throw Error("the API key file " + file + " holds no key");
  return keys;
}

void serve_main(ServeOptions& o) {
  // Signals go to one watcher thread, not to whichever thread they hit:
  // blocked here, before any thread starts, so every thread inherits it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error on its socket, not the end of the server

  serve::ServerOptions& so = o.server;
  if (!o.api_key_file.empty()) {
    auto keys = read_keys(o.api_key_file);
    so.api_keys.insert(so.api_keys.end(), keys.begin(), keys.end());
  }
  if (const char* env = std::getenv("BASALT_API_KEY"); env && *env) so.api_keys.emplace_back(env);

  auto model = load_model(o.model);
  const std::string path = o.model.model.empty() ? default_model_path() : o.model.model;
  so.template_vars = parse_template_vars(o.template_vars, "--chat-template-kwargs");
  so.tool_style = serve::tool_style_of(model->chat_template());
  so.split_reasoning = o.reasoning_format == "deepseek" || (o.reasoning_format == "auto" && so.tool_style.thinks);
  if (o.tool_format != "auto")
    so.tool_style.format = o.tool_format == "hermes"   ? serve::ToolFormat::hermes
                           : o.tool_format == "llama3" ? serve::ToolFormat::llama3
                                                       : serve::ToolFormat::json;
  so.model_name = !o.alias.empty() ? o.alias : std::filesystem::path(path).filename().replace_extension().string();
  so.sampling = with_model_defaults(so.sampling, o.sampling_given, *model);
  // --ctx-size is the whole KV pool, in positions, shared by the --parallel
  // requests block by block; one request may fill up to --request-ctx (by
  // default the model's context, at most 4096) and the pool.
  const int64_t per_request = o.request_ctx > 0 ? o.request_ctx : context_size(ModelOptions{}, *model);
  so.scheduler.max_running = o.parallel;
  so.scheduler.slot_ctx = per_request;
  so.scheduler.step_tokens = o.model.ubatch;
  so.scheduler.kv_type = parse_kv_type(o.model.kv_type);
  so.scheduler.offload = o.model.offload;
  so.memory_limit_bytes = static_cast<int64_t>(o.memory_limit);
  const int64_t pool = o.model.ctx_size > 0 ? o.model.ctx_size : default_pool_positions(*model, so.scheduler, so.memory_limit_bytes);
  so.scheduler.kv_blocks = KvCache::blocks_for(pool);
  so.scheduler.slot_ctx = std::min(per_request, so.scheduler.kv_blocks * KvCache::kBlock);
  if (so.scheduler.slot_ctx < 16) throw Error("--ctx-size must hold at least 16 tokens");
  if (so.memory_limit_bytes > 0) {
    const auto kv = static_cast<int64_t>(Scheduler::kv_bytes(model->spec(), so.scheduler));
    const int64_t resident = resident_memory_bytes();
    if (resident + kv > so.memory_limit_bytes)  // an estimate; the server checks again after its warm-up
      throw Error("the model (" + std::to_string(resident >> 20) + " MiB resident) and the KV pool (" +
                  std::to_string(kv >> 20) + " MiB) do not fit in --memory-limit " +
                  std::to_string(so.memory_limit_bytes >> 20) + " MiB (a smaller -c or --parallel, or a larger limit)");
  }
  so.limits.max_tokens = static_cast<int32_t>(std::min<int64_t>(so.limits.max_tokens, so.scheduler.slot_ctx));

  serve::Server server(*model, so);
  const int port = server.bind();
  std::fprintf(stderr, "basalt serve: listening on http://%s:%d (tool calls: %s format%s)\n", so.host.c_str(), port,
               serve::tool_format_name(so.tool_style.format), so.split_reasoning ? "; reasoning apart" : "");
  std::atomic<bool> serving{true};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (serving) server.shutdown();
  });
  // serve() returns when shut down by a signal or when the listener failed,
  // and throws when the warm-up went past --memory-limit. The watcher may
  // still wait either way: wake it.
  auto stop_watcher = [&] {
    serving = false;
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
  };
  try {
    server.serve();
  } catch (...) {
    stop_watcher();
    throw;
  }
  stop_watcher();
  std::fprintf(stderr, "basalt serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  add_model_options(*sub, o->model);
  sub->add_option("--host", o->server.host, "address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", o->server.port, "port (default 8080; 0: any free one)")->check(CLI::Range(0, 65535));
  sub->add_option("--parallel,--np", o->parallel, "requests decoded together, at most (default 16)")->check(CLI::Range(1, 256));
  sub->add_option("--request-ctx", o->request_ctx,
                  "tokens (prompt and output) one request may hold, at most (default: the model's context, at most 4096; "
                  "and at most -c)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 30));
  sub->add_option("--queue-timeout", o->server.queue_timeout_s, "seconds a request may wait to start; then 503 (default 60)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--rate-limit-rpm", o->server.rate_rpm, "requests a minute per API key (or client address); more get 429")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--rate-limit-tpm", o->server.rate_tpm,
                  "tokens (prompt and max_tokens) a minute per API key (or client address); more get 429")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--memory-limit", o->memory_limit, "resident memory past which new requests get 503, e.g. 4G or 800M")
      ->transform(CLI::AsSizeValue(false));
  sub->add_option("--log-interval", o->server.log_interval_s, "seconds between status lines on stderr (0: none; default 60)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--batch-window", o->server.batch_window_ms,
                  "milliseconds an idle server waits after a request for others to start with it (default 0)")
      ->check(CLI::Range(0.0, 1000.0));
  sub->add_flag("!--no-prefix-cache", o->server.scheduler.prefix_cache,
                "compute every prompt whole (default: reuse the KV blocks of prompts that start alike)");
  sub->add_option("--alias", o->alias, "model name in the API (default: the file name)");
  add_template_vars_option(*sub, o->template_vars);
  sub->add_option("--reasoning-format", o->reasoning_format,
                  "a chat reply's <think>...</think>: deepseek (apart, as message.reasoning_content), none (in the content), "
                  "auto (deepseek where the model's chat template writes <think>; the default)")
      ->check(CLI::IsMember({"auto", "none", "deepseek"}));
  sub->add_option("--tool-format", o->tool_format,
                  "how the model writes tool calls: hermes (<tool_call> tags: Qwen 2.5, Qwen3, Hermes), llama3 "
                  "({\"name\": ..., \"parameters\": ...}: Llama 3.1-3.3), json (basalt's own, for any model), auto "
                  "(the model's own where its chat template writes one of them; the default)")
      ->check(CLI::IsMember({"auto", "json", "hermes", "llama3"}));
  sub->add_option("--api-key", o->server.api_keys, "accept only requests with this Bearer key (repeatable; also BASALT_API_KEY)");
  sub->add_option("--api-key-file", o->api_key_file, "file of keys, one per line");
  sub->add_option("--max-queue", o->server.scheduler.max_queued, "requests that may wait for a slot; more get 429 (default 64)");
  sub->add_option("--max-tokens", o->server.default_max_tokens, "tokens a request generates when it does not say (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--timeout", o->server.request_timeout_s, "seconds a request may take in all (default 600)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--http-threads", o->server.http_threads, "connections served at once, at most; threads start as connections need them (default 512)")
      ->check(CLI::Range(8, 65536));
  o->sampling_given = add_sampling_options(*sub, o->server.sampling);
  sub->callback([o] { serve_main(*o); });
}

}  // namespace basalt::cli
