// SPDX-License-Identifier: MIT
#include "tools/serve/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "core/grammar/json_schema.h"
#include "tools/serve/openai_api.h"

namespace basalt::serve {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// OpenAI's rule for function names.
bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// s with every "$ref": "#..." pointing under base instead of the document's root:
// a tool's schema moves into the grammar's $defs, its references with it.
ordered_json with_refs_under(const ordered_json& s, const std::string& base) {
  if (s.is_array()) {
    ordered_json out = ordered_json::array();
    for (const ordered_json& e : s) out.push_back(with_refs_under(e, base));
    return out;
  }
  if (!s.is_object()) return s;
  ordered_json out = ordered_json::object();
  for (const auto& [key, value] : s.items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().rfind('#', 0) == 0)
      out[key] = base + value.get<std::string>().substr(1);
    else
      out[key] = with_refs_under(value, base);
  }
  return out;
}

// Where a call's arguments go: Llama 3 names them "parameters".
const char* arguments_key(ToolFormat f) { return f == ToolFormat::llama3 ? "parameters" : "arguments"; }

// One call of the tool: {"name": its name, "arguments": an instance of its parameters}.
ordered_json call_schema(const std::string& name, const std::string& parameters_ref, ToolFormat f) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", name}}}, {arguments_key(f), {{"$ref", parameters_ref}}}}},
          {"required", {"name", arguments_key(f)}}};
}

constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";

// JSON as Python's json.dumps writes it (", " and ": "), as the templates' tojson
// does: the layout a model trained on them has seen.
std::string python_json(const ordered_json& j) {
  if (j.is_object()) {
    std::string s = "{";
    for (auto it = j.begin(); it != j.end(); ++it)
      s += (it == j.begin() ? "" : ", ") + ordered_json(it.key()).dump() + ": " + python_json(it.value());
    return s + "}";
  }
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + python_json(j[i]);
    return s + "]";
  }
  return j.dump();
}

ByteSet blank_bytes() {
  ByteSet blank;
  for (char c : {' ', '\t', '\n', '\r'}) blank.set(static_cast<uint8_t>(c));
  return blank;
}

Grammar::Sequence blanks(Grammar& g, int64_t max) { return g.repeat({g.bytes(blank_bytes())}, 0, max); }

