#include "server/access/forward_auth.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "http/error_page.h"
#include "http/exchange.h"
#include "net/connection_pool.h"
#include "net/event_loop.h"
#include "net/secure_layer.h"
#include "net/tcp_connection.h"
#include "proxy/http_codec.h"
#include "server/chain.h"
#include "server/handlers/proxy_handler.h"
#include "upstream/call.h"
#include "upstream/group.h"

namespace tern::server {
namespace {

// The most of a denial's body (a login page, a challenge) held to relay it.
constexpr size_t kMaxRelayedBody = 64 * 1024;

// A denial, a challenge or a redirect (to a login page): what the client
// gets as the service sent it. Not 304: a check's "not modified" would
// tell the client its copy of the guarded page is still good.
bool relayed_status(int status) {
  switch (status) {
    case 301: case 302: case 303: case 307: case 308: case 401: case 403:
      return true;
    default:
      return false;
  }
}

// One request's check: the GET to the auth service, its answer read into
// memory, then the request let through, refused as the service said, or
// answered 500. Owned by the exchange.
class AuthCheck final : public http::ExchangeJob, private net::ConnectionPool::User {
 public:
  AuthCheck(const ForwardAuthHandler& handler, const Route& route, http::Exchange& exchange, upstream::Group& group);
  ~AuthCheck() override;

  void begin();

 private:
  void acquire();
  void on_lease(net::TcpConnection& conn) override;
  void on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) override;
  void on_upstream_message(net::TcpConnection& conn, net::Buffer& input) override;
  void on_upstream_drained(net::TcpConnection& /*conn*/) override {}
  void on_upstream_closed(net::TcpConnection& conn) override;
  // The answer's head: false when it already decided (a status that is a
  // failure).
  bool on_head();
  // The whole answer is in; `reusable`: its connection may serve another.
  void on_answer(bool reusable);
  void let_through();
  void relay_denial();
  void on_timeout();
  void on_client_gone();
  // The server's outcome, once per attempt.
  void settle(bool failed);
  // Lets go of the connection, or of the place in the pool's queue, and of
  // the timer; the check is over.
  void stop(bool reusable);
  // 500, and why in the log.
  void fail(std::string_view why);

