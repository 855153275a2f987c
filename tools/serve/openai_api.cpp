// SPDX-License-Identifier: MIT
#include "tools/serve/openai_api.h"

#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include "core/grammar/gbnf.h"
#include "core/grammar/json_schema.h"
#include "tools/basalt/chat_prompt.h"

namespace basalt::serve {

using nlohmann::json;

namespace {

double number(const json& v, const char* name, double lo, double hi) {
  if (!v.is_number()) throw bad_request(std::string(name) + " must be a number", name);
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_request(std::string(name) + " must be between " + json(lo).dump() + " and " + json(hi).dump(), name);
  return x;
}

int64_t integer(const json& v, const char* name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw bad_request(std::string(name) + " must be an integer", name);
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi)
    throw bad_request(std::string(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi), name);
  return x;
}

// A message's content: a string, or OpenAI's array of parts of which only text is supported.
std::string content_text(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) throw bad_request(param + " must be a string or an array of text parts", param);
  std::string text;
  for (const json& part : c) {
    const json* type = part.is_object() ? json_field(part, "type") : nullptr;
    const json* t = part.is_object() ? json_field(part, "text") : nullptr;
    if (!type || *type != "text" || !t || !t->is_string())
      throw bad_request(param + ": only parts of type \"text\" with a string \"text\" are supported", param);
    text += t->get<std::string>();
  }
  return text;
}

// The body again with its members' order kept, for what the reply follows in
// the client's order (response_format's schema, the tools' schemas, the
// template's variables): parsed once, when first asked for.
class OrderedBody {
 public:
  explicit OrderedBody(std::string_view body) : body_(body) {}
  const nlohmann::ordered_json& get() {
    if (!parsed_) parsed_ = nlohmann::ordered_json::parse(body_);
    return *parsed_;
  }

 private:
  std::string_view body_;
  std::optional<nlohmann::ordered_json> parsed_;
};

