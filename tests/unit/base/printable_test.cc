// Text from outside made safe for log lines and terminals.
#include "base/printable.h"

#include <gtest/gtest.h>

namespace base {
namespace {

TEST(Printable, EscapesControlsAndBrokenUtf8) {
  EXPECT_EQ(printable("mod\nel\r\x1b[31m.safetensors"), "mod\\nel\\r\\x1b[31m.safetensors");
  EXPECT_EQ(printable(std::string("a\0b\tc\x7f", 6)), "a\\x00b\\tc\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\xc2\\x9b2J");  // C1 CSI, as UTF-8
  EXPECT_EQ(printable("\x9b"
                      "2J"),
            "\\x9b2J");                                     // a lone continuation byte
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // an overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe6\x97\xa5"), "\xe6\x97\xa5");     // printable UTF-8 passes
  EXPECT_EQ(printable("\xe6\x97"), "\\xe6\\x97");           // cut short
  EXPECT_EQ(printable("back\\slash and spaces"), "back\\slash and spaces");
}

TEST(Printable, DetectsWhatItWouldEscape) {
  EXPECT_FALSE(has_control_characters("config.json"));
  EXPECT_FALSE(has_control_characters("mod\xc3\xa8le/\xe6\x97\xa5.json"));
  EXPECT_TRUE(has_control_characters("a\nb"));
  EXPECT_TRUE(has_control_characters("\x7f"));
  EXPECT_TRUE(has_control_characters("\xc2\x85"));  // NEL
  EXPECT_TRUE(has_control_characters("\xff"));
  EXPECT_TRUE(has_control_characters(std::string("\0", 1)));
}

}  // namespace
}  // namespace base
