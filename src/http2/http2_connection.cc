#include "http2/http2_connection.h"


#include <algorithm>
#include <string>

#include "base/log.h"
#include "http/dispatch.h"
#include "http/error_page.h"
#include "http/exchange.h"
#include "http/handler.h"
#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/loop_local.h"
#include "net/tcp_connection.h"

namespace tern::http2 {

// One stream's request on its way through the handler chain, and the
// transport of its exchange. Outlives its stream until the read that closed
// it is through, or the end of the round (the stream may close while one of
// its methods runs): see retire().
class Http2Connection::Task final : public http::ExchangeTransport {
 public:
  Task(Http2Connection* owner, Stream* stream) : owner_(owner), stream_(stream) {}

  // ExchangeTransport.
  net::EventLoop* loop() const override { return owner_->conn_->loop(); }
  const net::InetAddress& peer_address() const override { return owner_->conn_->peer_address(); }
  const net::InetAddress& connection_client() const override { return owner_->conn_->client_address(); }
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

  // As new, for another stream (a task retired whole, its exchange over).
  void recycle() {
    route = http::Route{};
    dispatch = {};
    max_body = 0;
    received = 0;
    body.clear();
    gathering = false;
    wait_drain_ = false;
  }

  Http2Connection* owner_;
  Stream* stream_;  // null once the stream closed
  http::Route route;
  http::Dispatch dispatch;
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
    TERN_LOG_ERROR("conn {} stream {}: exchange for {} {} finished without a complete response (request {})",
                   owner_->conn_->id().slot, stream_->id(), exchange.request().method_text(),
                   exchange.request().target(), exchange.request().id());
    if (!writer.started()) {
      http::write_error_page(writer, 500);
    } else {
      stream_->reset(ErrorCode::kInternalError);
    }
  }
  if (owner_->shared_->on_response) owner_->shared_->on_response(exchange.request(), *owner_->conn_, writer);
  exchange.end();
  owner_->flush();
}

void Http2Connection::Task::abort_exchange() {
  // Logged as it stands; what was written goes out, and the stream ends
  // unfinished.
  if (owner_->shared_->on_response) owner_->shared_->on_response(exchange.request(), *owner_->conn_, exchange.response());
  exchange.end();
  if (stream_ != nullptr) stream_->reset(ErrorCode::kInternalError);
  owner_->flush();
}

struct Http2Connection::LoopSpares {
  static constexpr size_t kTasks = StreamSpares::kStreams;
  std::shared_ptr<StreamSpares> streams = std::make_shared<StreamSpares>();
  // Tasks retired whole (their strings keep their room).
  std::vector<std::shared_ptr<Task>> tasks;
};

// ---- Http2Connection ----

Http2Connection::Http2Connection(const http::HttpShared* shared, net::TcpConnection* conn,
                                 const SessionLimits& limits, std::shared_ptr<LoopSpares> spares)
    : HttpConnection(/*http1=*/false),
      shared_(shared),
      conn_(conn),
      timeout_(&Http2Connection::timed_out, this),
      spares_(spares != nullptr ? std::move(spares) : std::make_shared<LoopSpares>()),
      tasks_(),
      session_(limits, Session::Callbacks{
                           .on_request = [this](Stream& stream) { on_request(stream); },
                           .on_body = [this](Stream& stream, std::string_view piece,
                                             bool last) { on_body(stream, piece, last); },
                           .on_drained = [this](Stream& stream) { on_drained(stream); },
                           .on_close = [this](Stream& stream) { on_stream_close(stream); },
                       },
               spares_->streams),
      last_active_(conn->loop()->clock().now()) {
  timeout_.arm(on_timer());
}

void Http2Connection::timed_out(void* self) {
  auto* connection = static_cast<Http2Connection*>(self);
  connection->timeout_.arm(connection->on_timer());
}

Http2Connection::~Http2Connection() = default;

