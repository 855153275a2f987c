// SPDX-License-Identifier: MIT
#include "core/grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/error.h"

namespace basalt {

using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxEnum = 10000;                // values of one enum (its trie is built recursively)
// Properties of one object: optional ones nest a rule each before the first
// member's byte, within GrammarMatcher::kMaxNesting.
constexpr size_t kMaxProperties = 500;

using Element = Grammar::Element;
using Sequence = Grammar::Sequence;

ByteSet byte_range(int lo, int hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
  return s;
}

ByteSet byte_chars(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.set(static_cast<uint8_t>(c));
  return s;
}

void append(Sequence& seq, const Element& e) { seq.push_back(e); }
void append(Sequence& seq, const Sequence& more) { seq.insert(seq.end(), more.begin(), more.end()); }

template <class... Parts>
Sequence cat(const Parts&... parts) {
  Sequence seq;
  (append(seq, parts), ...);
  return seq;
}

class JsonGrammarBuilder {
 public:
  explicit JsonGrammarBuilder(const ordered_json* document = nullptr) : doc_(document) {}

  Grammar& grammar() { return g_; }

  int32_t rule(const std::vector<Sequence>& alternatives) { return g_.one_of(alternatives).rule; }
  Element one_of(const std::vector<Sequence>& alternatives) { return g_.one_of(alternatives); }
  Element optional(const Sequence& seq) { return g_.optional(seq); }
  Sequence repeat(const Sequence& item, int64_t min, int64_t max) { return g_.repeat(item, min, max); }

  // Shared pieces, each made once.
  Element ws() {
    return shared("ws", [&] {
      return std::vector<Sequence>{{}, g_.literal(" "), cat(g_.byte('\n'), repeat({g_.bytes(byte_chars(" \t"))}, 0, 24))};
    });
  }
  Element string_char() {
    return shared("char", [&] {
      ByteSet plain = byte_range(0x20, 0x7f);
      plain.reset('"');
      plain.reset('\\');
      const Element cont = g_.bytes(byte_range(0x80, 0xbf));
      const Element hex = g_.bytes(byte_chars("0123456789abcdefABCDEF"));
      return std::vector<Sequence>{
          {g_.bytes(plain)},
          cat(g_.byte('\\'), one_of({{g_.bytes(byte_chars("\"\\/bfnrt"))}, cat(g_.byte('u'), hex, hex, hex, hex)})),
          // UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
          {g_.bytes(byte_range(0xc2, 0xdf)), cont},
          {g_.byte(0xe0), g_.bytes(byte_range(0xa0, 0xbf)), cont},
          {g_.bytes(byte_range(0xe1, 0xec) | byte_range(0xee, 0xef)), cont, cont},
          {g_.byte(0xed), g_.bytes(byte_range(0x80, 0x9f)), cont},
          {g_.byte(0xf0), g_.bytes(byte_range(0x90, 0xbf)), cont, cont},
          {g_.bytes(byte_range(0xf1, 0xf3)), cont, cont, cont},
          {g_.byte(0xf4), g_.bytes(byte_range(0x80, 0x8f)), cont, cont},
      };
    });
  }
  Element string() {
    return shared("string", [&] { return std::vector<Sequence>{cat(g_.byte('"'), repeat({string_char()}, 0, -1), g_.byte('"'))}; });
  }
  Element digits(int64_t min, int64_t max) { return one_of({repeat({g_.bytes(byte_range('0', '9'))}, min, max)}); }
  Element integer() {
    return shared("integer", [&] {
      const Element natural = one_of({g_.literal("0"), cat(g_.bytes(byte_range('1', '9')), digits(0, 15))});
      return std::vector<Sequence>{cat(optional(g_.literal("-")), natural)};
    });
  }
  Element number() {
    return shared("number", [&] {
      const Element fraction = optional(cat(g_.byte('.'), digits(1, 16)));
      const Element exponent = optional(cat(g_.bytes(byte_chars("eE")), optional({g_.bytes(byte_chars("+-"))}), digits(1, 3)));
      return std::vector<Sequence>{cat(integer(), fraction, exponent)};
    });
  }
  // [ ws (item ws (, ws item ws){min-1, max-1})? ]
  Element array_of(const Element& item, int64_t min, int64_t max) {
    if (max >= 0 && max < min) throw Error("maxItems is below minItems");
    if (max == 0) return one_of({cat(g_.byte('['), ws(), g_.byte(']'))});
    const Sequence more = cat(g_.byte(','), ws(), item, ws());
    Sequence items = cat(item, ws(), repeat(more, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1));
    return one_of({cat(g_.byte('['), ws(), min > 0 ? items : Sequence{optional(items)}, g_.byte(']'))});
  }
  // { ws (key ws : ws value ws (, ws key ws : ws value ws)*)? }
  Element object_of(const Element& value) {
    const Sequence member = cat(string(), ws(), g_.byte(':'), ws(), value, ws());
    return one_of({cat(g_.byte('{'), ws(), optional(cat(member, repeat(cat(g_.byte(','), ws(), member), 0, -1))), g_.byte('}'))});
  }
  Element value() {
    auto it = shared_.find("value");
    if (it != shared_.end()) return Grammar::ref(it->second);
    const int32_t r = g_.new_rule();  // before its parts: objects and arrays hold values
    shared_["value"] = r;
    for (const Sequence& a : std::vector<Sequence>{{object_of(Grammar::ref(r))}, {array_of(Grammar::ref(r), 0, -1)}, {string()},
                                                   {number()}, g_.literal("true"), g_.literal("false"), g_.literal("null")})
      g_.add_alternative(r, a);
    return Grammar::ref(r);
  }

