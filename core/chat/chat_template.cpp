// SPDX-License-Identifier: MIT
// ChatTemplate: the variables transformers passes to a chat template, and JSON to template values.
#include "core/chat/chat_template.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "core/error.h"

namespace basalt {

namespace {

constexpr const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Gemma's turn format, written from its description (the Gemma docs' "prompt
// formatting"): no system role, so a system message opens the first turn.
constexpr const char* kGemmaTurns =
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set prefix = messages[0]['content'] + '\n\n' -%}{%- set turns = messages[1:] -%}"
    "{%- else -%}{%- set prefix = '' -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- for m in turns -%}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\n' + (prefix if loop.first else '') + "
    "m['content'] + '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}";

jinja::Value str(const std::string& s) { return jinja::Value::string(s); }

}  // namespace

jinja::Value json_to_value(const nlohmann::ordered_json& j) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(json_to_value(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      jinja::DictData d;
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(str(it.key()), json_to_value(it.value()));
      return Value::dict(std::move(d));
    }
    default: throw Error("chat template: cannot pass a JSON value of type " + std::string(j.type_name()));
  }
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      template_(std::make_shared<jinja::Template>(source_)) {}

ChatTemplate ChatTemplate::chatml() { return ChatTemplate(kChatML, "", "<|im_end|>"); }
ChatTemplate ChatTemplate::gemma_turns(std::string bos) { return ChatTemplate(kGemmaTurns, std::move(bos), "<end_of_turn>"); }

std::string ChatTemplate::render_context(jinja::DictData context) const {
  return template_->render(context, options_);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::vector<jinja::Value> list;
  for (const ChatMessage& m : messages) {
    jinja::DictData d;
    d.items.emplace_back(str("role"), str(m.role));
    d.items.emplace_back(str("content"), str(m.content));
    list.push_back(jinja::Value::dict(std::move(d)));
  }
  jinja::DictData ctx;
  ctx.set(str("tools"), jinja::Value::none());
  ctx.set(str("documents"), jinja::Value::none());
  ctx.set(str("add_generation_prompt"), jinja::Value::boolean(add_generation_prompt));
  ctx.set(str("bos_token"), str(bos_token_));
  ctx.set(str("eos_token"), str(eos_token_));
  ctx.set(str("messages"), jinja::Value::list(std::move(list)));
  return render_context(std::move(ctx));
}

std::string ChatTemplate::render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                      const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) throw Error("chat template: messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object()) throw Error("chat template: extra variables must be a JSON object");
  jinja::DictData ctx;
  ctx.set(str("tools"), jinja::Value::none());
  ctx.set(str("documents"), jinja::Value::none());
  ctx.set(str("add_generation_prompt"), jinja::Value::boolean(add_generation_prompt));
  ctx.set(str("bos_token"), str(bos_token_));
  ctx.set(str("eos_token"), str(eos_token_));
  try {
    ctx.set(str("messages"), json_to_value(messages));
    if (extra.is_object())
      for (auto it = extra.begin(); it != extra.end(); ++it) ctx.set(str(it.key()), json_to_value(it.value()));
  } catch (const jinja::Fault& f) {
    throw Error(std::string("chat template: the messages or variables passed: ") + f.what());
  }
  return render_context(std::move(ctx));
}

}  // namespace basalt
