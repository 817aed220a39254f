// The --reasoning-parser names, and what a rendered prompt tells about the reasoning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "serverd/parsers/reasoning_parser.h"

namespace serverd::parsers {
namespace {

TEST(ReasoningRegistry, KnowsQwen3DeepSeekR1AndGptOss) {
  EXPECT_THAT(reasoning_parser_names(), ::testing::ElementsAre("deepseek_r1", "openai_gptoss", "qwen3"));
  EXPECT_EQ(make_reasoning_parser("qwen3")->name(), "qwen3");
  EXPECT_EQ(make_reasoning_parser("deepseek_r1")->name(), "deepseek_r1");
  EXPECT_EQ(make_reasoning_parser("openai_gptoss")->name(), "openai_gptoss");
  try {
    make_reasoning_parser("deepseek_v3\n");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown reasoning parser 'deepseek_v3\\n': choose one of deepseek_r1, openai_gptoss, qwen3");
  }
}

TEST(ReasoningRegistry, PromptClosesReasoningWhenItsLastTagIsTheEnd) {
  EXPECT_TRUE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(prompt_closes_reasoning("history </think> only"));
  EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_closes_reasoning("<think>a</think> then <think>\n"));
  EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace serverd::parsers