  const ForwardAuthHandler& handler_;
  http::Exchange* exchange_;  // null once the client has gone
  upstream::Group& group_;
  net::EventLoop* const loop_;
  std::string target_;
  std::string original_url_;  // X-Original-URL
  std::array<http::Header, 4> added_;
  proxy::HttpCodec codec_;
  std::optional<net::ProxyHeader> proxy_client_;
  net::TimerId timer_;
  size_t server_ = 0;
  uint64_t tried_ = 0;              // servers tried, a bit each
  uint64_t attempt_began_ms_ = 0;
  bool attempt_open_ = false;       // server_ has an outcome to report
  bool waiting_ = false;            // in server_'s pool, for a connection or with one
  net::TcpConnection* upstream_ = nullptr;
  bool stale_possible_ = false;     // the connection had served other checks
  bool answered_ = false;           // bytes came back on this attempt
  bool retried_stale_ = false;
  bool done_ = false;
  // The answer.
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> relayed_fields_;  // of a denial
  std::string body_;                                                // of a denial
  std::vector<std::optional<std::string>> copied_;  // by copy_headers' index
};

AuthCheck::AuthCheck(const ForwardAuthHandler& handler, const Route& route, http::Exchange& exchange,
                     upstream::Group& group)
    : handler_(handler),
      exchange_(&exchange),
      group_(group),
      loop_(exchange.loop()),
      target_(handler.config().check->path ? *handler.config().check->path : std::string(exchange.request().uri())),
      codec_(exchange.request(),
             [&]() -> proxy::ForwardOptions {
               const http::Request& request = exchange.request();
               const bool secure = exchange.secure() != nullptr;
               original_url_ = secure ? "https://" : "http://";
               if (request.host().empty()) {
                 original_url_ += exchange.local_address().to_ip_port();  // HTTP/1.0
               } else {
                 original_url_ += request.host();
               }
               original_url_ += request.uri();
               added_ = {http::Header{"X-Forwarded-Method", request.method_text()},
                         http::Header{"X-Forwarded-Uri", request.uri()},
                         http::Header{"X-Original-Method", request.method_text()},
                         http::Header{"X-Original-URL", original_url_}};
               proxy::ForwardOptions forward;
               forward.method = "GET";
               forward.target = target_;
               forward.host = handler.host();
               forward.upstream_host = handler.host();
               forward.client = &exchange.client_address();
               forward.hop = route.connection_client;
               forward.secure = secure;
               forward.added = added_;
               forward.fresh_lists = true;
               return forward;
             }(),
             handler.config().check->response_head),
      copied_(handler.config().copy_headers.size()) {
  group_.attach();
  if (handler.proxy_protocol()) {
    net::ProxyHeader& client = proxy_client_.emplace();
    client.local = false;
    client.source = exchange.client_address();
    client.destination = exchange.local_address();
  }
}

AuthCheck::~AuthCheck() { stop(false); }

void AuthCheck::begin() {
  exchange_->set_abort_handler([this] { on_client_gone(); });
  timer_ = loop_->run_after(handler_.config().timeout, [this] {
    timer_ = net::TimerId{};
    on_timeout();
  });
  acquire();
}

void AuthCheck::acquire() {
  const std::optional<size_t> server = group_.pick({}, tried_);
  if (!server) return fail("no server available");
  server_ = *server;
  tried_ |= uint64_t{1} << server_;
  attempt_open_ = true;
  attempt_began_ms_ = loop_->clock().now_ms();
  if (exchange_ != nullptr) exchange_->request().begin_upstream_attempt(static_cast<int64_t>(attempt_began_ms_));
  answered_ = false;
  waiting_ = true;
  group_.started(server_);
  group_.pool(server_).acquire(this, proxy_client_ ? &*proxy_client_ : nullptr);
}

void AuthCheck::settle(bool failed) {
  if (!attempt_open_) return;
  attempt_open_ = false;
  const uint64_t elapsed = loop_->clock().now_ms() - attempt_began_ms_;
  group_.finished(server_, failed, elapsed);
  if (exchange_ != nullptr) exchange_->request().add_upstream_ms(static_cast<int64_t>(elapsed));
}

void AuthCheck::stop(bool reusable) {
  if (done_) return;
  done_ = true;
  if (timer_.valid()) loop_->cancel(timer_);
  timer_ = net::TimerId{};
  if (waiting_) {
    waiting_ = false;
    if (upstream_ != nullptr && reusable) {
      group_.pool(server_).release(this, true);
    } else {
      group_.pool(server_).cancel(this);  // a connection mid-answer is closed
    }
  }
  upstream_ = nullptr;
  settle(false);
  // The group may go from here (a reload, a name's new addresses); the
  // check itself is destroyed after the round, perhaps after the group.
  group_.detach();
}

void AuthCheck::on_lease(net::TcpConnection& conn) {
  if (done_) return group_.pool(server_).release(this, false);
  upstream_ = &conn;
  // A kept-alive connection the service may have closed meanwhile.
  stale_possible_ = conn.bytes_received() > 0;
  if (!conn.is_reading()) conn.start_reading();
  codec_.reset();
  net::Buffer head(512);
  codec_.write_head(head, std::nullopt);
  conn.send(head);
}

void AuthCheck::on_lease_failed(net::ConnectionPool::Failure failure, std::string_view why) {
  waiting_ = false;
  if (done_) return;
  if (failure == net::ConnectionPool::Failure::kOverloaded) {
    settle(false);  // busy, not down
    return fail(why);
  }
  settle(true);
  // The check never left: another server of the group may take it.
  if (group_.pick({}, tried_)) return acquire();
  fail("no connection: " + std::string(why));
}

void AuthCheck::on_upstream_message(net::TcpConnection& /*conn*/, net::Buffer& input) {
  if (done_) return;
  answered_ = true;
  for (;;) {
    const upstream::Codec::Event event = codec_.next(input);
    switch (event.kind) {
      case upstream::Codec::Event::kNeedMore:
        return;
      case upstream::Codec::Event::kHead:
        if (!on_head()) return;
        break;
      case upstream::Codec::Event::kBody:
        if (status_ >= 200 && status_ < 300) break;  // read to keep the connection, not kept
        if (body_.size() + event.data.size() > kMaxRelayedBody) {
          return fail("its " + std::to_string(status_) + " answer is too large (over " +
                      std::to_string(kMaxRelayedBody / 1024) + " KiB)");
        }
        body_.append(event.data);
        break;
      case upstream::Codec::Event::kEnd:
        return on_answer(codec_.reusable() && input.readable_bytes() == 0);
      case upstream::Codec::Event::kError:
        settle(true);
        return fail(codec_.error());
    }
  }
}

bool AuthCheck::on_head() {
  const upstream::ResponseHead& head = codec_.head();
  status_ = head.status;
  if (status_ >= 200 && status_ < 300) {
    // The fields the request gets, copied now: the head's views last until
    // the next read.
    const std::vector<std::string>& names = handler_.config().copy_headers;
    for (size_t i = 0; i < names.size(); ++i) {
      for (const http::Header& field : head.headers) {
        if (!http::iequals(field.name, names[i])) continue;
        copied_[i].emplace(field.value);
        break;
      }
    }
    return true;
  }
  if (!relayed_status(status_)) {
    settle(false);  // the service answered: it is up
    fail("answered " + std::to_string(status_));
    return false;
  }
  for (const http::Header& field : head.headers) {
    if (upstream::is_unrelayed_field(field.name) || codec_.hop_field(field.name)) continue;
    relayed_fields_.emplace_back(field.name, field.value);
  }
  return true;
}

void AuthCheck::on_upstream_closed(net::TcpConnection& conn) {
  upstream_ = nullptr;  // the lease ended with the connection
  waiting_ = false;
  if (done_) return;
  // A 2xx's body is not used: once its head came, its status is the
  // answer, however the body ends (as nginx's auth_request). Another's body
  // goes to the client: one that ends at the close ends only at a clean
  // close, which a reset is not.
  const int error = conn.close_error();
  if (status_ >= 200 && status_ < 300) return on_answer(false);
  if (status_ != 0 && codec_.ends_at_close() && error == 0) return on_answer(false);
  // A kept-alive connection closed before it answered: the check is a GET
  // without a body, so it goes once more on a new connection.
  if (!answered_ && stale_possible_ && !retried_stale_) {
    retried_stale_ = true;
    settle(false);
    tried_ &= ~(uint64_t{1} << server_);
    return acquire();
  }
  settle(true);
  std::string why = answered_ ? "closed the connection in the middle of its answer"
                              : "closed the connection before answering";
  if (error != 0) why += std::string(": ") + std::strerror(error);
  fail(why);
}

void AuthCheck::on_answer(bool reusable) {
  stop(reusable);
  if (exchange_ == nullptr) return;
  if (status_ >= 200 && status_ < 300) return let_through();
  relay_denial();
}

void AuthCheck::let_through() {
  const AuthForwardConfig& config = handler_.config();
  const http::Request& request = exchange_->request();
  if (!config.copy_headers.empty()) {
    std::vector<http::Header> fields;
    for (size_t i = 0; i < copied_.size(); ++i) {
      if (copied_[i]) fields.push_back({config.copy_headers[i], *copied_[i]});
    }
    request.replace_fields(config.copy_headers, fields);
    // Its user, if it named one (else auth_basic's, if that proved one).
    if (handler_.copies_remote_user() && request.has_header("Remote-User")) {
      request.set_remote_user(request.header("Remote-User"));
    }
  }
  request.grant(&handler_);
  // On with the chain after this round: the next handler may replace this
  // job, which must not go while it runs.
  exchange_->set_abort_handler(nullptr);
  const Chain* chain = handler_.chain();
  loop_->defer([id = exchange_->id(), chain] {
    if (http::Exchange* exchange = http::Exchange::find(id)) resume_on(chain, *exchange);
  });
  exchange_ = nullptr;
}

void AuthCheck::relay_denial() {
  http::ResponseWriter& writer = exchange_->writer();
  writer.start(status_);
  for (const auto& [name, value] : relayed_fields_) writer.header(name, value);
  writer.body(body_);
  exchange_->finish();
  exchange_ = nullptr;
}

void AuthCheck::on_timeout() {
  if (done_) return;
  settle(true);
  fail("no answer within " + std::to_string(handler_.config().timeout.count()) + " ms (timed out)");
}

void AuthCheck::on_client_gone() {
  exchange_ = nullptr;
  stop(false);
}

void AuthCheck::fail(std::string_view why) {
  const std::string server = group_.size() > server_ ? group_.server_name(server_) : group_.name();
  stop(false);
  if (exchange_ == nullptr) return;
  TERN_LOG_ERROR("auth_forward {}: {}: 500 (request {})", server, why, exchange_->request().id());
  http::write_error_page(exchange_->writer(), 500);
  exchange_->finish();
  exchange_ = nullptr;
}

}  // namespace

