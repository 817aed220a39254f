// harmony_reader: headers read as gpt-oss and its template write them, and a completion's bytes told apart
// by message, whole and in pieces.
#include "serverd/parsers/harmony_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace serverd::parsers {
namespace {

TEST(HarmonyHeader, ChannelRecipientAndContentTypeWhereverTheyAreWritten) {
  EXPECT_EQ(parse_harmony_header("<|channel|>final"), (HarmonyHeader{"final", "", ""}));
  EXPECT_EQ(parse_harmony_header("<|channel|>commentary to=functions.get_weather <|constrain|>json"),
            (HarmonyHeader{"commentary", "functions.get_weather", "json"}));
  // The template's form: the recipient after the role, the content type a bare word after the channel.
  EXPECT_EQ(parse_harmony_header("assistant to=functions.f<|channel|>commentary json"),
            (HarmonyHeader{"commentary", "functions.f", "json"}));
  EXPECT_EQ(parse_harmony_header("assistant<|channel|>analysis to=python code"),
            (HarmonyHeader{"analysis", "python", "code"}));
  EXPECT_EQ(parse_harmony_header("<|channel|>commentary to=functions.f<|constrain|>json"),
            (HarmonyHeader{"commentary", "functions.f", "json"}));
  EXPECT_EQ(parse_harmony_header("assistant"), (HarmonyHeader{}));
  EXPECT_EQ(parse_harmony_header(""), (HarmonyHeader{}));
}

// What the reader found, written out: [text|channel], {begin channel}, (end marker).
class Transcript final : public HarmonyReader::Handler {
 public:
  void on_text(std::string_view text, const HarmonyHeader* header) override {
    // Adjacent pieces of one message's text are joined, so that every split reads the same.
    const std::string tag = header == nullptr ? "-" : header->channel;
    if (!log_.empty() && last_text_tag_ == tag && log_.back().starts_with("[")) {
      log_.back().insert(log_.back().size() - tag.size() - 2, text);
      return;
    }
    log_.push_back("[" + std::string(text) + "|" + tag + "]");
    last_text_tag_ = tag;
  }
  void on_begin(const HarmonyHeader& header) override { log_.push_back("{" + header.channel + "}"); }
  void on_end(const HarmonyHeader& header, std::string_view marker) override {
    log_.push_back("(" + header.channel + " " + std::string(marker) + ")");
  }
  const std::vector<std::string>& log() const { return log_; }

 private:
  std::vector<std::string> log_;
  std::string last_text_tag_;
};

std::vector<std::string> read_in_pieces(std::string_view text, std::size_t piece) {
  HarmonyReader reader;
  Transcript transcript;
  for (std::size_t at = 0; at < text.size(); at += piece) reader.feed(text.substr(at, piece), transcript);
  reader.finish(transcript);
  return transcript.log();
}

TEST(HarmonyReader, TellsMessagesApartHoweverTheTextIsCut) {
  constexpr std::string_view kText =
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.w <|constrain|>json<|message|>{\"c\": \"<|x|>\"}";
  const std::vector<std::string> expected = {"{analysis}",   "[Need weather.|analysis]",        "(analysis <|end|>)",
                                             "{commentary}", "[{\"c\": \"<|x|>\"}|commentary]", "(commentary )"};
  for (std::size_t piece = 1; piece <= kText.size(); ++piece)
    EXPECT_EQ(read_in_pieces(kText, piece), expected) << piece;
}

TEST(HarmonyReader, TextOutsideMessagesAndCutShortMarkers) {
  EXPECT_EQ(read_in_pieces("plain <|start text", 3), (std::vector<std::string>{"[plain <|start text|-]"}));
  // A header cut short is dropped; a marker cut short in a message is its text.
  EXPECT_EQ(read_in_pieces("<|channel|>final<|mess", 4), (std::vector<std::string>{}));
  EXPECT_EQ(read_in_pieces("<|channel|>final<|message|>ok<|en", 4),
            (std::vector<std::string>{"{final}", "[ok<|en|final]", "(final )"}));
  EXPECT_EQ(read_in_pieces("<|channel|>final<|message|>a<|return|>b", 5),
            (std::vector<std::string>{"{final}", "[a|final]", "(final <|return|>)", "[b|-]"}));
}

}  // namespace
}  // namespace serverd::parsers