void Http2Connection::on_message(net::Buffer& input) {
  if (lingering_) return input.retrieve_all();  // after our GOAWAY: read and dropped
  // Responses made while the input is read (every stream a read brought)
  // leave together, in one write, after it.
  in_message_ = in_entry_ = true;
  const bool ok = session_.receive(input.view());
  in_message_ = false;
  input.retrieve_all();
  if ((!ok || !session_.error().empty()) && !closing_) {
    // A protocol error or abuse: the GOAWAY that says so goes out, then
    // the connection ends.
    TERN_LOG_INFO("conn {} from {}: HTTP/2: {}; closing", conn_->id().slot, conn_->peer_address().to_ip(),
                  session_.error());
    closing_ = true;
  }
  flush();
  leave_entry();
}

void Http2Connection::on_write_complete() {
  in_entry_ = true;
  flush();
  leave_entry();
}

void Http2Connection::retire(std::shared_ptr<Task> task) {
  task->stream_ = nullptr;
  if (in_entry_) {
    retired_.push_back(std::move(task));
  } else {
    conn_->loop()->release_after_round(std::move(task));
  }
}

void Http2Connection::leave_entry() {
  in_entry_ = false;
  // Tasks nothing else holds any more are kept for the next streams.
  for (std::shared_ptr<Task>& task : retired_) {
    if (spares_->tasks.size() >= LoopSpares::kTasks) break;
    if (task.use_count() != 1 || task->exchange.active()) continue;
    task->recycle();
    spares_->tasks.push_back(std::move(task));
  }
  retired_.clear();
  // No more room kept than the next read is likely to need.
  if (retired_.capacity() > kKeptTasks) std::vector<std::shared_ptr<Task>>().swap(retired_);
}

void Http2Connection::on_close() {
  // The streams in progress end with the connection: their exchanges are
  // told (the session's end closes each stream).
  timeout_.cancel();
  closing_ = true;
  for (auto& [id, task] : tasks_) {
    task->stream_ = nullptr;
    if (task->exchange.active()) {
      log_unfinished(*task, true);
      task->exchange.cancel();
    }
    conn_->loop()->release_after_round(task);
  }
  tasks_.clear();
}

void Http2Connection::log_unfinished(Task& task, bool client_closed) {
  if (client_closed) task.exchange.response().client_closed();
  if (shared_->on_response) shared_->on_response(task.exchange.request(), *conn_, task.exchange.response());
}

http::HttpConnection::Phase Http2Connection::phase() const {
  // A stream in progress or a response on its way: answering.
  const bool busy = session_.open_streams() > 0 || !tasks_.empty() || conn_->pending_output_bytes() > 0;
  return busy ? Phase::kWriting : Phase::kIdle;
}

void Http2Connection::close_if_idle() {
  session_.shutdown();
  flush();
}