  Element schema(const ordered_json& s, const std::string& at);

 private:
  template <class Make>
  Element shared(const std::string& name, Make make) {
    auto it = shared_.find(name);
    if (it != shared_.end()) return Grammar::ref(it->second);
    const int32_t r = rule(make());
    shared_[name] = r;
    return Grammar::ref(r);
  }
  Element literal_json(const ordered_json& v) { return one_of({g_.literal(v.dump())}); }
  // One of the texts, as a trie: after its first byte a reading is one path,
  // however many values an enum lists (alternatives side by side would each
  // be followed until they differ).
  Element any_literal(std::vector<std::string> texts) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    return trie(texts, 0, texts.size(), 0);
  }
  Element trie(const std::vector<std::string>& texts, size_t begin, size_t end, size_t depth) {
    // The bytes all of them share past depth go in one sequence (recursion only where they part).
    const std::string& a = texts[begin];
    const std::string& z = texts[end - 1];
    Sequence shared;
    while (depth < a.size() && depth < z.size() && a[depth] == z[depth]) shared.push_back(g_.byte(static_cast<uint8_t>(a[depth++])));
    if (end - begin == 1) return one_of({shared});
    std::vector<Sequence> alts;
    for (size_t i = begin; i < end;) {
      if (texts[i].size() == depth) {  // sorted: the one that ends here comes first
        alts.push_back({});
        ++i;
        continue;
      }
      const char c = texts[i][depth];
      size_t j = i;
      while (j < end && texts[j].size() > depth && texts[j][depth] == c) ++j;
      alts.push_back({g_.byte(static_cast<uint8_t>(c)), trie(texts, i, j, depth + 1)});
      i = j;
    }
    shared.push_back(one_of(alts));
    return one_of({shared});
  }
  Element ref(const std::string& target, const std::string& at);
  Element typed(const ordered_json& s, const std::string& type, const std::string& at);
  Element object(const ordered_json& s, const std::string& at);
  Element array(const ordered_json& s, const std::string& at);
  Element string_of(const ordered_json& s, const std::string& at);
  Element format(const std::string& name, const std::string& at);

  Grammar g_;
  const ordered_json* doc_;
  std::map<std::string, int32_t> shared_;  // shared pieces and $ref targets, by name
};

