// SPDX-License-Identifier: MIT
#include "tools/serve/tool_calls.h"

#include <cctype>
#include <set>

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

// One call of the tool: {"name": its name, "arguments": an instance of its parameters}.
ordered_json call_schema(const std::string& name, const std::string& parameters_ref) {
  return {{"type", "object"},
          {"properties", {{"name", {{"const", name}}}, {"arguments", {{"$ref", parameters_ref}}}}},
          {"required", {"name", "arguments"}}};
}

}  // namespace

ToolRequest parse_tool_request(const ordered_json& body, size_t max_tools) {
  ToolRequest t;
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
  std::string s = "You can call these functions. Each is given as JSON, with the JSON Schema of its arguments:\n";
  for (const ordered_json& tool : t.tools) s += tool.dump() + "\n";
  s += "To call a function, reply with only a JSON object: {\"name\": <the function's name>, \"arguments\": <its arguments>}.";
  if (t.parallel && t.forced.empty()) s += " To call several, reply with a JSON array of such objects.";
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
    calls.push_back(call_schema(name, ref));
  }
  ordered_json one = calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}};
  root["anyOf"] = ordered_json::array({one});
  if (t.parallel && t.forced.empty()) root["anyOf"].push_back({{"type", "array"}, {"items", one}, {"minItems", 1}});
  Grammar g = json_schema_grammar_parsed(root);

  // A few blanks before the call; under "auto", text instead that cannot be taken for one.
  ByteSet blank, text;
  for (char c : {' ', '\t', '\n', '\r'}) blank.set(static_cast<uint8_t>(c));
  text.set();
  text &= ~blank;
  text.reset('{');
  text.reset('[');
  Grammar::Sequence call = g.repeat({g.bytes(blank)}, 0, 4);
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

std::string tool_calls_text(const json& tool_calls, const std::string& param) {
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
  return calls.size() == 1 ? calls[0].dump() : calls.dump();
}

std::string tool_result_text(const std::string& name, const std::string& content) {
  return ordered_json{{"tool_result", {{"name", name}, {"content", content}}}}.dump();
}

std::vector<ToolCall> read_tool_calls(std::string_view reply, const std::string& id_prefix) {
  ordered_json j;
  try {
    j = ordered_json::parse(reply);
  } catch (const json::exception&) {
    return {};  // text, or a call cut short (max_tokens): the reply stays text
  }
  const ordered_json calls = j.is_array() ? j : ordered_json::array({j});
  std::vector<ToolCall> out;
  for (const ordered_json& c : calls) {
    const ordered_json* name = json_field(c, "name");
    const ordered_json* args = json_field(c, "arguments");
    if (!name || !name->is_string() || !args || !args->is_object() || c.size() != 2) return {};
    out.push_back({id_prefix + std::to_string(out.size()), name->get<std::string>(), args->dump()});
  }
  return out;
}

bool may_be_tool_call(std::string_view reply_start) {
  for (char c : reply_start)
    if (!is_blank(c)) return c == '{' || c == '[';
  return true;
}

}  // namespace basalt::serve
