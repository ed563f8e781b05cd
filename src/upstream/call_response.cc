// upstream::Call, the way back: the response head and body relayed to the
// client (spooled when it is behind), and the tunnel after a 101. See
// call.h.
#include "upstream/call.h"

#include <algorithm>
#include <array>
#include <string>

#include "base/log.h"
#include "http/error_page.h"
#include "http/range.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "upstream/group.h"

namespace tern::upstream {

std::string_view ResponseHead::header(std::string_view name) const {
  for (const http::Header& field : headers) {
    if (http::iequals(field.name, name)) return field.value;
  }
  return {};
}

bool is_freshness_field(std::string_view name) {
  return http::iequals(name, "Date") || http::iequals(name, "X-Accel-Expires");
}

bool is_unrelayed_field(std::string_view name) {
  constexpr std::string_view kAccel = "X-Accel-";
  return http::iequals(name, "Connection") || http::iequals(name, "Keep-Alive") ||
         http::iequals(name, "Transfer-Encoding") || http::iequals(name, "Content-Length") ||
         http::iequals(name, "Date") || http::iequals(name, "Server") ||
         http::iequals(name, "X-Sendfile") || http::iequals(name, "X-Lighttpd-Send-File") ||
         (name.size() > kAccel.size() && http::iequals(name.substr(0, kAccel.size()), kAccel));
}

namespace {

// A field of the upstream's head to the client. `coded`: the body is
// compressed on the way.
void write_field(http::ResponseWriter& writer, std::string_view name, std::string_view value, bool coded) {
  if (coded && http::iequals(name, "ETag") && !value.starts_with("W/")) {
    // Another representation: its validator can only be weak.
    writer.header(name, "W/" + std::string(value));
  } else if (!(writer.varies() && http::iequals(name, "Vary") && http::iequals(value, "Accept-Encoding"))) {
    writer.header(name, value);
  }
}

// Whether a 200's body is compressed on the way to the client (a
// location's compression), unless the upstream coded it.
bool compressed_on_the_way(http::ResponseWriter& writer, const ResponseHead& head) {
  return head.status == 200 && head.header("Content-Encoding").empty() &&
         writer.compress_for(head.header("Content-Type"), head.content_length) != http::Coding::kIdentity;
}

}  // namespace

bool Call::on_body_data(std::string_view data) {
  if (data.empty()) return true;
  const uint64_t at = tapped_;
  if (tap_) {
    tap_->on_body(data);
    tapped_ += data.size();
  }
  if (exchange_ != nullptr) return window_end_ != 0 ? relay_window(data, at) : relay(data);
  // The client went: read on only while the tap wants the rest.
  if (tap_ && tap_->wants_rest()) return true;
  done();
  return false;
}

std::string_view Call::relayed_value(const http::Header& field) {
  if (options_.rewrite_from.empty() || !field.value.starts_with(options_.rewrite_from) ||
      !(http::iequals(field.name, "Location") || http::iequals(field.name, "Refresh"))) {
    return field.value;
  }
  return rewritten_.emplace_back(
      std::string(options_.rewrite_to).append(field.value.substr(options_.rewrite_from.size())));
}

void Call::fields_for_tap(const ResponseHead& head) {
  relayed_.clear();
  for (const http::Header& field : head.headers) {
    if ((!is_unrelayed_field(field.name) && !codec_->hop_field(field.name)) || is_freshness_field(field.name)) {
      relayed_.push_back(field);
    }
  }
}

void Call::show_tap_head(const ResponseHead& head) {
  for (const http::Header& field : head.headers) {
    if (is_freshness_field(field.name)) relayed_.push_back(field);
  }
  tap_->on_head(head.status, relayed_);
}

void Call::show_tap_relayed_head(const ResponseHead& head) {
  relayed_.clear();
  rewritten_.clear();
  for (const http::Header& field : head.headers) {
    if (!is_unrelayed_field(field.name) && !codec_->hop_field(field.name)) {
      relayed_.push_back({field.name, relayed_value(field)});
    }
  }
  show_tap_head(head);
}

bool Call::next_server_for(int status) {
  if (std::find(options_.next_on_status.begin(), options_.next_on_status.end(), status) ==
          options_.next_on_status.end() ||
      !may_send_again() || !next_server_allowed()) {
    return false;
  }
  // Not relayed: another server is asked. The connection goes (its body
  // is not read).
  if (upstream_ != nullptr) group_.pool(server_).cancel(this);
  upstream_ = nullptr;
  settle(true);
  if (!try_next_server("answered " + std::to_string(status))) fail(502, "no other server to try");
  return true;
}

bool Call::tap_response_head() {
  const ResponseHead& head = codec_->head();
  const int status = head.status;
  // Nothing a cache keeps: an interim response, or a protocol switch.
  if (!tap_ || status < 200 || codec_->upgraded()) {
    done();
    return false;
  }
  // As with the client there: the fill goes on with the next server.
  if (next_server_for(status)) return false;
  fields_for_tap(head);
  if (tap_->answer_instead(nullptr, status, relayed_, false)) {
    settle(false);
    done();
    return false;
  }
  // Nor a response the server answers in its place (X-Accel-Redirect),
  // which the tap was shown as write_response_head() shows it.
  if (options_.internal_redirect && !head.header("X-Accel-Redirect").empty()) {
    done();
    return false;
  }
  response_started_ = true;
  show_tap_relayed_head(head);
  if (tap_->wants_rest()) return true;
  done();
  return false;
}

bool Call::write_response_head() {
  const ResponseHead& head = codec_->head();
  const int status = head.status;
  if (status < 200) {
    // An interim response would leave the client waiting for the final
    // one, and a 101 would claim a protocol switch that never happens.
    TERN_LOG_ERROR("{}: the upstream answered {}, which is not a final status{}",
                   group_.server_name(server_), status, request_note());
    settle(false);
    fail(502, "1xx status from the upstream");
    return false;
  }
  if (next_server_for(status)) return false;
  if (tap_) {
    fields_for_tap(head);
    if (tap_->answer_instead(exchange_, status, relayed_, false)) {
      // Answered by the tap: the upstream's connection goes (its body is
      // not read).
      settle(false);
      http::Exchange* exchange = exchange_;
      exchange_ = nullptr;
      done();
      exchange->finish();
      return false;
    }
  }
  response_started_ = true;
  if (options_.internal_redirect) {
    if (std::string_view target = head.header("X-Accel-Redirect"); !target.empty()) {
      settle(false);
      http::Exchange* exchange = exchange_;
      exchange_ = nullptr;  // answered elsewhere from now on
      done();
      options_.internal_redirect(target, head, *exchange);
      return false;
    }
  }
  const ResponseTap::ClientAnswer answer =
      tap_ ? tap_->client_answer(status, relayed_, head.content_length) : ResponseTap::ClientAnswer{};
  if (answer.status != 0 && answer.status != 206) return answer_head_alone(head, answer);
  const bool ranged = answer.status == 206;
  http::ResponseWriter& writer = exchange_->writer();
  // A range is of the body as it came.
  const bool coded = !ranged && compressed_on_the_way(writer, head);
  if (ranged) {
    writer.start(206);
  } else {
    writer.start(status, head.reason);
  }
  relayed_.clear();
  rewritten_.clear();
  for (const http::Header& field : head.headers) {
    if (is_unrelayed_field(field.name) || codec_->hop_field(field.name)) continue;
    const std::string_view value = relayed_value(field);
    write_field(writer, field.name, value, coded);
    if (tap_) relayed_.push_back({field.name, value});
  }
  if (!options_.extra_header_name.empty()) {
    writer.header(options_.extra_header_name, options_.extra_header_value);
  }
  if (tap_) show_tap_head(head);
  buffer_response_ =
      options_.response_buffering && !http::iequals(head.header("X-Accel-Buffering"), "no");
  if (buffer_response_) response_.configure(options_.response_memory, options_.temp_dir);
  if (ranged) {
    std::array<char, http::kContentRangeMaxSize> range;
    writer.header("Content-Range", http::format_content_range(answer.offset, answer.length,
                                                              head.content_length.value_or(0), range));
    window_begin_ = answer.offset;
    window_end_ = answer.offset + answer.length;
    writer.begin_stream(answer.length);
  } else if (head.content_length) {
    writer.begin_stream(*head.content_length);
  } else {
    writer.begin_stream();
  }
  return true;
}

bool Call::answer_head_alone(const ResponseHead& head, const ResponseTap::ClientAnswer& answer) {
  http::ResponseWriter& writer = exchange_->writer();
  if (answer.status == 412) {
    http::write_error_page(writer, 412, {options_.extra_header_name, options_.extra_header_value});
  } else {
    // The fields the 200 would carry (its ETag weak when it would be
    // compressed: RFC 9110 15.4.5), less those of its body, as nginx's
    // not-modified filter keeps them.
    const bool coded = answer.status == 304 && compressed_on_the_way(writer, head);
    writer.start(answer.status);
    for (const http::Header& field : head.headers) {
      if (is_unrelayed_field(field.name) || codec_->hop_field(field.name) ||
          http::iequals(field.name, "Content-Type") || http::iequals(field.name, "Content-Encoding") ||
          http::iequals(field.name, "Content-Range") || http::iequals(field.name, "Accept-Ranges")) {
        continue;
      }
      write_field(writer, field.name, relayed_value(field), coded);
    }
    if (!options_.extra_header_name.empty()) {
      writer.header(options_.extra_header_name, options_.extra_header_value);
    }
    if (answer.status == 416) {
      std::array<char, http::kContentRangeMaxSize> range;
      writer.header("Content-Range", http::format_unsatisfied_range(head.content_length.value_or(0), range));
    }
    writer.end();
  }
  // The tap sees the response as it comes from the upstream.
  show_tap_relayed_head(head);
  return hand_off_client();
}

bool Call::relay_window(std::string_view data, uint64_t at) {
  const uint64_t begin = std::max(at, window_begin_);
  const uint64_t end = std::min(at + data.size(), window_end_);
  if (begin < end && !relay(data.substr(begin - at, end - begin))) return false;
  if (at + data.size() < window_end_ || window_full_) return true;
  window_full_ = true;
  // Else handed off once what waits has gone out (on_client_drained),
  // the rest read on meanwhile: a failure in it no longer touches the
  // client's answer (fail()).
  return response_.empty() ? hand_off_client() : true;
}

bool Call::hand_off_client() {
  http::Exchange* exchange = exchange_;
  if (window_end_ != 0) exchange->writer().end_stream();
  const bool reading_on = read_on_for_tap(*exchange);
  exchange_ = nullptr;
  if (!reading_on) done();
  exchange->finish();
  return reading_on;
}

// To the client if it keeps up, else into the spool behind what waits
// there already (buffering), or to the client anyway (relaying as it comes:
// the caller then pauses the upstream).
bool Call::relay(std::string_view data) {
  if (!buffer_response_ ||
      (response_.empty() && exchange_->pending_output_bytes() <= kHighWater)) {
    exchange_->writer().write(data);
    return true;
  }
  if (auto stored = response_.append(data); !stored) {
    TERN_LOG_ERROR("{}: buffering a response: {}{}", options_.log_name, stored.error().message(), request_note());
    fail(500, "cannot buffer the response");
    return false;
  }
  return true;
}

// Moves spooled response bytes to the client while it keeps up. False if
// the call failed.
bool Call::pump_response() {
  while (response_sent_ < response_.size()) {
    if (exchange_ == nullptr) return true;  // the last flush ended the client's side
    if (exchange_->pending_output_bytes() > kHighWater) {
      exchange_->wait_for_drain();
      return true;
    }
    Result<std::string_view> piece = response_.read(response_sent_, kSpoolPiece, &scratch_);
    if (!piece) {
      TERN_LOG_ERROR("{}: reading a buffered response: {}{}", options_.log_name,
                     piece.error().message(), request_note());
      window_full_ = false;  // a range that cannot be read out is cut off too
      fail(500, "cannot read the buffered response");
      return false;
    }
    exchange_->writer().write(*piece);
    response_sent_ += piece->size();
    exchange_->flush();
  }
  response_.clear();
  response_sent_ = 0;
  return true;
}

void Call::on_client_drained() {
  if (tunnel_) {
    if (upstream_ != nullptr && !upstream_->is_reading()) upstream_->start_reading();
    return;
  }
  if (exchange_ == nullptr || !pump_response()) return;
  if (exchange_ == nullptr) return;  // its last flush ended the client's side
  if (!response_.empty()) return;  // more when the client has taken this
  if (upstream_done_) return end_response();
  if (window_full_) {
    hand_off_client();
    return;
  }
  resume_upstream();
}

void Call::pause_upstream() {
  if (upstream_ == nullptr) return;
  upstream_->stop_reading();
  // The upstream waits for the client now, not the other way round.
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
}

void Call::resume_upstream() {
  if (upstream_ == nullptr || upstream_->is_reading()) return;
  upstream_->start_reading();
  arm_read_timer();
}

void Call::on_response_end(const net::Buffer& input) {
  const bool clean = codec_->reusable() && input.empty() && body_done_;
  // The upstream is done: its connection goes back now, whatever the
  // client still has to download.
  if (upstream_ != nullptr) group_.pool(server_).release(this, clean);
  upstream_ = nullptr;
  if (read_timer_.valid()) loop_->cancel(read_timer_);
  read_timer_ = net::TimerId{};
  if (!response_started_) {
    settle(codec_->error_status() != 503);
    TERN_LOG_ERROR("{}: {}{}", group_.server_name(server_), codec_->error(), request_note());
    return fail(codec_->error_status(), codec_->error());
  }
  settle(false);
  upstream_done_ = true;
  if (tap_) {
    // The tap has seen the whole response (unless the upstream sent less
    // than its Content-Length), whatever the client still has to take.
    const std::optional<uint64_t> length = codec_->head().content_length;
    tap_->on_end(!length || *length == tapped_);
    tap_.reset();
  }
  if (exchange_ == nullptr) return done();
  exchange_->flush();
  // The flush can end the client's side at once (an HTTP/2 stream whose
  // response to a HEAD is whole with its head): on_client_gone() ran.
  if (exchange_ == nullptr) return done();
  if (!response_.empty()) return exchange_->wait_for_drain();  // then end_response()
  end_response();
}

void Call::end_response() {
  http::ResponseWriter& writer = exchange_->writer();
  writer.end_stream();
  const bool complete = !writer.stream_short();
  if (tap_) tap_->on_end(complete);
  tap_.reset();
  if (!complete) {
    // What arrived goes out; the close says the rest never will.
    TERN_LOG_ERROR("{}: response shorter than its Content-Length{}", group_.server_name(server_), request_note());
    exchange_->abort();
  } else {
    exchange_->finish();
  }
  exchange_ = nullptr;
  done();
}

// The 101 to the client, then the tunnel: what the upstream sent behind
// its head is the new protocol's first bytes.
void Call::start_tunnel(net::Buffer& input) {
  const ResponseHead& head = codec_->head();
  http::ResponseWriter& writer = exchange_->writer();
  settle(false);
  if (!writer.keep_alive()) return fail(503, "the connection is closing");
  response_started_ = true;
  writer.start(101, head.reason);
  for (const http::Header& field : head.headers) {
    if (is_unrelayed_field(field.name) || codec_->hop_field(field.name)) continue;
    writer.header(field.name, field.value);
  }
  writer.header("Connection", "upgrade");
  writer.header("Upgrade", head.header("Upgrade"));
  writer.end();
  if (!exchange_->switch_protocols()) return fail(502, "the connection cannot switch protocols");
  tunnel_ = true;
  TERN_LOG_DEBUG("{}: switched to {}", group_.server_name(server_), head.header("Upgrade"));
  tunnel_from_upstream(input);
}

void Call::tunnel_from_client(std::string_view piece) {
  if (upstream_ == nullptr || piece.empty()) return;
  upstream_->send(piece);
  arm_read_timer();
  if (upstream_->pending_output_bytes() > kHighWater) {
    exchange_->pause_body();
    upstream_->ask_write_complete();
  }
}

void Call::tunnel_from_upstream(net::Buffer& input) {
  if (exchange_ == nullptr || input.empty()) return;
  exchange_->write_raw(input.view());
  input.retrieve_all();
  exchange_->flush();
  if (exchange_ == nullptr) return;
  arm_read_timer();
  if (exchange_->pending_output_bytes() > kHighWater) {
    exchange_->wait_for_drain();
    if (upstream_ != nullptr) upstream_->stop_reading();
  }
}

void Call::end_tunnel(std::string_view why) {
  TERN_LOG_DEBUG("{}: tunnel ends: {}", group_.server_name(server_), why);
  if (exchange_ != nullptr) {
    exchange_->finish();  // closes the client's connection once its output is out
    exchange_ = nullptr;
  }
  done();
}

}  // namespace tern::upstream