[[noreturn]] void unsupported(const std::string& what, const std::string& at) {
  throw Error("JSON schema at " + at + ": " + what);
}

int64_t count_of(const ordered_json& s, const char* key, int64_t fallback, const std::string& at) {
  auto it = s.find(key);
  if (it == s.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) unsupported(std::string(key) + " must be a non-negative integer", at);
  return it->get<int64_t>();
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
  return k;
}

const std::set<std::string>& enforced() {
  static const std::set<std::string> k = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
                                          "properties", "required", "additionalProperties", "items", "prefixItems",
                                          "minItems", "maxItems", "minLength", "maxLength", "format"};
  return k;
}

Element JsonGrammarBuilder::schema(const ordered_json& s, const std::string& at) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) unsupported("the schema false matches nothing", at);
    return value();
  }
  if (!s.is_object()) unsupported("a schema must be an object or a boolean", at);
  for (const auto& [key, v] : s.items())
    if (!enforced().count(key) && !annotations().count(key)) unsupported("the keyword \"" + key + "\" is not supported", at);

  if (auto it = s.find("$ref"); it != s.end()) {
    if (!it->is_string()) unsupported("$ref must be a string", at);
    return ref(it->get<std::string>(), at);
  }
  if (auto it = s.find("const"); it != s.end()) return literal_json(*it);
  if (auto it = s.find("enum"); it != s.end()) {
    if (!it->is_array() || it->empty()) unsupported("enum must be a non-empty array", at);
    if (it->size() > kMaxEnum) unsupported("an enum of more than " + std::to_string(kMaxEnum) + " values is not supported", at);
    std::vector<std::string> texts;
    for (const ordered_json& v : *it) texts.push_back(v.dump());
    return any_literal(texts);
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (auto it = s.find(key); it != s.end()) {
      if (!it->is_array() || it->empty()) unsupported(std::string(key) + " must be a non-empty array", at);
      std::vector<Sequence> alts;
      for (size_t i = 0; i < it->size(); ++i) alts.push_back({schema((*it)[i], at + "/" + key + "/" + std::to_string(i))});
      return one_of(alts);
    }
  if (auto it = s.find("allOf"); it != s.end()) {
    if (!it->is_array() || it->size() != 1) unsupported("allOf is supported with one schema only", at);
    return schema((*it)[0], at + "/allOf/0");
  }

  std::vector<std::string> types;
  if (auto it = s.find("type"); it != s.end()) {
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty()) {
      for (const ordered_json& t : *it) {
        if (!t.is_string()) unsupported("type must be a string or an array of strings", at);
        types.push_back(t.get<std::string>());
      }
    } else {
      unsupported("type must be a string or an array of strings", at);
    }
  } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
    types.push_back("string");
  } else {
    return value();
  }
  std::vector<Sequence> alts;
  for (const std::string& t : types) alts.push_back({typed(s, t, at)});
  return alts.size() == 1 ? alts[0][0] : one_of(alts);
}

Element JsonGrammarBuilder::typed(const ordered_json& s, const std::string& type, const std::string& at) {
  if (type == "object") return object(s, at);
  if (type == "array") return array(s, at);
  if (type == "string") return string_of(s, at);
  if (type == "integer") return integer();
  if (type == "number") return number();
  if (type == "boolean") return one_of({g_.literal("true"), g_.literal("false")});
  if (type == "null") return one_of({g_.literal("null")});
  unsupported("unknown type \"" + type + "\"", at);
}

Element JsonGrammarBuilder::ref(const std::string& target, const std::string& at) {
  if (!doc_ || target.empty() || target[0] != '#') unsupported("only $ref within the document (\"#...\") is supported", at);
  const std::string key = "$ref " + target;
  auto it = shared_.find(key);
  if (it != shared_.end()) return Grammar::ref(it->second);
  const ordered_json* resolved = nullptr;
  try {
    resolved = &doc_->at(ordered_json::json_pointer(target.substr(1)));
  } catch (const nlohmann::json::exception&) {
    unsupported("$ref \"" + target + "\" does not resolve", at);
  }
  const int32_t r = g_.new_rule();  // named first: the schema may refer to itself
  shared_[key] = r;
  g_.add_alternative(r, {schema(*resolved, target)});
  return Grammar::ref(r);
}

