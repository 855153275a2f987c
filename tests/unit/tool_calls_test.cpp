// SPDX-License-Identifier: MIT
// Function calling without HTTP or a model: tools become a system message and
// a grammar, the grammar takes exactly the calls (or, under "auto", text that
// cannot be taken for one), earlier calls and results are written back into
// the conversation, and replies are read back as OpenAI's tool_calls.
#include "tools/serve/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/chat/chat_template.h"
#include "core/runtime/generation.h"
#include "tests/unit/byte_vocab.h"
#include "tests/unit/grammar_matches.h"
#include "tests/unit/test_paths.h"
#include "tools/serve/openai_api.h"

namespace basalt::serve {
namespace {

using nlohmann::json;

CompletionRequest parse_chat(const std::string& body) {
  return parse_completion_request(body, true, SamplingParams{}, 256, "", ApiLimits{});
}

const char* kWeather = R"({"type": "function", "function": {"name": "get_weather", "description": "The weather now",
  "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "a city", "maxLength": 20},
  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}})";
const char* kTime = R"({"type": "function", "function": {"name": "get_time"}})";

CompletionRequest with_tools(const std::string& extra = "") {
  return parse_chat(std::string(R"({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [)") + kWeather +
                    ", " + kTime + "]" + extra + "}");
}

TEST(ToolCalls, ToolsBecomeASystemMessageAndAGrammar) {
  const CompletionRequest r = with_tools();
  ASSERT_TRUE(r.tools.active());
  EXPECT_EQ(r.tools.choice, ToolRequest::Choice::automatic);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_NE(r.messages[0].content.find("\"get_weather\""), std::string::npos);
  EXPECT_NE(r.messages[0].content.find("\"a city\""), std::string::npos);
  EXPECT_NE(r.messages[0].content.find("plain text"), std::string::npos);
  EXPECT_EQ(r.messages[1].content, "Weather in Paris?");
  ASSERT_TRUE(r.options.grammar);

  // A system message the client gave keeps its text, the tools after it.
  const CompletionRequest s = parse_chat(std::string(R"({"messages": [{"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hi"}], "tools": [)") + kTime + "]}");
  ASSERT_EQ(s.messages.size(), 2u);
  EXPECT_EQ(s.messages[0].content.rfind("Be brief.\n\nYou can call", 0), 0u) << s.messages[0].content;

  // "auto" among no tools: nothing to offer (clients send it so).
  EXPECT_FALSE(parse_chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "auto"})").tools.active());

  // tool_choice "none": the tools are not offered.
  const CompletionRequest none = with_tools(R"(, "tool_choice": "none")");
  EXPECT_FALSE(none.tools.active());
  EXPECT_FALSE(none.options.grammar);
  EXPECT_EQ(none.messages.size(), 1u);
}

TEST(ToolCalls, TheGrammarTakesCallsOfTheToolsAndTextUnderAuto) {
  const CompletionRequest automatic = with_tools();
  const Grammar& g = *automatic.options.grammar;
  EXPECT_TRUE(test::matches(g, R"({"name": "get_weather", "arguments": {"location": "Paris"}})"));
  EXPECT_TRUE(test::matches(g, R"({"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}})"));
  EXPECT_TRUE(test::matches(g, "\n" R"({"name":"get_time","arguments":{}})"));
  EXPECT_TRUE(test::matches(g, R"([{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"location": "Oslo"}}])"));
  EXPECT_TRUE(test::matches(g, "It is sunny in Paris."));
  EXPECT_TRUE(test::matches(g, ""));
  EXPECT_FALSE(test::matches(g, R"({"name": "get_wind", "arguments": {}})"));                           // not a tool
  EXPECT_FALSE(test::matches(g, R"({"name": "get_weather", "arguments": {"location": 3}})"));           // not its schema
  EXPECT_FALSE(test::matches(g, R"({"name": "get_weather", "arguments": {"unit": "celsius"}})"));       // required left out
  EXPECT_FALSE(test::matches(g, R"({"name": "get_weather", "arguments": {"location": "P", "unit": "kelvin"}})"));
  EXPECT_FALSE(test::matches(g, R"({"name": "get_time", "arguments": {"x": 1}})"));                     // takes no arguments
  EXPECT_FALSE(test::matches(g, R"({"location": "Paris"})"));
  EXPECT_FALSE(test::matches(g, " It is sunny."));  // text cannot start as a call would
  EXPECT_FALSE(test::matches(g, "[]"));

  const CompletionRequest one = with_tools(R"(, "tool_choice": "required", "parallel_tool_calls": false)");
  const Grammar& required = *one.options.grammar;
  EXPECT_TRUE(test::matches(required, R"({"name": "get_time", "arguments": {}})"));
  EXPECT_FALSE(test::matches(required, "It is sunny."));
  EXPECT_FALSE(test::matches(required, ""));
  EXPECT_FALSE(test::matches(required, R"([{"name": "get_time", "arguments": {}}])"));  // one call only

  const CompletionRequest named = with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})");
  EXPECT_EQ(named.tools.forced, "get_weather");
  EXPECT_NE(named.messages[0].content.find("Call the function get_weather now."), std::string::npos);
  EXPECT_TRUE(test::matches(*named.options.grammar, R"({"name": "get_weather", "arguments": {"location": "Rome"}})"));
  EXPECT_FALSE(test::matches(*named.options.grammar, R"({"name": "get_time", "arguments": {}})"));
}

