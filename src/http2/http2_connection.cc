#include "http2/http2_connection.h"

#include <nghttp2/nghttp2.h>

#include <string>

#include "base/log.h"
#include "http/error_page.h"
#include "http/exchange.h"
#include "http/handler.h"
#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::http2 {

// One stream's request on its way through the handler chain, and the
// transport of its exchange. Outlives its stream until the end of the round
// (the stream may close while one of its methods runs).
class Http2Connection::Task final : public http::ExchangeTransport {
 public:
  Task(Http2Connection* owner, Stream* stream) : owner_(owner), stream_(stream) {}

  // ExchangeTransport.
  net::EventLoop* loop() const override { return owner_->conn_->loop(); }
  const net::InetAddress& peer_address() const override { return owner_->conn_->peer_address(); }
  const net::InetAddress& local_address() const override { return owner_->conn_->local_address(); }
  const net::SecureLayer* secure() const override { return owner_->conn_->secure_layer(); }
  bool must_close() const override { return false; }  // a stream ends, not the connection
  void flush() override { owner_->flush(); }
  size_t pending_output_bytes() const override { return stream_ != nullptr ? stream_->pending_output_bytes() : 0; }
  void pause_body() override {
    if (stream_ != nullptr) stream_->pause_body();
  }
  void resume_body() override {
    if (stream_ == nullptr) return;
    stream_->resume_body();
    owner_->flush();
  }
  void wait_for_drain() override { wait_drain_ = true; }
  void finish_exchange() override;
  void abort_exchange() override;

  Http2Connection* const owner_;
  Stream* stream_;  // null once the stream closed
  http::Route route;
  http::RequestHandler* handler = nullptr;
  http::Claim claim = http::Claim::kPass;
  http::Exchange exchange;
  uint64_t max_body = 0;
  uint64_t received = 0;      // body bytes given to the exchange
  std::string body;           // gathered for a Router handler (kRespondWithBody)
  bool gathering = false;
  bool wait_drain_ = false;
};

void Http2Connection::Task::finish_exchange() {
  http::ResponseWriter& writer = exchange.response();
  if (!writer.finished() && stream_ != nullptr) {
    TERN_LOG_ERROR("conn {} stream {}: exchange for {} {} finished without a complete response",
                   owner_->conn_->id().slot, stream_->id(), exchange.request().method_text(),
                   exchange.request().target());
    if (!writer.started()) {
      http::write_error_page(writer, 500);
    } else {
      stream_->reset(NGHTTP2_INTERNAL_ERROR);
    }
  }
  if (owner_->shared_->on_response) owner_->shared_->on_response(exchange.request(), *owner_->conn_, writer);
  exchange.end();
  owner_->flush();
}

void Http2Connection::Task::abort_exchange() {
  // What was written goes out; the stream ends unfinished.
  if (stream_ != nullptr) stream_->reset(NGHTTP2_INTERNAL_ERROR);
  exchange.end();
  owner_->flush();
}

// ---- Http2Connection ----

Http2Connection::Http2Connection(const http::HttpShared* shared, net::TcpConnection* conn,
                                 const SessionLimits& limits)
    : shared_(shared),
      conn_(conn),
      tasks_(),
      session_(limits, Session::Callbacks{
                           .on_request = [this](Stream& stream) { on_request(stream); },
                           .on_body = [this](Stream& stream, std::string_view piece,
                                             bool last) { on_body(stream, piece, last); },
                           .on_drained = [this](Stream& stream) { on_drained(stream); },
                           .on_close = [this](Stream& stream) { on_stream_close(stream); },
                       }) {}

Http2Connection::~Http2Connection() = default;

void Http2Connection::on_message(net::Buffer& input) {
  const bool ok = session_.receive(input.view());
  input.retrieve_all();
  if (!ok) {
    TERN_LOG_DEBUG("conn {}: HTTP/2: {}", conn_->id().slot, session_.error());
    closing_ = true;
  }
  flush();
}

void Http2Connection::on_write_complete() { flush(); }

void Http2Connection::on_close() {
  // The streams in progress end with the connection: their exchanges are
  // told (the session's end closes each stream).
  closing_ = true;
  for (auto& [id, task] : tasks_) {
    task->stream_ = nullptr;
    if (task->exchange.active()) task->exchange.cancel();
    conn_->loop()->release_after_round(task);
  }
  tasks_.clear();
}

void Http2Connection::close_if_idle() {
  session_.shutdown();
  flush();
}

void Http2Connection::flush() {
  if (flushing_ || conn_ == nullptr || !conn_->connected()) return;
  flushing_ = true;
  // Again while frames are made: a drain callback inside send() may queue more.
  while (conn_->pending_output_bytes() < kOutputHighWater && session_.wants_to_send()) {
    net::Buffer& out = conn_->output_tail_buffer();
    const size_t before = out.readable_bytes();
    session_.send(out);
    const bool made = out.readable_bytes() != before;
    conn_->flush();
    if (!made) break;
  }
  // More to make once the client takes what is queued.
  if (conn_->pending_output_bytes() >= kOutputHighWater) conn_->ask_write_complete();
  flushing_ = false;
  if ((closing_ || session_.done()) && conn_->pending_output_bytes() == 0) {
    conn_->force_close();
  } else if (closing_ || session_.done()) {
    conn_->close_after_write();
  }
}