std::chrono::milliseconds Http2Connection::on_timer() {
  using std::chrono::milliseconds;
  const http::HttpLimits& limits = *shared_->limits;
  const auto now = conn_->loop()->clock().now();
  const bool data_out = session_.data_sent() != data_sent_mark_;
  const bool data_in = session_.data_received() != data_received_mark_;
  const bool bytes_out = conn_->bytes_sent() != bytes_sent_mark_;
  if (lingering_) {
    const auto lingered = std::chrono::duration_cast<milliseconds>(now - linger_since_);
    if (lingered < limits.linger_timeout) return limits.linger_timeout - lingered;
    conn_->force_close();
    return limits.linger_timeout;
  }
  data_sent_mark_ = session_.data_sent();
  data_received_mark_ = session_.data_received();
  bytes_sent_mark_ = conn_->bytes_sent();
  // How long something has waited without progress, from the first tick
  // that saw it wait.
  // Often enough for either timeout to be kept within half its length.
  const milliseconds tick = std::max(milliseconds(100), std::min(limits.send_timeout, limits.body_timeout) / 2);
  auto stalled = [now](std::optional<Clock::time_point>& since, bool waiting, bool progressed) {
    if (!waiting || progressed) {
      since.reset();
      return milliseconds(0);
    }
    if (!since) since = now;
    return std::chrono::duration_cast<milliseconds>(now - *since);
  };

  if (tasks_.empty() && session_.open_streams() == 0 && conn_->pending_output_bytes() == 0) {
    send_stall_since_.reset();
    body_stall_since_.reset();
    session_.release_spares();
    // Keep-alive: no stream for the whole time (PINGs do not count) ends
    // the connection gracefully (GOAWAY).
    const auto idle = std::chrono::duration_cast<milliseconds>(now - last_active_);
    if (idle >= limits.keepalive_timeout) {
      close_if_idle();
      return limits.linger_timeout;
    }
    return std::min(limits.keepalive_timeout - idle, tick);
  }
  // Responses waiting on the client: it must take body bytes (a client
  // that keeps its windows shut holds its streams, and their producers,
  // only this long); with nothing queued but frames in the socket's queue,
  // any bytes.
  const size_t queued = session_.queued_bytes();
  const bool sending = queued > 0 || conn_->pending_output_bytes() > 0;
  if (stalled(send_stall_since_, sending, data_out || (queued == 0 && bytes_out)) >= limits.send_timeout) {
    TERN_LOG_DEBUG("conn {}: HTTP/2 send timeout, {} stream(s) open", conn_->id().slot, session_.open_streams());
    conn_->force_close();
    return limits.send_timeout;
  }
  // Request bodies that stopped coming: those streams end (408 when no
  // answer has begun), the others go on.
  std::vector<std::shared_ptr<Task>> waiting;
  for (const auto& [id, task] : tasks_) {
    const Stream* stream = task->stream_;
    if (stream != nullptr && !stream->body_complete() && !stream->body_paused()) waiting.push_back(task);
  }
  if (stalled(body_stall_since_, !waiting.empty(), data_in) >= limits.body_timeout) {
    body_stall_since_.reset();
    for (const std::shared_ptr<Task>& task : waiting) {
      if (task->stream_ == nullptr) continue;
      TERN_LOG_DEBUG("conn {} stream {}: body timeout", conn_->id().slot, task->stream_->id());
      if (task->stream_->response_sent()) {
        task->stream_->reset(ErrorCode::kNoError);  // answered already: the rest is not wanted
        continue;
      }
      const bool started = task->exchange.active() && task->exchange.response().started();
      task->gathering = false;
      if (task->exchange.active()) task->exchange.cancel();
      if (task->stream_ == nullptr) continue;
      if (started) {
        task->stream_->reset(ErrorCode::kCancel);
      } else {
        task->stream_->reset_after_response();
        http::ResponseWriter writer(writer_context(*task->stream_));
        http::write_error_page(writer, 408);
      }
    }
    flush();
  }
  return tick;
}

