#pragma once

// Where serverd's HTTP server listens: a TCP host:port, or a Unix domain socket path (vLLM's --uds). Both
// give one acceptor type, so the rest of the server does not care which. Internal to serverd/http.

// Before Asio: Boost 1.74's headers use std::exchange without including <utility>.
#include <sys/types.h>

#include <algorithm>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace serverd::http::detail {

namespace net = boost::asio;
using Acceptor = net::basic_socket_acceptor<net::generic::stream_protocol>;

// The TCP endpoint a generic one holds; nullopt for a Unix socket.
std::optional<net::ip::tcp::endpoint> tcp_endpoint(const net::generic::stream_protocol::endpoint& endpoint);

// Opens `acceptor` listening on host (an address, or a name: its first address) and port; returns the port
// bound, the kernel's pick when `port` is 0. Throws std::system_error.
std::uint16_t listen_tcp(Acceptor& acceptor, const std::string& host, std::uint16_t port);

// The socket file of a Unix domain socket listener. listen() binds it, first removing a stale socket file
// (one no server accepts on) and refusing any other file, with mode 0666 as uvicorn gives it (a replaced
// file's mode is kept); the file is removed again by remove() or on destruction, provided it is still the
// one bound.
class UnixSocketFile {
 public:
  UnixSocketFile() = default;
  ~UnixSocketFile() { remove(); }
  UnixSocketFile(const UnixSocketFile&) = delete;
  UnixSocketFile& operator=(const UnixSocketFile&) = delete;

  // Throws std::invalid_argument for a path too long for sun_path, std::runtime_error for a path taken by
  // another file or a live server, std::system_error when binding fails.
  void listen(Acceptor& acceptor, const std::string& path);
  void remove();

 private:
  std::string path_;  // empty: nothing bound
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace serverd::http::detail
