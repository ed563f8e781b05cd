#include "http/response_writer.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "base/assert.h"
#include "http/exchange.h"
#include "http/status.h"

namespace tern::http {
ResponseWriter& ResponseWriter::start(int status, std::string_view reason) {
  TERN_CHECK_MSG(!started(), "ResponseWriter::start called twice");
  TERN_CHECK(status >= 100 && status <= 999);
  status_ = status;
  if (extra_ != nullptr && !extra_->remove.empty() && extra_->removes("Server")) {
    ctx_.stream->start_head(status, reason, {{}, ctx_.date, {}});
    return *this;
  }
  ctx_.stream->start_head(status, reason, {ctx_.server, ctx_.date, ctx_.ok_head});
  return *this;
}

bool ExtraFields::removes(std::string_view name) const {
  return std::any_of(remove.begin(), remove.end(), [name](const std::string& r) { return iequals(r, name); });
}

ResponseWriter& ResponseWriter::header(std::string_view name, std::string_view value) {
  TERN_CHECK(started() && !finished_ && !streaming_);
  if (extra_ != nullptr && !extra_->remove.empty() && extra_->removes(name)) return *this;
  ctx_.stream->field(name, value);
  return *this;
}

ResponseWriter& ResponseWriter::fields(const FieldBlock& block) {
  TERN_CHECK(started() && !finished_ && !streaming_);
  if (extra_ != nullptr && !extra_->remove.empty()) {
    // One field at a time, less the removed ones.
    for (size_t i = 0; i < block.size(); ++i) {
      if (!extra_->removes(block.name(i))) ctx_.stream->field(block.name(i), block.value(i));
    }
    return *this;
  }
  ctx_.stream->fields(block);
  return *this;
}

ResponseWriter& ResponseWriter::header(std::string_view name, uint64_t value) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  return header(name, std::string_view(digits, static_cast<size_t>(end - digits)));
}

Coding ResponseWriter::compress_for(std::string_view content_type, std::optional<uint64_t> length) {
  if (compression_ == nullptr || !compression_->compressible(content_type)) return Coding::kIdentity;
  vary_ = true;
  if (ctx_.head_only) return Coding::kIdentity;
  if (length && (*length < compression_->min_length || *length > compression_->max_file)) {
    return Coding::kIdentity;
  }
  coding_ = compression_->choose(accept_encoding_);
  return coding_;
}

void ResponseWriter::end_head(ResponseFraming::Kind kind, uint64_t content_length) {
  ResponseStream& stream = *ctx_.stream;
  if (vary_) stream.field("Vary", "Accept-Encoding");
  if (compressing()) stream.field("Content-Encoding", coding_name(coding_));
  if (extra_ != nullptr) {
    if (!extra_->always.empty()) stream.fields(extra_->always);
    switch (status_) {
      case 200: case 201: case 204: case 206: case 301: case 302: case 303: case 304: case 307: case 308:
        if (!extra_->success.empty()) stream.fields(extra_->success);
        break;
      default:
        break;
    }
  }
  ResponseFraming framing;
  framing.kind = status_has_body(status_) ? kind : ResponseFraming::Kind::kNone;
  framing.length = content_length;
  framing.head_only = ctx_.head_only;
  framing.keep_alive = ctx_.keep_alive && !(ctx_.transport != nullptr && ctx_.transport->must_close());
  ctx_.keep_alive = ctx_.stream->end_head(framing);
}

void ResponseWriter::body(std::string_view data) { body(data, BodyOwner{}); }

void ResponseWriter::body(std::string_view data, const BodyOwner& owner) {
  TERN_CHECK(started() && !finished_);
  if (compressing() && !body_coded_) return body_coded(data);
  finished_ = true;
  end_head(ResponseFraming::Kind::kLength, data.size());
  if (status_has_body(status_) && !ctx_.head_only && !data.empty()) {
    if (!owner) {
      ctx_.stream->data(data);
    } else {
      ctx_.stream->kept_data(data, owner);
    }
    body_bytes_ = data.size();
  }
  ctx_.stream->end();
}

void ResponseWriter::body_coded(std::string_view data) {
  const std::string coded = Compressor::compress(coding_, *compression_, data);
  body_coded_ = true;
  body(coded);
}

void ResponseWriter::end() { body({}); }

void ResponseWriter::file(net::FileRegion region) {
  TERN_CHECK(started() && !finished_);
  if (compressing() && !ctx_.head_only) {
    // Compressed from memory: what compress_for() admitted is small.
    std::string data;
    if (region.memory != nullptr) {
      data.assign(region.memory + region.offset, region.length);
    } else {
      data.resize(region.length);
      size_t done = 0;
      while (done < data.size()) {
        const ssize_t n = ::pread(region.fd, data.data() + done, data.size() - done,
                                  region.offset + static_cast<off_t>(done));
        if (n <= 0) break;  // the file shrank: what was read goes out
        done += static_cast<size_t>(n);
      }
      data.resize(done);
    }
    return body(data);
  }
  finished_ = true;
  end_head(ResponseFraming::Kind::kLength, region.length);
  if (!ctx_.head_only && status_has_body(status_)) {
    body_bytes_ = region.length;
    ctx_.stream->file(std::move(region));
  }
  ctx_.stream->end();
}

void ResponseWriter::begin_stream() {
  TERN_CHECK(started() && !finished_ && !streaming_);
  streaming_ = true;
  if (compressing() && !ctx_.head_only) compressor_ = std::make_unique<Compressor>(coding_, *compression_);
  discard_body_ = ctx_.head_only || !status_has_body(status_);
  end_head(ResponseFraming::Kind::kStream, 0);
}

void ResponseWriter::begin_stream(uint64_t content_length) {
  TERN_CHECK(started() && !finished_ && !streaming_);
  // Compressed, the length is no longer known.
  if (compressing()) return begin_stream();
  streaming_ = sized_ = true;
  discard_body_ = ctx_.head_only || !status_has_body(status_);
  length_left_ = discard_body_ ? 0 : content_length;
  end_head(ResponseFraming::Kind::kLength, content_length);
}

void ResponseWriter::write(std::string_view data) {
  TERN_CHECK(streaming_ && !finished_);
  if (data.empty() || discard_body_) return;
  if (compressor_) {
    std::string coded;
    compressor_->write(data, &coded);
    body_bytes_ += coded.size();
    if (!coded.empty()) ctx_.stream->data(coded);
    return;
  }
  if (sized_) {
    data = data.substr(0, length_left_);
    length_left_ -= data.size();
  }
  body_bytes_ += data.size();
  ctx_.stream->data(data);
}

void ResponseWriter::end_stream() {
  TERN_CHECK(streaming_ && !finished_);
  if (compressor_ && !discard_body_) {
    std::string coded;
    compressor_->finish(&coded);
    body_bytes_ += coded.size();
    if (!coded.empty()) ctx_.stream->data(coded);
  }
  finished_ = true;
  ctx_.stream->end();
}

}  // namespace tern::http
