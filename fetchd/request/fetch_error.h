#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace fetchd {

// What went wrong, coarsely enough for a caller to act on: each kind has its own exit code in
// `fetchd pull` and its own gRPC status in Resolve.
enum class ErrorKind {
  Usage,        // the request itself is malformed
  NotFound,     // repository, revision or file does not exist
  Auth,         // gated, private, or a bad token
  Integrity,    // a listing or a file failed its proof
  OfflineMiss,  // offline and the cache cannot answer
  Network,      // the hub could not be reached or kept failing
  Unsupported,  // the repository holds nothing this engine can load, or this build lacks a feature
  Internal,     // local I/O and everything else
};

// Every fetchd layer reports failure with this exception. The message is a whole sentence for the user:
// it names the thing, the numbers that disagree, and what to do.
class FetchError : public std::runtime_error {
 public:
  FetchError(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// `fetchd pull` exit codes: 0 success, 1 internal, 2 usage, then one per kind.
int exit_code(ErrorKind kind);
std::string_view error_kind_name(ErrorKind kind);

}  // namespace fetchd
