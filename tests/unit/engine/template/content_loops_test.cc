// How --chat-template-content-format auto reads a template: a loop over a message's content (through
// filters, tests, slices and message lists set from `messages`) means content as a list of parts.
#include <gtest/gtest.h>

#include "engine/template/chat_template.h"

namespace engine::template_ {
namespace {

bool loops(std::string_view source) {
  return ChatTemplate::parse(source).loops_over_message_content();
}

TEST(ContentLoops, LoopsOverAMessagesContentMeanParts) {
  EXPECT_TRUE(loops("{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(loops("{% for message in messages %}{% for c in message.content %}{{ c }}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      loops("{% for m in messages %}{% for p in m['content'] | selectattr('type', 'equalto', 'text') %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      loops("{% set loop_messages = messages[1:] %}{% for m in loop_messages %}"
            "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}"
            "{% endfor %}{% endif %}{% endfor %}"));
}

TEST(ContentLoops, AnythingElseMeansAString) {
  EXPECT_FALSE(loops("{% for m in messages %}{{ m['content'] }}{% endfor %}"));
  EXPECT_FALSE(loops("{% for m in messages %}{% for x in m['tool_calls'] %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(loops("{% for p in other['content'] %}{% endfor %}"));                                 // not a message
  EXPECT_FALSE(loops("{% for m in messages %}{% for k, v in m.content %}{% endfor %}{% endfor %}"));  // tuples
  EXPECT_FALSE(loops("plain text"));
}

}  // namespace
}  // namespace engine::template_
