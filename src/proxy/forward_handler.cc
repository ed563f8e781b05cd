#include "proxy/forward_handler.h"

#include <stdexcept>
#include <utility>

#include "http/error_page.h"
#include "http/exchange.h"
#include "http/uri.h"
#include "net/secure_layer.h"
#include "proxy/forward_head.h"
#include "proxy/http_codec.h"
#include "upstream/call.h"

namespace tern::proxy {

ForwardHandler::ForwardHandler(ForwardHandlerOptions options)
    : options_(std::move(options)),
      groups_([this](net::EventLoop* loop) {
        net::ConnectionPoolOptions pool;
        pool.max_idle = options_.connections;
        pool.connect_timeout = options_.connect_timeout;
        std::vector<upstream::GroupServer> servers;
        for (const net::SocketAddress& address : options_.servers) {
          upstream::GroupServer& server = servers.emplace_back();
          server.spec.address = address.to_string();
          server.address = address;
        }
        return std::make_unique<upstream::Group>(loop, log_name_, servers, upstream::Balancer::Method::kRoundRobin,
                                                 pool);
      }) {
  if (options_.servers.empty()) throw std::invalid_argument("a forward handler needs at least one server");
  auto normalized = http::normalize_prefix(options_.prefix);
  if (!normalized) throw std::invalid_argument("a handler's prefix is a path starting with '/': " + options_.prefix);
  prefix_ = std::move(*normalized);
  if (!options_.path.empty() && !options_.path.starts_with('/')) {
    throw std::invalid_argument("a forward handler's path starts with '/': " + options_.path);
  }
  log_name_ = "proxy " + options_.servers.front().to_string();
  // nginx's $proxy_host: the server's address, "localhost" for a Unix socket.
  upstream_host_ = options_.servers.front().is_unix() ? "localhost" : options_.servers.front().to_string();
}

http::Claim ForwardHandler::claim(http::Route& route) {
  std::string scratch;
  std::string_view rest;
  auto path = http::normalized_path(route.path, &scratch);
  if (!path || !http::path_beneath(prefix_, *path, &rest)) return http::Claim::kPass;
  if (options_.max_body != 0) route.max_body = options_.max_body;
  return http::Claim::kExchange;
}

void ForwardHandler::start(const http::Route& route, http::Exchange& exchange) {
  const http::Request& request = exchange.request();
  std::string target;
  if (!options_.path.empty()) {
    // The prefix becomes `path`; the rest of the normalised path follows,
    // encoded again, then the query.
    std::string scratch;
    std::string_view rest;
    auto path = http::normalized_path(route.path, &scratch);
    if (!path || !http::path_beneath(prefix_, *path, &rest)) {
      http::write_error_page(exchange.writer(), 400);
      return exchange.finish();
    }
    target = options_.path;
    if (target.back() == '/' && rest.starts_with('/')) rest.remove_prefix(1);
    http::append_percent_encoded_path(rest, &target);
    if (!request.query().empty()) target.append("?").append(request.query());
  } else {
    target = std::string(request.uri());
  }
  ForwardOptions forward;
  forward.target = target;
  forward.host = options_.host;
  forward.upstream_host = upstream_host_;
  forward.client = &exchange.client_address();
  forward.secure = exchange.secure() != nullptr;

  upstream::CallOptions call;
  call.read_timeout = options_.read_timeout;
  call.send_timeout = options_.send_timeout;
  call.log_name = log_name_;
  call.temp_dir = options_.temp_dir;
  call.next_server = options_.servers.size() > 1;
  call.request_buffering = options_.buffering;
  call.response_buffering = options_.buffering;
  upstream::Call::start<HttpCodec>(exchange, groups_.current(), call, nullptr, request, forward,
                                   call.response_head);
}

void ForwardHandler::close_loop(net::EventLoop* loop) { groups_.close(loop); }

}  // namespace tern::proxy