Element JsonGrammarBuilder::object(const ordered_json& s, const std::string& at) {
  const auto props = s.find("properties");
  const auto extra = s.find("additionalProperties");
  std::set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) unsupported("required must be an array of strings", at);
    for (const ordered_json& name : *it) {
      if (!name.is_string()) unsupported("required must be an array of strings", at);
      required.insert(name.get<std::string>());
    }
  }
  if (props == s.end() || (props->is_object() && props->empty())) {
    if (!required.empty()) unsupported("required names properties the schema does not list", at);
    if (extra == s.end() || (extra->is_boolean() && extra->get<bool>())) return object_of(value());
    if (extra->is_boolean()) return one_of({cat(g_.byte('{'), ws(), g_.byte('}'))});
    return object_of(schema(*extra, at + "/additionalProperties"));
  }
  if (!props->is_object()) unsupported("properties must be an object", at);
  if (extra != s.end() && !(extra->is_boolean() && !extra->get<bool>()))
    unsupported("additionalProperties beside properties is not supported (set it to false)", at);
  for (const std::string& name : required)
    if (!props->contains(name)) unsupported("required property \"" + name + "\" is not among the properties", at);

  // The members in the schema's order, those not required optional, commas
  // between those present: first_i (none written yet) and next_i (some
  // written) each take member i or, where it is optional, go on without it.
  if (props->size() > kMaxProperties)
    unsupported("an object of more than " + std::to_string(kMaxProperties) + " properties is not supported", at);
  std::vector<std::pair<std::string, const ordered_json*>> members;
  for (const auto& [name, sub] : props->items()) members.emplace_back(name, &sub);
  Element first = one_of({{}}), next = one_of({{}});  // past the last member
  for (size_t i = members.size(); i-- > 0;) {
    const auto& [name, sub] = members[i];
    const Sequence member = cat(g_.literal(ordered_json(name).dump()), ws(), g_.byte(':'), ws(),
                                schema(*sub, at + "/properties/" + name), ws());
    const bool optional_member = !required.count(name);
    std::vector<Sequence> first_alts{cat(member, next)}, next_alts{cat(g_.byte(','), ws(), member, next)};
    if (optional_member) first_alts.push_back({first}), next_alts.push_back({next});
    first = one_of(first_alts);
    next = one_of(next_alts);
  }
  return one_of({cat(g_.byte('{'), ws(), first, g_.byte('}'))});
}

Element JsonGrammarBuilder::array(const ordered_json& s, const std::string& at) {
  const int64_t min = count_of(s, "minItems", 0, at), max = count_of(s, "maxItems", -1, at);
  if (auto tuple = s.find("prefixItems"); tuple != s.end()) {
    if (!tuple->is_array() || tuple->empty()) unsupported("prefixItems must be a non-empty array", at);
    const auto items = s.find("items");
    if (items == s.end() || !(items->is_boolean() && !items->get<bool>()))
      unsupported("prefixItems is supported with \"items\": false only", at);
    if (s.contains("minItems") || s.contains("maxItems")) unsupported("minItems and maxItems beside prefixItems are not supported", at);
    Sequence seq = cat(g_.byte('['), ws());
    for (size_t i = 0; i < tuple->size(); ++i) {
      if (i > 0) append(seq, cat(g_.byte(','), ws()));
      append(seq, cat(schema((*tuple)[i], at + "/prefixItems/" + std::to_string(i)), ws()));
    }
    seq.push_back(g_.byte(']'));
    return one_of({seq});
  }
  const auto items = s.find("items");
  const Element item = items == s.end() ? value() : schema(*items, at + "/items");
  return array_of(item, min, max);
}

