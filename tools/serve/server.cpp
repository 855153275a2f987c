// SPDX-License-Identifier: MIT
#include "tools/serve/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>

#include "core/util/memory.h"
#include "tools/serve/http_workers.h"
#include "tools/serve/reasoning.h"

namespace basalt::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kKeepAliveSeconds = 5;  // cpp-httplib's default, and llama-server's

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Equal strings, in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// Debian's cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG,
// compiled into the library), so a burst of connections overflows the accept
// queue and some are reset. listen() again on the bound socket raises it.
void widen_listen_backlog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    const int bound = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                      : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                   : -1;
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A reply's tool calls are call_<request>_<index>: unique within this server's run.
std::string tool_call_id_prefix(int64_t request) { return "call_" + std::to_string(request) + "_"; }

}  // namespace

// What the scheduler's thread hands one HTTP request: for each of its
// choices (a request of the scheduler's each), text pieces, then the end.
// One lock and one condition for all of them, so that a stream waits on all at once.
struct Server::Channel {
  struct Choice {
    int64_t id = -1;                      // the scheduler's, once submitted
    std::vector<int32_t> prompt;          // its prompt's tokens, when echoed
    std::deque<std::string> pieces;
    std::vector<TokenLogprob> logprobs;   // every generated token's, when asked for
    std::vector<TokenLogprob> prompt_logprobs;  // an echoed prompt's, its tokens after the first
    bool started = false;  // joined the running batch
    bool done = false;
    GenerationStats stats;
    Clock::time_point last_piece;  // the scheduler's thread only
    bool any_piece = false;
  };
  std::mutex m;
  std::condition_variable cv;
  std::vector<Choice> choices;  // sized before the first is submitted, never after
  std::atomic<bool> closed{false};  // the client went away: the next piece cancels
  Clock::time_point arrived = Clock::now();

  bool any_started() const {
    return std::any_of(choices.begin(), choices.end(), [](const Choice& c) { return c.started; });
  }
  bool all_done() const {
    return std::all_of(choices.begin(), choices.end(), [](const Choice& c) { return c.done; });
  }
};

void Server::Histogram::add(double s) {
  size_t b = 0;
  while (b < std::size(kBounds) && s > kBounds[b]) ++b;
  ++counts[b];
  sum += s;
  ++n;
}

void Server::Histogram::write(std::string& out, const char* name, const char* help) const {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
  int64_t cumulative = 0;
  for (size_t b = 0; b <= std::size(kBounds); ++b) {
    cumulative += counts[b];
    const std::string le = b < std::size(kBounds) ? json(kBounds[b]).dump() : "+Inf";
    out += std::string(name) + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_sum " + std::to_string(sum) + "\n" + name + "_count " + std::to_string(n) + "\n";
}

void Server::observe(Histogram& h, double s) {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  h.add(s);
}

Server::Server(const Model& model, ServerOptions opt)
    : model_(model),
      opt_(std::move(opt)),
      http_(std::make_unique<httplib::Server>()),
      rate_limiter_(opt_.rate_rpm, opt_.rate_tpm),
      created_(unix_seconds()) {
  scheduler_ = std::make_unique<Scheduler>(model_, opt_.scheduler);
  prompter_ = std::make_unique<cli::ChatPrompter>(model_, "", opt_.template_vars);
  const int threads = std::max(8, opt_.http_threads);
  http_->new_task_queue = [this, threads] {
    auto* workers = new HttpWorkers(static_cast<size_t>(threads));
    http_workers_ = workers;  // lives while the listener does, which serves /metrics
    return workers;
  };
  http_->set_payload_max_length(opt_.max_body_bytes);
  // An idle keep-alive connection holds its worker until this passes, and
  // cpp-httplib 0.11 lets the shutdown wait for it: 30 s made every SIGTERM
  // with a client still connected take 30 s. Clients reconnect past it.
  http_->set_keep_alive_timeout(kKeepAliveSeconds);

  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http_->Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    res.status = ready_ ? 200 : 503;
    res.set_content(ready_ ? R"({"status":"ready"})" : R"({"status":"loading"})", "application/json");
  });
  http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req)) return send_error(res, ApiError(401, "authentication_error", "missing or wrong API key (Authorization: Bearer KEY)"));
    res.set_content(dump(models_json(opt_.model_name, created_)), "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  http_->Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, false); });
  http_->Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, true); });

  // Errors httplib answers itself (404, 413, 400 for bad HTTP) get OpenAI's error body too.
  http_->set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const char* what = res.status == 404 ? "no such endpoint" : res.status == 413 ? "the request body is too large" : "bad request";
    send_error(res, ApiError(res.status, res.status == 404 ? "not_found_error" : "invalid_request_error", what));
  });
  http_->set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", what));
  });
  // One line per request, JSON, on stderr; and its count for /metrics.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(metrics_mutex_);
      // Known endpoints by name; anything else as one label, so random paths cannot grow the table.
      static const char* known[] = {"/health", "/ready", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"};
      const bool is_known = std::any_of(std::begin(known), std::end(known), [&](const char* k) { return req.path == k; });
      ++http_requests_[{is_known ? req.path : "other", res.status}];
    }
    std::fprintf(stderr, "%s\n",
                 dump({{"time", unix_seconds()}, {"remote", req.remote_addr}, {"method", req.method}, {"path", req.path},
                       {"status", res.status}})
                     .c_str());
  });
}

