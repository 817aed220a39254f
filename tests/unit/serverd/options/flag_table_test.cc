// Walks every row of serverd's flag table: an honoured (or stored) flag changes its option, a flag taken as
// it is logs exactly its one line, values it does not take and refused flags stop serverd with the row's
// sentence, and docs/serverd.md and --help list every flag.
#include "serverd/options/flag_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "base/flags.h"
#include "serverd/parsers/reasoning_parser.h"
#include "serverd/parsers/tool_call_parser.h"

namespace serverd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string name_of(const FlagRow& row) {
  return "--" + std::string(row.name);
}

// The arguments that give `row` the value `value` (a kBool's "false" is its --no- form).
std::vector<std::string> flag_args(const FlagRow& row, std::string_view value) {
  switch (row.kind) {
    case FlagKind::kSwitch: return {name_of(row)};
    case FlagKind::kBool: return {value == "false" ? "--no-" + std::string(row.name) : name_of(row)};
    default: return {name_of(row), std::string(value)};
  }
}

// How notes and refusals show the flag: a boolean by its form, anything else with its value.
std::string spelled(const FlagRow& row, std::string_view value) {
  if (row.kind == FlagKind::kBool) return flag_args(row, value).front();
  if (row.kind == FlagKind::kSwitch) return name_of(row);
  return name_of(row) + " " + std::string(value);
}