Element JsonGrammarBuilder::string_of(const ordered_json& s, const std::string& at) {
  if (auto f = s.find("format"); f != s.end()) {
    if (!f->is_string()) unsupported("format must be a string", at);
    if (s.contains("minLength") || s.contains("maxLength")) unsupported("minLength and maxLength beside format are not supported", at);
    return format(f->get<std::string>(), at);
  }
  const int64_t min = count_of(s, "minLength", 0, at), max = count_of(s, "maxLength", -1, at);
  if (max >= 0 && max < min) unsupported("maxLength is below minLength", at);
  if (min == 0 && max < 0) return string();
  return one_of({cat(g_.byte('"'), repeat({string_char()}, min, max), g_.byte('"'))});
}

Element JsonGrammarBuilder::format(const std::string& name, const std::string& at) {
  const Element digit = g_.bytes(byte_range('0', '9'));
  auto two = [&](char first_lo, char first_hi) { return Sequence{g_.bytes(byte_range(first_lo, first_hi)), digit}; };
  const Element date = one_of({cat(digit, digit, digit, digit, g_.byte('-'),
                                   one_of({cat(g_.byte('0'), g_.bytes(byte_range('1', '9'))), cat(g_.byte('1'), g_.bytes(byte_range('0', '2')))}),
                                   g_.byte('-'),
                                   one_of({cat(g_.byte('0'), g_.bytes(byte_range('1', '9'))), two('1', '2'),
                                           cat(g_.byte('3'), g_.bytes(byte_range('0', '1')))}))});
  const Element hour = one_of({two('0', '1'), cat(g_.byte('2'), g_.bytes(byte_range('0', '3')))});
  const Element sixty = one_of({two('0', '5')});
  const Element time = one_of({cat(hour, g_.byte(':'), sixty, g_.byte(':'), sixty, optional(cat(g_.byte('.'), digits(1, 9))),
                                   one_of({g_.literal("Z"), cat(g_.bytes(byte_chars("+-")), hour, g_.byte(':'), sixty)}))});
  const Element hex = g_.bytes(byte_chars("0123456789abcdefABCDEF"));
  Sequence body;
  if (name == "date") {
    body = {date};
  } else if (name == "time") {
    body = {time};
  } else if (name == "date-time") {
    body = cat(date, g_.byte('T'), time);
  } else if (name == "uuid") {
    for (int group : {8, 4, 4, 4, 12}) {
      if (!body.empty()) body.push_back(g_.byte('-'));
      for (int i = 0; i < group; ++i) body.push_back(hex);
    }
  } else {
    unsupported("format \"" + name + "\" is not supported (date, time, date-time and uuid are)", at);
  }
  return one_of({cat(g_.byte('"'), body, g_.byte('"'))});
}

Grammar finish(JsonGrammarBuilder& b, const Element& top) {
  // Blanks may lead (a SentencePiece token often starts with a space), none trail: the end is the value's.
  Grammar& g = b.grammar();
  const int32_t root = g.new_rule();
  g.add_alternative(root, cat(b.ws(), top));
  g.set_root(root);
  GrammarMatcher start(g);  // checks it, and that its start is within the matcher's bounds
  return std::move(g);
}

}  // namespace

Grammar json_grammar(bool object_only) {
  JsonGrammarBuilder b;
  const Element top = object_only ? b.object_of(b.value()) : b.value();
  return finish(b, top);
}

Grammar json_schema_grammar_parsed(const ordered_json& schema) {
  JsonGrammarBuilder b(&schema);
  const Element top = b.schema(schema, "#");
  return finish(b, top);
}

Grammar json_schema_grammar(std::string_view schema_text) {
  ordered_json schema;
  try {
    schema = ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the JSON schema is not valid JSON: ") + e.what());
  }
  return json_schema_grammar_parsed(schema);
}

}  // namespace basalt
