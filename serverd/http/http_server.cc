#include "serverd/http/http_server.h"

#include "base/printable.h"
#include "serverd/http/connection.h"
#include "serverd/http/request_framing.h"
#include "serverd/http/root_path.h"
#include "serverd/http/tls_context.h"

namespace serverd::http {

using detail::Connection;
using detail::Gate;
using detail::ServerImpl;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

Response plain_error(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  r.body = std::string(message) + "\n";
  return r;
}

// Options refused by name before anything is opened; the TLS ones are checked where they are loaded.
ServerOptions checked(ServerOptions options) {
  check_root_path(options.root_path);
  return options;
}

}  // namespace

ServerImpl::ServerImpl(ServerOptions options, Handler handler)
    : options_(checked(std::move(options))),
      tls_(detail::make_tls_context(options_)),
      cors_(options_),
      handler_(std::move(handler)),
      gate_(std::make_shared<Gate>(context_)),
      work_(net::make_work_guard(context_)),
      acceptor_(net::make_strand(context_)),
      accept_retry_(acceptor_.get_executor()) {
  if (!options_.error_response) options_.error_response = plain_error;
  if (options_.io_threads == 0) options_.io_threads = 1;
  if (options_.uds.empty()) {
    port_ = detail::listen_tcp(acceptor_, options_.host, options_.port);
  } else {
    socket_file_.listen(acceptor_, options_.uds);
  }
}

ServerImpl::~ServerImpl() {
  shutdown(std::chrono::milliseconds(0));
  std::lock_guard lock(mutex_);
  connections_.clear();
}

void ServerImpl::start() {
  std::lock_guard lock(shutdown_mutex_);
  if (started_ || stopped_) return;
  started_ = true;
  net::post(acceptor_.get_executor(), [this] { accept(); });
  for (std::size_t i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          context_.run();
          return;
        } catch (const std::exception& e) {
          std::cerr << "serverd: I/O thread: " << base::printable(e.what()) << '\n';
        }
      }
    });
  }
}

void ServerImpl::accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(net::make_strand(context_),
                         [this](const beast::error_code& ec, Socket socket) { on_accept(ec, std::move(socket)); });
}

void ServerImpl::on_accept(const beast::error_code& ec, Socket socket) {
  if (!acceptor_.is_open() || draining_) return;
  if (ec) {
    // Out of descriptors, say: try again shortly instead of spinning.
    accept_retry_.expires_after(std::chrono::milliseconds(100));
    accept_retry_.async_wait([this](const beast::error_code& wait_ec) {
      if (!wait_ec) accept();
    });
    return;
  }
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mutex_);
    if (connections_.size() < options_.max_connections) {
      connection = std::make_shared<Connection>(this, tls_ ? detail::make_tls_transport(std::move(socket), *tls_)
                                                           : detail::make_plain_transport(std::move(socket)));
      connections_.emplace(connection.get(), connection);
    }
  }
  if (connection) {
    net::dispatch(connection->executor(), [connection] { connection->start(); });
  } else {
    beast::error_code ignored;
    socket.close(ignored);
  }
  accept();
}

void ServerImpl::remove(Connection* connection) {
  std::lock_guard lock(mutex_);
  connections_.erase(connection);
  changed_.notify_all();
}

void ServerImpl::for_each_connection(void (Connection::*method)()) {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, connection] : connections_) all.push_back(connection);
  }
  for (const auto& connection : all) {
    net::post(connection->executor(), [connection, method] { ((*connection).*method)(); });
  }
}

void ServerImpl::begin_shutdown() {
  if (draining_.exchange(true)) return;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
    socket_file_.remove();  // new clients find no socket rather than one nobody accepts on
  });
  for_each_connection(&Connection::drain);
}

void ServerImpl::shutdown(std::chrono::milliseconds grace) {
  std::lock_guard shutdown_lock(shutdown_mutex_);
  if (stopped_) return;
  stopped_ = true;
  begin_shutdown();
  if (started_) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, grace, [this] { return exchanges_ == 0; });
    lock.unlock();
    for_each_connection(&Connection::close);
    lock.lock();
    // Closing runs on the I/O threads and takes a moment; it never blocks, so this wait is short.
    changed_.wait_for(lock, std::chrono::seconds(5), [this] { return connections_.empty(); });
  }
  gate_->close();
  work_.reset();
  context_.stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  socket_file_.remove();  // in case the I/O threads stopped before begin_shutdown's task ran
}

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_shared<ServerImpl>(std::move(options), std::move(handler))) {}

Server::~Server() = default;

std::uint16_t Server::port() const {
  return impl_->port();
}
void Server::start() {
  impl_->start();
}
void Server::begin_shutdown() {
  impl_->begin_shutdown();
}
void Server::shutdown(std::chrono::milliseconds grace) {
  impl_->shutdown(grace);
}
std::size_t Server::open_connections() const {
  return impl_->open_connections();
}
std::size_t Server::exchanges_in_flight() const {
  return impl_->exchanges_in_flight();
}

std::string_view Request::path() const {
  const std::string_view target_view(target);
  return target_view.substr(0, target_view.find('?'));
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  for (const auto& header : headers) {
    if (ascii_iequals(header.name, name)) return std::string_view(header.value);
  }
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  const auto phrase = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return {phrase.data(), phrase.size()};
}

}  // namespace serverd::http
