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

}  // namespace
}  // namespace base
