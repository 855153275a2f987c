// SPDX-License-Identifier: MIT
// The server's OpenAI layer without HTTP: request fields become generation
// options, every bad field is an ApiError with its status and the field's
// name, and responses have the shapes OpenAI's clients read.
#include "tools/serve/openai_api.h"

#include <gtest/gtest.h>

#include "tests/unit/grammar_matches.h"

namespace basalt::serve {
namespace {

CompletionRequest parse(const std::string& body, bool chat = false) {
  return parse_completion_request(body, chat, SamplingParams{}, 256, "served", ApiLimits{});
}

TEST(OpenAiApi, FieldsBecomeOptions) {
  CompletionRequest r = parse(R"({"model": "served", "prompt": "hi", "max_tokens": 7, "temperature": 0.5,
    "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 42, "presence_penalty": 0.5, "frequency_penalty": -0.5,
    "repetition_penalty": 1.1, "logit_bias": {"17": -100}, "stop": ["\n", "END"], "stream": true,
    "stream_options": {"include_usage": true}, "ignore_eos": true, "user": "ignored"})");
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"hi"}));
  EXPECT_EQ(r.options.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.options.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.options.sampling.top_p, 0.9f);
  EXPECT_EQ(r.options.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.options.sampling.min_p, 0.1f);
  EXPECT_EQ(r.options.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(r.options.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.options.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.options.sampling.repeat_penalty, 1.1f);
  ASSERT_EQ(r.options.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.options.sampling.logit_bias[0].first, 17);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.options.stop_at_end_of_generation);

  CompletionRequest c = parse(R"({"messages": [{"role": "developer", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
    "max_completion_tokens": 9})", true);
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[1].content, "ab");
  EXPECT_EQ(c.options.max_tokens, 9);
  EXPECT_EQ(parse(R"({"prompt": ["one"]})").options.max_tokens, 256);  // the server's default

  // chat_template_kwargs: the template's variables, their order kept
  const CompletionRequest vars = parse(R"({"messages": [{"role": "user", "content": "x"}],
    "chat_template_kwargs": {"enable_thinking": false, "a": {"z": 1, "b": 2}}})", true);
  EXPECT_EQ(vars.template_vars.dump(), R"({"enable_thinking":false,"a":{"z":1,"b":2}})");
  EXPECT_TRUE(parse(R"({"messages": [{"role": "user", "content": "x"}]})", true).template_vars.empty());
}

