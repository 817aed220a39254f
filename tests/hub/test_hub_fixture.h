#pragma once

// What the test hub's own tests share: ids of one small file computed outside the hub, helpers for JSON
// listings and test content, and the fixture of one hub with one ordinary repository. The tests go through
// real HTTP on loopback, with libcurl as the client (tests/hub/hub_test_client.h).

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tests/hub/test_hub.h"

namespace testing_support {

// Ids computed by git and sha256sum, not by the hub's code: `printf 'hello\n' | git hash-object --stdin`, and
// the git-lfs pointer of that content hashed the same way.
inline constexpr const char* kHello = "hello\n";
inline constexpr const char* kHelloGitOid = "ce013625030ba8dba906f756967f9e9ca394464a";
inline constexpr const char* kHelloSha256 = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
inline constexpr const char* kHelloPointerOid = "fa61e1ef71c9908c0926776a4aa3504b3a27f159";
inline constexpr int kHelloPointerSize = 126;

inline std::vector<std::string> string_members(const rapidjson::Value& array, const char* member) {
  std::vector<std::string> values;
  for (const auto& element : array.GetArray()) values.emplace_back(element[member].GetString());
  return values;
}

inline bool is_40_hex(const std::string& text) {
  return text.size() == 40 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A deterministic, non-repeating body of `size` bytes.
inline std::string pattern_bytes(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + i / 251) & 0xff);
  return bytes;
}

// ---- Fixture: one hub with one ordinary repository ----------------------------------------------------

class TestHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    main_commit_ = hub_.commit("org/model", "main",
                               {{"config.json", kHello, false},
                                {"model.safetensors", kHello, true},
                                {"original/consolidated.bin", "weights!", true},
                                {"original/params.json", "{}", false}});
  }

  std::string api(const std::string& path) const { return hub_.endpoint() + path; }

  TestHub hub_;
  std::string main_commit_;
};

}  // namespace testing_support
