// Scripted models: each piece is one added token, and the float64 reference's greedy reply to any prompt is
// the pieces in order, then the end of the turn; scripts the model cannot follow are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model_writer/model_writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/reference_model.h"
#include "tests/support/temp_dir.h"

namespace engine::tools {
namespace {

using model::Architecture;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing_support::TempDir;

const std::vector<std::string> kScript = {"<tool_call>\n", "{\"name\": \"get_weather\", ",
                                          "\"arguments\": {\"city\": \"Paris\"}}", "\n</tool_call>"};

ModelWriterOptions scripted(Architecture arch, const TempDir& dir) {
  ModelWriterOptions options;
  options.arch = arch;
  options.out_dir = dir.path();
  options.script = kScript;
  return options;
}

std::string refusal(const ModelWriterOptions& options) {
  try {
    write_model(options);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelWriterScript, TheGreedyReplyToAnyPromptIsTheScriptThenTheEndOfTurn) {
  for (const auto arch : {Architecture::Qwen3, Architecture::Llama}) {
    TempDir dir;
    write_model(scripted(arch, dir));
    const auto tokenizer = tokenizer::Tokenizer::from_directory(dir.path());
    std::vector<std::int32_t> pieces;
    for (const auto& piece : kScript) {
      const auto ids = tokenizer.encode(piece, false);
      ASSERT_EQ(ids.size(), 1u) << piece;
      EXPECT_FALSE(tokenizer.is_special(ids[0])) << piece;  // the reply's text, kept when specials are skipped
      EXPECT_EQ(tokenizer.decode(ids, true), piece);
      pieces.push_back(ids[0]);
    }
    std::vector<std::int32_t> expected = pieces;
    expected.push_back(*tokenizer.eos_id());
    expected.push_back(pieces[0]);  // the end of turn is outside the script: the chain starts again
    for (const std::string prompt : {"What is the weather in Paris?", "x", "The river flows"}) {
      const auto reply = testing_support::reference_greedy(dir.path(), tokenizer.encode(prompt), 6);
      EXPECT_THAT(reply, ElementsAreArray(expected)) << prompt;
    }
    // A prompt that ends inside the script continues from there.
    const auto from_middle = testing_support::reference_greedy(dir.path(), {pieces[1]}, 2);
    EXPECT_THAT(from_middle, ElementsAreArray(std::vector<std::int32_t>{pieces[2], pieces[3]}));
  }
}

TEST(ModelWriterScript, ScriptsTheModelCannotFollowAreRefusedByName) {
  TempDir dir;
  auto options = scripted(Architecture::Qwen3, dir);
  options.script = {"a piece", "another", "a piece"};
  EXPECT_THAT(refusal(options), HasSubstr("script piece 2 \"a piece\" appears twice"));
  options.script = {"<|im_end|>"};
  EXPECT_THAT(refusal(options), HasSubstr("script piece 0 \"<|im_end|>\" is already token"));
  options.script = {"ok", ""};
  EXPECT_THAT(refusal(options), HasSubstr("script piece 1 is empty"));
  options = scripted(Architecture::Qwen2, dir);
  EXPECT_THAT(refusal(options), HasSubstr("--arch qwen2 ties it to the embedding"));
  options = scripted(Architecture::Qwen3, dir);
  options.script.assign(300, "");
  for (std::size_t i = 0; i < options.script.size(); ++i) options.script[i] = "piece " + std::to_string(i);
  EXPECT_THAT(refusal(options), HasSubstr("a script of 300 pieces needs a hidden size above 300; the preset has 256"));
}

}  // namespace
}  // namespace engine::tools