ForwardAuthHandler::ForwardAuthHandler(const ProxyRoutes* routes, const AuthForwardConfig& config, const Chain* chain)
    : routes_(routes), chain_(chain), config_(config), group_(routes->find(*config.check)) {
  const ProxyConfig& check = *config_.check;
  host_ = !check.host.empty() ? check.host : std::string(proxy_host(check));
  if (group_ >= 0) proxy_protocol_ = routes->config(static_cast<size_t>(group_)).proxy_protocol != 0;
  copies_remote_user_ = std::any_of(config_.copy_headers.begin(), config_.copy_headers.end(),
                                    [](const std::string& name) { return http::iequals(name, "Remote-User"); });
}

Claim ForwardAuthHandler::claim(Route& route) {
  // Let through already: it resumed after the check.
  return route.request->granted_by(this) ? Claim::kPass : Claim::kExchange;
}

void ForwardAuthHandler::start(const Route& route, http::Exchange& exchange) {
  upstream::Group* group = group_ >= 0 ? routes_->group(static_cast<size_t>(group_)) : nullptr;
  if (group == nullptr) {
    TERN_LOG_ERROR("auth_forward {}: no such group on this worker: 500", config_.check->group);
    http::write_error_page(exchange.writer(), 500);
    return exchange.finish();
  }
  // What arrives of the body waits for the handler after the check.
  exchange.hold_body();
  auto check = std::make_shared<AuthCheck>(*this, route, exchange, *group);
  AuthCheck& started = *check;
  exchange.adopt(std::move(check));
  started.begin();
}

}  // namespace tern::server