// A tool's schema keeps its references ($defs, and "#" itself) inside the grammar's document.
TEST(ToolCalls, ReferencesInAToolsSchemaStayItsOwn) {
  const CompletionRequest r = parse_chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
     "required": ["n"]}}},
    {"type": "function", "function": {"name": "tree", "parameters": {"$defs": {"leaf": {"type": "object",
     "properties": {"v": {"type": "string"}}, "required": ["v"]}}, "type": "object", "properties": {
     "leaf": {"$ref": "#/$defs/leaf"}, "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
     "required": ["leaf"]}}}]})");
  const Grammar& g = *r.options.grammar;
  EXPECT_TRUE(test::matches(g, R"({"name": "tree", "arguments": {"leaf": {"v": "x"}, "kids": [{"leaf": {"v": "y"}}]}})"));
  EXPECT_FALSE(test::matches(g, R"({"name": "tree", "arguments": {"leaf": {"v": "x"}, "kids": [{"n": 1}]}})"));  // "#" is tree's root
  EXPECT_TRUE(test::matches(g, R"({"name": "a", "arguments": {"n": 1}})"));
}

TEST(ToolCalls, BadToolFieldsAreErrorsThatNameThem) {
  struct Case {
    std::string body;
    const char* param;
    const char* says;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  const Case cases[] = {
      {"{" + msgs + R"(, "tools": {"a": 1}})", "tools", "must be an array"},
      {"{" + msgs + R"(, "tools": [{"type": "code", "function": {"name": "a"}}]})", "tools", "type must be"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})", "tools", "name must be"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]})",
       "tools", "given twice"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object",
         "properties": {"n": {"type": "integer", "minimum": 0}}}}}]})", "tools", "minimum"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a", "parameters": 3}}]})", "tools", "parameters"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a"}}], "tool_choice": "always"})", "tool_choice", "must be"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a"}}], "tool_choice": {"type": "function",
         "function": {"name": "b"}}})", "tool_choice", "not among"},
      {"{" + msgs + R"(, "tool_choice": "required"})", "tool_choice", "no tools"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a"}}], "parallel_tool_calls": 1})",
       "parallel_tool_calls", "true or false"},
      {"{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "a"}}], "response_format": {"type": "json_object"}})",
       "tools", "response_format"},
      {"{" + msgs + R"(, "tools": [], "functions": []})", "functions", "not both"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a",
         "arguments": "{oops"}}]}]})", "messages[0].tool_calls", "not JSON"},
      {R"({"messages": [{"role": "tool", "tool_call_id": "c9", "content": "1"}]})", "messages[0].tool_call_id", "no earlier"},
  };
  for (const Case& c : cases) {
    try {
      parse_chat(c.body);
      ADD_FAILURE() << "no error for " << c.body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << c.body;
      EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  // The completions endpoint has no tools: the error names the field sent.
  for (const char* name : {"tools", "functions", "tool_choice", "function_call"}) {
    try {
      parse_completion_request(R"({"prompt": "x", ")" + std::string(name) + R"(": "none"})", false, SamplingParams{}, 16, "",
                               ApiLimits{});
      ADD_FAILURE() << "no error for " << name << " on /v1/completions";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, name);
    }
  }
}

