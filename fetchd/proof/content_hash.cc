#include "fetchd/proof/content_hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "fetchd/request/fetch_error.h"

namespace fetchd::proof {

namespace {

// An EVP digest context; OpenSSL picks the fastest implementation (SHA extensions, AVX2) at run time.
class Digest {
 public:
  explicit Digest(const EVP_MD* md) : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, md, nullptr) != 1) throw std::runtime_error("EVP_DigestInit failed");
  }
  ~Digest() { EVP_MD_CTX_free(ctx_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, std::size_t size) {
    if (size != 0 && EVP_DigestUpdate(ctx_, data, size) != 1) throw std::runtime_error("EVP_DigestUpdate failed");
  }
  std::string hex() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(ctx_, out, &length) != 1) throw std::runtime_error("EVP_DigestFinal failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string text(2 * length, '0');
    for (unsigned int i = 0; i < length; ++i) {
      text[2 * i] = kHex[out[i] >> 4];
      text[2 * i + 1] = kHex[out[i] & 15];
    }
    return text;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

struct Sha256::State {
  Digest digest{EVP_sha256()};
};

Sha256::Sha256() : state_(std::make_unique<State>()) {}
Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
void Sha256::update(std::span<const std::byte> bytes) {
  state_->digest.update(bytes.data(), bytes.size());
}
std::string Sha256::hex_digest() {
  return state_->digest.hex();
}

struct GitBlobSha1::State {
  Digest digest{EVP_sha1()};
};

GitBlobSha1::GitBlobSha1(std::uint64_t size) : state_(std::make_unique<State>()) {
  const std::string header = "blob " + std::to_string(size);
  state_->digest.update(header.c_str(), header.size() + 1);  // with the terminating NUL
}
GitBlobSha1::~GitBlobSha1() = default;
GitBlobSha1::GitBlobSha1(GitBlobSha1&&) noexcept = default;
GitBlobSha1& GitBlobSha1::operator=(GitBlobSha1&&) noexcept = default;
void GitBlobSha1::update(std::span<const std::byte> bytes) {
  state_->digest.update(bytes.data(), bytes.size());
}
std::string GitBlobSha1::hex_digest() {
  return state_->digest.hex();
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

std::string git_blob_sha1_hex(std::span<const std::byte> bytes) {
  GitBlobSha1 h(bytes.size());
  h.update(bytes);
  return h.hex_digest();
}

void hash_file_prefix(const std::filesystem::path& path, std::uint64_t length,
                      const std::function<void(std::span<const std::byte>)>& consume) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw FetchError(ErrorKind::Internal, "cannot read " + path.string() + ": " + std::strerror(errno));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::byte> buffer(4u << 20);
  std::uint64_t done = 0;
  while (done < length) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), length - done));
    const ssize_t n = ::read(fd, buffer.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : 0;
      ::close(fd);
      throw FetchError(ErrorKind::Internal, "cannot read " + path.string() + " at byte " + std::to_string(done) + ": " +
                                                (error ? std::strerror(error) : "unexpected end of file"));
    }
    consume(std::span(buffer.data(), static_cast<std::size_t>(n)));
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
}

}  // namespace fetchd::proof
