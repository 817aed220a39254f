// One choice as tokens arrive: stop tokens left out of the text, stop strings held back while undecided
// and cut at their start, min_tokens, UTF-8 split across tokens, log-probability records.
#include "serverd/api/choice_output.h"

#include <gtest/gtest.h>

#include <string_view>

#include "tests/support/serverd/fake_generator.h"
#include "tests/support/serverd/test_model.h"

namespace serverd::api {
namespace {

using serverd_test::bytes;
using serverd_test::kEos;

class ChoiceOutputTest : public ::testing::Test {
 protected:
  ChoiceOutput make(std::vector<std::string> stops = {}, ChoiceConfig config = {}) {
    config.eos_token_ids = {kEos};
    return ChoiceOutput(model_.tokenizer, std::make_shared<StopStrings>(std::move(stops)),
                        std::make_shared<ChoiceConfig>(std::move(config)));
  }
  static std::vector<GeneratedToken> tokens(const std::vector<std::int32_t>& ids, int logprobs = -1) {
    std::vector<GeneratedToken> out;
    for (const auto id : ids) out.push_back({serverd_test::FakeGenerator::sampled(id, logprobs)});
    return out;
  }
  // Feeds `text` one byte-token at a time and returns what take_text() gives after each.
  static std::vector<std::string> feed(ChoiceOutput& out, std::string_view text) {
    std::vector<std::string> pieces;
    for (const char c : text) {
      out.add_tokens(tokens({static_cast<unsigned char>(c)}));
      pieces.push_back(out.take_text());
    }
    return pieces;
  }