// The row's flag with `value` after a model; `full` adds the environment and start checks.
std::optional<ServerOptions> parse(const FlagRow& row, std::string_view value, bool full) {
  // The model as the first argument, unless the row is --model itself.
  std::vector<std::string> args = {"serve"};
  if (row.name != "model") args.emplace_back("org/model");
  for (auto& a : flag_args(row, value)) args.push_back(std::move(a));
  // vLLM refuses --enable-auto-tool-choice without a parser (ServerOptions.ToolFlagsRefusedAsVllmRefusesThem).
  if (row.name == "enable-auto-tool-choice") args.insert(args.end(), {"--tool-call-parser", "hermes"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return full ? parse_server_options(argv, {}) : read_server_flags(argv);
}

std::string refusal(const FlagRow& row, std::string_view value, bool full) {
  try {
    parse(row, value, full);
  } catch (const base::UsageError& e) {
    return e.what();
  }
  return "";
}

bool changed(const FlagRow& row, const ServerOptions& o) {
  static const ServerOptions defaults{};
  return std::visit(
      [&](auto m) {
        if constexpr (std::is_same_v<decltype(m), std::monostate>) {
          return false;
        } else {
          return !(o.*m == defaults.*m);
        }
      },
      row.target);
}

TEST(FlagTable, RowsAreCompleteAndNamedOnce) {
  std::set<std::string_view> names;
  for (const FlagRow& row : server_flag_table()) {
    SCOPED_TRACE(row.name);
    EXPECT_TRUE(names.insert(row.name).second) << "listed twice";
    EXPECT_FALSE(row.text.empty());
    EXPECT_EQ(row.name.find('_'), std::string_view::npos) << "vLLM spells flags with dashes";
    const bool stores = row.status == FlagStatus::kHonoured || row.status == FlagStatus::kCheckedAtLoad ||
                        row.status == FlagStatus::kParsedOnly;
    EXPECT_EQ(stores, !std::holds_alternative<std::monostate>(row.target))
        << "stored flags, and only those, have a target";
    if (row.kind != FlagKind::kSwitch) {
      EXPECT_FALSE(row.example.empty()) << "every flag with a value has an example";
    }
    if (!row.accepted.empty()) {
      EXPECT_FALSE(row.refusal.empty());
      EXPECT_FALSE(row.refused_example.empty());
    }
    if (row.status == FlagStatus::kParsedOnly) {
      EXPECT_FALSE(row.refusal.empty());
    }
  }
  ASSERT_NE(find_flag_row("tensor-parallel-size"), nullptr);
  EXPECT_EQ(find_flag_row("tensor-parallel-size")->alias, "tp");
  EXPECT_EQ(find_flag_row("no-such-flag"), nullptr);
}

TEST(FlagTable, EveryRowDoesWhatItSays) {
  for (const FlagRow& row : server_flag_table()) {
    SCOPED_TRACE(std::string(status_name(row.status)) + " " + name_of(row) + " " + std::string(row.example));
    switch (row.status) {
      case FlagStatus::kHonoured:
      case FlagStatus::kCheckedAtLoad: {
        const auto o = parse(row, row.example, true);
        ASSERT_TRUE(o);
        EXPECT_TRUE(changed(row, *o)) << "the example leaves the option at its default";
        EXPECT_TRUE(o->notes.empty());
        break;
      }
      case FlagStatus::kParsedOnly: {
        const auto o = parse(row, row.example, false);
        ASSERT_TRUE(o);
        EXPECT_TRUE(changed(row, *o));
        // Not wired yet: a value that would change behaviour stops serverd at start, saying so.
        EXPECT_EQ(refusal(row, row.example, true), name_of(row) + " " + std::string(row.refusal));
        break;
      }
      case FlagStatus::kAcceptedAsIs: {
        const auto o = parse(row, row.example, true);
        ASSERT_TRUE(o);
        EXPECT_THAT(o->notes, ElementsAre(spelled(row, row.example) + ": " + std::string(row.text)));
        break;
      }
      case FlagStatus::kRefused:
        EXPECT_EQ(refusal(row, row.example, false), name_of(row) + ": " + std::string(row.text));
        break;
    }
    if (!row.accepted.empty()) {
      EXPECT_EQ(refusal(row, row.refused_example, false),
                spelled(row, row.refused_example) + ": " + std::string(row.refusal));
    }
  }
}

TEST(FlagTable, ShortAliasesAreVllms) {
  for (const FlagRow& row : server_flag_table()) {
    if (row.alias.empty() || row.kind == FlagKind::kBool) continue;
    SCOPED_TRACE(row.alias);
    std::vector<std::string> args = {"org/model", "-" + std::string(row.alias), std::string(row.example)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    if (row.status == FlagStatus::kRefused) {
      EXPECT_THROW(read_server_flags(argv), base::UsageError);
    } else {
      EXPECT_TRUE(read_server_flags(argv));
    }
  }
}

TEST(FlagTable, HelpListsEveryFlag) {
  std::vector<std::string> args = {"--help"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  EXPECT_FALSE(read_server_flags(argv));
  const std::string help = testing::internal::GetCapturedStdout();
  for (const FlagRow& row : server_flag_table()) EXPECT_THAT(help, HasSubstr(name_of(row))) << row.name;
  EXPECT_THAT(help, HasSubstr("-tp, --tensor-parallel-size"));
  EXPECT_THAT(help, HasSubstr("--enable-prefix-caching, --no-enable-prefix-caching"));
}

std::string serverd_docs() {
  std::ifstream in(std::string(PROJECT_SOURCE_DIR) + "/docs/serverd.md");
  std::stringstream docs;
  docs << in.rdbuf();
  return docs.str();
}

// The flag's row of docs/serverd.md's flag table ("| `--name ...` | status | ..."), or "" when it has none.
std::string docs_row(const std::string& docs, const FlagRow& row) {
  const auto at = docs.find("| `" + name_of(row));
  return at == std::string::npos ? std::string() : docs.substr(at, docs.find('\n', at) - at);
}

const FlagRow& flag_row(std::string_view name) {
  for (const FlagRow& row : server_flag_table()) {
    if (row.name == name) return row;
  }
  throw std::logic_error("no flag " + std::string(name));
}

TEST(FlagTable, DocsListEveryFlagWithItsStatus) {
  const std::string docs = serverd_docs();
  ASSERT_FALSE(docs.empty());
  for (const FlagRow& row : server_flag_table()) {
    const std::string line = docs_row(docs, row);
    ASSERT_FALSE(line.empty()) << name_of(row) << " is missing from docs/serverd.md's flag table";
    EXPECT_THAT(line, HasSubstr("| " + std::string(status_name(row.status)) + " |")) << line;
  }
}

// The parser flags' sentence, in --help and in the docs, names every parser the registries know.
TEST(FlagTable, ParserFlagsNameEveryParser) {
  const std::string docs = serverd_docs();
  const auto expect_names = [&](std::string_view flag, std::span<const std::string_view> names) {
    const FlagRow& row = flag_row(flag);
    for (const std::string_view name : names) {
      EXPECT_THAT(std::string(row.text), HasSubstr(name)) << flag;
      EXPECT_THAT(docs_row(docs, row), HasSubstr(name)) << flag;
    }
  };
  expect_names("reasoning-parser", parsers::reasoning_parser_names());
  expect_names("tool-call-parser", parsers::tool_call_parser_names());
}

}  // namespace
}  // namespace serverd
