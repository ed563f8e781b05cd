#include "server/handlers/background_exchange.h"

#include "net/event_loop.h"

namespace tern::server {

bool BackgroundExchange::start(const http::Exchange& from, const std::function<void(http::Exchange&)>& handler) {
  auto self = std::make_shared<BackgroundExchange>(from);
  if (!self->make_request(from.request(), from.client_address())) return false;
  http::ResponseWriter::Context context;
  context.stream = self.get();
  self->exchange_.begin(self.get(), &self->request_, context, /*has_body=*/false);
  // The configuration the client's request began under, let go after the
  // call, as an exchange of a connection does.
  self->exchange_.keep(from.kept());
  self->self_ = self;
  handler(self->exchange_);
  return true;
}

BackgroundExchange::BackgroundExchange(const http::Exchange& from)
    : loop_(from.loop()),
      peer_(from.peer_address()),
      connection_client_(from.connection_client()),
      local_(from.local_address()) {}

bool BackgroundExchange::make_request(const http::Request& from, const net::InetAddress& client) {
  // One string holds every view of the copy, made before any is taken.
  // HTTP/2's :authority comes as the authority (it has no Host field).
  const std::string_view target = from.target();
  const bool has_host = from.has_header(http::FieldId::kHost);
  const std::string_view authority = has_host ? std::string_view() : from.host();
  size_t size = 3 + target.size() + from.scheme().size() + authority.size();
  for (const http::Header& field : from.headers()) size += field.name.size() + field.value.size();
  text_.reserve(size);
  auto copy = [this](std::string_view bytes) {
    const size_t at = text_.size();
    text_.append(bytes);
    return std::string_view(text_).substr(at, bytes.size());
  };
  http::Request::DecodedHead head;
  head.method = copy("GET");
  head.path = copy(target);
  head.scheme = copy(from.scheme());
  head.authority = copy(authority);
  // Taken by the request (set_head swaps it with the request's own table).
  std::vector<http::Header> fields;
  fields.reserve(from.headers().size());
  for (const http::Header& field : from.headers()) {
    fields.push_back(http::Header{copy(field.name), copy(field.value), field.id});
  }
  head.fields = &fields;
  std::string_view reason;
  if (request_.set_head(from.version(), head, &reason) != 0) return false;
  request_.set_received_ms(static_cast<int64_t>(loop_->clock().now_ms()));
  request_.set_client_address(client);
  return true;
}

void BackgroundExchange::wait_for_drain() {
  // Nothing is ever pending: drained on the next round, as a connection
  // would say it.
  loop_->queue_in_loop([weak = weak_from_this()] {
    if (auto self = weak.lock(); self && self->exchange_.active()) self->exchange_.drained();
  });
}

void BackgroundExchange::done() {
  exchange_.end();
  // What runs now may be the call this exchange owns.
  if (self_) loop_->release_after_round(std::move(self_));
}

}  // namespace tern::server
