#pragma once

// Reading the Prometheus text exposition in serverd's tests.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace serverd_test {

// The value of the sample `series` (its name and labels exactly as the exposition writes them); nullopt
// when there is none.
std::optional<double> sample(const std::string& text, const std::string& series);

// A sample's name with `labels` (each `key="value"`) in the order prometheus-cpp writes them: by key, with
// a histogram's `le` last.
std::string series(std::string_view name, std::vector<std::string> labels);

// Each family's type by its name, from the "# TYPE name type" lines.
std::map<std::string, std::string> declared_types(const std::string& text);

}  // namespace serverd_test