// Earlier calls come back as the model wrote them; the results of one turn's calls as one user turn.
TEST(ToolCalls, EarlierCallsAndResultsAreWrittenIntoTheConversation) {
  const CompletionRequest r = parse_chat(R"({"messages": [
    {"role": "user", "content": "Weather and time?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}},
      {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "noon"}]},
    {"role": "assistant", "content": "Sunny, and noon."},
    {"role": "user", "content": "Thanks"}], "tool_choice": "none"})");
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[1].role, "assistant");
  EXPECT_EQ(r.messages[1].content,
            R"([{"name":"get_weather","arguments":{"location":"Paris"}},{"name":"get_time","arguments":{}}])");
  EXPECT_EQ(r.messages[2].role, "user");
  EXPECT_EQ(r.messages[2].content, R"({"tool_result":{"name":"get_weather","content":"sunny"}})" "\n"
                                   R"({"tool_result":{"name":"get_time","content":"noon"}})");
  EXPECT_EQ(r.messages[3].content, "Sunny, and noon.");
  EXPECT_EQ(r.messages[4].role, "user");

  // The older functions API: functions, function_call, and role "function" with its name.
  const CompletionRequest f = parse_chat(R"({"messages": [{"role": "user", "content": "t?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "x", "type": "function",
     "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "function", "name": "get_time", "content": "noon"}],
    "functions": [{"name": "get_time"}], "function_call": {"name": "get_time"}})");
  EXPECT_EQ(f.tools.forced, "get_time");
  EXPECT_EQ(f.messages[2].content, "Let me look.\n\n" R"({"name":"get_time","arguments":{}})");
  EXPECT_EQ(f.messages[3].content, R"({"tool_result":{"name":"get_time","content":"noon"}})");
}

