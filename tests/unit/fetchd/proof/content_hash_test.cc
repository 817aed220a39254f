#include "fetchd/proof/content_hash.h"

#include <gtest/gtest.h>

#include <string_view>

#include "tests/support/temp_dir.h"

namespace fetchd::proof {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(ContentHash, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(bytes("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(bytes("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ContentHash, GitBlobSha1MatchesGit) {
  // `printf 'hello\n' | git hash-object --stdin` and the empty blob.
  EXPECT_EQ(git_blob_sha1_hex(bytes("hello\n")), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(git_blob_sha1_hex(bytes("")), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

TEST(ContentHash, StreamingEqualsOneShot) {
  std::string data(1'000'003, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  Sha256 sha;
  GitBlobSha1 git(data.size());
  for (std::size_t at = 0; at < data.size(); at += 4099) {
    const auto piece = bytes(std::string_view(data).substr(at, 4099));
    sha.update(piece);
    git.update(piece);
  }
  EXPECT_EQ(sha.hex_digest(), sha256_hex(bytes(data)));
  EXPECT_EQ(git.hex_digest(), git_blob_sha1_hex(bytes(data)));
}

TEST(ContentHash, HashesAFilePrefix) {
  testing_support::TempDir dir;
  testing_support::write_file(dir / "f", std::string_view("abcdef"));
  Sha256 sha;
  hash_file_prefix(dir / "f", 3, [&](auto b) { sha.update(b); });
  EXPECT_EQ(sha.hex_digest(), sha256_hex(bytes("abc")));
  EXPECT_THROW(hash_file_prefix(dir / "f", 7, [](auto) {}), std::exception);
  EXPECT_THROW(hash_file_prefix(dir / "missing", 1, [](auto) {}), std::exception);
}

}  // namespace
}  // namespace fetchd::proof