Grammar::Sequence operator+(Grammar::Sequence a, const Grammar::Sequence& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

const char* tool_format_name(ToolFormat f) {
  return f == ToolFormat::hermes ? "hermes" : f == ToolFormat::llama3 ? "llama3" : "json";
}

ToolStyle tool_style_of(std::string_view chat_template) {
  ToolStyle s;
  s.thinks = chat_template.find("<think>") != std::string_view::npos;
  auto has = [&](std::string_view text) { return chat_template.find(text) != std::string_view::npos; };
  if (has(kCallOpen)) s.format = ToolFormat::hermes;
  else if (has("\"parameters\"") && has("ipython")) s.format = ToolFormat::llama3;
  else return s;
  s.template_lists_tools = chat_template.find("tools") != std::string_view::npos;
  s.template_has_tool_role =
      chat_template.find("\"tool\"") != std::string_view::npos || chat_template.find("'tool'") != std::string_view::npos;
  return s;
}

ToolRequest parse_tool_request(const ordered_json& body, size_t max_tools, const ToolStyle& style) {
  ToolRequest t;
  t.style = style;
  const ordered_json* tools = json_field(body, "tools");
  const ordered_json* functions = json_field(body, "functions");  // the API's older form: the functions alone
  if (tools && functions) throw bad_request("give tools or functions, not both", "functions");
  const std::string param = tools ? "tools" : "functions";
  std::set<std::string> names;
  if (const ordered_json* list = tools ? tools : functions) {
    if (!list->is_array()) throw bad_request(param + " must be an array", param);
    if (list->size() > max_tools) throw bad_request("more than " + std::to_string(max_tools) + " " + param, param);
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string at = param + "[" + std::to_string(i) + "]";
      const ordered_json* fn = &(*list)[i];
      std::string fn_at = at;
      if (tools) {
        const ordered_json* type = json_field(*fn, "type");
        if (!type || *type != "function") throw bad_request(at + ".type must be \"function\"", param);
        fn = json_field(*fn, "function");
        fn_at = at + ".function";
      }
      if (!fn || !fn->is_object()) throw bad_request(fn_at + " must be an object", param);
      const ordered_json* name = json_field(*fn, "name");
      if (!name || !name->is_string() || !valid_name(name->get<std::string>()))
        throw bad_request(fn_at + ".name must be 1 to 64 letters, digits, underscores or dashes", param);
      if (!names.insert(name->get<std::string>()).second)
        throw bad_request(fn_at + ".name '" + name->get<std::string>() + "' is given twice", param);
      ordered_json tool = {{"name", *name}};
      if (const ordered_json* d = json_field(*fn, "description")) {
        if (!d->is_string()) throw bad_request(fn_at + ".description must be a string", param);
        tool["description"] = *d;
      }
      if (const ordered_json* s = json_field(*fn, "strict"); s && !s->is_boolean())
        throw bad_request(fn_at + ".strict must be true or false", param);
      // Without parameters a function takes none: {} is its only arguments.
      ordered_json parameters = {{"type", "object"}, {"properties", ordered_json::object()}, {"additionalProperties", false}};
      if (const ordered_json* p = json_field(*fn, "parameters")) {
        if (!p->is_object()) throw bad_request(fn_at + ".parameters must be a JSON Schema object", param);
        parameters = *p;
      }
      try {  // strict or not, the arguments are held to the schema: one it cannot enforce is refused
        json_schema_grammar_parsed(parameters);
      } catch (const Error& e) {
        throw bad_request(fn_at + ".parameters: " + e.what(), param);
      }
      tool["parameters"] = std::move(parameters);
      t.tools.push_back(std::move(tool));
    }
  }

  const char* choice_param = json_field(body, "tool_choice") ? "tool_choice" : "function_call";
  t.choice = t.tools.empty() ? ToolRequest::Choice::none : ToolRequest::Choice::automatic;
  if (const ordered_json* c = json_field(body, choice_param)) {
    if (c->is_string() && (*c == "none" || *c == "auto" || *c == "required")) {
      t.choice = *c == "none" ? ToolRequest::Choice::none
                 : *c == "auto" ? ToolRequest::Choice::automatic
                                : ToolRequest::Choice::required;
    } else if (c->is_object()) {  // tool_choice {type: function, function: {name}}; function_call {name}
      const ordered_json* fn = c;
      if (std::string(choice_param) == "tool_choice") {
        const ordered_json* type = json_field(*c, "type");
        if (!type || *type != "function") throw bad_request("tool_choice.type must be \"function\"", choice_param);
        fn = json_field(*c, "function");
      }
      const ordered_json* name = fn ? json_field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) throw bad_request(std::string(choice_param) + " must name a function", choice_param);
      if (!names.count(name->get<std::string>()))
        throw bad_request(std::string(choice_param) + " names '" + name->get<std::string>() + "', which is not among the " + param,
                  choice_param);
      t.choice = ToolRequest::Choice::required;
      t.forced = name->get<std::string>();
    } else {
      throw bad_request(std::string(choice_param) + " must be \"none\", \"auto\", \"required\" or name a function", choice_param);
    }
    if (t.choice == ToolRequest::Choice::required && t.tools.empty())
      throw bad_request(std::string(choice_param) + " asks for a call, but no tools are given", choice_param);
    if (t.tools.empty()) t.choice = ToolRequest::Choice::none;  // "auto" among no tools
  }
  if (const ordered_json* p = json_field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw bad_request("parallel_tool_calls must be true or false", "parallel_tool_calls");
    t.parallel = p->get<bool>();
  }
  return t;
}

std::string tools_prompt(const ToolRequest& t) {
  if (t.style.format == ToolFormat::hermes) {
    if (t.style.template_lists_tools) return "";
    std::string s = "You can call these functions, each given as JSON with the JSON Schema of its arguments, within <tools></tools>:\n<tools>\n";
    for (const ordered_json& tool : tools_variable(t)) s += python_json(tool) + "\n";
    s += "</tools>\nTo call a function, write <tool_call>\n{\"name\": <the function's name>, \"arguments\": <its arguments>}\n</tool_call>.";
    if (!t.forced.empty()) s += " Call the function " + t.forced + " now.";
    else if (t.choice == ToolRequest::Choice::required) s += " Call a function now.";
    return s + " A function's result comes back within <tool_response></tool_response>.";
  }
  if (t.style.format == ToolFormat::llama3 && t.style.template_lists_tools) return "";
  const std::string key = arguments_key(t.style.format);
  std::string s = "You can call these functions. Each is given as JSON, with the JSON Schema of its arguments:\n";
  for (const ordered_json& tool : t.tools) s += tool.dump() + "\n";
  s += "To call a function, reply with only a JSON object: {\"name\": <the function's name>, \"" + key + "\": <its arguments>}.";
  if (t.parallel && t.forced.empty() && t.style.format == ToolFormat::json) s += " To call several, reply with a JSON array of such objects.";
  if (!t.forced.empty())
    s += " Call the function " + t.forced + " now.";
  else if (t.choice == ToolRequest::Choice::required)
    s += " Call a function now.";
  else
    s += " Otherwise reply to the user in plain text.";
  s += " A function's result comes back as {\"tool_result\": {\"name\": <the function's name>, \"content\": <its result>}}.";
  return s;
}

