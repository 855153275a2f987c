// SPDX-License-Identifier: MIT
// `basalt serve`: the OpenAI-compatible HTTP front end (cpp-httplib) over the
// batching scheduler (core/runtime/scheduler.h). One thread steps the
// scheduler; each HTTP request waits on its own channel for the text the
// scheduler gives it, and streams it as server-sent events.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/model/model.h"
#include "core/runtime/scheduler.h"
#include "tools/basalt/chat_prompt.h"
#include "tools/serve/openai_api.h"
#include "tools/serve/rate_limit.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace basalt::serve {

class HttpWorkers;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (the log line says which)
  std::string model_name;            // what /v1/models lists and requests may name
  std::vector<std::string> api_keys;  // empty: no authentication
  SchedulerOptions scheduler;
  SamplingParams sampling;           // defaults for fields a request leaves out
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();  // the chat template's, under a request's own
  bool split_reasoning = false;      // chat replies' <think>...</think> as reasoning_content (tools/serve/reasoning.h)
  ToolStyle tool_style;              // how the model writes tool calls (tools/serve/tool_calls.h)
  int32_t default_max_tokens = 256;
  ApiLimits limits;
  size_t max_body_bytes = 8u << 20;
  int http_threads = 512;            // connections served at once, at most (streams hold one each; started as needed)
  double request_timeout_s = 600;    // from arrival to the last token
  double queue_timeout_s = 60;       // from arrival to joining the running batch (then 503)
  double rate_rpm = 0, rate_tpm = 0;  // per API key (or client address): requests and tokens a minute; 0: none
  int64_t memory_limit_bytes = 0;    // resident memory past which new requests get 503; 0: none
  double log_interval_s = 60;        // a status line on stderr this often (0: never)
  double batch_window_ms = 0;        // when idle, how long a request waits for others to batch with (0 measured best: PERFORMANCE.md 9.2)
  double shutdown_grace_s = 30;      // SIGTERM: how long running requests may go on
};

class Server {
 public:
  Server(const Model& model, ServerOptions opt);
  ~Server();

  // Binds the socket; returns the port (the one chosen when opt.port is 0).
  int bind();
  // Warms the engine up, then serves until shutdown(); returns after the
  // requests in flight have ended (or the grace period ran out).
  void serve();
  // From any thread or a signal watcher: stop accepting, let requests finish.
  void shutdown();

 private:
  struct Channel;
  void step_loop();
  void warm_up();
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  bool authorized(const httplib::Request& req) const;
  void send_error(httplib::Response& res, const ApiError& e) const;
  std::vector<int64_t> submit(std::vector<ScheduledRequest> rs);  // all or none
  void cancel(Channel& ch);  // every choice of the request

  const Model& model_;
  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<HttpWorkers*> http_workers_{nullptr};
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<cli::ChatPrompter> prompter_;
  RateLimiter rate_limiter_;
  int64_t created_;

  std::mutex work_mutex_;
  std::condition_variable work_cv_;
  bool work_ = false;
  std::atomic<bool> ready_{false}, stopping_{false}, steps_done_{false};
  std::atomic<int> in_flight_{0};  // completion requests accepted and not yet answered in full
  // /metrics: requests by path and status, tokens, requests ended by a cancel,
  // and latency histograms (seconds).
  struct Histogram {
    static constexpr double kBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
    int64_t counts[std::size(kBounds) + 1] = {};
    double sum = 0;
    int64_t n = 0;
    void add(double s);
    void write(std::string& out, const char* name, const char* help) const;
  };
  Histogram time_to_first_token_, inter_token_, end_to_end_;  // under metrics_mutex_
  void observe(Histogram& h, double s);
  std::mutex metrics_mutex_;
  std::map<std::pair<std::string, int>, int64_t> http_requests_;
  std::atomic<int64_t> prompt_tokens_{0}, generated_tokens_{0}, cancelled_{0}, grammar_redraws_{0};
  std::atomic<int64_t> rate_limited_{0}, queue_timeouts_{0}, memory_refusals_{0};
  std::string metrics_text();
  std::string status_line();
  std::thread stepper_, grace_;
};

}  // namespace basalt::serve
