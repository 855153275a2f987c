// SPDX-License-Identifier: MIT
// Chat templates and Jinja snippets render byte for byte as jinja2 does (tests/data/chat/cases.json),
// and bad or runaway templates stop with a basalt::Error.
#include "core/chat/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/chat/jinja.h"
#include "core/error.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

using nlohmann::ordered_json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// cases.json, made by tests/python/make_chat_refs.py.
const ordered_json& refs() {
  static const ordered_json j = [] {
    try {
      return ordered_json::parse(read_text(test::data_path("chat/cases.json")));
    } catch (const std::exception&) {
      return ordered_json::object();  // RefsAreThere reports it
    }
  }();
  return j;
}

std::tm fixed_now() {
  const ordered_json& n = refs().at("now");
  std::tm tm{};
  tm.tm_year = n.at("year").get<int>() - 1900;
  tm.tm_mon = n.at("month").get<int>() - 1;
  tm.tm_mday = n.at("day").get<int>();
  tm.tm_hour = n.at("hour").get<int>();
  tm.tm_min = n.at("minute").get<int>();
  tm.tm_sec = n.at("second").get<int>();
  std::time_t t = timegm(&tm);  // fills in the weekday and the day of the year
  gmtime_r(&t, &tm);
  return tm;
}

jinja::RenderOptions fixed_clock() {
  jinja::RenderOptions o;
  o.now = fixed_now();
  return o;
}