TEST(OpenAiApi, BadFieldsAreErrorsThatNameThem) {
  struct Case {
    const char* body;
    bool chat;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"{oops", false, 400, ""},
      {"[]", false, 400, ""},
      {R"({"prompt": "x", "top_k": 5E5555})", false, 400, ""},  // a number past double (found by fuzz_openai_request)
      {R"({"prompt": "x\u0000"})", false, 200, ""},  // a NUL is text like any other
      {R"({"prompt": ""})", false, 400, "prompt"},
      {R"({"prompt": 5})", false, 400, "prompt"},
      {R"({})", false, 400, "prompt"},
      {R"({"messages": "hi"})", true, 400, "messages"},
      {R"({"messages": [{"role": "user"}], "model": 3})", true, 400, "model"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})", true, 400, "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true, 400, "messages[0].content"},
      {R"({"prompt": "x", "model": "other"})", false, 404, "model"},
      {R"({"prompt": "x", "max_tokens": 0})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 100000})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1.5})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "temperature": -1})", false, 400, "temperature"},
      {R"({"prompt": "x", "top_p": 0})", false, 400, "top_p"},
      {R"({"prompt": "x", "top_k": -1})", false, 400, "top_k"},
      {R"({"prompt": "x", "presence_penalty": 3})", false, 400, "presence_penalty"},
      {R"({"prompt": "x", "logit_bias": {"-1": 1}})", false, 400, "logit_bias"},
      {R"({"prompt": "x", "logit_bias": {"5": 500}})", false, 400, "logit_bias"},
      {R"({"prompt": "x", "stop": [1]})", false, 400, "stop"},
      {R"({"prompt": "x", "stop": ""})", false, 400, "stop"},
      {R"({"prompt": "x", "n": 3})", false, 200, ""},
      {R"({"prompt": "x", "n": 65})", false, 400, "n"},
      {R"({"prompt": ["x", "y"], "n": 33})", false, 400, "n"},  // 66 choices
      {R"({"prompt": ["x", [1, 2]]})", false, 400, "prompt"},   // text and ids mixed
      {R"({"prompt": ["x", ""]})", false, 400, "prompt"},
      {R"({"prompt": "x", "stream": "yes"})", false, 400, "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": 1}})", false, 400, "stream_options"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})", true, 400, "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", true, 400, "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})", true, 400, "top_logprobs"},
      {R"({"prompt": "x", "logprobs": true})", false, 400, "logprobs"},
      {R"({"prompt": "x", "logprobs": 21})", false, 400, "logprobs"},
      {R"({"prompt": "x", "echo": true})", false, 200, ""},
      {R"({"prompt": "x", "echo": false})", false, 200, ""},
      {R"({"prompt": "x", "echo": "yes"})", false, 400, "echo"},
      {R"({"prompt": "x", "echo": true, "stream": true})", false, 400, "echo"},
      {R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", true, 400, "echo"},
      {R"({"prompt": "x", "max_tokens": 0})", false, 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 0, "echo": true, "logprobs": 1})", false, 200, ""},
      {R"({"prompt": [1, 2, 3]})", false, 200, ""},
      {R"({"prompt": [[1, 2, 3]]})", false, 200, ""},
      {R"({"prompt": [1, -2]})", false, 400, "prompt"},
      {R"({"prompt": [1, 2.5]})", false, 400, "prompt"},
      {R"({"prompt": []})", false, 400, "prompt"},
      {R"({"prompt": ["a", "b"]})", false, 200, ""},
      {R"({"prompt": "x", "best_of": 2})", false, 400, "best_of"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]})", true, 200,
       ""},  // function calling: tool_calls_test.cpp
      {R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})", true, 200, ""},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", true, 200, ""},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}], "tool_choice": "none"})", true, 400, "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", true, 400, "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})", true, 400,
       "chat_template_kwargs"},
      {R"({"prompt": "x", "chat_template_kwargs": {}})", false, 400, "chat_template_kwargs"},
      {R"({"prompt": "x", "grammar": 5})", false, 400, "grammar"},
      {R"({"prompt": "x", "grammar": "root ::= missing"})", false, 400, "grammar"},
      {R"({"prompt": "x", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})", false, 400, "grammar"},
      {R"({"prompt": "x", "response_format": "json"})", false, 400, "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "xml"}})", false, 400, "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema"}})", false, 400, "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"pattern": "a"}}}})", false, 400,
       "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/x"}}}})", false, 400,
       "response_format"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}}})", false,
       400, "response_format"},
  };
  for (const Case& c : cases) {
    try {
      parse(c.body, c.chat);
      EXPECT_EQ(c.status, 200) << c.body << ": accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, c.status) << c.body << ": " << e.what();
      EXPECT_EQ(e.param, c.param) << c.body;
      EXPECT_FALSE(std::string(e.what()).empty());
      const nlohmann::json j = error_json(e);
      EXPECT_TRUE(j["error"]["message"].is_string() && j["error"]["type"].is_string()) << j.dump();
    }
  }
  // Invalid UTF-8 in a string is bad JSON.
  EXPECT_THROW(parse("{\"prompt\": \"\xff\xfe\"}"), ApiError);
  ApiLimits small;
  small.max_prompt_bytes = 4;
  EXPECT_THROW(parse_completion_request(R"({"prompt": "too long"})", false, {}, 16, "", small), ApiError);
}

// response_format holds the output to JSON: an object, or an instance of the
// schema with its properties in the order the body gives them.
TEST(OpenAiApi, ResponseFormatBecomesAGrammar) {
  EXPECT_EQ(parse(R"({"prompt": "x"})").options.grammar, nullptr);
  EXPECT_EQ(parse(R"({"prompt": "x", "response_format": {"type": "text"}})").options.grammar, nullptr);
  const auto object = parse(R"({"prompt": "x", "response_format": {"type": "json_object"}})").options.grammar;
  ASSERT_NE(object, nullptr);
  EXPECT_TRUE(test::matches(*object, R"({"a": [1, {"b": null}]})"));
  EXPECT_FALSE(test::matches(*object, "[1]"));
  const auto schema = parse(R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema",
    "json_schema": {"name": "person", "strict": true, "schema": {"type": "object", "additionalProperties": false,
    "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}}})", true)
                                .options.grammar;
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(test::matches(*schema, R"({"zeta": "z", "alpha": 1})"));
  EXPECT_FALSE(test::matches(*schema, R"({"alpha": 1, "zeta": "z"})"));  // nlohmann's json would have sorted them
  // llama-server's "grammar": GBNF.
  const auto gbnf = parse(R"({"prompt": "x", "grammar": "root ::= (\"yes\" | \"no\") \"!\""})").options.grammar;
  ASSERT_NE(gbnf, nullptr);
  EXPECT_TRUE(test::matches(*gbnf, "no!"));
  EXPECT_FALSE(test::matches(*gbnf, "maybe!"));
}

TEST(OpenAiApi, TokenIdPromptsAndEcho) {
  const CompletionRequest ids = parse(R"({"prompt": [[5, 0, 7]], "echo": true, "logprobs": 2, "max_tokens": 0})");
  EXPECT_EQ(ids.prompt_ids, (std::vector<std::vector<int32_t>>{{5, 0, 7}}));
  EXPECT_TRUE(ids.prompts.empty());
  EXPECT_EQ(parse(R"({"prompt": [5, 0, 7]})").prompt_ids, ids.prompt_ids);
  // Several prompts (a choice each), and n choices of each.
  const CompletionRequest batch = parse(R"({"prompt": [[1, 2], [3]], "n": 2})");
  EXPECT_EQ(batch.prompt_ids, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  EXPECT_EQ(batch.n, 2);
  EXPECT_EQ(parse(R"({"prompt": ["a", "b", "c"]})").prompts, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(ids.echo);
  EXPECT_EQ(ids.options.logprobs, 2);
  EXPECT_EQ(ids.options.max_tokens, 0);
  EXPECT_FALSE(parse(R"({"prompt": "x"})").echo);
}

TEST(OpenAiApi, LogprobsBecomeOptions) {
  EXPECT_EQ(parse(R"({"prompt": "x"})").options.logprobs, -1);
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 0})").options.logprobs, 0);
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 5})").options.logprobs, 5);
  const char* chat = R"({"messages": [{"role": "user", "content": "x"}], )";
  EXPECT_EQ(parse(std::string(chat) + R"("logprobs": false})", true).options.logprobs, -1);
  EXPECT_EQ(parse(std::string(chat) + R"("logprobs": true})", true).options.logprobs, 0);
  EXPECT_EQ(parse(std::string(chat) + R"("logprobs": true, "top_logprobs": 20})", true).options.logprobs, 20);
}