std::shared_ptr<const Grammar> tools_grammar(const ToolRequest& t) {
  ordered_json root = {{"$defs", ordered_json::object()}};
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const std::string name = t.tools[i]["name"].get<std::string>();
    if (!t.forced.empty() && name != t.forced) continue;
    const std::string def = "tool" + std::to_string(i), ref = "#/$defs/" + def;
    root["$defs"][def] = with_refs_under(t.tools[i]["parameters"], ref);
    calls.push_back(call_schema(name, ref, t.style.format));
  }
  ordered_json one = calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}};
  const bool several = t.parallel && t.forced.empty();
  root["anyOf"] = ordered_json::array({one});
  if (several && t.style.format == ToolFormat::json) root["anyOf"].push_back({{"type", "array"}, {"items", one}, {"minItems", 1}});
  Grammar g = json_schema_grammar_parsed(root);
  if (t.style.format == ToolFormat::hermes) {
    // A call in its tags; under "auto" text before the calls (a thinking
    // model's thoughts among it), under "required" only the thoughts; blanks
    // between and after the calls.
    const Grammar::Sequence call = g.literal(kCallOpen) + blanks(g, 4) + Grammar::Sequence{Grammar::ref(g.root())} +
                                   blanks(g, 4) + g.literal(kCallClose);
    Grammar::Sequence calls_seq = call;
    if (several) calls_seq = calls_seq + g.repeat(blanks(g, 4) + call, 0, -1);
    calls_seq = calls_seq + blanks(g, 4);
    const int32_t reply = g.new_rule();
    if (t.choice == ToolRequest::Choice::automatic) {
      g.add_alternative(reply, {g.text_without(kCallOpen), g.optional(calls_seq)});
    } else {
      Grammar::Sequence thoughts;  // "<think>...</think>", or "...</think>" for a reply that starts inside
      if (t.style.thinks)
        thoughts = {g.optional(Grammar::Sequence{g.optional(g.literal("<think>")), g.text_without("</think>")} +
                               g.literal("</think>"))};
      g.add_alternative(reply, thoughts + blanks(g, 4) + calls_seq);
    }
    g.set_root(reply);
    g.check();
    return std::make_shared<const Grammar>(std::move(g));
  }

  // A few blanks before the call; under "auto", text instead that cannot be taken for one.
  ByteSet text = ~blank_bytes();
  text.reset('{');
  text.reset('[');
  Grammar::Sequence call = blanks(g, 4);
  call.push_back(Grammar::ref(g.root()));
  const int32_t reply = g.new_rule();
  g.add_alternative(reply, call);
  if (t.choice == ToolRequest::Choice::automatic) {
    ByteSet any;
    any.set();
    const int32_t rest = g.new_rule();
    g.add_alternative(rest, {g.bytes(any), Grammar::ref(rest)});
    g.add_alternative(rest, {});
    g.add_alternative(reply, {g.bytes(text), Grammar::ref(rest)});
    g.add_alternative(reply, {});
  }
  g.set_root(reply);
  g.check();
  return std::make_shared<const Grammar>(std::move(g));
}

ordered_json tools_variable(const ToolRequest& t) {
  ordered_json out = ordered_json::array();
  for (const ordered_json& tool : t.tools) out.push_back({{"type", "function"}, {"function", tool}});
  return out;
}

std::string tool_calls_text(const json& tool_calls, const std::string& param, ToolFormat f) {
  if (!tool_calls.is_array()) throw bad_request(param + " must be an array", param);
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const json& c = tool_calls[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    const json* fn = json_field(c, "function");
    const json* name = fn ? json_field(*fn, "name") : nullptr;
    const json* args = fn ? json_field(*fn, "arguments") : nullptr;
    if (!name || !name->is_string()) throw bad_request(at + ".function.name must be a string", param);
    // OpenAI's arguments are JSON text; written back as the JSON the model wrote.
    ordered_json arguments = ordered_json::object();
    if (args) {
      if (!args->is_string()) throw bad_request(at + ".function.arguments must be a string of JSON", param);
      try {
        arguments = ordered_json::parse(args->get<std::string>());
      } catch (const json::exception&) {
        throw bad_request(at + ".function.arguments is not JSON", param);
      }
    }
    calls.push_back({{"name", *name}, {"arguments", std::move(arguments)}});
  }
  if (calls.empty()) return "";
  if (f == ToolFormat::llama3) {  // as Llama 3's templates write a call (one per turn; more, one to a line)
    std::string s;
    for (const ordered_json& c : calls)
      s += (s.empty() ? "" : "\n") + std::string("{\"name\": ") + c["name"].dump() + ", \"parameters\": " + python_json(c["arguments"]) + "}";
    return s;
  }
  if (f == ToolFormat::hermes) {  // as Qwen's and Hermes' templates write them
    std::string s;
    for (const ordered_json& c : calls)
      s += (s.empty() ? "" : "\n") + std::string(kCallOpen) + "\n{\"name\": " + c["name"].dump() +
           ", \"arguments\": " + python_json(c["arguments"]) + "}\n" + std::string(kCallClose);
    return s;
  }
  return calls.size() == 1 ? calls[0].dump() : calls.dump();
}

