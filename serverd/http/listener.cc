#include "serverd/http/listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "base/printable.h"

namespace serverd::http::detail {

namespace {

using tcp = net::ip::tcp;
using local = net::local::stream_protocol;

std::string quoted(const std::string& path) {
  return "'" + base::printable(path) + "'";
}

// True when a server accepts connections on the socket file at `path`.
bool someone_listens(const std::string& path) {
  net::io_context context;
  local::socket probe(context);
  boost::system::error_code ec;
  probe.connect(local::endpoint(path), ec);
  return !ec;
}

}  // namespace

std::optional<tcp::endpoint> tcp_endpoint(const net::generic::stream_protocol::endpoint& endpoint) {
  if (endpoint.protocol().family() != AF_INET && endpoint.protocol().family() != AF_INET6) return std::nullopt;
  tcp::endpoint out;
  if (endpoint.size() > out.capacity()) return std::nullopt;
  std::memcpy(out.data(), endpoint.data(), endpoint.size());
  out.resize(endpoint.size());
  return out;
}

std::uint16_t listen_tcp(Acceptor& acceptor, const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    // A host name ("localhost"): the first address it resolves to.
    net::io_context context;
    tcp::resolver resolver(context);
    address = resolver.resolve(host, std::to_string(port)).begin()->endpoint().address();
  }
  const net::generic::stream_protocol::endpoint endpoint(tcp::endpoint(address, port));
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  return tcp_endpoint(acceptor.local_endpoint())->port();
}

void UnixSocketFile::listen(Acceptor& acceptor, const std::string& path) {
  constexpr std::size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;  // and its terminating NUL
  if (path.size() > kMaxPath) {
    throw std::invalid_argument("uds path " + quoted(path) + " is " + std::to_string(path.size()) +
                                " bytes; a Unix socket path holds at most " + std::to_string(kMaxPath) +
                                " (sun_path): choose a shorter path");
  }
  // Like uvicorn: anyone may connect (as to a TCP port), unless a replaced socket file said otherwise.
  mode_t mode = 0666;
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      throw std::runtime_error("uds path " + quoted(path) +
                               " exists and is not a socket: remove it or choose another path");
    }
    if (someone_listens(path)) {
      throw std::runtime_error("uds path " + quoted(path) +
                               ": another server is listening on it; stop it or choose another path");
    }
    // A socket file left behind by a server that died.
    mode = existing.st_mode & 07777;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      throw std::system_error(errno, std::generic_category(), "removing the stale socket file " + quoted(path));
    }
  }
  const net::generic::stream_protocol::endpoint endpoint(local::endpoint{path});
  acceptor.open(endpoint.protocol());
  acceptor.bind(endpoint);
  if (::chmod(path.c_str(), mode) != 0) {
    throw std::system_error(errno, std::generic_category(), "setting the mode of the socket file " + quoted(path));
  }
  struct stat bound {};
  if (::stat(path.c_str(), &bound) == 0) {
    path_ = path;
    device_ = bound.st_dev;
    inode_ = bound.st_ino;
  }
  acceptor.listen(net::socket_base::max_listen_connections);
}

void UnixSocketFile::remove() {
  if (path_.empty()) return;
  // Only our own: another server may have replaced the file since.
  struct stat now {};
  if (::lstat(path_.c_str(), &now) == 0 && now.st_dev == device_ && now.st_ino == inode_) ::unlink(path_.c_str());
  path_.clear();
}

}  // namespace serverd::http::detail
