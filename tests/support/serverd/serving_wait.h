#pragma once

// Waiting for a serverd child to serve: the tests that start the real binary read its port from the one
// line serverd logs once the model is loaded.

#include <chrono>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/environment.h"

namespace serverd_test {

// Waits (up to 120 s: a model load) for "serving 'NAME' on 127.0.0.1:PORT"; the port, or nullopt when serverd
// exited first. `name` is matched as a regular expression.
inline std::optional<std::uint16_t> wait_until_serving(testing_support::ChildProcess& serverd,
                                                       const std::string& name) {
  const std::regex serving("serving '" + name + "' on 127\\.0\\.0\\.1:([0-9]+)");
  std::smatch match;
  std::string err;
  testing_support::eventually(
      [&] {
        err = serverd.err();
        return std::regex_search(err, match, serving) || !serverd.running();
      },
      std::chrono::seconds(120));
  if (match.empty()) return std::nullopt;
  return static_cast<std::uint16_t>(std::stoi(match[1].str()));
}

}  // namespace serverd_test
