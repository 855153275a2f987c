// SPDX-License-Identifier: MIT
// A reply's <think>...</think> apart from its answer (tools/serve/reasoning.h):
// whole, and fed in pieces cut at every byte, which must give the same parts.
#include <gtest/gtest.h>

#include <string>

#include "tools/serve/reasoning.h"

namespace basalt::serve {
namespace {

struct ReasoningCase {
  const char* reply;
  bool starts_inside;
  const char* reasoning;
  const char* content;
};

const ReasoningCase kReasoningCases[] = {
    {"<think>\nLet me see.\n</think>\n\nParis.", false, "\nLet me see.\n", "Paris."},
    {"\n <think>a</think>b", false, "a", "b"},
    {"Paris.", false, "", "Paris."},
    {"Paris. <think>x</think>", false, "", "Paris. <think>x</think>"},  // only a reply's start thinks
    {"<thin", false, "", "<thin"},                                     // a tag's start that never finishes
    {"<think>never closed", false, "never closed", ""},
    {"<think></think>", false, "", ""},
    {"<think>\n\n</think>\n\nHi", false, "\n\n", "Hi"},
    {"Okay.\n</think>\n\nParis.", true, "Okay.\n", "Paris."},  // the template opened <think>
    {"still thinking </thi", true, "still thinking </thi", ""},
    {"a < b </think> c", true, "a < b ", "c"},
    {"", true, "", ""},
    {"  ", false, "", "  "},
};

TEST(Reasoning, SplitsWholeAndInPieces) {
  for (const ReasoningCase& c : kReasoningCases) {
    const std::string reply = c.reply;
    const ReplyParts whole = split_reasoning(reply, c.starts_inside);
    EXPECT_EQ(whole.reasoning, c.reasoning) << reply;
    EXPECT_EQ(whole.content, c.content) << reply;
    for (size_t cut = 0; cut <= reply.size(); ++cut)
      for (size_t cut2 = cut; cut2 <= reply.size(); ++cut2) {
        ReasoningSplitter s(c.starts_inside);
        ReplyParts got;
        for (const ReplyParts& p : {s.feed(reply.substr(0, cut)), s.feed(reply.substr(cut, cut2 - cut)),
                                    s.feed(reply.substr(cut2)), s.finish()}) {
          got.reasoning += p.reasoning;
          got.content += p.content;
        }
        EXPECT_EQ(got.reasoning, c.reasoning) << reply << " cut at " << cut << ", " << cut2;
        EXPECT_EQ(got.content, c.content) << reply << " cut at " << cut << ", " << cut2;
      }
  }
}

// Text reaches the client as soon as it cannot be a tag: only a tag's possible start waits.
TEST(Reasoning, HoldsBackOnlyWhatMayBeATag) {
  ReasoningSplitter s(true);
  EXPECT_EQ(s.feed("one two").reasoning, "one two");
  EXPECT_EQ(s.feed(" three </th").reasoning, " three ");
  const ReplyParts p = s.feed("ink>\nAnswer");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "Answer");
  EXPECT_EQ(s.feed(" more").content, " more");
}

TEST(Reasoning, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));  // Qwen3 without thinking
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning(""));
}

}  // namespace
}  // namespace basalt::serve