void Http2Connection::flush() {
  if (in_message_ || flushing_ || conn_ == nullptr || !conn_->connected()) return;
  flushing_ = true;
  // Again while frames are made: a drain callback inside send() may queue more.
  while (conn_->pending_output_bytes() < kOutputHighWater && session_.wants_to_send()) {
    net::Buffer& out = conn_->output_tail_buffer();
    const size_t before = out.readable_bytes();
    // No more than the room left under the mark: what waits here for a
    // client that does not read is bounded by it, not by it and a step.
    session_.send(out, std::min(kSendStep, kOutputHighWater - conn_->pending_output_bytes()));
    const bool made = out.readable_bytes() != before;
    conn_->flush();
    if (!made) break;
  }
  // More to make once the client takes what is queued.
  if (conn_->pending_output_bytes() >= kOutputHighWater) conn_->ask_write_complete();
  flushing_ = false;
  if ((closing_ || session_.done()) && !lingering_) {
    // The GOAWAY goes out, then our side closes; what the client sent
    // after it is read and dropped until it closes too (or linger_timeout),
    // since closing with bytes unread would reset the connection, and the
    // GOAWAY with it, in the client's buffer.
    lingering_ = true;
    linger_since_ = conn_->loop()->clock().now();
    conn_->shutdown();
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
// (as Http1Connection::start_request does for HTTP/1).
void Http2Connection::on_request(Stream& stream) {
  last_active_ = conn_->loop()->clock().now();
  std::shared_ptr<Task> made;
  if (spares_->tasks.empty()) {
    made = std::make_shared<Task>(this, &stream);
  } else {
    made = std::move(spares_->tasks.back());
    spares_->tasks.pop_back();
    made->owner_ = this;
    made->stream_ = &stream;
  }
  Task& task = *made;
  tasks_.add(stream.id(), std::move(made));
  const http::Request& request = stream.request();
  request.set_client_address(conn_->client_address());
  const bool has_body = !stream.body_complete();
  task.dispatch = http::choose_handler(*shared_->handlers, request, *conn_, &task.route);
  task.max_body = task.route.max_body.value_or(shared_->limits->max_body_bytes);
  if (has_body && request.body_framing() == http::BodyFraming::kContentLength &&
      request.content_length() > task.max_body) {
    stream.reset_after_response();  // the body is not wanted
    http::ResponseWriter writer(writer_context(stream));
    http::write_error_page(writer, 413);
    return flush();
  }
  if (task.dispatch.claim == http::Claim::kExchange) return begin_exchange(task, has_body);
  if (task.dispatch.claim == http::Claim::kRespondWithBody && has_body) {
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
  if (!http::answer(task.dispatch, task.route, request, writer, conn_->id().slot, stream.id())) {
    stream.reset(ErrorCode::kInternalError);
  }
  if (shared_->on_response) shared_->on_response(request, *conn_, writer);
  request.set_body({});
  task.gathering = false;
  task.body.clear();
  flush();
  // Answered, and the request is whole: what is left of the stream is its
  // response on its way, which needs neither the task nor the request.
  if (task.stream_ != nullptr && task.stream_->body_complete()) {
    task.stream_->release_request();
    auto it = tasks_.find(task.stream_->id());
    if (it != tasks_.end()) {
      std::shared_ptr<Task> done = std::move(it->second);
      tasks_.erase(it);
      retire(std::move(done));
    }
  }
}

void Http2Connection::begin_exchange(Task& task, bool has_body) {
  Stream& stream = *task.stream_;
  task.exchange.begin(&task, &stream.request(), writer_context(stream), has_body);
  task.dispatch.handler->start(task.route, task.exchange);
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
        stream.reset(ErrorCode::kCancel);
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
    stream.reset_after_response();  // the body is not wanted
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
  last_active_ = conn_->loop()->clock().now();
  task->stream_ = nullptr;
  if (task->exchange.active()) {
    // A response that went out whole while its handler still ran (a
    // HEAD's, ended with its head while the handler reads the body it
    // would have had) is logged as answered, and a stream the client reset
    // before the answer was whole as it stands; then the handler lets go.
    log_unfinished(*task, !stream.response_sent());
    task->exchange.cancel();
  }
  retire(std::move(task));
}

http::Protocol http2_protocol(SessionLimits limits) {
  // One LoopSpares per loop, made by the first connection there; each
  // connection holds it too, so that it outlives them whatever order the
  // server lets go of its parts in.
  auto spares = std::make_shared<net::LoopLocal<std::shared_ptr<Http2Connection::LoopSpares>>>();
  auto make = [limits, spares](const http::HttpShared* shared,
                               net::TcpConnection* conn) -> std::unique_ptr<http::HttpConnection> {
    SessionLimits mine = limits;
    mine.parser = shared->limits->parser;
    std::shared_ptr<Http2Connection::LoopSpares>* loop_spares = spares->get(conn->loop());
    if (loop_spares == nullptr) {
      loop_spares = &spares->emplace(conn->loop(), std::make_shared<Http2Connection::LoopSpares>());
    }
    return std::make_unique<Http2Connection>(shared, conn, mine, *loop_spares);
  };
  return {std::move(make), kClientPreface};
}

}  // namespace tern::http2
