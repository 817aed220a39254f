#include "base/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace base {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  std::string model;
  std::uint64_t port = 8000;
  double share = 0.9;
  bool verbose = false;
  std::string device = "auto";
};

bool parse(std::vector<std::string> args, Parsed& out) {
  FlagParser flags("usage: test");
  flags.add_string("model", "MODEL", "the model", &out.model);
  flags.add_uint("port", "PORT", "the port", &out.port, 0, 65535);
  flags.add_double("share", "F", "a share", &out.share, 0.01, 1.0);
  flags.add_switch("verbose", "more", &out.verbose);
  flags.add_choice("device", {"auto", "cpu", "cuda"}, "where", &out.device);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return flags.parse(argv);
}

std::string error_of(std::vector<std::string> args) {
  Parsed p;
  try {
    parse(std::move(args), p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string error_of_parser(FlagParser& flags, std::vector<std::string> args) {
  try {
    flags.parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Flags, ReadsSeparateAndJoinedValues) {
  Parsed p;
  ASSERT_TRUE(parse({"--model", "org/repo", "--port=9000", "--verbose", "--device", "cpu", "--share", "0.5"}, p));
  EXPECT_EQ(p.model, "org/repo");
  EXPECT_EQ(p.port, 9000u);
  EXPECT_TRUE(p.verbose);
  EXPECT_EQ(p.device, "cpu");
  EXPECT_EQ(p.share, 0.5);
}

TEST(Flags, HelpStopsParsing) {
  Parsed p;
  EXPECT_FALSE(parse({"--help"}, p));
  EXPECT_FALSE(parse({"-h"}, p));
}

TEST(Flags, RefusesMistakesByName) {
  EXPECT_THAT(error_of({"--modle", "x"}), HasSubstr("unknown flag --modle"));
  EXPECT_THAT(error_of({"--model"}), HasSubstr("--model needs a value MODEL"));
  EXPECT_THAT(error_of({"stray"}), HasSubstr("unexpected argument 'stray'"));
  EXPECT_THAT(error_of({"--port", "70000"}), HasSubstr("--port takes a whole number from 0 to 65535, not '70000'"));
  EXPECT_THAT(error_of({"--port", "80x"}), HasSubstr("not '80x'"));
  EXPECT_THAT(error_of({"--port", "-1"}), HasSubstr("not '-1'"));
  EXPECT_THAT(error_of({"--share", "2"}), HasSubstr("--share takes a number"));
  EXPECT_THAT(error_of({"--share", "nan"}), HasSubstr("--share takes a number"));
  EXPECT_THAT(error_of({"--verbose=yes"}), HasSubstr("--verbose takes no value"));
  EXPECT_THAT(error_of({"--device", "tpu"}), HasSubstr("--device takes one of auto, cpu, cuda, not 'tpu'"));
}

TEST(Flags, ParsesStrings) {
  Parsed p;
  FlagParser flags("usage: test");
  flags.add_string("model", "MODEL", "the model", &p.model);
  flags.add_switch("verbose", "more", &p.verbose);
  const std::vector<std::string> args = {"--model", "org/repo", "--verbose"};
  ASSERT_TRUE(flags.parse(args));
  EXPECT_EQ(p.model, "org/repo");
  EXPECT_TRUE(p.verbose);
  const std::vector<std::string> help = {"--model=x", "--help", "--unknown"};
  EXPECT_FALSE(flags.parse(help));
  const std::vector<std::string> stray = {"stray"};
  EXPECT_THROW(flags.parse(stray), UsageError);
}

enum class Color { Red, Green };

TEST(Flags, ValueFlagsRunTheirReaderAtEachOccurrence) {
  std::vector<Color> colors;
  FlagParser flags("usage: test");
  flags.add_value("color", "red|green", "a color; repeat for more", [&colors](std::string_view v) {
    if (v == "red") {
      colors.push_back(Color::Red);
    } else if (v == "green") {
      colors.push_back(Color::Green);
    } else {
      throw UsageError("--color " + std::string(v) + ": not a color I know");
    }
  });
  const std::vector<std::string> args = {"--color", "green", "--color=red"};
  ASSERT_TRUE(flags.parse(args));
  EXPECT_EQ(colors, (std::vector<Color>{Color::Green, Color::Red}));

  const auto refusal = [&flags](std::vector<std::string> wrong) -> std::string {
    try {
      flags.parse(wrong);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal({"--color", "blue"}), "--color blue: not a color I know");
  EXPECT_THAT(refusal({"--color"}), HasSubstr("--color needs a value red|green"));
  EXPECT_THAT(flags.help(), HasSubstr("--color red|green"));
  EXPECT_THAT(flags.help(), HasSubstr("a color; repeat for more"));
}

TEST(Flags, HelpListsEveryFlag) {
  Parsed p;
  FlagParser flags("usage: test");
  flags.add_string("model", "MODEL", "the model to serve", &p.model);
  flags.add_switch("verbose", "more detail", &p.verbose);
  const auto help = flags.help();
  EXPECT_THAT(help, HasSubstr("usage: test"));
  EXPECT_THAT(help, HasSubstr("--model MODEL"));
  EXPECT_THAT(help, HasSubstr("the model to serve"));
  EXPECT_THAT(help, HasSubstr("--verbose"));
}

TEST(Flags, HumanSizesFollowVllm) {
  // Lowercase suffixes are decimal, uppercase binary (vLLM's human_readable_int).
  EXPECT_EQ(parse_human_uint("32k", "--n"), 32000u);
  EXPECT_EQ(parse_human_uint("32K", "--n"), 32768u);
  EXPECT_EQ(parse_human_uint("1M", "--n"), 1048576u);
  EXPECT_EQ(parse_human_uint("1m", "--n"), 1000000u);
  EXPECT_EQ(parse_human_uint("25.6k", "--n"), 25600u);
  EXPECT_EQ(parse_human_uint("2g", "--n"), 2000000000u);
  EXPECT_EQ(parse_human_uint("1T", "--n"), std::uint64_t{1} << 40);
  EXPECT_EQ(parse_human_uint(" 4096 ", "--n"), 4096u);
  const auto refusal = [](std::string_view text) -> std::string {
    try {
      parse_human_uint(text, "--max-model-len");
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_THAT(refusal("1.5K"), HasSubstr("a fraction cannot take the binary suffix K"));
  EXPECT_THAT(refusal("1.5K"), HasSubstr("1.5k"));
  EXPECT_THAT(refusal("32x"), HasSubstr("--max-model-len takes a whole number"));
  EXPECT_THAT(refusal("k"), HasSubstr("not 'k'"));
  EXPECT_THAT(refusal("-1"), HasSubstr("not '-1'"));
  EXPECT_THAT(refusal("99999999999T"), HasSubstr("takes a whole number"));  // past 2^64
}

TEST(Flags, SizeFlagsTakeHumanSizesWithinBounds) {
  std::uint64_t tokens = 0;
  FlagParser flags("usage: test");
  flags.add_size("max-num-batched-tokens", "N", "tokens", &tokens, 1, 1u << 24);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--max-num-batched-tokens", "8k"}));
  EXPECT_EQ(tokens, 8000u);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--max-num-batched-tokens=16K"}));
  EXPECT_EQ(tokens, 16384u);
  EXPECT_THROW(flags.parse(std::vector<std::string>{"--max-num-batched-tokens", "1G"}), UsageError);
}

TEST(Flags, BooleansTakeTheirNoForm) {
  bool caching = true;
  bool eager = false;
  FlagParser flags("usage: test");
  flags.add_bool("enable-prefix-caching", "cache prefixes", &caching);
  flags.add_switch("enforce-eager", "no graphs", &eager);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--no-enable-prefix-caching"}));
  EXPECT_FALSE(caching);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--enable-prefix-caching"}));
  EXPECT_TRUE(caching);
  // A switch (argparse's store_true) has no --no- form, and neither form takes a value.
  EXPECT_THROW(flags.parse(std::vector<std::string>{"--no-enforce-eager"}), UsageError);
  EXPECT_THROW(flags.parse(std::vector<std::string>{"--enable-prefix-caching=false"}), UsageError);
  EXPECT_THAT(flags.help(), HasSubstr("--enable-prefix-caching, --no-enable-prefix-caching"));
}

TEST(Flags, ListsTakeEveryValueUpToTheNextFlag) {
  std::vector<std::string> names;
  bool verbose = false;
  FlagParser flags("usage: test");
  flags.add_list("served-model-name", "NAME", "names", [&names](std::vector<std::string> v) { names = std::move(v); });
  flags.add_switch("verbose", "more", &verbose);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--served-model-name", "a", "b", "--verbose"}));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(verbose);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--served-model-name=c"}));
  EXPECT_EQ(names, (std::vector<std::string>{"c"}));
  EXPECT_THAT(error_of_parser(flags, {"--served-model-name", "--verbose"}), HasSubstr("needs at least one value NAME"));
  EXPECT_THAT(flags.help(), HasSubstr("--served-model-name NAME [NAME ...]"));
}

TEST(Flags, UnderscoresAliasesAndPositionals) {
  std::string model;
  std::uint64_t tp = 1;
  std::uint64_t len = 0;
  FlagParser flags("usage: test MODEL");
  flags.add_uint("tensor-parallel-size", "N", "devices", &tp);
  flags.add_alias("tp", "tensor-parallel-size");
  flags.add_uint("max-model-len", "N", "context", &len);
  flags.set_positional("MODEL", "the model", [&model](std::string_view v) { model = std::string(v); });
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"org/repo", "-tp", "2", "--max_model_len=4096"}));
  EXPECT_EQ(model, "org/repo");
  EXPECT_EQ(tp, 2u);
  EXPECT_EQ(len, 4096u);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"-tp=3"}));
  EXPECT_EQ(tp, 3u);
  EXPECT_THAT(error_of_parser(flags, {"-x"}), HasSubstr("unknown flag -x"));
  EXPECT_THAT(flags.help(), HasSubstr("-tp, --tensor-parallel-size N"));
  EXPECT_THAT(flags.help(), HasSubstr("MODEL"));
  // After "--" everything is positional.
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--", "--odd-name"}));
  EXPECT_EQ(model, "--odd-name");
}

TEST(Flags, ValuesThatLookLikeFlagsAreRefused) {
  EXPECT_THAT(error_of({"--model", "--port", "1"}), HasSubstr("--model needs a value MODEL"));
  // Negative numbers are values, as argparse reads them.
  double offset = 0;
  FlagParser flags("usage: test");
  flags.add_double("offset", "F", "shift", &offset, -10, 10);
  ASSERT_TRUE(flags.parse(std::vector<std::string>{"--offset", "-2.5"}));
  EXPECT_EQ(offset, -2.5);
}

TEST(Flags, AddingAFlagTwiceIsAProgrammingError) {
  bool a = false;
  FlagParser flags("usage: test");
  flags.add_switch("verbose", "more", &a);
  EXPECT_THROW(flags.add_switch("verbose", "again", &a), std::logic_error);
  EXPECT_THROW(flags.add_alias("v", "missing"), std::logic_error);
}

}  // namespace
}  // namespace base