Server::~Server() {
  if (grace_.joinable()) grace_.join();
  steps_done_ = true;
  work_cv_.notify_all();
  if (stepper_.joinable()) stepper_.join();
}

bool Server::authorized(const httplib::Request& req) const {
  if (opt_.api_keys.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (h.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string given = h.substr(prefix.size());
  bool ok = false;
  for (const std::string& k : opt_.api_keys) ok |= same_secret(given, k);
  return ok;
}

void Server::send_error(httplib::Response& res, const ApiError& e) const {
  res.status = e.status;
  res.set_content(dump(error_json(e)), "application/json");
}

std::vector<int64_t> Server::submit(std::vector<ScheduledRequest> rs) {
  std::vector<int64_t> ids = scheduler_->submit(std::move(rs));
  {
    std::lock_guard<std::mutex> lock(work_mutex_);
    work_ = true;
  }
  work_cv_.notify_one();
  return ids;
}

void Server::cancel(Channel& ch) {
  for (const Channel::Choice& c : ch.choices)
    if (c.id >= 0) scheduler_->cancel(c.id);
}

void Server::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (!ready_ || stopping_)
    return send_error(res, ApiError(503, "service_unavailable", stopping_ ? "the server is shutting down" : "the model is still loading"));
  if (!authorized(req)) return send_error(res, ApiError(401, "authentication_error", "missing or wrong API key (Authorization: Bearer KEY)"));
  CompletionRequest r;
  std::vector<std::vector<int32_t>> prompts;  // each prompt's tokens; n choices each
  try {
    r = parse_completion_request(req.body, chat, opt_.sampling, opt_.default_max_tokens, opt_.model_name, opt_.limits,
                                 opt_.tool_style);
    const Tokenizer& tok = model_.tokenizer();
    if (chat) prompts.push_back(prompter_->tokens_for(r.messages, r.template_vars));
    for (const std::string& text : r.prompts) prompts.push_back(tok.encode(text, true, true));
    for (const std::vector<int32_t>& ids : r.prompt_ids) {
      for (int32_t id : ids)
        if (id >= tok.n_vocab())
          throw ApiError(400, "invalid_request_error",
                         "prompt: token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(tok.n_vocab()) +
                             " tokens)",
                         "prompt");
      prompts.push_back(ids);
    }
  } catch (const ApiError& e) {
    return send_error(res, e);
  } catch (const Error& e) {  // the chat template or the tokenizer refused the input
    return send_error(res, ApiError(400, "invalid_request_error", e.what(), chat ? "messages" : "prompt"));
  }

  // A reply that thinks first: its reasoning apart (not under a grammar, which holds the reply from its
  // start, but for Hermes' tool calls, whose grammar lets it think first).
  const bool reasoning_apart = chat && opt_.split_reasoning &&
                               (r.tools.active() ? r.tools.style.format == ToolFormat::hermes : !r.options.grammar);
  bool starts_inside = false;  // the template opened <think> at the prompt's end
  if (reasoning_apart) {
    const std::vector<int32_t>& p = prompts.front();
    const auto tail = std::vector<int32_t>(p.end() - std::min<std::ptrdiff_t>(8, static_cast<std::ptrdiff_t>(p.size())), p.end());
    starts_inside = prompt_opens_reasoning(model_.tokenizer().decode(tail, true));
  }

  // 5% short of the limit: the requests in flight still grow a little (buffers, text) before they end.
  if (opt_.memory_limit_bytes > 0 && resident_memory_bytes() > opt_.memory_limit_bytes - opt_.memory_limit_bytes / 20) {
    ++memory_refusals_;
    res.set_header("Retry-After", "5");
    return send_error(res, ApiError(503, "service_unavailable",
                                    "the server is at its memory limit (--memory-limit " +
                                        std::to_string(opt_.memory_limit_bytes >> 20) + " MiB); try again later"));
  }
  // Charged its prompts and max_tokens now, for every choice; what they do not generate comes back at their ends.
  const std::string rate_key = opt_.api_keys.empty() ? req.remote_addr : req.get_header_value("Authorization");
  const size_t n_choices = prompts.size() * static_cast<size_t>(r.n);
  auto charge_of = [&](size_t choice) {
    return static_cast<double>(prompts[choice / static_cast<size_t>(r.n)].size()) + std::max<int32_t>(0, r.options.max_tokens);
  };
  double charged = 0;
  for (size_t i = 0; i < n_choices; ++i) charged += charge_of(i);
  if (rate_limiter_.enabled()) {
    if (rate_limiter_.tokens_per_minute() > 0 && charged > rate_limiter_.tokens_per_minute())
      return send_error(res, ApiError(400, "invalid_request_error",
                                      "the prompt and max_tokens (" + std::to_string(static_cast<int64_t>(charged)) +
                                          " tokens) exceed the limit of " +
                                          std::to_string(static_cast<int64_t>(rate_limiter_.tokens_per_minute())) +
                                          " tokens a minute",
                                      "max_tokens"));
    if (const double wait = rate_limiter_.admit(rate_key, charged); wait > 0) {
      ++rate_limited_;
      const std::string seconds = std::to_string(static_cast<int64_t>(std::ceil(wait)));
      res.set_header("Retry-After", seconds);
      return send_error(res, ApiError(429, "rate_limit_error", "rate limit reached for this API key; try again in " + seconds + " s"));
    }
  }

  auto ch = std::make_shared<Channel>();
  ch->choices.resize(n_choices);
  auto scheduled = [&](size_t i) {
    Channel::Choice& c = ch->choices[i];
    ScheduledRequest sr;
    sr.prompt = prompts[i / static_cast<size_t>(r.n)];
    if (r.echo) c.prompt = sr.prompt;
    sr.options = r.options;
    sr.options.sampling.seed += i % static_cast<size_t>(r.n);  // a prompt's choices draw apart
    if (r.echo && r.options.logprobs >= 0) {
      sr.prompt_logprobs = r.options.logprobs;
      sr.on_prompt_logprob = [ch, &c](const TokenLogprob& t) {
        std::lock_guard<std::mutex> lock(ch->m);
        c.prompt_logprobs.push_back(t);
      };
    }
    sr.on_text = [this, ch, &c](std::string_view t) {
      if (ch->closed) return false;
      const auto now = Clock::now();
      observe(c.any_piece ? inter_token_ : time_to_first_token_,
              std::chrono::duration<double>(now - (c.any_piece ? c.last_piece : ch->arrived)).count());
      c.any_piece = true;
      c.last_piece = now;
      {
        std::lock_guard<std::mutex> lock(ch->m);
        c.pieces.emplace_back(t);
      }
      ch->cv.notify_all();
      return true;
    };
    if (r.options.logprobs >= 0)
      sr.on_logprob = [ch, &c](const TokenLogprob& t) {
        std::lock_guard<std::mutex> lock(ch->m);
        c.logprobs.push_back(t);
      };
    sr.on_start = [ch, &c] {
      {
        std::lock_guard<std::mutex> lock(ch->m);
        c.started = true;
      }
      ch->cv.notify_all();
    };
    sr.on_done = [this, ch, &c, rate_key, charge = charge_of(i)](const GenerationStats& st) {
      rate_limiter_.refund(rate_key, charge - static_cast<double>(st.n_prompt + st.n_generated));
      prompt_tokens_ += st.n_prompt;
      generated_tokens_ += st.n_generated;
      grammar_redraws_ += st.n_redrawn;
      if (st.stop_reason == "cancelled") ++cancelled_;
      else observe(end_to_end_, std::chrono::duration<double>(Clock::now() - ch->arrived).count());
      {
        std::lock_guard<std::mutex> lock(ch->m);
        c.stats = st;
        c.done = true;
      }
      ch->cv.notify_all();
    };
    return sr;
  };
  try {  // all the choices or none
    std::vector<ScheduledRequest> srs;
    for (size_t i = 0; i < n_choices; ++i) srs.push_back(scheduled(i));
    const std::vector<int64_t> ids = submit(std::move(srs));
    for (size_t i = 0; i < n_choices; ++i) ch->choices[i].id = ids[i];
  } catch (const QueueFull& e) {
    rate_limiter_.refund(rate_key, charged);
    res.set_header("Retry-After", "1");
    return send_error(res, ApiError(429, "rate_limit_error", e.what()));
  } catch (const Error& e) {  // does not fit the context, or bad sampling parameters
    rate_limiter_.refund(rate_key, charged);
    return send_error(res, ApiError(400, "invalid_request_error", e.what(), chat ? "messages" : "prompt"));
  }
  ++in_flight_;  // until the answer is out: a shutdown waits for it, queued or running
  {
    // Until one runs: a request that waits too long in the queue gets 503 (a
    // stream too: its headers are not out yet).
    std::unique_lock<std::mutex> lock(ch->m);
    const auto queue_deadline = ch->arrived + std::chrono::duration<double>(opt_.queue_timeout_s);
    if (!ch->cv.wait_until(lock, queue_deadline, [&] { return ch->any_started() || ch->all_done(); })) {
      lock.unlock();
      cancel(*ch);
      lock.lock();
      ch->cv.wait(lock, [&] { return ch->all_done(); });  // (some may have started just now: cancelled all the same)
      ++queue_timeouts_;
      --in_flight_;
      res.set_header("Retry-After", "5");
      return send_error(res, ApiError(503, "service_unavailable",
                                      "the request waited " + std::to_string(static_cast<int64_t>(opt_.queue_timeout_s)) +
                                          " s in the queue without starting; the server is overloaded"));
    }
    if (!ch->any_started()) {  // ended while it waited: a shutdown's cancel
      --in_flight_;
      return send_error(res, ApiError(503, "service_unavailable", "the server is shutting down"));
    }
  }
  const int64_t first_id = ch->choices[0].id;
  const std::string rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(first_id);
  const auto deadline = ch->arrived + std::chrono::duration<double>(opt_.request_timeout_s);
  const Tokenizer& tok = model_.tokenizer();

  if (!r.stream) {
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { --n; }
    } leave{in_flight_};
    std::unique_lock<std::mutex> lock(ch->m);
    if (!ch->cv.wait_until(lock, deadline, [&] { return ch->all_done(); })) {
      lock.unlock();
      cancel(*ch);
      lock.lock();
      ch->cv.wait(lock, [&] { return ch->all_done(); });
      return send_error(res, ApiError(504, "timeout", "the request took longer than " + std::to_string(opt_.request_timeout_s) + " s"));
    }
    std::vector<ChoiceResult> results;
    for (size_t i = 0; i < n_choices; ++i) {
      const Channel::Choice& c = ch->choices[i];
      ChoiceResult out;
      if (r.echo) out.text = r.prompts.empty() ? tok.decode(c.prompt) : r.prompts[i / static_cast<size_t>(r.n)];
      for (const std::string& p : c.pieces) out.text += p;
      if (reasoning_apart) {
        ReplyParts parts = split_reasoning(out.text, starts_inside);
        out.reasoning = std::move(parts.reasoning);
        out.text = std::move(parts.content);
      }
      size_t offset = 0;
      out.logprobs = r.options.logprobs < 0 ? json(nullptr)
                     : r.echo ? echo_logprobs_json(c.prompt, c.prompt_logprobs, c.logprobs, tok)
                              : logprobs_json(r, c.logprobs, tok, &offset);
      if (r.tools.active()) {
        ToolReply reply = read_tool_calls(out.text, tool_call_id_prefix(c.id), r.tools.style.format);
        out.text = std::move(reply.content);
        out.calls = std::move(reply.calls);
      }
      out.stats = c.stats;
      results.push_back(std::move(out));
    }
    res.set_content(dump(completion_json(r, rid, unix_seconds(), opt_.model_name, results)), "application/json");
    return;
  }

  // A stream: each choice's chunks carry its index, in the order its pieces come.
  struct Sent {
    bool first = true;
    bool finished = false;
    size_t logprobs = 0;            // of the choice's logprobs, those taken
    size_t offset = 0;              // completions' text_offset
    std::vector<TokenLogprob> unsent;
    std::optional<ToolCallHold> hold;  // what may be a tool call is sent at the reply's end, as calls or as text
    std::optional<ReasoningSplitter> reasoning;  // where the reply's reasoning goes apart
  };
  std::vector<Sent> sent(n_choices);
  for (Sent& s : sent) {
    if (r.tools.active()) s.hold.emplace(r.tools.style.format);
    if (reasoning_apart) s.reasoning.emplace(starts_inside);
  }
  res.set_header("Cache-Control", "no-cache");
  const int64_t created = unix_seconds();
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, ch, r, rid, created, deadline, sent](size_t, httplib::DataSink& sink) mutable {
        const size_t n = ch->choices.size();
        std::vector<std::deque<std::string>> got(n);
        std::vector<bool> done(n);
        std::vector<GenerationStats> stats(n);
        {
          std::unique_lock<std::mutex> lock(ch->m);
          ch->cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
            for (size_t i = 0; i < n; ++i)
              if (!ch->choices[i].pieces.empty() || (ch->choices[i].done && !sent[i].finished)) return true;
            return false;
          });
          for (size_t i = 0; i < n; ++i) {
            Channel::Choice& c = ch->choices[i];
            got[i].swap(c.pieces);
            done[i] = c.done;
            stats[i] = c.stats;
            sent[i].unsent.insert(sent[i].unsent.end(), c.logprobs.begin() + static_cast<std::ptrdiff_t>(sent[i].logprobs), c.logprobs.end());
            sent[i].logprobs = c.logprobs.size();
          }
        }
        const Tokenizer& tok = model_.tokenizer();
        // A choice's tokens' logprobs so far go with its next chunk sent (a token's
        // text may come in a later one: held back for a stop string or a whole character).
        auto take_logprobs = [&](Sent& s) -> json {
          if (r.options.logprobs < 0) return nullptr;
          json j = logprobs_json(r, s.unsent, tok, &s.offset);
          s.unsent.clear();
          return j;
        };
        auto send = [&](const json& event) {
          const std::string e = "data: " + dump(event) + "\n\n";
          return sink.write(e.data(), e.size());
        };
        const bool all_done = std::all_of(done.begin(), done.end(), [](bool d) { return d; });
        if (!sink.is_writable() || (!all_done && Clock::now() > deadline)) {
          ch->closed = true;
          cancel(*ch);
          if (!sink.is_writable()) return false;
        }
        // A piece of the reply as its reasoning and content chunks (one chunk of content where nothing splits it).
        auto send_parts = [&](Sent& s, size_t i, const ReplyParts& parts) {
          for (const bool thought : {true, false}) {
            const std::string& text = thought ? parts.reasoning : parts.content;
            if (text.empty() && (thought || s.reasoning || s.hold)) continue;
            const json chunk = thought ? reasoning_chunk_json(r, rid, created, opt_.model_name, text, s.first, take_logprobs(s), i)
                                       : chunk_json(r, rid, created, opt_.model_name, text, nullptr, s.first, take_logprobs(s), i);
            if (!send(chunk)) return false;
            s.first = false;
          }
          return true;
        };
        // A piece of the reply through the reasoning's split, then the tool calls' hold.
        auto pass = [&](Sent& s, ReplyParts parts) {
          if (s.hold) parts.content = s.hold->feed(parts.content);
          return parts;
        };
        for (size_t i = 0; i < n; ++i) {
          Sent& s = sent[i];
          for (std::string& p : got[i]) {
            if (!send_parts(s, i, pass(s, s.reasoning ? s.reasoning->feed(p) : ReplyParts{"", std::move(p)}))) {
              ch->closed = true;
              cancel(*ch);
              return false;
            }
          }
          if (!done[i] || s.finished) continue;
          if (s.reasoning) send_parts(s, i, pass(s, s.reasoning->finish()));
          std::vector<ToolCall> calls;
          if (s.hold && !s.hold->held().empty()) {
            ToolReply reply = read_tool_calls(s.hold->held(), tool_call_id_prefix(ch->choices[i].id), r.tools.style.format);
            calls = std::move(reply.calls);
            if (!reply.content.empty())
              send(chunk_json(r, rid, created, opt_.model_name, reply.content, nullptr, s.first, take_logprobs(s), i));
            if (!calls.empty()) send(tool_calls_chunk_json(r, rid, created, opt_.model_name, calls, s.first && reply.content.empty(), i));
            s.first = false;
          }
          send(chunk_json(r, rid, created, opt_.model_name, "", finish_reason(stats[i], calls), s.first,
                          s.unsent.empty() ? json(nullptr) : take_logprobs(s), i));
          s.finished = true;
        }
        if (all_done) {
          if (r.include_usage) send(usage_chunk_json(r, rid, created, opt_.model_name, usage_json(stats, r.n)));
          const std::string end = "data: [DONE]\n\n";
          sink.write(end.data(), end.size());
          sink.done();
        }
        return true;
      },
      [this, ch](bool success) {
        bool all_done = false;
        {
          std::lock_guard<std::mutex> lock(ch->m);
          all_done = ch->all_done();
        }
        if (!success && !all_done) {  // the client went away mid-stream: free its slots now
          ch->closed = true;
          cancel(*ch);
        }
        --in_flight_;
      });
}