std::string with_tool_calls(const std::string& content, const std::string& calls_text, ToolFormat f) {
  if (f == ToolFormat::llama3 && !calls_text.empty()) return calls_text;  // Llama 3's templates write the call alone
  if (content.empty() || calls_text.empty()) return content + calls_text;
  return content + (f == ToolFormat::hermes ? "\n" : "\n\n") + calls_text;
}

std::string tool_result_text(const std::string& name, const std::string& content, ToolFormat f) {
  if (f == ToolFormat::hermes) return "<tool_response>\n" + content + "\n</tool_response>";
  return ordered_json{{"tool_result", {{"name", name}, {"content", content}}}}.dump();
}

namespace {

// {"name": ..., "arguments": {...}} ("parameters" in Llama 3's) as a call; false where it is not one.
bool read_call(const ordered_json& c, const std::string& id, std::vector<ToolCall>& out, ToolFormat f = ToolFormat::json) {
  const ordered_json* name = json_field(c, "name");
  const ordered_json* args = json_field(c, arguments_key(f));
  if (!name || !name->is_string() || !args || !args->is_object() || c.size() != 2) return false;
  out.push_back({id, name->get<std::string>(), args->dump()});
  return true;
}

ToolReply read_hermes_calls(std::string_view reply, const std::string& id_prefix) {
  const size_t first = reply.find(kCallOpen);
  if (first == std::string_view::npos) return {std::string(reply), {}};
  ToolReply r;
  size_t at = first;
  while (at < reply.size()) {
    if (reply.compare(at, kCallOpen.size(), kCallOpen) != 0) return {std::string(reply), {}};
    // The call ends at the first closing tag after which its JSON is whole (a string in it may hold one).
    const size_t from = at + kCallOpen.size();
    size_t close = reply.find(kCallClose, from);
    ordered_json c;
    for (; close != std::string_view::npos; close = reply.find(kCallClose, close + 1))
      if (c = ordered_json::parse(reply.substr(from, close - from), nullptr, false); !c.is_discarded()) break;
    if (close == std::string_view::npos) return {std::string(reply), {}};  // cut short, or no call
    if (!read_call(c, id_prefix + std::to_string(r.calls.size()), r.calls)) return {std::string(reply), {}};
    at = close + kCallClose.size();
    while (at < reply.size() && is_blank(reply[at])) ++at;
  }
  size_t end = first;
  while (end > 0 && is_blank(reply[end - 1])) --end;
  r.content = std::string(reply.substr(0, end));
  return r;
}

}  // namespace

ToolReply read_tool_calls(std::string_view reply, const std::string& id_prefix, ToolFormat f) {
  if (f == ToolFormat::hermes) return read_hermes_calls(reply, id_prefix);
  const ordered_json j = ordered_json::parse(reply, nullptr, false);
  if (j.is_discarded()) return {std::string(reply), {}};  // text, or a call cut short (max_tokens): the reply stays text
  ToolReply r;
  if (j.is_array() && f != ToolFormat::json) return {std::string(reply), {}};
  for (const ordered_json& c : j.is_array() ? j : ordered_json::array({j}))
    if (!read_call(c, id_prefix + std::to_string(r.calls.size()), r.calls, f)) return {std::string(reply), {}};
  return r;
}

std::string ToolCallHold::feed(std::string_view piece) {
  held_ += piece;
  if (format_ != ToolFormat::hermes) {
    if (decided_) return std::exchange(held_, {});
    for (char c : held_)
      if (!is_blank(c)) {
        if (c == '{' || c == '[') return "";  // a call, until the end says otherwise
        decided_ = true;
        return std::exchange(held_, {});
      }
    return "";  // blanks only, so far
  }
  if (decided_) return "";
  if (size_t cut = held_.find(kCallOpen); cut != std::string::npos) {
    decided_ = true;
    while (cut > 0 && is_blank(held_[cut - 1])) --cut;  // blanks before the calls are not content
    std::string out = held_.substr(0, cut);
    held_.erase(0, cut);
    return out;
  }
  // Hold what may begin a tag (the longest end of the text that starts one)
  // and the blanks before it, which a call's content does not end with.
  size_t keep = std::min(held_.size(), kCallOpen.size() - 1);
  while (keep > 0 && held_.compare(held_.size() - keep, keep, kCallOpen, 0, keep) != 0) --keep;
  while (keep < held_.size() && is_blank(held_[held_.size() - keep - 1])) ++keep;
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace basalt::serve
