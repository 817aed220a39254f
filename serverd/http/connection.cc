#include "serverd/http/connection.h"

#include "base/printable.h"
#include "serverd/http/request_framing.h"
#include "serverd/http/root_path.h"

namespace serverd::http::detail {

namespace {

constexpr std::size_t kReadChunk = 4096;
// How long a connection closed after an error response keeps reading (and discarding) what the client still
// sends, so the kernel does not reset the connection before the client has read the response.
constexpr std::chrono::milliseconds kLinger{2000};

std::string text_of(beast::string_view view) {
  return std::string(view.data(), view.size());
}

// Every header field of a request, names and values as sent.
std::vector<Header> header_fields(const bhttp::request_header<>& message) {
  std::vector<Header> fields;
  for (const auto& field : message) fields.push_back({text_of(field.name_string()), text_of(field.value())});
  return fields;
}

// Header names and values go on the wire verbatim; a CR or LF in them would split the response.
std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return out;
}

}  // namespace

void Connection::start() {
  arm(read_timer_, read_generation_, server_->options().header_timeout, &Connection::on_read_timeout);
  transport_->handshake([self = shared_from_this()](const beast::error_code& ec) { self->on_handshake(ec); });
}

void Connection::on_handshake(const beast::error_code& ec) {
  if (phase_ == Phase::kClosed) return;
  disarm(read_timer_, read_generation_);
  if (ec) {
    // A client that speaks plain HTTP to the TLS port, or whose certificate fails: this connection only.
    if (server_->options().verbose) {
      std::cerr << "serverd: TLS handshake with " << transport_->peer() << " failed: " << base::printable(ec.message())
                << '\n';
    }
    close();
    return;
  }
  wait_for_request();
}

void Connection::wait_for_request() {
  if (!keep_alive_ || server_->draining()) {
    linger_close();
    return;
  }
  parser_.emplace();
  parser_->header_limit(
      static_cast<std::uint32_t>(std::min<std::size_t>(server_->options().max_header_bytes, UINT32_MAX)));
  parser_->body_limit(server_->options().max_body_bytes);
  if (buffer_.size() > 0 && !read_pending_) {
    read_header();  // a pipelined request is already here
    return;
  }
  phase_ = Phase::kIdle;
  arm(read_timer_, read_generation_, server_->options().idle_timeout, &Connection::on_read_timeout);
  if (!read_pending_) watch();
}

void Connection::watch() {
  read_pending_ = true;
  transport_->read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](const beast::error_code& ec, std::size_t bytes) { self->on_watch(ec, bytes); });
}

void Connection::on_watch(const beast::error_code& ec, std::size_t bytes) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();  // end of stream or a broken connection: a pending exchange is aborted
    return;
  }
  buffer_.commit(bytes);
  switch (phase_) {
    case Phase::kIdle: read_header(); return;
    case Phase::kClosing:
      buffer_.consume(buffer_.size());
      watch();
      return;
    case Phase::kHandling:
      // A pipelined request: it waits in the buffer until the response is done. Watching stops here (so the
      // buffer stays bounded); a client that pipelines loses disconnect detection for this exchange only.
      return;
    default: return;
  }
}

void Connection::read_header() {
  phase_ = Phase::kHeader;
  arm(read_timer_, read_generation_, server_->options().header_timeout, &Connection::on_read_timeout);
  parse_header();
}

// Offers the buffered bytes to the parser, after checking them raw for what the parser would hide; reads
// more until the header is complete (the parser bounds its size).
void Connection::parse_header() {
  const std::string_view data(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  if (has_obs_fold(data)) {
    disarm(read_timer_, read_generation_);
    reject(400, "A request header is folded over two lines (obsolete line folding)");
    return;
  }
  beast::error_code ec = bhttp::error::need_more;
  const std::size_t used = data.empty() ? 0 : parser_->put(buffer_.data(), ec);
  if (ec == bhttp::error::need_more) {
    read_pending_ = true;
    transport_->read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](const beast::error_code& read_ec, std::size_t bytes) {
                            self->on_header_bytes(read_ec, bytes);
                          });
    return;
  }
  buffer_.consume(used);
  if (read_completed(ec)) on_header();
}

void Connection::on_header_bytes(const beast::error_code& ec, std::size_t bytes) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();  // the client left mid-header
    return;
  }
  buffer_.commit(bytes);
  parse_header();
}