// Prometheus' text format.
std::string Server::metrics_text() {
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + std::to_string(v) + "\n";
  };
  auto counter = [&](const char* name, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + std::to_string(v) + "\n";
  };
  gauge("basalt_ready", "1 once the model is loaded and warmed up", ready_ ? 1 : 0);
  const SchedulerStats st = scheduler_->stats();
  gauge("basalt_requests_running", "requests in the running batch", st.running);
  gauge("basalt_requests_queued", "requests waiting to run (preempted ones included)", static_cast<double>(st.queued));
  counter("basalt_prompt_tokens_total", "prompt tokens of ended requests", static_cast<double>(prompt_tokens_));
  counter("basalt_generated_tokens_total", "tokens generated by ended requests", static_cast<double>(generated_tokens_));
  counter("basalt_requests_cancelled_total", "requests ended by a cancel (a client gone, a timeout)", static_cast<double>(cancelled_));
  counter("basalt_grammar_redraws_total", "tokens drawn again because the first draw did not fit the response_format's grammar",
          static_cast<double>(grammar_redraws_));
  counter("basalt_requests_rate_limited_total", "requests refused by the per-key rate limits (429)", static_cast<double>(rate_limited_));
  counter("basalt_requests_queue_timeout_total", "requests that waited past --queue-timeout (503)", static_cast<double>(queue_timeouts_));
  counter("basalt_requests_memory_refused_total", "requests refused at --memory-limit (503)", static_cast<double>(memory_refusals_));
  if (opt_.memory_limit_bytes > 0) gauge("basalt_memory_limit_bytes", "--memory-limit", static_cast<double>(opt_.memory_limit_bytes));
  if (HttpWorkers* w = http_workers_) gauge("basalt_http_threads", "HTTP threads started (one per open connection at the peak)", static_cast<double>(w->threads()));
  gauge("basalt_resident_memory_bytes", "resident memory of the process", static_cast<double>(resident_memory_bytes()));
  gauge("basalt_kv_cache_bytes", "memory of the KV pool", static_cast<double>(scheduler_->kv_bytes()));
  gauge("basalt_kv_blocks", "blocks of 64 positions in the KV pool", static_cast<double>(st.kv_blocks));
  gauge("basalt_kv_blocks_free", "KV blocks no one holds", static_cast<double>(st.kv_free_blocks));
  gauge("basalt_kv_blocks_largest_free_run", "the longest run of consecutive free KV blocks (paged: any free block serves)",
        static_cast<double>(st.kv_largest_free_run));
  gauge("basalt_kv_blocks_cached", "KV blocks the prefix cache lists (free to evict when no request holds them)",
        static_cast<double>(st.kv_cached_blocks));
  if (st.kv_ring_blocks > 0) {
    gauge("basalt_kv_ring_blocks", "blocks of the sliding-window layers' rings (their own pool)", static_cast<double>(st.kv_ring_blocks));
    gauge("basalt_kv_ring_blocks_free", "ring blocks no request or cached prefix holds", static_cast<double>(st.kv_free_ring_blocks));
  }
  gauge("basalt_kv_positions_used", "positions the running requests hold in the KV pool", static_cast<double>(st.kv_used_positions));
  counter("basalt_preemptions_total", "running requests preempted for KV blocks (recomputed later)", static_cast<double>(st.preemptions));
  counter("basalt_prefix_cache_hits_total", "requests that took KV blocks from the prefix cache", static_cast<double>(st.prefix_hits));
  counter("basalt_prefix_cache_hit_tokens_total", "prompt tokens taken from the prefix cache, not computed",
          static_cast<double>(st.prefix_hit_tokens));
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  time_to_first_token_.write(out, "basalt_time_to_first_token_seconds", "from arrival to the first text");
  inter_token_.write(out, "basalt_inter_token_seconds", "between two pieces of text of a request");
  end_to_end_.write(out, "basalt_request_seconds", "from arrival to the end of requests that were not cancelled");
  out += "# HELP basalt_http_requests_total HTTP requests by path and status\n# TYPE basalt_http_requests_total counter\n";
  for (const auto& [key, n] : http_requests_) {
    std::string path;  // escaped for a label value
    for (char c : key.first) path += c == '"' || c == '\\' ? std::string("\\") + c : c == '\n' ? std::string("\\n") : std::string(1, c);
    out += "basalt_http_requests_total{path=\"" + path + "\",status=\"" + std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  return out;
}