  serverd_test::TestModel model_;
};

TEST_F(ChoiceOutputTest, EosEndsTheTextWithoutAppearingInIt) {
  auto out = make();
  EXPECT_FALSE(out.add_tokens(tokens({'H', 'i', kEos})));
  EXPECT_EQ(out.take_text(), "Hi");
  out.finish(FinishReason::Stop, kEos);
  EXPECT_EQ(out.text(), "Hi");
  EXPECT_EQ(out.finish_reason(), "stop");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(out.stop_reason()));  // null for EOS, as vLLM
  EXPECT_EQ(out.token_count(), 3u);
}

TEST_F(ChoiceOutputTest, StopTokenIdIsTheStopReasonAndStaysOutOfTheText) {
  ChoiceConfig config;
  config.stop_token_ids = {'!'};
  auto out = make({}, config);
  out.add_tokens(tokens({'a', '!'}));
  out.finish(FinishReason::Stop, '!');
  EXPECT_EQ(out.text(), "a");
  EXPECT_EQ(std::get<std::int32_t>(out.stop_reason()), '!');
}

TEST_F(ChoiceOutputTest, IncludeStopStrInOutputKeepsTheStopToken) {
  ChoiceConfig config;
  config.stop_token_ids = {'!'};
  config.include_stop_str_in_output = true;
  auto out = make({}, config);
  out.add_tokens(tokens({'a', '!'}));
  out.finish(FinishReason::Stop, '!');
  EXPECT_EQ(out.text(), "a!");
}

TEST_F(ChoiceOutputTest, SpecialTokensShowWhenNotSkipped) {
  ChoiceConfig config;
  config.skip_special_tokens = false;
  config.include_stop_str_in_output = true;
  auto out = make({}, config);
  out.add_tokens(tokens({'a', serverd_test::kImEnd, kEos}));
  out.finish(FinishReason::Stop, kEos);
  EXPECT_EQ(out.text(), "a<|im_end|><|endoftext|>");
  auto skipping = make();
  skipping.add_tokens(tokens({'a', serverd_test::kImEnd, kEos}));
  skipping.finish(FinishReason::Stop, kEos);
  EXPECT_EQ(skipping.text(), "a");
}

TEST_F(ChoiceOutputTest, AStopCandidateThatDidNotStopIsText) {
  ChoiceConfig config;
  config.stop_token_ids = {'x'};
  auto out = make({}, config);
  out.add_tokens(tokens({'a', 'x'}));
  EXPECT_EQ(out.take_text(), "a");  // 'x' may be the end
  out.add_tokens(tokens({'b'}));
  EXPECT_EQ(out.take_text(), "xb");  // it was not (min_tokens, say)
  out.finish(FinishReason::Length, std::nullopt);
  EXPECT_EQ(out.text(), "axb");
  EXPECT_EQ(out.finish_reason(), "length");
}

TEST_F(ChoiceOutputTest, StopStringSplitAcrossTokensIsHeldBackAndNeverSent) {
  auto out = make({"STOP"});
  const auto pieces = feed(out, "ab STO");
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", " ", "", "", ""}));
  EXPECT_FALSE(out.finished());
  EXPECT_TRUE(out.add_tokens(tokens({'P', 'z'})));  // the caller cancels the sequence
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(out.take_text(), "");
  EXPECT_EQ(out.text(), "ab ");
  EXPECT_EQ(out.finish_reason(), "stop");
  EXPECT_EQ(std::get<std::string>(out.stop_reason()), "STOP");
  EXPECT_EQ(out.token_count(), 7u);               // 'z' came after the end
  out.finish(FinishReason::Abort, std::nullopt);  // the cancellation's echo changes nothing
  EXPECT_EQ(out.finish_reason(), "stop");
}

TEST_F(ChoiceOutputTest, HeldBackTextIsReleasedWhenItTurnsOutNotToBeAStop) {
  auto out = make({"STOP"});
  EXPECT_EQ(feed(out, "aST"), (std::vector<std::string>{"a", "", ""}));
  EXPECT_EQ(feed(out, "x"), (std::vector<std::string>{"STx"}));
  EXPECT_EQ(feed(out, "S"), (std::vector<std::string>{""}));
  out.finish(FinishReason::Length, std::nullopt);
  EXPECT_EQ(out.take_text(), "S");  // at the end everything goes out
  EXPECT_EQ(out.text(), "aSTxS");
}

TEST_F(ChoiceOutputTest, IncludeStopStrInOutputKeepsTheStopString) {
  ChoiceConfig config;
  config.include_stop_str_in_output = true;
  auto out = make({"STOP"}, config);
  feed(out, "ab STOP tail");
  EXPECT_EQ(out.text(), "ab STOP");
  EXPECT_EQ(std::get<std::string>(out.stop_reason()), "STOP");
}

TEST_F(ChoiceOutputTest, TheEarliestStopStringWinsWithinOneBatch) {
  auto out = make({"cd", "b"});
  EXPECT_TRUE(out.add_tokens(tokens(bytes("abcd"))));
  EXPECT_EQ(out.text(), "a");
  EXPECT_EQ(std::get<std::string>(out.stop_reason()), "b");
}

TEST_F(ChoiceOutputTest, StopStringsCountOnlyFromMinTokens) {
  ChoiceConfig config;
  config.min_tokens = 4;
  auto out = make({"x"}, config);
  EXPECT_FALSE(out.add_tokens(tokens(bytes("axb"))));
  EXPECT_TRUE(out.add_tokens(tokens(bytes("cx"))));
  EXPECT_EQ(out.text(), "axbc");
}

TEST_F(ChoiceOutputTest, Utf8SplitAcrossTokensComesOutWhole) {
  auto out = make();
  const std::string e_acute = "\xC3\xA9";
  out.add_tokens(tokens({0xC3}));
  EXPECT_EQ(out.take_text(), "");
  out.add_tokens(tokens({0xA9}));
  EXPECT_EQ(out.take_text(), e_acute);
}

TEST_F(ChoiceOutputTest, KeepsLogprobRecordsWhenAsked) {
  ChoiceConfig config;
  config.keep_logprobs = true;
  auto out = make({}, config);
  out.add_tokens(tokens({'a', 'b'}, 2));
  ASSERT_EQ(out.logprobs().size(), 2u);
  EXPECT_EQ(out.logprobs()[1].token, 'b');
  EXPECT_EQ(out.logprobs()[1].top.size(), 2u);
  EXPECT_TRUE(out.has_new_logprobs());
  EXPECT_EQ(out.take_logprobs().size(), 2u);
  EXPECT_FALSE(out.has_new_logprobs());
}

TEST(StopStrings, FindsOnlyMatchesEndingInTheNewPart) {
  const StopStrings stops({"abc", "x"});
  EXPECT_FALSE(stops.find("abc", 3).has_value());  // looked at already
  const auto match = stops.find("zzabc", 4);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->position, 2u);
  EXPECT_EQ(match->index, 0u);
  // The earliest in the text wins, whatever the order of the list.
  const StopStrings two({"b", "cd"});
  EXPECT_EQ(two.find("xcdb", 0)->index, 1u);
}

TEST(StopStrings, HoldsBackTheLongestPrefixAtTheEnd) {
  const StopStrings stops({"abc", "bcd"});
  EXPECT_EQ(stops.held_back("xxab"), 2u);
  EXPECT_EQ(stops.held_back("xxbc"), 2u);
  EXPECT_EQ(stops.held_back("xxa"), 1u);
  EXPECT_EQ(stops.held_back("xyz"), 0u);
  EXPECT_EQ(StopStrings().held_back("abc"), 0u);
}

}  // namespace
}  // namespace serverd::api