bool Connection::read_completed(const beast::error_code& ec) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return false;
  disarm(read_timer_, read_generation_);
  if (ec) {
    on_read_error(ec);
    return false;
  }
  return true;
}

void Connection::on_header() {
  const auto& message = parser_->get();
  fields_ = header_fields(message);
  if (auto refusal = framing_refusal(fields_, message.version() < 11)) {
    reject(refusal->status, refusal->message);
    return;
  }
  const auto length = parser_->content_length();
  if (length && *length > server_->options().max_body_bytes) {
    reject(413, "Request body too large");
    return;
  }
  if (parser_->is_done()) {
    dispatch();
    return;
  }
  if (const auto expect = message[bhttp::field::expect];
      ascii_iequals({expect.data(), expect.size()}, "100-continue")) {
    queue("HTTP/1.1 100 Continue\r\n\r\n");
  }
  phase_ = Phase::kBody;
  arm(read_timer_, read_generation_, server_->options().body_timeout, &Connection::on_read_timeout);
  parse_body();
}

// Offers the buffered bytes to the parser, which bounds the body's size; reads more until the body is
// complete.
void Connection::parse_body() {
  beast::error_code ec;
  while (!parser_->is_done() && buffer_.size() > 0) {
    const std::size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == bhttp::error::need_more) ec = {};
    if (ec || used == 0) break;
  }
  if (ec || parser_->is_done()) {
    if (read_completed(ec)) dispatch();
    return;
  }
  read_pending_ = true;
  transport_->read_some(buffer_.prepare(kReadChunk),
                        [self = shared_from_this()](const beast::error_code& read_ec, std::size_t bytes) {
                          self->on_body_bytes(read_ec, bytes);
                        });
}

void Connection::on_body_bytes(const beast::error_code& ec, std::size_t bytes) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();  // the client left mid-body
    return;
  }
  buffer_.commit(bytes);
  parse_body();
}

void Connection::on_read_error(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    reject(431, "Request header fields too large");
  } else if (ec == bhttp::error::body_limit) {
    // The header was read whole (a Content-Length over the limit is found at its end): its Origin is known.
    if (fields_.empty()) fields_ = header_fields(parser_->get());
    reject(413, "Request body too large");
  } else if (ec == bhttp::error::bad_content_length) {
    reject(400,
           "The request's Content-Length is malformed, repeated with another value, or beside "
           "Transfer-Encoding");
  } else if (ec == bhttp::error::bad_transfer_encoding) {
    reject(400, "The request's Transfer-Encoding is repeated or beside Content-Length");
  } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
             ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    reject(400, "Malformed HTTP request");
  } else {
    close();  // the client left, or the read timed out
  }
}

void Connection::dispatch() {
  auto message = parser_->release();
  Request request;
  request.method = text_of(message.method_string());
  request.target = strip_root_path(text_of(message.target()), server_->options().root_path);
  request.headers = std::move(fields_);  // read once, when the header was checked
  fields_.clear();                       // a later request's refusal must not answer this one's Origin
  request.body = std::move(message.body());
  keep_alive_ = keep_alive_ && message.keep_alive() && !server_->draining();
  http10_ = message.version() < 11;
  if (const auto preflight = server_->cors().preflight(request)) {
    respond_now(*preflight);
    return;
  }

  phase_ = Phase::kHandling;
  exchange_ = std::make_shared<ExchangeImpl>(weak_from_this(), server_->gate(), std::move(request));
  server_->exchange_started();
  if (buffer_.size() == 0 && !read_pending_) watch();  // notices a client that leaves before the response

  const auto exchange = exchange_;
  try {
    server_->handle(exchange);
  } catch (const std::exception& e) {
    std::cerr << "serverd: handler failed: " << base::printable(e.what()) << '\n';
    exchange->respond(server_->error_response(500, "Internal server error"));
  }
}

std::string Connection::head(int status, const std::vector<Header>& headers,
                             std::optional<std::size_t> content_length) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  for (const auto& header : headers) {
    if (ascii_iequals(header.name, "content-length") || ascii_iequals(header.name, "transfer-encoding") ||
        ascii_iequals(header.name, "connection")) {
      continue;
    }
    out += sanitize(header.name) + ": " + sanitize(header.value) + "\r\n";
  }
  if (content_length) {
    out += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  } else if (chunked_) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  out += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

void Connection::respond_now(const Response& response) {
  phase_ = Phase::kHandling;
  queue(head(response.status, response.headers, response.body.size()) + response.body);
  response_queued_ = true;
}