TEST(ToolCalls, RepliesAreReadBackAsCalls) {
  const ToolReply one = read_tool_calls(R"( {"name": "get_weather", "arguments": {"location": "Paris"}})", "call_7_");
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.content, "");
  EXPECT_EQ(one.calls[0].id, "call_7_0");
  EXPECT_EQ(one.calls[0].name, "get_weather");
  EXPECT_EQ(one.calls[0].arguments, R"({"location":"Paris"})");
  const ToolReply two = read_tool_calls(R"([{"name": "a", "arguments": {"z": 1, "y": 2}}, {"name": "b", "arguments": {}}])", "c");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[0].arguments, R"({"z":1,"y":2})");  // the model's order
  EXPECT_EQ(two.calls[1].id, "c1");
  for (const char* text : {"It is sunny.", R"({"name": "a", "arguments": {"z": )" /* cut short: stays text */, R"({"name": "a"})"}) {
    const ToolReply r = read_tool_calls(text, "c");
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

// A streamed reply cut into pieces at every pair of places: what is let out
// and what is held add up to the reply, and what is held is the call (json:
// all of a reply that starts like one; hermes: from the tag, its blanks before).
TEST(ToolCalls, TheHoldLetsTextOutAndKeepsCalls) {
  struct Case {
    ToolFormat format;
    std::string reply, sent;  // what goes out before the end
  };
  const std::string call = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const Case cases[] = {
      {ToolFormat::json, R"( {"name": "a", "arguments": {}})", ""},
      {ToolFormat::json, " \nIt is {sunny}.", " \nIt is {sunny}."},
      {ToolFormat::hermes, "Let me check.\n\n" + call, "Let me check."},
      {ToolFormat::hermes, call + "\n" + call, ""},
      {ToolFormat::hermes, "a <b> < <tool", "a <b> <"},  // a tag's start at the end stays held
      {ToolFormat::hermes, "no tag <tool_cal>.", "no tag <tool_cal>."},
  };
  for (const Case& c : cases)
    for (size_t i = 0; i <= c.reply.size(); ++i)
      for (size_t j = i; j <= c.reply.size(); ++j) {
        ToolCallHold hold(c.format);
        std::string sent = hold.feed(c.reply.substr(0, i));
        sent += hold.feed(c.reply.substr(i, j - i));
        sent += hold.feed(c.reply.substr(j));
        EXPECT_EQ(sent, c.sent) << c.reply << " cut at " << i << ", " << j;
        EXPECT_EQ(sent + hold.held(), c.reply) << c.reply << " cut at " << i << ", " << j;
      }
}

ToolStyle hermes_style(bool lists_tools, bool tool_role, bool thinks = false) {
  return {ToolFormat::hermes, lists_tools, tool_role, thinks};
}

CompletionRequest parse_hermes(const std::string& body, const ToolStyle& style) {
  return parse_completion_request(body, true, SamplingParams{}, 256, "", ApiLimits{}, style);
}

TEST(ToolCalls, ToolStylesComeFromTheTemplate) {
  const ToolStyle qwen = tool_style_of(
      "{%- if tools %}{%- for tool in tools %}{{ tool | tojson }}{% endfor %}{% endif %}{% for message in messages %}"
      "{% if message.role == \"tool\" %}<tool_response>{% endif %}{% endfor %}<tool_call>");
  EXPECT_EQ(qwen.format, ToolFormat::hermes);
  EXPECT_TRUE(qwen.template_lists_tools);
  EXPECT_TRUE(qwen.template_has_tool_role);
  EXPECT_FALSE(qwen.thinks);
  const ToolStyle chatml = tool_style_of("{% for message in messages %}{{ message.content }}{% endfor %}<think>");
  EXPECT_EQ(chatml.format, ToolFormat::json);
  EXPECT_TRUE(chatml.thinks);
  EXPECT_STREQ(tool_format_name(qwen.format), "hermes");
}

// The template lists the tools (its `tools` variable, OpenAI's form) where it
// can; else the system message does, in Hermes' tags.
TEST(ToolCalls, HermesToolsGoToTheTemplateOrTheSystemMessage) {
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Weather?"}], "tools": [)") + kWeather + "]}";
  const CompletionRequest own = parse_hermes(body, hermes_style(true, true));
  ASSERT_TRUE(own.tools.active());
  ASSERT_EQ(own.messages.size(), 1u);
  ASSERT_TRUE(own.template_vars.contains("tools"));
  EXPECT_EQ(own.template_vars["tools"][0]["type"], "function");
  EXPECT_EQ(own.template_vars["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(own.template_vars["tools"][0]["function"]["parameters"]["required"][0], "location");

  const CompletionRequest told = parse_hermes(body, hermes_style(false, false));
  EXPECT_FALSE(told.template_vars.contains("tools"));
  ASSERT_EQ(told.messages.size(), 2u);
  const std::string& sys = told.messages[0].content;
  EXPECT_NE(sys.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos) << sys;
  EXPECT_NE(sys.find("<tool_call>"), std::string::npos) << sys;
}

TEST(ToolCalls, HermesCallsAndResultsAreWrittenAsItsTemplatesWriteThem) {
  const std::string body = R"({"messages": [{"role": "user", "content": "Time and weather?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
      {"id": "c0", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
      {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\",\"n\":[1,2]}"}}]},
    {"role": "tool", "tool_call_id": "c0", "content": "noon"},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]})";
  const std::string calls =
      "Let me look.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"n\": [1, 2]}}\n</tool_call>";
  const CompletionRequest own = parse_hermes(body, hermes_style(true, true));
  ASSERT_EQ(own.messages.size(), 4u);
  EXPECT_EQ(own.messages[1].content, calls);
  EXPECT_EQ(own.messages[2].role, "tool");  // the template wraps them
  EXPECT_EQ(own.messages[2].content, "noon");
  EXPECT_EQ(own.messages[3].content, "sunny");
  const CompletionRequest user = parse_hermes(body, hermes_style(true, false));
  ASSERT_EQ(user.messages.size(), 3u);
  EXPECT_EQ(user.messages[2].role, "user");
  EXPECT_EQ(user.messages[2].content, "<tool_response>\nnoon\n</tool_response>\n<tool_response>\nsunny\n</tool_response>");
}

