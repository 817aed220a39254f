#pragma once

#include <cstddef>
#include <string>
#include <string_view>

// The hashes the Hugging Face hub reports for a file, computed the way git and git-lfs compute them, so a
// client under test can check what it downloads against the ids the test hub announced.
namespace testing_support::hub {

std::string sha1_hex(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);

// git's blob id: SHA-1 of "blob {size}\0" followed by the content.
std::string git_blob_oid(std::string_view content);

// The git-lfs pointer text that git stores in place of an LFS file (what the hub's `oid` hashes).
std::string lfs_pointer_text(std::string_view content_sha256, std::size_t content_size);

}  // namespace testing_support::hub