// Only conversations of plain role/content strings fit std::vector<ChatMessage>.
bool plain_messages(const ordered_json& messages, std::vector<ChatMessage>* out) {
  for (const auto& m : messages) {
    if (m.size() != 2 || !m.contains("role") || !m.contains("content") || !m["content"].is_string()) return false;
    out->push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return true;
}

std::vector<size_t> indices(const char* section) {
  std::vector<size_t> v;
  if (refs().contains(section))
    for (size_t i = 0; i < refs()[section].size(); ++i) v.push_back(i);
  return v;
}

std::string test_name(const char* section, size_t i) {
  std::string n = refs()[section][i]["name"].get<std::string>();
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

TEST(ChatTemplateRefs, RefsAreThere) {
  ASSERT_TRUE(refs().contains("cases")) << "tests/data/chat/cases.json is missing or unreadable: run "
                                            "python3 tests/python/make_chat_refs.py";
  EXPECT_GT(refs()["cases"].size(), 100u);
  EXPECT_GT(refs()["snippets"].size(), 50u);
}

TEST(ChatTemplateRefs, TemplateFilesMatchTheReferences) {
  for (const auto& [name, t] : refs().at("templates").items()) {
    std::string text = read_text(test::data_path("chat/" + t.at("file").get<std::string>()));
    EXPECT_EQ(text, t.at("source").get<std::string>())
        << name << ": the template file changed since cases.json was made; rerun tests/python/make_chat_refs.py";
  }
}

class ChatCase : public testing::TestWithParam<size_t> {};

TEST_P(ChatCase, RendersAsJinja2) {
  const ordered_json& c = refs()["cases"][GetParam()];
  const ordered_json& t = refs()["templates"][c["template"].get<std::string>()];
  ChatTemplate tmpl(t["source"].get<std::string>(), t["bos_token"].get<std::string>(), t["eos_token"].get<std::string>());
  tmpl.set_options(fixed_clock());
  bool agp = c["add_generation_prompt"].get<bool>();
  if (c.contains("expected")) {
    std::string want = c["expected"].get<std::string>();
    EXPECT_EQ(tmpl.render_json(c["messages"], agp, c["extra"]), want);
    std::vector<ChatMessage> plain;
    if (c["extra"].empty() && plain_messages(c["messages"], &plain)) {
      EXPECT_EQ(tmpl.render(plain, agp), want);
    }
    return;
  }
  try {
    tmpl.render_json(c["messages"], agp, c["extra"]);
    ADD_FAILURE() << "jinja2 failed with \"" << c["error"].get<std::string>() << "\" but basalt rendered";
  } catch (const Error& e) {
    if (c["error_type"] == "TemplateError") {  // raise_exception: the template's own message
      EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ChatCase, testing::ValuesIn(indices("cases")),
                         [](const testing::TestParamInfo<size_t>& p) { return test_name("cases", p.param); });

class JinjaSnippet : public testing::TestWithParam<size_t> {};

TEST_P(JinjaSnippet, RendersAsJinja2) {
  const ordered_json& s = refs()["snippets"][GetParam()];
  jinja::Value ctx = json_to_value(s["context"]);
  if (s.contains("expected")) {
    jinja::Template t(s["source"].get<std::string>());
    EXPECT_EQ(t.render(ctx.dict(), fixed_clock()), s["expected"].get<std::string>());
    return;
  }
  try {
    jinja::Template t(s["source"].get<std::string>());
    t.render(ctx.dict(), fixed_clock());
    ADD_FAILURE() << "jinja2 failed with \"" << s["error"].get<std::string>() << "\" but basalt rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Snippets, JinjaSnippet, testing::ValuesIn(indices("snippets")),
                         [](const testing::TestParamInfo<size_t>& p) { return test_name("snippets", p.param); });

// ---- errors name the construct and the position

std::string render_error(const std::string& source, const jinja::RenderOptions& options = {}) {
  try {
    jinja::Template t(source);
    t.render(jinja::DictData{}, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatTemplateErrors, UnknownFilter) {
  std::string msg = render_error("x\n{{ 'a' | frobnicate }}");
  EXPECT_NE(msg.find("unknown filter 'frobnicate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(ChatTemplateErrors, UnclosedBlock) {
  try {
    ChatTemplate t("{% for m in messages %}{{ m.content }}", "", "");
    FAIL() << "parsed an unclosed for block";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unclosed 'for'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("endfor"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 1, column 1"), std::string::npos) << msg;
  }
  EXPECT_NE(render_error("{% if x %}a{% else %}b").find("unclosed 'if'"), std::string::npos);
  EXPECT_NE(render_error("a {{ x ").find("unclosed '{{'"), std::string::npos);
  EXPECT_NE(render_error("a {# x ").find("unclosed comment"), std::string::npos);
  EXPECT_NE(render_error("{% endif %}").find("unexpected 'endif'"), std::string::npos);
}

TEST(ChatTemplateErrors, UnsupportedConstructsAreNamed) {
  EXPECT_NE(render_error("{% include 'other.jinja' %}").find("'include' statement is not supported"),
            std::string::npos);
  EXPECT_NE(render_error("{% frob %}").find("unknown statement 'frob'"), std::string::npos);
  EXPECT_NE(render_error("{{ 'x'.encode() }}").find("str.encode() is not supported"), std::string::npos);
  EXPECT_NE(render_error("{{ x is frob }}").find("unknown test 'frob'"), std::string::npos);
  EXPECT_NE(render_error("{{ cycler(1) }}").find("'cycler' is undefined"), std::string::npos);
  // jinja2 prints "<generator object ... at 0x...>", which no one can match: an error instead.
  EXPECT_NE(render_error("{{ [1, 2] | select('odd') }}").find("cannot print a generator"), std::string::npos);
  EXPECT_NE(render_error("{{ '%s' % 1 }}").find("'%' string formatting is not supported"), std::string::npos);
}

TEST(ChatTemplateErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  std::string src = read_text(test::data_path("chat/templates/mistral-v0.2.jinja"));
  ChatTemplate t(src, "<s>", "</s>");
  try {
    t.render({{"system", "Be brief."}, {"user", "Hi"}}, true);
    FAIL() << "Mistral's template accepted a system message";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Conversation roles must alternate user/assistant/user/assistant/..."), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("raise_exception"), std::string::npos) << msg;
  }
  EXPECT_EQ(t.render({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}, true),
            "<s>[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
}

// ---- runaway templates stop

TEST(ChatTemplateLimits, DeepNestingIsAnError) {
  std::string deep = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_NE(render_error(deep).find("too deeply"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  EXPECT_NE(render_error(blocks).find("too deeply"), std::string::npos);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_NE(render_error(nots + "x }}").find("too deeply"), std::string::npos);
}

// Chains the parser builds in a loop make trees as deep as they are long;
// each kind, 100000 links long, is an error, not a stack overflow (in the
// parser, the renderer or the tree's destructor).
TEST(ChatTemplateLimits, LongChainsOfEveryKindAreErrors) {
  auto chain = [](const std::string& first, const std::string& link, const std::string& last = "") {
    std::string t = "{{ " + first;
    for (int i = 0; i < 100000; ++i) t += link;
    return t + last + " }}";
  };
  const std::string closes(100000, ']'), braces(100000, '}');
  const std::vector<std::string> templates = {
      chain("1", " + 1"),  chain("1", " - 1"),    chain("1", " * 1"),       chain("1", " ** 1"),
      chain("'a'", " ~ 'a'"), chain("x", " or x"), chain("x", " and x"),    chain("x", ".a"),
      chain("x", "[0]"),   chain("x", "[0:1]"),   chain("x", "()"),         chain("x", " | trim"),
      chain("1", " if 1 else 1"), chain("1", " if 1"), chain("", "-", "1"), chain("", "[", "1" + closes),
      chain("", "{'a': ", "1" + braces),
  };
  for (const std::string& t : templates) {
    const std::string msg = render_error(t);
    EXPECT_NE(msg.find("too deeply"), std::string::npos) << t.substr(0, 40) << ": " << msg;
  }
  // A comparison chain is one flat node, and tests do not chain: no depth to bound.
  EXPECT_EQ(render_error(chain("1", " == 1")), "(no error)");
  EXPECT_NE(render_error(chain("x", " is defined")).find("cannot be chained"), std::string::npos);
  // Bounded trees inside bounded blocks inside macros: the renderer's own nesting budget.
  std::string body = "{{ f(n + 1)";  // the call at the bottom of a tree 201 deep: 200 left-nested additions
  for (int i = 0; i < 200; ++i) body += " + n";
  body += " }}";
  jinja::RenderOptions o;
  o.max_call_depth = 1000;  // 64 calls x 200 levels would pass the default nesting budget too; 1000 must not be reached
  const std::string msg = render_error("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}", o);
  EXPECT_NE(msg.find("nest more than"), std::string::npos) << msg;
}

TEST(ChatTemplateLimits, DeepValuesAndCyclesAreErrors) {
  std::string msg = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}");
  EXPECT_NE(msg.find("levels deep"), std::string::npos) << msg;
  msg = render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}");
  EXPECT_NE(msg.find("cannot store a namespace() inside"), std::string::npos) << msg;
  msg = render_error("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = {'k': b} %}");
  EXPECT_NE(msg.find("cannot store a namespace() inside"), std::string::npos) << msg;
  msg = render_error(  // a chain built link by link, deeper than any depth recorded along it
      "{% set ns = namespace(prev=namespace()) %}{% for i in range(100000) %}{% set cur = namespace() %}"
      "{% set p = ns.prev %}{% set p.x = cur %}{% set ns.prev = cur %}{% endfor %}");
  EXPECT_NE(msg.find("cannot store a namespace() inside"), std::string::npos) << msg;
}

TEST(ChatTemplateLimits, HugeLoopIsStopped) {
  auto start = std::chrono::steady_clock::now();
  std::string msg = render_error("{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}");
  EXPECT_NE(msg.find("runs away"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  jinja::RenderOptions small;
  small.max_steps = 1000;
  EXPECT_NE(render_error("{% for i in range(2000) %}{% endfor %}", small).find("runs away"), std::string::npos);
}

TEST(ChatTemplateLimits, RecursionIsStopped) {
  std::string msg = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(msg.find("nested more than"), std::string::npos) << msg;
}

TEST(ChatTemplateLimits, HugeOutputIsStopped) {
  jinja::RenderOptions o;
  o.max_output_bytes = 1 << 20;
  EXPECT_NE(render_error("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", o).find("over the limit"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'x' * 10000000000 }}").find("over the template's limit"), std::string::npos);
  EXPECT_NE(render_error("{{ range(10000000000) | length }}").find("range()"), std::string::npos);
}

// ---- the rest of the API

TEST(ChatTemplate, ChatMLFallback) {
  ChatTemplate t = ChatTemplate::chatml();
  EXPECT_EQ(t.render({{"system", "S"}, {"user", "Hi"}}, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.render({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

// Gemma's turns: the assistant's role is "model", a system message opens the
// first user turn, the BOS text first.
TEST(ChatTemplate, GemmaTurnsFallback) {
  ChatTemplate t = ChatTemplate::gemma_turns("<bos>");
  EXPECT_EQ(t.render({{"system", "S"}, {"user", "Hi"}, {"assistant", "Yes."}, {"user", "Why?"}}, true),
            "<bos><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\nYes.<end_of_turn>\n"
            "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.render({{"user", "Hi"}}, false), "<bos><start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(t.render({}, true), "<bos><start_of_turn>model\n");
}

TEST(ChatTemplate, StrftimeNowUsesTodayByDefault) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char want[64];
  std::strftime(want, sizeof want, "%d %b %Y", &tm);
  jinja::Template t("{{ strftime_now('%d %b %Y') }}");
  std::string got = t.render(jinja::DictData{});
  if (got != want) {  // midnight passed between the two reads
    now = std::time(nullptr);
    localtime_r(&now, &tm);
    std::strftime(want, sizeof want, "%d %b %Y", &tm);
  }
  EXPECT_EQ(got, want);
}

TEST(ChatTemplate, SmolLM2TemplateFromItsGGUFRenders) {
  std::string src = read_text(test::data_path("chat/templates/smollm2.jinja"));
  ChatTemplate t(src, "<|im_start|>", "<|im_end|>");
  EXPECT_EQ(t.render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace basalt
