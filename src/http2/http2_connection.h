// Http2Connection: HTTP/2 on one TcpConnection, the sibling of
// Http1Connection (http/http_connection.h). HttpServer chooses it when TLS
// agreed on "h2" (ALPN), or when the first bytes of a plain connection are
// the HTTP/2 preface and the server allows it (h2c by prior knowledge).
// Each stream's request goes through the server's handler chain
// (http/dispatch.h) as an HTTP/1 request does in Http1Connection: the
// handlers claim it, a Router handler answers from the head (or once the
// body is in, within the body limit), an exchange streams its body and
// answers when it can; each stream is the exchange's transport, so
// FastCGI, the proxy and the users app run unchanged.
//
// Output: the session's frames go into the connection's output; while the
// client has not taken kOutputHighWater of them, no more are made (a slow
// client holds its streams' producers back through their drain callbacks,
// not memory here).
//
// Timeouts, on one timer (on_timer): keep-alive idle time without a stream
// (GOAWAY), progress of queued output (send_timeout) and of request bodies
// (body_timeout, per stream), the linger after our GOAWAY.
//
// Owned by HttpServer's table of the loop's connections; loop thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <algorithm>
#include <utility>
#include <vector>

#include "http/http_connection.h"
#include "http/response_writer.h"
#include "http2/session.h"
#include "net/timeout.h"

namespace tern::http2 {

class Http2Connection final : public http::HttpConnection {
 public:
  // What the HTTP/2 connections of a loop share (http2_protocol makes one
  // per loop): the streams they closed and the tasks they finished, kept
  // for the next ones of any of them, the last one first, still in cache.
  struct LoopSpares;
  // `spares`: the loop's (a connection of its own when none is given).
  Http2Connection(const http::HttpShared* shared, net::TcpConnection* conn, const SessionLimits& limits,
                  std::shared_ptr<LoopSpares> spares = nullptr);
  ~Http2Connection() override;

  void on_message(net::Buffer& input) override;
  void on_write_complete() override;
  void on_close() override;
  void close_if_idle() override;
  Phase phase() const override;

 private:
  class Task;
  // Frames queued for the client above which no more are made, and what
  // is made between two writes: four TLS records' worth (the frames fit a
  // step exactly, see Session::send), so that a large body costs one write
  // per 64 KiB, not per frame (a fifth more MiB per CPU-second on a 64 MiB
  // file over h2 than steps of 16 KiB); and small enough for the output
  // buffer to stay in its pool's largest size (net::BufferPool: a larger
  // one would be mapped and unmapped again with every burst). A client
  // that stops reading holds that much here.
  static constexpr size_t kOutputHighWater = 64 * 1024;
  static constexpr size_t kSendStep = 64 * 1024;
  // Room for retired tasks kept from one read to the next.
  static constexpr size_t kKeptTasks = 64;

  // Enforces the timeouts, which may close the connection; returns when
  // to look again.
  std::chrono::milliseconds on_timer();
  static void timed_out(void* self);
  void on_request(Stream& stream);
  void on_body(Stream& stream, std::string_view piece, bool last);
  void on_drained(Stream& stream);
  void on_stream_close(Stream& stream);
  // Logs the exchange of a stream that ends while its handler still runs:
  // its response went out whole (a HEAD's), or the client went first
  // (`client_closed`: 499 if nothing was answered, as nginx).
  void log_unfinished(Task& task, bool client_closed);
  // A task no longer needed: destroyed as on_message or on_write_complete
  // returns (none of its methods can be running then), else at the end of
  // the round.
  void retire(std::shared_ptr<Task> task);
  void leave_entry();
  void dispatch(Task& task);
  void begin_exchange(Task& task, bool has_body);
  http::ResponseWriter::Context writer_context(Stream& stream) const;
  // Frames into the connection's output, as far as the client takes them.
  void flush();

  const http::HttpShared* shared_;
  net::TcpConnection* conn_;
  net::Timeout timeout_;
  // The tasks by stream id: a flat list (a connection has a few to
  // max_concurrent_streams), no node allocated per stream.
  class Tasks {
   public:
    using Entry = std::pair<int32_t, std::shared_ptr<Task>>;
    using iterator = std::vector<Entry>::iterator;
    iterator begin() { return entries_.begin(); }
    iterator end() { return entries_.end(); }
    bool empty() const { return entries_.empty(); }
    iterator find(int32_t id) {
      return std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.first == id; });
    }
    void add(int32_t id, std::shared_ptr<Task> task) { entries_.emplace_back(id, std::move(task)); }
    // Order is not kept: the last entry takes the place of the one erased.
    void erase(iterator it) {
      if (it != entries_.end() - 1) *it = std::move(entries_.back());
      entries_.pop_back();
    }
    void clear() { entries_.clear(); }

   private:
    std::vector<Entry> entries_;
  };
  // The loop's closed streams and finished tasks, for the next ones.
  std::shared_ptr<LoopSpares> spares_;
  // Before the session, which ends its streams (on_stream_close) as it goes.
  Tasks tasks_;
  Session session_;
  bool flushing_ = false;
  bool in_message_ = false;  // on_message is reading the input
  // Inside on_message or on_write_complete, and the tasks retired there
  // (a rapid reset retires thousands a read: freed with it, not a round later).
  bool in_entry_ = false;
  std::vector<std::shared_ptr<Task>> retired_;
  bool closing_ = false;
  bool lingering_ = false;  // our side is closed (after the GOAWAY)
  // Progress as the timer last saw it, and when a stream last began or ended.
  uint64_t data_sent_mark_ = 0;
  uint64_t data_received_mark_ = 0;
  uint64_t bytes_sent_mark_ = 0;
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_active_;
  Clock::time_point linger_since_;
  // Since when output, or a request body, has waited for the client
  // without progress (as the timer saw it).
  std::optional<Clock::time_point> send_stall_since_;
  std::optional<Clock::time_point> body_stall_since_;
};

// What HttpServerOptions::http2 takes: HTTP/2 with these limits (the
// request head's from the server's HttpLimits).
http::Protocol http2_protocol(SessionLimits limits = {});

}  // namespace tern::http2
