#include "http/http_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <vector>

#include "http/http_date.h"
#include "http1/http1_connection.h"
#include "http1/http1_output.h"
#include "net/buffer.h"
#include "net/connection_table.h"
#include "net/event_loop.h"
#include "net/secure_layer.h"
#include "net/tcp_connection.h"

namespace tern::http {
namespace {

constexpr size_t kMaxPooled = 1024;
// What the pool keeps once a burst of connections is over: more, scattered
// through the heap among what the burst allocated, would pin its pages.
constexpr size_t kKeptAfterBurst = 64;

}  // namespace

// Per I/O loop; touched only on that loop's thread once serving.
struct HttpServer::LoopContext {
  net::EventLoop* loop = nullptr;
  HttpLimits limits;  // this loop's copy; set_limits() replaces it on the loop
  RequestStatePool states;
  HttpShared shared;
  // Every open connection of this loop, HTTP/1 and HTTP/2. Each knows its
  // index, so closing takes it out in O(1).
  std::vector<std::unique_ptr<HttpConnection>> live;
  // Closed HTTP/1 connections kept for the next ones.
  std::vector<std::unique_ptr<Http1Connection>> pool;
  int64_t date_second = -1;
  char date[kHttpDateSize] = {};
  net::Buffer ok_head{256};  // refilled each second without allocating
  // The live connections by phase, counted once a second while asked
  // (count_connection_phases).
  net::TimerId sampler;
  std::atomic<uint32_t> reading{0};
  std::atomic<uint32_t> writing{0};
  std::atomic<uint32_t> idle{0};

  // A connection that closed, or that another protocol's took the place
  // of, kept for the next one if it is HTTP/1 and the pool has room.
  void keep_spare(std::unique_ptr<HttpConnection> http) {
    if (http->http1() && pool.size() < kMaxPooled) pool.emplace_back(static_cast<Http1Connection*>(http.release()));
  }

  void sample_phases() {
    uint32_t counts[3] = {};
    for (const auto& connection : live) ++counts[static_cast<size_t>(connection->phase())];
    idle.store(counts[static_cast<size_t>(HttpConnection::Phase::kIdle)], std::memory_order_relaxed);
    reading.store(counts[static_cast<size_t>(HttpConnection::Phase::kReading)], std::memory_order_relaxed);
    writing.store(counts[static_cast<size_t>(HttpConnection::Phase::kWriting)], std::memory_order_relaxed);
  }