int Server::bind() {
  const int port = opt_.port == 0 ? http_->bind_to_any_port(opt_.host) : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port < 0) throw Error("cannot listen on " + opt_.host + ":" + std::to_string(opt_.port) + " (in use, or not an address here)");
  opt_.port = port;
  widen_listen_backlog(port);
  return port;
}

// Memory and load at a glance, one JSON line (the access log's format).
std::string Server::status_line() {
  const SchedulerStats st = scheduler_->stats();
  return dump({{"time", unix_seconds()},
               {"status",
                {{"running", st.running},
                 {"queued", st.queued},
                 {"resident_mib", resident_memory_bytes() >> 20},
                 {"kv_blocks", st.kv_blocks},
                 {"kv_blocks_free", st.kv_free_blocks},
                 {"kv_largest_free_run", st.kv_largest_free_run},
                 {"kv_blocks_cached", st.kv_cached_blocks},
                 {"preemptions", st.preemptions},
                 {"prompt_tokens", prompt_tokens_.load()},
                 {"generated_tokens", generated_tokens_.load()}}}});
}

void Server::step_loop() {
  auto last_log = Clock::now();
  while (!steps_done_) {
    if (opt_.log_interval_s > 0 && Clock::now() - last_log > std::chrono::duration<double>(opt_.log_interval_s)) {
      std::fprintf(stderr, "%s\n", status_line().c_str());
      last_log = Clock::now();
    }
    bool did = false;
    try {
      did = scheduler_->step();
    } catch (const std::exception& e) {
      // A batch that cannot run (an engine error): end its requests rather than retry them forever.
      std::fprintf(stderr, "basalt serve: a step failed: %s; ending the requests in it\n", e.what());
      scheduler_->cancel_all();
    }
    if (!did && scheduler_->queued() == 0) {
      std::unique_lock<std::mutex> lock(work_mutex_);
      const bool woke = work_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return work_ || steps_done_.load(); });
      work_ = false;
      // Idle until now: let requests arriving together start in one batch.
      if (woke && opt_.batch_window_ms > 0) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.batch_window_ms));
      }
    }
  }
}