// response_format: "text", "json_object" (any JSON object) or "json_schema"
// (JSON valid under json_schema.schema). The schema is read from the ordered
// body: the output's properties come in the order the client wrote them.
std::shared_ptr<const Grammar> output_grammar(const json& format, OrderedBody& body) {
  const std::string param = "response_format";
  if (!format.is_object()) throw bad_request("response_format must be an object", param);
  const json* type = json_field(format, "type");
  if (!type || !type->is_string()) throw bad_request("response_format.type must be a string", param);
  if (*type == "text") return nullptr;
  if (*type == "json_object") {
    static const auto object = std::make_shared<const Grammar>(json_grammar(true));
    return object;
  }
  if (*type != "json_schema")
    throw bad_request("response_format.type must be \"text\", \"json_object\" or \"json_schema\"", param);
  const json* spec = json_field(format, "json_schema");
  if (!spec || !spec->is_object()) throw bad_request("response_format.json_schema must be an object", param);
  if (const json* name = json_field(*spec, "name"); name && !name->is_string())
    throw bad_request("response_format.json_schema.name must be a string", param);
  if (const json* strict = json_field(*spec, "strict"); strict && !strict->is_boolean())
    throw bad_request("response_format.json_schema.strict must be true or false", param);
  const json* schema = json_field(*spec, "schema");
  if (!schema) return std::make_shared<const Grammar>(json_grammar(false));  // OpenAI: any JSON then
  try {
    return std::make_shared<const Grammar>(json_schema_grammar_parsed(body.get().at(param).at("json_schema").at("schema")));
  } catch (const nlohmann::json::exception& e) {
    throw bad_request(std::string("response_format.json_schema.schema: ") + e.what(), param);
  } catch (const Error& e) {
    throw bad_request(std::string("response_format.json_schema.schema: ") + e.what(), param);
  }
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, bool chat, const SamplingParams& defaults,
                                           int32_t default_max_tokens, const std::string& served_model,
                                           const ApiLimits& limits, const ToolStyle& tool_style) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw bad_request(std::string("the body is not valid JSON: ") + e.what(), "");
  }
  if (!j.is_object()) throw bad_request("the body must be a JSON object", "");
  OrderedBody ordered(body);

  CompletionRequest r;
  r.chat = chat;
  r.options.sampling = defaults;
  r.options.max_tokens = default_max_tokens;
  if (const json* m = json_field(j, "model")) {
    if (!m->is_string()) throw bad_request("model must be a string", "model");
    r.model = m->get<std::string>();
    if (!served_model.empty() && r.model != served_model)
      throw ApiError(404, "not_found_error", "the model '" + r.model + "' does not exist; this server serves '" + served_model + "'",
                     "model");
  }

  size_t prompt_bytes = 0;
  if (chat) {
    const json* msgs = json_field(j, "messages");
    if (!msgs) throw bad_request("messages is required", "messages");
    if (!msgs->is_array() || msgs->empty()) throw bad_request("messages must be a non-empty array", "messages");
    if (msgs->size() > limits.max_messages)
      throw bad_request("more than " + std::to_string(limits.max_messages) + " messages", "messages");
    std::map<std::string, std::string> called;  // earlier tool calls' ids -> their functions
    bool after_result = false;                  // the last message is a tool's result
    // A tool's result: the template's own "tool" turn where it has one (Qwen's, Hermes', Llama's), else the user's.
    const bool own_turn = tool_style.format != ToolFormat::json && tool_style.template_has_tool_role;
    for (size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) throw bad_request(at + " must be an object", at);
      const json* role = json_field(m, "role");
      if (!role || !role->is_string()) throw bad_request(at + ".role must be a string", at + ".role");
      const std::string rl = role->get<std::string>();
      if (rl != "system" && rl != "user" && rl != "assistant" && rl != "developer" && rl != "tool" && rl != "function")
        throw bad_request(at + ".role '" + rl + "' is not one of system, developer, user, assistant, tool, function", at + ".role");
      const json* content = json_field(m, "content");
      std::string text = content ? content_text(*content, at + ".content") : std::string();
      std::string as = rl == "developer" ? "system" : rl;  // the role the template sees
      // A thinking model's reasoning sent back with its turn (tool calls in one thinking turn): in the
      // tags before the content, where its template finds it (Qwen3's keeps the current turn's).
      if (const json* thought = rl == "assistant" ? json_field(m, "reasoning_content") : nullptr; thought && !thought->is_null()) {
        if (!thought->is_string()) throw bad_request(at + ".reasoning_content must be a string", at + ".reasoning_content");
        if (tool_style.thinks && !thought->get_ref<const std::string&>().empty())
          text = "<think>\n" + thought->get<std::string>() + "\n</think>\n\n" + text;
      }
      const json* calls = rl == "assistant" ? json_field(m, "tool_calls") : nullptr;
      if (calls && calls->is_array())
        for (const json& c : *calls)
          if (const json* id = json_field(c, "id"); id && id->is_string() && json_field(c, "function"))
            if (const json* fn = json_field(c["function"], "name"); fn && fn->is_string()) called[id->get<std::string>()] = fn->get<std::string>();
      if (calls)  // written as the model would have written them (tools/serve/tool_calls.h)
        text = with_tool_calls(text, tool_calls_text(*calls, at + ".tool_calls", tool_style.format), tool_style.format);
      const bool result = rl == "tool" || rl == "function";
      if (result) {
        std::string name;
        if (rl == "tool") {
          const json* id = json_field(m, "tool_call_id");
          if (!id || !id->is_string()) throw bad_request(at + ".tool_call_id must be a string", at + ".tool_call_id");
          auto it = called.find(id->get<std::string>());
          if (it == called.end())
            throw bad_request(at + ".tool_call_id '" + id->get<std::string>() + "' answers no earlier tool call", at + ".tool_call_id");
          name = it->second;
        } else if (const json* n = json_field(m, "name"); n && n->is_string()) {
          name = n->get<std::string>();
        }
        text = own_turn ? text : tool_result_text(name, text, tool_style.format);
        as = own_turn ? "tool" : "user";
      }
      prompt_bytes += text.size();
      if (result && after_result && !own_turn)
        r.messages.back().content += "\n" + text;  // parallel calls' results: one turn
      else
        r.messages.push_back({as, std::move(text)});
      after_result = result;
    }
  } else {
    // A string or token ids, or an array of several of either (a choice each), as OpenAI's
    // API allows: lm-evaluation-harness sends batches of token ids.
    const json* p = json_field(j, "prompt");
    if (!p) throw bad_request("prompt is required", "prompt");
    const std::string shapes = "prompt must be a string, an array of token ids, or an array of strings or of token id arrays";
    auto add_ids = [&](const json& ids) {
      std::vector<int32_t>& out = r.prompt_ids.emplace_back();
      for (const json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          throw bad_request("prompt: an array must hold token ids (non-negative integers)", "prompt");
        out.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      prompt_bytes += out.size() * sizeof(int32_t);
    };
    auto add_text = [&](const json& text) {
      r.prompts.push_back(text.get<std::string>());
      prompt_bytes += r.prompts.back().size();
    };
    if (p->is_string()) {
      add_text(*p);
    } else if (!p->is_array() || p->empty()) {
      throw bad_request(p->is_array() ? "prompt is empty" : shapes, "prompt");
    } else if ((*p)[0].is_string() || (*p)[0].is_array()) {
      if (p->size() > limits.max_choices)
        throw bad_request("more than " + std::to_string(limits.max_choices) + " prompts in one request", "prompt");
      for (const json& one : *p) {
        if (one.is_string() != (*p)[0].is_string() || one.is_array() != (*p)[0].is_array()) throw bad_request(shapes, "prompt");
        one.is_string() ? add_text(one) : add_ids(one);
      }
    } else {
      add_ids(*p);
    }
    for (const auto& ids : r.prompt_ids)
      if (ids.empty()) throw bad_request("prompt is empty", "prompt");
    for (const std::string& text : r.prompts)
      if (text.empty()) throw bad_request("prompt is empty", "prompt");
  }
  if (prompt_bytes > limits.max_prompt_bytes)
    throw bad_request("the prompt is " + std::to_string(prompt_bytes) + " bytes, more than the limit of " +
                  std::to_string(limits.max_prompt_bytes),
              chat ? "messages" : "prompt");

  if (const json* v = json_field(j, "echo")) {  // the prompt's text (and log-probabilities) before the completion's
    if (!v->is_boolean()) throw bad_request("echo must be true or false", "echo");
    r.echo = v->get<bool>();
    if (r.echo && chat) throw bad_request("echo is for /v1/completions", "echo");
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"})  // 0 with echo: only score the prompt
    if (const json* v = json_field(j, name)) r.options.max_tokens = static_cast<int32_t>(integer(*v, name, r.echo ? 0 : 1, limits.max_tokens));
  if (const json* v = json_field(j, "n")) r.n = static_cast<int32_t>(integer(*v, "n", 1, static_cast<int64_t>(limits.max_choices)));
  if (const size_t n_prompts = std::max<size_t>(1, r.prompts.size() + r.prompt_ids.size()); n_prompts * r.n > limits.max_choices)
    throw bad_request("prompts x n is " + std::to_string(n_prompts * r.n) + ", more than " + std::to_string(limits.max_choices) +
                  " choices in one request",
              "n");

  SamplingParams& s = r.options.sampling;
  if (const json* v = json_field(j, "temperature")) s.temperature = static_cast<float>(number(*v, "temperature", 0, 2));
  if (const json* v = json_field(j, "top_p")) s.top_p = static_cast<float>(number(*v, "top_p", 0, 1));
  if (!(s.top_p > 0)) throw bad_request("top_p must be above 0", "top_p");
  if (const json* v = json_field(j, "top_k")) s.top_k = static_cast<int32_t>(integer(*v, "top_k", 0, 1 << 20));
  if (const json* v = json_field(j, "min_p")) s.min_p = static_cast<float>(number(*v, "min_p", 0, 1));
  if (const json* v = json_field(j, "seed")) s.seed = static_cast<uint64_t>(integer(*v, "seed", INT64_MIN, INT64_MAX));
  if (const json* v = json_field(j, "presence_penalty")) s.presence_penalty = static_cast<float>(number(*v, "presence_penalty", -2, 2));
  if (const json* v = json_field(j, "frequency_penalty")) s.frequency_penalty = static_cast<float>(number(*v, "frequency_penalty", -2, 2));
  for (const char* name : {"repetition_penalty", "repeat_penalty"})
    if (const json* v = json_field(j, name)) s.repeat_penalty = static_cast<float>(number(*v, name, 0.01, 10));
  if (const json* v = json_field(j, "logit_bias")) {
    if (!v->is_object()) throw bad_request("logit_bias must be an object of token ids to numbers", "logit_bias");
    if (v->size() > limits.max_logit_bias) throw bad_request("logit_bias has too many entries", "logit_bias");
    for (const auto& [key, bias] : v->items()) {
      char* end = nullptr;
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX)
        throw bad_request("logit_bias: '" + key + "' is not a token id", "logit_bias");
      s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(number(bias, "logit_bias", -100, 100)));
    }
  }
  if (const json* v = json_field(j, "stop")) {
    std::vector<std::string> stops;
    if (v->is_string()) {
      stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const json& x : *v) {
        if (!x.is_string()) throw bad_request("stop must be a string or an array of strings", "stop");
        stops.push_back(x.get<std::string>());
      }
    } else {
      throw bad_request("stop must be a string or an array of strings", "stop");
    }
    if (stops.size() > limits.max_stop) throw bad_request("at most " + std::to_string(limits.max_stop) + " stop strings", "stop");
    for (const std::string& x : stops)
      if (x.empty() || x.size() > limits.max_stop_bytes)
        throw bad_request("a stop string must have 1 to " + std::to_string(limits.max_stop_bytes) + " bytes", "stop");
    r.options.stop = std::move(stops);
  }
  if (const json* v = json_field(j, "ignore_eos")) {  // llama-server's: generate max_tokens whatever the model says
    if (!v->is_boolean()) throw bad_request("ignore_eos must be true or false", "ignore_eos");
    r.options.stop_at_end_of_generation = !v->get<bool>();
  }
  if (const json* v = json_field(j, "response_format")) r.options.grammar = output_grammar(*v, ordered);
  if (const json* v = json_field(j, "grammar")) {  // llama-server's: GBNF text
    if (!v->is_string()) throw bad_request("grammar must be a string (GBNF)", "grammar");
    if (r.options.grammar) throw bad_request("grammar and a JSON response_format cannot be given together", "grammar");
    try {
      r.options.grammar = std::make_shared<const Grammar>(gbnf_grammar(v->get<std::string>()));
    } catch (const Error& e) {
      throw bad_request(e.what(), "grammar");
    }
  }
  // logprobs: chat's a boolean with top_logprobs beside it; the completions API's the number of alternatives.
  constexpr int64_t kMaxTop = GenerateOptions::kMaxTopLogprobs;
  if (chat) {
    bool wanted = false;
    if (const json* v = json_field(j, "logprobs")) {
      if (!v->is_boolean()) throw bad_request("logprobs must be true or false", "logprobs");
      wanted = v->get<bool>();
    }
    if (const json* v = json_field(j, "top_logprobs")) {
      const int64_t n = integer(*v, "top_logprobs", 0, kMaxTop);
      if (!wanted) throw bad_request("top_logprobs needs logprobs: true", "top_logprobs");
      r.options.logprobs = static_cast<int32_t>(n);
    } else if (wanted) {
      r.options.logprobs = 0;
    }
  } else if (const json* v = json_field(j, "logprobs")) {
    r.options.logprobs = static_cast<int32_t>(integer(*v, "logprobs", 0, kMaxTop));
  }
  // Asked for and not done: refused, not ignored.
  if (const json* v = json_field(j, "best_of"); v && integer(*v, "best_of", 1, 1) != 1) throw bad_request("only best_of = 1 is supported", "best_of");
  // Function calling (tools/serve/tool_calls.h). The tools' schemas are read
  // from the ordered body, as response_format's.
  for (const char* name : {"tools", "functions", "tool_choice", "function_call"}) {
    if (!json_field(j, name)) continue;
    if (!chat) throw bad_request("tools are for /v1/chat/completions", name);  // the first of them the request has
    r.tools = parse_tool_request(ordered.get(), limits.max_tools, tool_style);
    break;
  }
  if (json_field(j, "chat_template_kwargs")) {  // llama-server's and vLLM's: the chat template's variables
    if (!chat) throw bad_request("chat_template_kwargs is for /v1/chat/completions", "chat_template_kwargs");
    r.template_vars = ordered.get().at("chat_template_kwargs");
    try {
      cli::check_template_vars(r.template_vars, "chat_template_kwargs");
    } catch (const Error& e) {
      throw bad_request(e.what(), "chat_template_kwargs");
    }
  }
  if (r.tools.active()) {
    if (r.options.grammar) throw bad_request("tools cannot be given with response_format or grammar", "tools");
    r.options.grammar = tools_grammar(r.tools);
    if (const std::string offer = tools_prompt(r.tools); offer.empty())  // the template lists them
      r.template_vars["tools"] = tools_variable(r.tools);
    else if (r.messages.front().role == "system")
      r.messages.front().content += "\n\n" + offer;
    else
      r.messages.insert(r.messages.begin(), {"system", offer});
  }
  if (const json* v = json_field(j, "stream")) {
    if (!v->is_boolean()) throw bad_request("stream must be true or false", "stream");
    r.stream = v->get<bool>();
    if (r.stream && r.echo) throw bad_request("echo is not supported with stream", "echo");
  }
  if (const json* v = json_field(j, "stream_options")) {
    if (!v->is_object()) throw bad_request("stream_options must be an object", "stream_options");
    if (const json* u = json_field(*v, "include_usage")) {
      if (!u->is_boolean()) throw bad_request("stream_options.include_usage must be true or false", "stream_options");
      r.include_usage = u->get<bool>();
    }
  }
  return r;
}