// The real Qwen 2.5, Qwen3, Hermes 3 and Llama 3.1 and 3.2 templates
// (tests/data/chat): a conversation with a call and its result, sent as
// OpenAI's API has it and written into the prompt as basalt does (calls as
// text in the assistant's content, results as "tool" messages, the tools as
// the template's variable), renders byte for byte as jinja2 renders the
// conversation with its calls as structured tool_calls
// (tests/data/chat/cases.json, make_chat_refs.py).
TEST(ToolCalls, TurnsRenderAsTheRealTemplatesWriteTheirCalls) {
  std::ifstream in(test::data_path("chat/cases.json"));
  ASSERT_TRUE(in) << "tests/data/chat/cases.json";
  const nlohmann::ordered_json refs = nlohmann::ordered_json::parse(in);
  int checked = 0;
  for (const auto& c : refs["cases"]) {
    const std::string name = c["name"];
    const bool llama = name == "llama3.1/tools" || name == "llama3.2/tools";
    if (!llama && name != "qwen2.5/tools" && name != "qwen3/tools" && name != "hermes3-tool-use/tools") continue;
    const auto& t = refs["templates"][c["template"].get<std::string>()];
    const std::string source = t["source"];
    const ToolStyle style = tool_style_of(source);
    EXPECT_EQ(style.format, llama ? ToolFormat::llama3 : ToolFormat::hermes) << name;
    EXPECT_TRUE(style.template_lists_tools && style.template_has_tool_role) << name;
    EXPECT_EQ(style.thinks, name == "qwen3/tools") << name;
    // The request as a client sends it: arguments as JSON text.
    nlohmann::ordered_json messages = c["messages"];
    for (auto& m : messages)
      if (m.contains("tool_calls"))
        for (auto& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
    const nlohmann::ordered_json body = {{"messages", messages}, {"tools", c["extra"]["tools"]}};
    CompletionRequest r = parse_completion_request(body.dump(), true, SamplingParams{}, 256, "", ApiLimits{}, style);
    // Llama's date as the references have it: 3.1's own default, 3.2's from make_chat_refs.py's fixed clock.
    r.template_vars["date_string"] = name == "llama3.2/tools" ? "05 Sep 2024" : "26 Jul 2024";
    nlohmann::ordered_json turns = nlohmann::ordered_json::array();
    for (const ChatMessage& m : r.messages) turns.push_back({{"role", m.role}, {"content", m.content}});
    const ChatTemplate tmpl(source, t["bos_token"].get<std::string>(), t["eos_token"].get<std::string>());
    EXPECT_EQ(tmpl.render_json(turns, true, r.template_vars), c["expected"].get<std::string>()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// A Qwen3 turn that thought, then called, sent back with its reasoning_content
// (an agent's loop within one user turn): written as basalt writes it, it
// renders through the real Qwen3 template as the template renders the turn's
// fields (reasoning_content, tool_calls) itself.
TEST(ToolCalls, ReasoningSentBackRendersAsTheTemplateRendersIt) {
  std::ifstream in(test::data_path("chat/cases.json"));
  ASSERT_TRUE(in);
  const nlohmann::ordered_json refs = nlohmann::ordered_json::parse(in);
  const auto& t = refs["templates"]["qwen3"];
  const ChatTemplate tmpl(t["source"].get<std::string>(), t["bos_token"].get<std::string>(), t["eos_token"].get<std::string>());
  const ToolStyle style = tool_style_of(t["source"].get<std::string>());
  ASSERT_TRUE(style.thinks);
  const nlohmann::ordered_json tools = nlohmann::ordered_json::array({nlohmann::ordered_json::parse(kTime)});
  const nlohmann::ordered_json structured = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Time?"},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "The user wants the time.",
     "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "get_time", "arguments": {}}}]},
    {"role": "tool", "tool_call_id": "c0", "content": "noon"}])");
  nlohmann::ordered_json sent = structured;
  sent[1]["tool_calls"][0]["function"]["arguments"] = "{}";
  const nlohmann::ordered_json body = {{"messages", sent}, {"tools", tools}};
  const CompletionRequest r = parse_completion_request(body.dump(), true, SamplingParams{}, 256, "", ApiLimits{}, style);
  nlohmann::ordered_json turns = nlohmann::ordered_json::array();
  for (const ChatMessage& m : r.messages) turns.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::ordered_json vars = {{"tools", nlohmann::ordered_json::array({{{"type", "function"},
                                                                          {"function", {{"name", "get_time"}, {"parameters", r.tools.tools[0]["parameters"]}}}}})}};
  const std::string want = tmpl.render_json(structured, true, vars);
  EXPECT_NE(want.find("<think>\nThe user wants the time.\n</think>\n\nLet me look.\n<tool_call>"), std::string::npos) << want;
  EXPECT_EQ(tmpl.render_json(turns, true, r.template_vars), want);
  // A bad one is an error naming it.
  sent[1]["reasoning_content"] = 3;
  EXPECT_THROW(parse_completion_request(nlohmann::ordered_json{{"messages", sent}}.dump(), true, SamplingParams{}, 256, "", ApiLimits{}, style),
               ApiError);
}

// Llama 3's format: basalt's own, but its template lists the tools, a call
// names its arguments "parameters", one call a turn, results go back as "tool"
// turns (the template's ipython ones).
TEST(ToolCalls, Llama3CallsNameTheirArgumentsParameters) {
  const ToolStyle style = tool_style_of(
      "{%- if tools %}Respond in the format {\"name\": function name, \"parameters\": dictionary}{% endif %}"
      "{% if message.role == \"tool\" %}<|start_header_id|>ipython<|end_header_id|>{% endif %}");
  ASSERT_EQ(style.format, ToolFormat::llama3);
  EXPECT_TRUE(style.template_lists_tools && style.template_has_tool_role);
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Weather?"}], "tools": [)") + kWeather + ", " +
                           kTime + "]";
  const CompletionRequest r = parse_completion_request(body + "}", true, SamplingParams{}, 256, "", ApiLimits{}, style);
  ASSERT_EQ(r.messages.size(), 1u);  // the template lists the tools
  EXPECT_EQ(r.template_vars["tools"][1]["function"]["name"], "get_time");
  const Grammar& g = *r.options.grammar;
  EXPECT_TRUE(test::matches(g, R"({"name": "get_weather", "parameters": {"location": "Paris"}})"));
  EXPECT_TRUE(test::matches(g, "It is sunny."));
  EXPECT_FALSE(test::matches(g, R"({"name": "get_weather", "arguments": {"location": "Paris"}})"));
  EXPECT_FALSE(test::matches(g, R"([{"name": "get_time", "parameters": {}}])"));  // one call a turn

  const ToolReply call = read_tool_calls(R"({"name": "get_weather", "parameters": {"location": "Paris"}})", "c", ToolFormat::llama3);
  ASSERT_EQ(call.calls.size(), 1u);
  EXPECT_EQ(call.calls[0].arguments, R"({"location":"Paris"})");
  EXPECT_TRUE(read_tool_calls(R"({"name": "get_time", "arguments": {}})", "c", ToolFormat::llama3).calls.empty());
  EXPECT_TRUE(read_tool_calls(R"([{"name": "get_time", "parameters": {}}])", "c", ToolFormat::llama3).calls.empty());

  const CompletionRequest turn = parse_completion_request(R"({"messages": [{"role": "user", "content": "Time?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
      {"id": "c0", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"UTC\"}"}}]},
    {"role": "tool", "tool_call_id": "c0", "content": "noon"}]})", true, SamplingParams{}, 256, "", ApiLimits{}, style);
  ASSERT_EQ(turn.messages.size(), 3u);
  EXPECT_EQ(turn.messages[1].content, R"({"name": "get_time", "parameters": {"tz": "UTC"}})");  // the call alone, as the template writes it
  EXPECT_EQ(turn.messages[2].role, "tool");
  EXPECT_EQ(turn.messages[2].content, "noon");
}