void Server::warm_up() {
  // A prompt longer than one step's budget, then a few tokens: the prefill,
  // chunked prefill and decode paths all run once before the first user.
  std::vector<int32_t> prompt(static_cast<size_t>(std::min<int64_t>(opt_.scheduler.step_tokens + 8, opt_.scheduler.slot_ctx - 4)),
                              model_.tokenizer().bos_id() >= 0 ? model_.tokenizer().bos_id() : 0);
  ScheduledRequest r;
  r.prompt = prompt;
  r.options.max_tokens = 2;
  r.options.sampling.temperature = 0;
  r.options.stop_at_end_of_generation = false;
  scheduler_->submit(r);
  r.prompt.resize(std::min<size_t>(prompt.size(), 8));
  scheduler_->submit(r);
  scheduler_->run_until_idle();
  // The vocabulary in byte order, which the first request with a grammar
  // would otherwise sort on the engine's thread (Gemma 3's 262k tokens).
  (void)model_.tokenizer().sorted_pieces();
}

void Server::serve() {
  const auto t0 = Clock::now();
  warm_up();
  const int64_t resident = resident_memory_bytes();
  if (opt_.memory_limit_bytes > 0 && resident > opt_.memory_limit_bytes)
    throw Error("after its warm-up the server holds " + std::to_string(resident >> 20) + " MiB, past --memory-limit " +
                std::to_string(opt_.memory_limit_bytes >> 20) + " MiB (a smaller -c, -b or --parallel, or a larger limit)");
  stepper_ = std::thread([this] { step_loop(); });
  ready_ = true;
  std::fprintf(stderr,
               "basalt serve: %s ready on http://%s:%d (warm-up %.2f s, %d requests at once, a KV pool of %lld positions "
               "(%.0f MiB), up to %lld a request, prefix cache %s, resident %lld MiB)\n",
               opt_.model_name.c_str(), opt_.host.c_str(), opt_.port,
               std::chrono::duration<double>(Clock::now() - t0).count(), opt_.scheduler.max_running,
               static_cast<long long>(scheduler_->kv().n_blocks() * KvCache::kBlock),
               static_cast<double>(scheduler_->kv_bytes()) / (1 << 20), static_cast<long long>(opt_.scheduler.slot_ctx),
               opt_.scheduler.prefix_cache ? "on" : "off", static_cast<long long>(resident >> 20));
  http_->listen_after_bind();  // returns once shutdown() has let the requests end and stopped it
  if (grace_.joinable()) grace_.join();
  steps_done_ = true;
  work_cv_.notify_all();
  stepper_.join();
}

void Server::shutdown() {
  if (stopping_.exchange(true)) return;
  ready_ = false;
  std::fprintf(stderr, "basalt serve: shutting down; requests in flight have %.0f s to finish\n", opt_.shutdown_grace_s);
  // Requests still running when the grace ends are cancelled, so their handlers return.
  // New requests get 503 from now on; those in flight run to their end (or
  // the grace's), then the listener stops. (httplib's stop() would cut the
  // streams still being written, so it comes last.)
  grace_ = std::thread([this] {
    auto wait_until = [this](auto end) {
      while (Clock::now() < end && in_flight_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    wait_until(Clock::now() + std::chrono::duration<double>(opt_.shutdown_grace_s));
    if (in_flight_ > 0) {
      scheduler_->cancel_all();
      wait_until(Clock::now() + std::chrono::seconds(5));
    }
    http_->stop();
  });
}

}  // namespace basalt::serve
