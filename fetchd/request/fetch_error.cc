#include "fetchd/request/fetch_error.h"

namespace fetchd {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Internal: return 1;
    case ErrorKind::Usage: return 2;
    case ErrorKind::NotFound: return 3;
    case ErrorKind::Auth: return 4;
    case ErrorKind::Integrity: return 5;
    case ErrorKind::OfflineMiss: return 6;
    case ErrorKind::Network: return 7;
    case ErrorKind::Unsupported: return 8;
  }
  return 1;
}

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Internal: return "internal";
    case ErrorKind::Usage: return "usage";
    case ErrorKind::NotFound: return "not-found";
    case ErrorKind::Auth: return "auth";
    case ErrorKind::Integrity: return "integrity";
    case ErrorKind::OfflineMiss: return "offline-miss";
    case ErrorKind::Network: return "network";
    case ErrorKind::Unsupported: return "unsupported";
  }
  return "internal";
}

}  // namespace fetchd