void Connection::reject(int status, std::string_view message) {
  // The request was not read to its end (or its end is in doubt), so the connection cannot carry another
  // one: after the response it closes, and what the client still sends is discarded.
  keep_alive_ = false;
  Response response = server_->error_response(status, message);
  // A browser reads a refusal only when it carries the CORS headers every other answer carries; the header
  // fields are known unless they were what failed (431, malformed), and then there is no Origin to answer.
  Request request;
  request.headers = std::move(fields_);
  fields_.clear();
  server_->cors().add_response_headers(request, response.headers);
  respond_now(response);
}

void Connection::send_full(ExchangeImpl& exchange, Response response) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kPending) return;
  exchange.state = ExchangeImpl::State::kResponded;
  if (server_->draining()) keep_alive_ = false;
  server_->cors().add_response_headers(exchange.request(), response.headers);
  queue(head(response.status, response.headers, response.body.size()) + response.body);
  response_queued_ = true;
}

void Connection::send_head(ExchangeImpl& exchange, Response head_only) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kPending) return;
  exchange.state = ExchangeImpl::State::kStreaming;
  if (server_->draining()) keep_alive_ = false;
  chunked_ = !http10_;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the body is the end of the connection
  server_->cors().add_response_headers(exchange.request(), head_only.headers);
  queue(head(head_only.status, head_only.headers, std::nullopt));
}

void Connection::send_chunk(ExchangeImpl& exchange, std::string data) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kStreaming) return;
  if (chunked_) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    queue(size + std::move(data) + "\r\n");
  } else {
    queue(std::move(data));
  }
  if (out_.size() > server_->options().max_pending_output_bytes) {
    close();  // the client does not read what it asked for
  }
}

void Connection::send_end(ExchangeImpl& exchange) {
  if (exchange_.get() != &exchange || exchange.state != ExchangeImpl::State::kStreaming) return;
  exchange.state = ExchangeImpl::State::kResponded;
  queue(chunked_ ? "0\r\n\r\n" : "");
  response_queued_ = true;
  flush();  // an HTTP/1.0 stream queues nothing here, and still has to end
}

void Connection::queue(std::string bytes) {
  if (phase_ == Phase::kClosed) return;
  out_ += bytes;
  flush();
}

void Connection::flush() {
  if (write_pending_ || phase_ == Phase::kClosed) return;
  if (out_.empty()) {
    if (response_queued_) {
      response_queued_ = false;
      response_done();
    }
    return;
  }
  writing_.swap(out_);
  out_.clear();
  write_pending_ = true;
  arm(write_timer_, write_generation_, server_->options().write_timeout, &Connection::on_write_timeout);
  transport_->write(net::buffer(writing_),
                    [self = shared_from_this()](const beast::error_code& ec, std::size_t) { self->on_write(ec); });
}

void Connection::on_write(const beast::error_code& ec) {
  write_pending_ = false;
  disarm(write_timer_, write_generation_);
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    close();
    return;
  }
  writing_.clear();
  flush();
}

void Connection::response_done() {
  if (exchange_) {
    exchange_->state = ExchangeImpl::State::kComplete;
    if (exchange_->counted) {
      exchange_->counted = false;
      server_->exchange_finished();
    }
    exchange_.reset();
  }
  chunked_ = false;
  wait_for_request();
}

void Connection::abort_exchange() {
  if (!exchange_) return;
  const auto exchange = std::move(exchange_);
  const bool unanswered =
      exchange->state == ExchangeImpl::State::kPending || exchange->state == ExchangeImpl::State::kStreaming;
  exchange->state = ExchangeImpl::State::kAborted;
  if (exchange->counted) {
    exchange->counted = false;
    server_->exchange_finished();
  }
  if (unanswered) exchange->fire_abort();
}

void Connection::linger_close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosing;
  transport_->shutdown_send(shared_from_this());
  buffer_.consume(buffer_.size());
  arm(read_timer_, read_generation_, std::min<std::chrono::milliseconds>(kLinger, server_->options().idle_timeout),
      &Connection::on_read_timeout);
  if (!read_pending_) watch();
}

void Connection::close() {
  if (phase_ == Phase::kClosed) return;
  abort_exchange();
  phase_ = Phase::kClosed;
  disarm(read_timer_, read_generation_);
  disarm(write_timer_, write_generation_);
  transport_->close();
  server_->remove(this);  // pending handlers hold the connection until they have run
}

}  // namespace serverd::http::detail
