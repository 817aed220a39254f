#pragma once

#include <stdexcept>
#include <string>

namespace engine::template_ {

// Where in the template source something happened; 1-based. Line 0 means "not tied to a place".
struct Location {
  int line = 0;
  int column = 0;
};

// Every failure to parse or render a template. what() reads "chat template line L, column C: message";
// message() is the bare text, which for raise_exception(...) is exactly what the template passed.
class TemplateError : public std::runtime_error {
 public:
  enum class Kind {
    kSyntax,  // the template cannot be parsed
    kRender,  // the template failed while rendering (type errors, unknown filters, ...)
    kRaised,  // the template called raise_exception(message)
    kLimit,   // a resource limit stopped the render (output size, loop iterations, recursion)
  };

  TemplateError(Kind kind, Location where, std::string message);

  Kind kind() const { return kind_; }
  const Location& location() const { return location_; }
  const std::string& message() const { return message_; }

 private:
  Kind kind_;
  Location location_;
  std::string message_;
};

}  // namespace engine::template_
