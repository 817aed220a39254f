#include "tests/support/serverd/exposition.h"

#include <algorithm>
#include <sstream>

namespace serverd_test {

std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(series + " ")) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

std::string series(std::string_view name, std::vector<std::string> labels) {
  const auto key = [](const std::string& label) {
    const std::string k = label.substr(0, label.find('='));
    return k == "le" ? "\x7f" : k;  // after every other key
  };
  std::sort(labels.begin(), labels.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  std::string out(name);
  for (std::size_t i = 0; i < labels.size(); ++i) out += (i == 0 ? "{" : ",") + labels[i];
  return labels.empty() ? out : out + "}";
}

std::map<std::string, std::string> declared_types(const std::string& text) {
  std::map<std::string, std::string> types;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("# TYPE ")) continue;
    std::istringstream fields(line.substr(7));
    std::string name, type;
    fields >> name >> type;
    types[name] = type;
  }
  return types;
}

}  // namespace serverd_test