  HttpShared::Clock current_clock() {
    int64_t now = loop->clock().wall_seconds();
    if (now != date_second) {
      date_second = now;
      format_http_date(static_cast<time_t>(now), std::span<char, kHttpDateSize>(date, kHttpDateSize));
      ok_head.retrieve_all();
      Http1Output::append_start(ok_head, 200, {}, shared.server_name,
                                std::string_view(date, kHttpDateSize));
    }
    return {std::string_view(date, kHttpDateSize), ok_head.view()};
  }
};

HttpServer::HttpServer(net::EventLoop* loop, const net::InetAddress& address,
                       HttpServerOptions options)
    : HttpServer(loop, std::vector<net::InetAddress>{address}, std::move(options)) {}

HttpServer::HttpServer(net::EventLoop* loop, std::vector<net::InetAddress> addresses,
                       HttpServerOptions options)
    : options_(std::move(options)), tcp_(loop, std::move(addresses), options_.tcp) {}

HttpServer::~HttpServer() {
  // The handlers close what they keep on each loop (upstream connections),
  // on that loop, before the connections and the loops go.
  std::vector<net::EventLoop*> loops;
  contexts_.for_each([&loops](net::EventLoop* loop, LoopContext&) { loops.push_back(loop); });
  std::latch closed(static_cast<std::ptrdiff_t>(loops.size()));
  for (net::EventLoop* loop : loops) {
    auto close = [this, loop, &closed] {
      for (RequestHandler* handler : handlers_) handler->close_loop(loop);
      closed.count_down();
    };
    if (loop->is_in_loop_thread()) {
      close();
    } else {
      loop->run_in_loop(close);
    }
  }
  closed.wait();
  // A loop that outlives the server (the base loop serving as the only I/O
  // loop) must not ring for a context that goes with it; the others stop
  // with their threads, below.
  contexts_.for_each([](net::EventLoop* loop, LoopContext& context) {
    if (loop->is_in_loop_thread()) {
      loop->cancel(context.sampler);
      loop->connections().remove_burst_listener(&context);
    }
  });
}

Result<void> HttpServer::start() {
  tcp_.set_thread_init_callback([this](net::EventLoop* loop) {
    LoopContext* context = &contexts_.emplace(loop);
    context->loop = loop;
    context->limits = options_.limits;
    context->shared.limits = &context->limits;
    context->shared.states = &context->states;
    context->shared.server_name = options_.server_name;
    context->shared.handlers = &handlers_;
    context->shared.on_response = on_response_;
    context->shared.clock = [context] { return context->current_clock(); };
    context->sampler = loop->run_every(std::chrono::seconds(1), [this, context] {
      if (count_phases_.load(std::memory_order_relaxed)) context->sample_phases();
    });
    // The spare connections and request states a burst left (as many as it
    // had at once) go when it is over, not at the next request's period check.
    loop->connections().add_burst_listener(context, [context] {
      context->states.trim();
      if (context->pool.size() > kKeptAfterBurst) context->pool.resize(kKeptAfterBurst);
    });
    if (thread_init_) thread_init_(loop);
  });
  tcp_.set_connection_callback([this](net::TcpConnection& conn) { on_connection(conn); });
  tcp_.set_message_callback([this](net::TcpConnection& conn, net::Buffer& input) {
    auto* http = std::any_cast<HttpConnection*>(conn.context());
    if (http->may_switch()) [[unlikely]] {
      http = choose_protocol(conn, input);
      if (http == nullptr) return;
    }
    http->on_message(input);
  });
  // Exchanges ask for it when they wait for a slow client, and the
  // graceful stop; nothing else.
  tcp_.set_write_complete_callback(
      [](net::TcpConnection& conn) { std::any_cast<HttpConnection*>(conn.context())->on_write_complete(); },
      /*only_when_asked=*/true);
  return tcp_.start();
}

bool HttpServer::takes_h2c(const net::TcpConnection& conn) const {
  return conn.secure_layer() == nullptr && options_.http2_cleartext &&
         options_.http2_cleartext(conn.local_address());
}

void HttpServer::on_connection(net::TcpConnection& conn) {
  LoopContext* context = contexts_.get(conn.loop());
  auto& live = context->live;
  if (conn.connected()) {
    // HTTP/1 until the first bytes say otherwise (choose_protocol).
    std::unique_ptr<Http1Connection> http1;
    if (context->pool.empty()) {
      http1 = std::make_unique<Http1Connection>(&context->shared);
    } else {
      http1 = std::move(context->pool.back());
      context->pool.pop_back();
    }
    const bool h2c = takes_h2c(conn);
    http1->attach(&conn, h2c);
    http1->set_may_switch(options_.http2.make && (h2c || conn.secure_layer() != nullptr));
    http1->set_index(live.size());
    conn.context() = static_cast<HttpConnection*>(http1.get());
    live.push_back(std::move(http1));
    return;
  }
  auto* http = std::any_cast<HttpConnection*>(conn.context());
  http->on_close();
  conn.context().reset();
  release(*context, http->index());
}

void HttpServer::release(LoopContext& context, size_t index) {
  // The last live one takes its place; the pool keeps at most kMaxPooled
  // HTTP/1 spares.
  std::unique_ptr<HttpConnection> http = std::move(context.live[index]);
  if (index + 1 != context.live.size()) {
    context.live[index] = std::move(context.live.back());
    context.live[index]->set_index(index);
  }
  context.live.pop_back();
  context.keep_spare(std::move(http));
}

HttpConnection* HttpServer::choose_protocol(net::TcpConnection& conn, net::Buffer& input) {
  auto* http1 = std::any_cast<HttpConnection*>(conn.context());
  bool http2 = false;
  if (const net::SecureLayer* tls = conn.secure_layer(); tls != nullptr) {
    http2 = tls->application_protocol() == "h2";
  } else {
    // h2c by prior knowledge: the preface, whole, before anything else.
    const std::string_view preface = options_.http2.preface;
    const std::string_view start = input.view().substr(0, preface.size());
    if (!preface.starts_with(start)) {
      http2 = false;
    } else if (start.size() < preface.size()) {
      return nullptr;  // the preface so far: wait for the rest
    } else {
      http2 = true;
    }
  }
  http1->set_may_switch(false);
  if (!http2) return http1;
  // The HTTP/1 connection has seen nothing yet: it lets go of conn and goes
  // back to the pool, and HTTP/2 takes its place in the table.
  LoopContext* context = contexts_.get(conn.loop());
  const size_t index = http1->index();
  http1->on_close();
  std::unique_ptr<HttpConnection> http = options_.http2.make(&context->shared, &conn);
  http->set_index(index);
  std::swap(context->live[index], http);
  context->keep_spare(std::move(http));
  conn.context() = context->live[index].get();
  return context->live[index].get();
}

void HttpServer::set_limits(const HttpLimits& limits) {
  for (net::EventLoop* loop : tcp_.io_loops()) {
    loop->run_in_loop([this, loop, limits] { contexts_.get(loop)->limits = limits; });
  }
}

HttpServer::ConnectionStates HttpServer::connection_states() const {
  ConnectionStates states;
  contexts_.for_each([&states](net::EventLoop*, const LoopContext& context) {
    states.reading += context.reading.load(std::memory_order_relaxed);
    states.writing += context.writing.load(std::memory_order_relaxed);
    states.idle += context.idle.load(std::memory_order_relaxed);
  });
  states.open = states.reading + states.writing + states.idle;
  return states;
}

void HttpServer::drain() {
  for (net::EventLoop* loop : tcp_.io_loops()) {
    loop->run_in_loop([this, loop] {
      LoopContext* context = contexts_.get(loop);
      context->shared.draining = true;
      // close_if_idle() closes nothing at once (an HTTP/1 connection gets a
      // timer, an HTTP/2 one a GOAWAY): the set of live connections does not
      // change while we walk it.
      for (const auto& connection : context->live) connection->close_if_idle();
    });
  }
}

}  // namespace tern::http