const char* finish_reason(const GenerationStats& st) {
  return st.stop_reason == "length" || st.stop_reason == "context full" ? "length" : "stop";
}

const char* finish_reason(const GenerationStats& st, const std::vector<ToolCall>& calls) {
  return calls.empty() ? finish_reason(st) : "tool_calls";
}

namespace {
json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id}, {"type", "function"}, {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (indexed) c["index"] = i;  // a stream's deltas say which call they add to
    out.push_back(std::move(c));
  }
  return out;
}
}  // namespace

json usage_json(const GenerationStats& st) { return usage_json(std::vector<GenerationStats>{st}, 1); }

json usage_json(const std::vector<GenerationStats>& choices, int32_t n) {
  int64_t prompt = 0, generated = 0, cached = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    generated += choices[i].n_generated;
    if (i % static_cast<size_t>(n) != 0) continue;  // a prompt's tokens count once
    prompt += choices[i].n_prompt;
    // cached_tokens: prompt tokens whose keys and values came from the prefix cache (OpenAI's field).
    cached += std::max<int64_t>(0, choices[i].n_prompt - choices[i].n_prefilled);
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", generated},
          {"total_tokens", prompt + generated},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

namespace {

// The completions API's logprobs: four arrays, a token's entry in each.
json completion_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
}

// Token id's entries; without its TokenLogprob (a prompt's first token) null logprobs.
void append_completion_token(json& j, const Tokenizer& tok, int32_t id, const TokenLogprob* t, size_t* text_offset) {
  const std::string piece = tok.token_to_piece(id);
  json top = t ? json::object() : json(nullptr);
  if (t)
    for (const auto& [alt, lp] : t->top) top.emplace(tok.token_to_piece(alt), lp);  // a piece twice: the likelier stays
  j["tokens"].push_back(piece);
  j["token_logprobs"].push_back(t ? json(t->logprob) : json(nullptr));
  j["top_logprobs"].push_back(top);
  j["text_offset"].push_back(*text_offset);
  *text_offset += piece.size();
}

}  // namespace

