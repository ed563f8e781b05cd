#include "upstream/health_check.h"

#include "base/log.h"
#include "http1/response_parser.h"
#include "net/buffer.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::upstream {

// One server's probes: at most one in flight.
class HealthCheck::Probe final : private net::ConnectionPool::User {
 public:
  Probe(HealthCheck* owner, size_t index, const GroupServer& server)
      : owner_(owner), index_(index), label_(owner->name_ + " " + server.address.to_string()) {
    net::ConnectionPoolOptions options;
    options.address = server.address;
    options.secure = server.secure;
    options.proxy_protocol = server.proxy_protocol;  // the probes' headers say LOCAL
    options.name = label_ + " health check";
    options.max_connections = 1;
    options.max_waiting = 1;
    options.connect_timeout = owner->options_.timeout;
    options.queue_timeout = owner->options_.timeout;
    pool_ = std::make_unique<net::ConnectionPool>(owner->loop_, options);
    const HealthOptions& o = owner->options_;
    request_ = "GET " + o.path + " HTTP/1.1\r\nHost: " + (o.host.empty() ? server.address.to_string() : o.host) +
               "\r\nUser-Agent: tern-health-check\r\nConnection: close\r\n\r\n";
  }
  ~Probe() override { stop(); }

  void run() {
    if (in_flight_) return;
    in_flight_ = true;
    parser_.reset();
    pool_->acquire(this);
  }

  void stop() {
    cancel_timer();
    if (in_flight_) pool_->cancel(this);
    in_flight_ = false;
    pool_->close();
  }

 private:
  void on_lease(net::TcpConnection& conn) override {
    conn_ = &conn;
    if (!conn.is_reading()) conn.start_reading();
    conn.send(request_);
    timer_ = owner_->loop_->run_after(owner_->options_.timeout, [this] {
      timer_ = net::TimerId{};
      verdict(false, "no response in time");
      pool_->cancel(this);
    });
  }
  void on_lease_failed(net::ConnectionPool::Failure, std::string_view why) override {
    verdict(false, std::string(why));
  }
  void on_upstream_message(net::TcpConnection&, net::Buffer& input) override {
    http::ResponseHead head;
    switch (parser_.parse(input.view(), false, &head)) {
      case http::ParseStatus::kNeedMore:
        return;
      case http::ParseStatus::kError:
        input.retrieve_all();
        verdict(false, "bad response: " + std::string(parser_.error_reason()));
        return pool_->cancel(this);
      case http::ParseStatus::kComplete:
        break;
    }
    input.retrieve_all();
    const HealthOptions& o = owner_->options_;
    const bool passed = head.status >= o.status_min && head.status <= o.status_max;
    verdict(passed, "status " + std::to_string(head.status));
    pool_->cancel(this);  // the connection closes: the body does not matter
  }
  void on_upstream_drained(net::TcpConnection&) override {}
  void on_upstream_closed(net::TcpConnection&) override {
    conn_ = nullptr;
    if (in_flight_) verdict(false, "closed before a response");
  }

  void cancel_timer() {
    if (timer_.valid()) owner_->loop_->cancel(timer_);
    timer_ = net::TimerId{};
  }

  void verdict(bool passed, const std::string& why) {
    if (!in_flight_) return;
    in_flight_ = false;
    conn_ = nullptr;
    cancel_timer();
    const HealthOptions& o = owner_->options_;
    std::atomic<bool>& up = owner_->up_[index_];
    if (passed) {
      failures_ = 0;
      if (!up.load(std::memory_order_relaxed) && ++passes_ >= o.rise) {
        up.store(true, std::memory_order_relaxed);
        TERN_LOG_WARN("{}: health check passed {} time(s) in a row ({}): marked up", label_, passes_, why);
      }
      return;
    }
    passes_ = 0;
    if (up.load(std::memory_order_relaxed) && ++failures_ >= o.fall) {
      up.store(false, std::memory_order_relaxed);
      TERN_LOG_ERROR("{}: health check failed {} time(s) in a row ({}): marked down", label_, failures_, why);
    } else if (up.load(std::memory_order_relaxed)) {
      TERN_LOG_DEBUG("{}: health check failed ({})", label_, why);
    }
  }

  HealthCheck* owner_;
  size_t index_;
  std::string label_;
  std::string request_;
  std::unique_ptr<net::ConnectionPool> pool_;
  http::ResponseParser parser_;
  net::TcpConnection* conn_ = nullptr;
  net::TimerId timer_;
  unsigned passes_ = 0;
  unsigned failures_ = 0;
  bool in_flight_ = false;
};

HealthCheck::HealthCheck(net::EventLoop* loop, std::string name, const std::vector<GroupServer>& servers,
                         HealthOptions options)
    : loop_(loop),
      name_(std::move(name)),
      options_(std::move(options)),
      up_(new std::atomic<bool>[servers.size()]) {
  for (size_t i = 0; i < servers.size(); ++i) {
    up_[i].store(true, std::memory_order_relaxed);
    probes_.push_back(std::make_unique<Probe>(this, i, servers[i]));
  }
}

HealthCheck::~HealthCheck() { stop(); }

void HealthCheck::start() {
  for (auto& probe : probes_) probe->run();
  timer_ = loop_->run_every(options_.interval, [this] {
    for (auto& probe : probes_) probe->run();
  });
}

void HealthCheck::stop() {
  if (timer_.valid()) loop_->cancel(timer_);
  timer_ = net::TimerId{};
  for (auto& probe : probes_) probe->stop();
}

}  // namespace tern::upstream