TEST(OpenAiApi, ResponsesHaveOpenAisShape) {
  CompletionRequest chat = parse(R"({"messages": [{"role": "user", "content": "hi"}]})", true);
  GenerationStats st;
  st.n_prompt = 5, st.n_generated = 3, st.stop_reason = "eos";
  nlohmann::json full = completion_json(chat, "chatcmpl-1", 100, "served", "hey", st);
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hey");
  EXPECT_EQ(full["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(full["usage"]["total_tokens"], 8);
  st.stop_reason = "context full";
  EXPECT_STREQ(finish_reason(st), "length");

  nlohmann::json first = chunk_json(chat, "chatcmpl-1", 100, "served", "he", nullptr, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "he");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  nlohmann::json last = chunk_json(chat, "chatcmpl-1", 100, "served", "", "length", false);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));

  // A reply's reasoning beside its content (tools/serve/reasoning.h), whole and as a chunk.
  EXPECT_FALSE(full["choices"][0]["message"].contains("reasoning_content"));
  st.stop_reason = "eos";
  const nlohmann::json thought = completion_json(chat, "chatcmpl-1", 100, "served", {{"Paris.", st, nullptr, {}, "Let me see."}});
  EXPECT_EQ(thought["choices"][0]["message"]["reasoning_content"], "Let me see.");
  EXPECT_EQ(thought["choices"][0]["message"]["content"], "Paris.");
  const nlohmann::json thinking = reasoning_chunk_json(chat, "chatcmpl-1", 100, "served", "Let", true);
  EXPECT_EQ(thinking["choices"][0]["delta"]["reasoning_content"], "Let");
  EXPECT_EQ(thinking["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(thinking["choices"][0]["delta"].contains("content"));
  EXPECT_TRUE(thinking["choices"][0]["finish_reason"].is_null());

  CompletionRequest comp = parse(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}})");
  nlohmann::json piece = chunk_json(comp, "cmpl-2", 100, "served", "y", nullptr, true);
  EXPECT_EQ(piece["object"], "text_completion");
  EXPECT_EQ(piece["choices"][0]["text"], "y");
  EXPECT_TRUE(piece.contains("usage") && piece["usage"].is_null());
  nlohmann::json usage = usage_chunk_json(comp, "cmpl-2", 100, "served", usage_json(st));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 3);
  EXPECT_EQ(chunk_json(comp, "cmpl-2", 100, "served", "z", nullptr, false, nullptr, 3)["choices"][0]["index"], 3);

  // Several choices: each its index; a prompt's tokens count once for its n choices.
  comp.n = 2;
  GenerationStats a = st, b = st;
  b.n_generated = 5;
  b.stop_reason = "length";
  const nlohmann::json two = completion_json(comp, "cmpl-3", 100, "served", {{"one", a, nullptr, {}}, {"two", b, nullptr, {}}});
  ASSERT_EQ(two["choices"].size(), 2u);
  EXPECT_EQ(two["choices"][1]["index"], 1);
  EXPECT_EQ(two["choices"][1]["text"], "two");
  EXPECT_EQ(two["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(two["usage"]["prompt_tokens"], st.n_prompt);
  EXPECT_EQ(two["usage"]["completion_tokens"], st.n_generated + 5);
  EXPECT_EQ(models_json("served", 1)["data"][0]["id"], "served");
}

}  // namespace
}  // namespace basalt::serve