json logprobs_json(const CompletionRequest& r, const std::vector<TokenLogprob>& tokens, const Tokenizer& tok,
                   size_t* text_offset) {
  auto bytes = [](const std::string& piece) {
    json b = json::array();
    for (unsigned char c : piece) b.push_back(c);
    return b;
  };
  if (r.chat) {
    json content = json::array();
    for (const TokenLogprob& t : tokens) {
      const std::string piece = tok.token_to_piece(t.id);
      json top = json::array();
      for (const auto& [id, lp] : t.top) {
        const std::string p = tok.token_to_piece(id);
        top.push_back({{"token", p}, {"logprob", lp}, {"bytes", bytes(p)}});
      }
      content.push_back({{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json j = completion_logprobs();
  for (const TokenLogprob& t : tokens) append_completion_token(j, tok, t.id, &t, text_offset);
  return j;
}

json echo_logprobs_json(const std::vector<int32_t>& prompt, const std::vector<TokenLogprob>& scored,
                        const std::vector<TokenLogprob>& generated, const Tokenizer& tok) {
  json j = completion_logprobs();
  size_t offset = 0;
  if (!prompt.empty()) append_completion_token(j, tok, prompt[0], nullptr, &offset);  // nothing before it to score it
  for (const auto* part : {&scored, &generated})
    for (const TokenLogprob& t : *part) append_completion_token(j, tok, t.id, &t, &offset);
  return j;
}

json completion_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                     const std::vector<ChoiceResult>& results) {
  json choices = json::array();
  std::vector<GenerationStats> stats;
  for (const ChoiceResult& c : results) {
    json choice = {{"index", choices.size()}, {"logprobs", c.logprobs}, {"finish_reason", finish_reason(c.stats, c.calls)}};
    if (r.chat) {
      // With calls, the text the model wrote before them (Hermes' tags allow some), or null.
      choice["message"] = {{"role", "assistant"}, {"content", c.calls.empty() || !c.text.empty() ? json(c.text) : json(nullptr)}};
      if (!c.calls.empty()) choice["message"]["tool_calls"] = tool_calls_json(c.calls, false);
      if (!c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
    } else {
      choice["text"] = c.text;
    }
    choices.push_back(std::move(choice));
    stats.push_back(c.stats);
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", std::move(choices)},
          {"usage", usage_json(stats, r.n)}};
}

json completion_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                     const std::string& text, const GenerationStats& st, const json& logprobs,
                     const std::vector<ToolCall>& calls) {
  return completion_json(r, id, created, model, std::vector<ChoiceResult>{{text, st, logprobs, calls}});
}

json chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                std::string_view text, const char* finish, bool first, const json& logprobs, size_t index) {
  json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  json chunk = {{"id", id},
                {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({choice})}};
  if (r.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json reasoning_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                          std::string_view reasoning, bool first, const json& logprobs, size_t index) {
  json chunk = chunk_json(r, id, created, model, "", nullptr, first, logprobs, index);
  json& delta = chunk["choices"][0]["delta"];
  delta.erase("content");
  delta["reasoning_content"] = std::string(reasoning);
  return chunk;
}

json tool_calls_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                           const std::vector<ToolCall>& calls, bool first, size_t index) {
  json delta = {{"tool_calls", tool_calls_json(calls, true)}};
  if (first) delta["role"] = "assistant";
  json chunk = {{"id", id},
                {"object", "chat.completion.chunk"},
                {"created", created},
                {"model", model},
                {"choices", json::array({{{"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"delta", delta}}})}};
  if (r.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json usage_chunk_json(const CompletionRequest& r, const std::string& id, int64_t created, const std::string& model,
                      const json& usage) {
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage}};
}

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.what()}, {"type", e.type}, {"param", e.param.empty() ? json(nullptr) : json(e.param)}, {"code", nullptr}}}};
}

json models_json(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "basalt"}}})}};
}

}  // namespace basalt::serve