TEST(ToolCalls, HermesRepliesAreTextThenCalls) {
  const ToolReply r = read_tool_calls(
      "Let me check. \n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}</tool_call>\n",
      "c", ToolFormat::hermes);
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[1].id, "c1");
  EXPECT_EQ(r.calls[1].arguments, R"({"location":"Paris"})");
  // A closing tag inside a string of the arguments does not end the call.
  const ToolReply tagged = read_tool_calls(
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"a</tool_call>b\"}}</tool_call>", "c", ToolFormat::hermes);
  ASSERT_EQ(tagged.calls.size(), 1u);
  EXPECT_EQ(tagged.calls[0].arguments, R"({"location":"a</tool_call>b"})");
  for (const std::string text : {"Sunny.", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}" /* cut short */,
                                 "<tool_call>{\"name\": \"get_time\"}</tool_call>",
                                 "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call> and text"}) {
    const ToolReply t = read_tool_calls(text, "c", ToolFormat::hermes);
    EXPECT_TRUE(t.calls.empty()) << text;
    EXPECT_EQ(t.content, text);
  }
}

TEST(ToolCalls, HermesGrammarTakesTaggedCallsAndThoughts) {
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  auto grammar = [&](const std::string& extra, bool thinks) {
    const std::string body = std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": [)") + kWeather + ", " +
                             kTime + "]" + extra + "}";
    return parse_hermes(body, hermes_style(true, true, thinks)).options.grammar;
  };
  const auto automatic = grammar("", false);
  for (const std::string& ok : {std::string("Sunny."), std::string(""), call, "Let me check.\n" + call, call + "\n" + time + "\n",
                               std::string("a <tool_cal> b")})
    EXPECT_TRUE(test::matches(*automatic, ok)) << ok;
  for (const std::string& bad : {"x" + call + " and more", std::string("&get_weather,<tool_call>{ \"name\":"), std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"),
                                std::string("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>")})
    EXPECT_FALSE(test::matches(*automatic, bad)) << bad;

  const auto required = grammar(R"(, "tool_choice": "required")", false);
  EXPECT_TRUE(test::matches(*required, call));
  EXPECT_TRUE(test::matches(*required, "\n" + call + "\n" + time));
  EXPECT_FALSE(test::matches(*required, "Sunny."));
  EXPECT_FALSE(test::matches(*required, "<think>hm</think>" + call));  // a model that does not think
  const auto one = grammar(R"(, "tool_choice": "required", "parallel_tool_calls": false)", false);
  EXPECT_TRUE(test::matches(*one, call));
  EXPECT_FALSE(test::matches(*one, call + "\n" + time));
  const auto forced = grammar(R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})", false);
  EXPECT_TRUE(test::matches(*forced, time));
  EXPECT_FALSE(test::matches(*forced, call));

  const auto thinking = grammar(R"(, "tool_choice": "required")", true);
  EXPECT_TRUE(test::matches(*thinking, "<think>\nIt asks for Paris.\n</think>\n\n" + call));
  EXPECT_TRUE(test::matches(*thinking, "It asks for Paris.\n</think>\n\n" + call));  // the prompt opened <think>
  EXPECT_TRUE(test::matches(*thinking, call));
  EXPECT_FALSE(test::matches(*thinking, "<think>\nhm\n</think>\n\nSunny."));
}