http::ResponseWriter::Context Http2Connection::writer_context(Stream& stream) const {
  http::ResponseWriter::Context context;
  context.stream = &stream;
  context.head_only = stream.request().method() == http::Method::kHead;
  context.keep_alive = true;
  const http::HttpShared::Clock clock = shared_->clock();
  context.date = clock.date;
  context.ok_head = clock.ok_head;
  context.server = shared_->server_name;
  return context;
}

// A request head: the chain is asked which handler answers it, and how
// (as HttpConnection::start_request does for HTTP/1).
void Http2Connection::on_request(Stream& stream) {
  auto made = std::make_shared<Task>(this, &stream);
  Task& task = *made;
  tasks_[stream.id()] = std::move(made);
  const http::Request& request = stream.request();
  const bool has_body = !stream.body_complete();
  if (request.method() != http::Method::kOther) {
    task.route.request = &request;
    task.route.peer = &conn_->peer_address();
    task.route.local = &conn_->local_address();
    task.route.secure = conn_->secure_layer();
    task.route.path = request.path();
    for (http::RequestHandler* handler : *shared_->handlers) {
      const http::Claim claim = handler->claim(task.route);
      if (claim == http::Claim::kPass || claim == http::Claim::kRedirect) continue;
      task.handler = handler;
      task.claim = claim;
      break;
    }
  }
  task.max_body = task.route.max_body.value_or(shared_->limits->max_body_bytes);
  if (has_body && request.body_framing() == http::BodyFraming::kContentLength &&
      request.content_length() > task.max_body) {
    http::ResponseWriter writer(writer_context(stream));
    http::write_error_page(writer, 413);
    return flush();
  }
  if (task.claim == http::Claim::kExchange) return begin_exchange(task, has_body);
  if (task.claim == http::Claim::kRespondWithBody && has_body) {
    task.gathering = true;  // dispatched once the body is in (on_body)
    return;
  }
  dispatch(task);  // a body behind it is dropped as it arrives
}

void Http2Connection::dispatch(Task& task) {
  Stream& stream = *task.stream_;
  http::Request& request = stream.request();
  if (task.gathering) request.set_body(task.body);
  http::ResponseWriter writer(writer_context(stream));
  if (request.method() == http::Method::kOther) {
    http::write_error_page(writer, 501);
  } else if (task.handler == nullptr) {
    http::write_error_page(writer, 404);
  } else {
    task.handler->respond(task.route, writer);
  }
  if (!writer.finished()) {
    TERN_LOG_ERROR("conn {} stream {}: handler for {} {} did not finish its response", conn_->id().slot,
                   stream.id(), request.method_text(), request.target());
    if (!writer.started()) {
      http::write_error_page(writer, 500);
    } else {
      stream.reset(NGHTTP2_INTERNAL_ERROR);
    }
  }
  if (shared_->on_response) shared_->on_response(request, *conn_, writer);
  request.set_body({});
  task.gathering = false;
  task.body.clear();
  flush();
}

void Http2Connection::begin_exchange(Task& task, bool has_body) {
  Stream& stream = *task.stream_;
  task.exchange.begin(&task, &stream.request(), writer_context(stream), has_body);
  task.handler->start(task.route, task.exchange);
  flush();
}

void Http2Connection::on_body(Stream& stream, std::string_view piece, bool last) {
  auto it = tasks_.find(stream.id());
  if (it == tasks_.end()) return;
  Task& task = *it->second;
  if (task.exchange.active()) {
    task.received += piece.size();
    if (task.received > task.max_body) {
      // Past the body limit with no length announced: 413 if nothing was
      // answered yet, else the stream ends here.
      const bool answered = task.exchange.response().started();
      task.exchange.cancel();
      if (answered) {
        stream.reset(NGHTTP2_CANCEL);
      } else {
        http::ResponseWriter writer(writer_context(stream));
        http::write_error_page(writer, 413);
      }
      return flush();
    }
    task.exchange.deliver(piece, last);
    return flush();
  }
  if (!task.gathering) return;  // answered from the head: dropped
  if (task.body.size() + piece.size() > task.max_body) {
    task.gathering = false;
    task.body.clear();
    http::ResponseWriter writer(writer_context(stream));
    http::write_error_page(writer, 413);
    return flush();
  }
  task.body.append(piece);
  if (last) dispatch(task);
}

void Http2Connection::on_drained(Stream& stream) {
  auto it = tasks_.find(stream.id());
  if (it == tasks_.end() || !it->second->wait_drain_) return;
  it->second->wait_drain_ = false;
  if (it->second->exchange.active()) it->second->exchange.drained();
}

void Http2Connection::on_stream_close(Stream& stream) {
  auto it = tasks_.find(stream.id());
  if (it == tasks_.end()) return;
  std::shared_ptr<Task> task = std::move(it->second);
  tasks_.erase(it);
  task->stream_ = nullptr;
  // Reset by the client before the answer was complete: the handler lets go.
  if (task->exchange.active()) task->exchange.cancel();
  conn_->loop()->release_after_round(std::move(task));
}

http::ProtocolFactory http2_protocol(SessionLimits limits) {
  return [limits](const http::HttpShared* shared, net::TcpConnection* conn) {
    SessionLimits mine = limits;
    mine.parser = shared->limits->parser;
    return std::make_unique<Http2Connection>(shared, conn, mine);
  };
}

}  // namespace tern::http2
