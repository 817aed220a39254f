#include "serverd/loader/chat_template_flag.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/flags.h"
#include "tests/support/temp_dir.h"

namespace serverd {
namespace {

using ::testing::HasSubstr;

TEST(ChatTemplateFlag, ReadsAFile) {
  testing_support::TempDir dir;
  const auto path = dir / "t.jinja";
  std::ofstream(path) << "{{ messages[0]['content'] }}\\n stays as written in a file\n";
  EXPECT_EQ(read_chat_template_flag(path.string()), "{{ messages[0]['content'] }}\\n stays as written in a file\n");
}

TEST(ChatTemplateFlag, TakesInlineTemplatesWithTheirEscapesDecoded) {
  EXPECT_EQ(read_chat_template_flag("{% for m in messages %}{{ m.content }}\\n{% endfor %}"),
            "{% for m in messages %}{{ m.content }}\n{% endfor %}");
  EXPECT_EQ(read_chat_template_flag("a\nb"), "a\nb");
}

TEST(ChatTemplateFlag, RefusesAMissingFile) {
  try {
    read_chat_template_flag("/no/such/template.jinja");
    FAIL() << "accepted a missing file";
  } catch (const base::UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--chat-template /no/such/template.jinja: no such file"));
  }
}

TEST(ChatTemplateFlag, DecodesPythonsEscapes) {
  EXPECT_EQ(decode_escapes(R"(\t\r\\\'\"\x41\u00e9\U0001F600\101\q)"),
            "\t\r\\'\"A\xc3\xa9\xf0\x9f\x98\x80"
            "A\\q");
  EXPECT_EQ(decode_escapes("line\\\nnext"), "linenext");
  EXPECT_THROW(decode_escapes("\\x4"), base::UsageError);
}

}  // namespace
}  // namespace serverd