TEST(ToolCalls, ResponsesHaveOpenAisShape) {
  const CompletionRequest r = with_tools(R"(, "stream": true)");
  GenerationStats st;
  st.stop_reason = "grammar";
  const std::vector<ToolCall> calls = {{"call_1_0", "get_weather", R"({"location":"Paris"})"}};
  const json whole = completion_json(r, "chatcmpl-1", 0, "m", "", st, nullptr, calls);
  const json& choice = whole["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_FALSE(choice.contains("text"));  // a completion's field, not a chat's
  // Text before the calls (Hermes' format allows it) is the message's content.
  EXPECT_EQ(completion_json(r, "chatcmpl-1", 0, "m", "Let me look.", st, nullptr, calls)["choices"][0]["message"]["content"],
            "Let me look.");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["id"], "call_1_0");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"location":"Paris"})");
  EXPECT_EQ(completion_json(r, "chatcmpl-1", 0, "m", "Sunny.", st)["choices"][0]["finish_reason"], "stop");

  const json chunk = tool_calls_chunk_json(r, "chatcmpl-1", 0, "m", calls, true);
  const json& delta = chunk["choices"][0]["delta"];
  EXPECT_EQ(delta["role"], "assistant");
  EXPECT_EQ(delta["tool_calls"][0]["index"], 0);
  EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
}

