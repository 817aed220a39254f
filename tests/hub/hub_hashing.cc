#include "tests/hub/hub_hashing.h"

#include <openssl/evp.h>

#include <array>
#include <stdexcept>

namespace testing_support::hub {
namespace {

std::string digest_hex(const EVP_MD* algorithm, std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, algorithm, nullptr) != 1) {
    throw std::runtime_error("OpenSSL digest failed");
  }
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHexDigits[digest[i] >> 4]);
    hex.push_back(kHexDigits[digest[i] & 0x0f]);
  }
  return hex;
}

}  // namespace

std::string sha1_hex(std::string_view bytes) {
  return digest_hex(EVP_sha1(), bytes);
}

std::string sha256_hex(std::string_view bytes) {
  return digest_hex(EVP_sha256(), bytes);
}

std::string git_blob_oid(std::string_view content) {
  std::string object = "blob " + std::to_string(content.size());
  object.push_back('\0');
  object.append(content);
  return sha1_hex(object);
}

std::string lfs_pointer_text(std::string_view content_sha256, std::size_t content_size) {
  std::string pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:";
  pointer.append(content_sha256);
  pointer += "\nsize " + std::to_string(content_size) + "\n";
  return pointer;
}

}  // namespace testing_support::hub