// 60 replies drawn from random logits under opt's grammar, those cut short
// by max_tokens left out; half of them pushed toward token `push` at step `at`.
std::vector<std::string> random_replies(const Tokenizer& tok, GenerateOptions opt, int32_t push, int at, uint32_t rng_seed) {
  opt.max_tokens = 400;
  opt.sampling = test::untruncated_sampling();
  std::mt19937 rng(rng_seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::vector<std::string> replies;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    opt.sampling.seed = seed;
    std::string out;
    Generation gen(tok, opt, {1}, tok.n_vocab(), [&](std::string_view s) { return out += s, true; });
    for (int i = 0; !gen.done(); ++i) {
      for (float& l : logits) l = normal(rng);
      if (i == at) logits[static_cast<size_t>(push)] += 12.0f * (seed % 2);
      gen.step(logits.data(), 1000);
    }
    if (gen.stats().stop_reason != "length") replies.push_back(out);
  }
  return replies;
}

// Random logits under the grammar, on a vocabulary of bytes and JSON-ish
// pieces: every reply is a call of a tool with arguments of its schema, or text.
TEST(ToolCalls, GenerationFromRandomLogitsIsACallOrText) {
  const Tokenizer tok = test::byte_vocab({"{\"", "\":", "\",", "\u2581\"", "name", "arguments", "get_weather", "get_time",
                                          "location", "unit", "celsius", "{}", "}}", "Paris", "It", "\u2581is"});
  int n_calls = 0, n_text = 0;
  for (const std::string& out : random_replies(tok, with_tools().options, 3 + '{', 0, 5)) {
    const std::vector<ToolCall> calls = read_tool_calls(out, "c").calls;
    ToolCallHold hold(ToolFormat::json);
    if (!hold.feed(out).empty()) {  // text
      ++n_text;
      continue;
    }
    ASSERT_FALSE(calls.empty()) << out;
    ++n_calls;
    for (const ToolCall& c : calls) {
      const json args = json::parse(c.arguments);
      if (c.name == "get_time") {
        EXPECT_EQ(args, json::object()) << out;
      } else {
        ASSERT_EQ(c.name, "get_weather") << out;
        EXPECT_TRUE(args.at("location").is_string()) << out;
        if (args.contains("unit")) {
          EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << out;
        }
      }
    }
  }
  EXPECT_GT(n_calls, 10);
  EXPECT_GT(n_text, 10);
}

// The same in Hermes' tags, a thinking model's: every reply that ends is
// text, thoughts and then calls of the tools, or text alone.
TEST(ToolCalls, HermesGenerationFromRandomLogitsIsTextThenCalls) {
  const Tokenizer tok = test::byte_vocab({"<tool_call>", "</tool_call>", "<think>", "</think>", "{\"", "\":", "\",", "\u2581\"",
                                          "name", "arguments", "get_weather", "get_time", "location", "{}", "}}", "Paris", "It"});
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": [)") + kWeather + ", " + kTime + "]}";
  const int32_t tag = tok.find("<tool_call>");
  ASSERT_GE(tag, 0);
  int n_calls = 0, n_text = 0;
  for (const std::string& out : random_replies(tok, parse_hermes(body, hermes_style(true, true, true)).options, tag, 3, 9)) {
    const ToolReply reply = read_tool_calls(out, "c", ToolFormat::hermes);
    if (reply.calls.empty()) {
      EXPECT_EQ(out.find("<tool_call>"), std::string::npos) << out;
      ++n_text;
      continue;
    }
    ++n_calls;
    EXPECT_EQ(reply.content.find("<tool_call>"), std::string::npos) << out;
    for (const ToolCall& c : reply.calls) {
      const json args = json::parse(c.arguments);
      if (c.name == "get_time") EXPECT_EQ(args, json::object()) << out;
      else EXPECT_TRUE(args.at("location").is_string()) << out;
    }
  }
  EXPECT_GT(n_calls, 10);
  EXPECT_GT(n_text, 10);
}

}  // namespace
}  // namespace basalt::serve
