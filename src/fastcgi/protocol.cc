#include "fastcgi/protocol.h"

#include <algorithm>
#include <cstring>

#include "base/assert.h"

namespace tern::fastcgi {
namespace {

constexpr char kZeros[kHeaderSize] = {};

// Padding that brings a record's content to a multiple of 8 bytes. php-fpm
// does not need it, but the spec recommends it and it keeps records aligned.
uint8_t padding_for(size_t content) { return static_cast<uint8_t>(-content & 7); }

void put_u16(char* p, size_t v) {
  p[0] = static_cast<char>(v >> 8);
  p[1] = static_cast<char>(v);
}

Event error_event() {
  Event e;
  e.kind = Event::kError;
  return e;
}

uint16_t get_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

void put_header(char* p, RecordType type, uint16_t request_id, size_t content, uint8_t padding) {
  TERN_DCHECK(content <= kMaxContent);
  p[0] = static_cast<char>(kVersion);
  p[1] = static_cast<char>(type);
  put_u16(p + 2, request_id);
  put_u16(p + 4, content);
  p[6] = static_cast<char>(padding);
  p[7] = 0;
}

// A name-value length: one byte below 128, else four with the high bit set.
size_t put_length(char* p, size_t len) {
  if (len < 128) {
    p[0] = static_cast<char>(len);
    return 1;
  }
  TERN_CHECK_MSG(len <= 0x7fffffff, "FastCGI name or value of {} bytes", len);
  p[0] = static_cast<char>(len >> 24 | 0x80);
  p[1] = static_cast<char>(len >> 16);
  put_u16(p + 2, len);
  return 4;
}

// Takes one length off the front of *data; false if it is truncated.
bool take_length(std::string_view* data, size_t* len) {
  if (data->empty()) return false;
  auto p = reinterpret_cast<const uint8_t*>(data->data());
  if (p[0] < 0x80) {
    *len = p[0];
    data->remove_prefix(1);
    return true;
  }
  if (data->size() < 4) return false;
  *len = get_u32(p) & 0x7fffffff;
  data->remove_prefix(4);
  return true;
}

}  // namespace

void append_begin_request(net::Buffer& out, uint16_t request_id, Role role, bool keep_conn) {
  // FCGI_BeginRequestBody: role(2), flags(1), reserved(5).
  constexpr size_t kBody = 8;
  out.ensure_writable(kHeaderSize + kBody);
  char* p = out.begin_write();
  put_header(p, RecordType::kBeginRequest, request_id, kBody, 0);
  put_u16(p + kHeaderSize, static_cast<uint16_t>(role));
  p[kHeaderSize + 2] = static_cast<char>(keep_conn ? kKeepConn : 0);
  std::memset(p + kHeaderSize + 3, 0, kBody - 3);
  out.has_written(kHeaderSize + kBody);
}

void append_abort_request(net::Buffer& out, uint16_t request_id) {
  out.ensure_writable(kHeaderSize);
  put_header(out.begin_write(), RecordType::kAbortRequest, request_id, 0, 0);
  out.has_written(kHeaderSize);
}

void append_stream(net::Buffer& out, RecordType type, uint16_t request_id, std::string_view data) {
  // Reserve everything at once, then copy each piece behind its header.
  size_t full = data.size() / kMaxContent;
  size_t rest = data.size() % kMaxContent;
  size_t total = full * (kHeaderSize + kMaxContent + padding_for(kMaxContent));
  if (rest > 0 || data.empty()) total += kHeaderSize + rest + padding_for(rest);
  out.ensure_writable(total);
  char* p = out.begin_write();
  do {
    size_t n = std::min(data.size(), kMaxContent);
    uint8_t padding = padding_for(n);
    put_header(p, type, request_id, n, padding);
    if (n > 0) std::memcpy(p + kHeaderSize, data.data(), n);
    std::memset(p + kHeaderSize + n, 0, padding);
    p += kHeaderSize + n + padding;
    data.remove_prefix(n);
  } while (!data.empty());
  out.has_written(total);
}

ParamsWriter::ParamsWriter(net::Buffer& out, uint16_t request_id)
    : out_(out), request_id_(request_id) {}

void ParamsWriter::add(std::string_view name, std::string_view value) {
  char lengths[8];
  size_t n = put_length(lengths, name.size());
  n += put_length(lengths + n, value.size());
  write({lengths, n});
  write(name);
  write(value);
}

void ParamsWriter::finish() {
  if (open_) close_record();
  append_stream(out_, RecordType::kParams, request_id_, {});
}

// Appends content to the open record, opening one (with a placeholder
// header) when none is, and closing each record that fills up.
void ParamsWriter::write(std::string_view bytes) {
  while (!bytes.empty()) {
    if (!open_) {
      out_.append(kZeros, kHeaderSize);
      open_ = true;
      content_ = 0;
    }
    size_t n = std::min(bytes.size(), kMaxContent - content_);
    out_.append(bytes.data(), n);
    content_ += n;
    bytes.remove_prefix(n);
    if (content_ == kMaxContent) close_record();
  }
}

// The header is found from the write end rather than by a saved pointer or
// offset: growth may move the buffer's storage or slide its bytes, but both
// keep the distance from the header to the end of what was written.
void ParamsWriter::close_record() {
  uint8_t padding = padding_for(content_);
  if (padding > 0) out_.append(kZeros, padding);
  TERN_DCHECK(out_.readable_bytes() >= kHeaderSize + content_ + padding);
  char* header = out_.begin_write() - padding - content_ - kHeaderSize;
  put_header(header, RecordType::kParams, request_id_, content_, padding);
  open_ = false;
}

bool decode_pairs(std::string_view data,
                  const std::function<void(std::string_view, std::string_view)>& each) {
  while (!data.empty()) {
    size_t name_len = 0;
    size_t value_len = 0;
    if (!take_length(&data, &name_len) || !take_length(&data, &value_len)) return false;
    if (name_len > data.size() || value_len > data.size() - name_len) return false;
    each(data.substr(0, name_len), data.substr(name_len, value_len));
    data.remove_prefix(name_len + value_len);
  }
  return true;
}

bool RecordParser::at_record_boundary() const { return state_ == kHeader && header_len_ == 0; }

void RecordParser::reset() { *this = RecordParser(); }

Event RecordParser::fail(std::string_view reason) {
  state_ = kFailed;
  error_ = reason;
  return error_event();
}

// Header bytes are copied (a header may arrive in pieces), content is handed
// out as views of the input, and END_REQUEST's 8-byte body is copied so that
// it too may arrive in pieces. Nothing is read twice.
Event RecordParser::next(std::string_view input, size_t* used) {
  size_t i = 0;
  for (;;) {
    switch (state_) {
      case kFailed:
        *used = i;
        return error_event();
      case kHeader: {
        size_t n = std::min(kHeaderSize - header_len_, input.size() - i);
        if (n > 0) std::memcpy(header_ + header_len_, input.data() + i, n);
        header_len_ = static_cast<uint8_t>(header_len_ + n);
        i += n;
        if (header_len_ < kHeaderSize) {
          *used = i;
          return {};
        }
        if (Event e = start_record(); e.kind == Event::kError) {
          *used = i;
          return e;
        }
        break;
      }
      case kContent: {
        if (i == input.size()) {
          *used = i;
          return {};
        }
        size_t n = std::min<size_t>(content_left_, input.size() - i);
        std::string_view piece = input.substr(i, n);
        i += n;
        content_left_ = static_cast<uint16_t>(content_left_ - n);
        if (content_left_ == 0) state_ = kPadding;
        if (type_ == RecordType::kEndRequest) {
          // Only the 8-byte body is kept; a longer content is skipped.
          size_t keep = std::min(n, sizeof body_ - body_len_);
          if (keep > 0) std::memcpy(body_ + body_len_, piece.data(), keep);
          body_len_ = static_cast<uint8_t>(body_len_ + keep);
          break;
        }
        *used = i;
        Event e;
        e.kind = type_ == RecordType::kStdout   ? Event::kStdout
                 : type_ == RecordType::kStderr ? Event::kStderr
                                                : Event::kOther;
        e.request_id = request_id_;
        e.data = piece;
        e.stream = type_;
        return e;
      }
      case kPadding: {
        size_t n = std::min<size_t>(padding_left_, input.size() - i);
        padding_left_ = static_cast<uint8_t>(padding_left_ - n);
        i += n;
        if (padding_left_ > 0) {
          *used = i;
          return {};
        }
        state_ = kHeader;
        header_len_ = 0;
        if (Event e = end_record(); e.kind != Event::kNeedMore) {
          *used = i;
          return e;
        }
        break;
      }
    }
  }
}

// Checks a complete header; kNeedMore means "carry on".
Event RecordParser::start_record() {
  if (header_[0] != kVersion) return fail("unsupported FastCGI version");
  type_ = static_cast<RecordType>(header_[1]);
  request_id_ = get_u16(header_ + 2);
  content_length_ = get_u16(header_ + 4);
  content_left_ = content_length_;
  padding_left_ = header_[6];
  body_len_ = 0;
  switch (type_) {
    case RecordType::kStdout:
    case RecordType::kStderr:
    case RecordType::kGetValuesResult:
    case RecordType::kUnknownType: break;
    case RecordType::kEndRequest:
      if (content_length_ < sizeof body_) return fail("END_REQUEST record shorter than 8 bytes");
      break;
    case RecordType::kBeginRequest:
    case RecordType::kAbortRequest:
    case RecordType::kParams:
    case RecordType::kStdin:
    case RecordType::kData:
    case RecordType::kGetValues: return fail("record type only a web server sends");
    default: return fail("unknown record type");
  }
  state_ = content_left_ > 0 ? kContent : kPadding;
  return {};
}

// The event, if any, that a record's end brings; kNeedMore means none.
Event RecordParser::end_record() {
  Event e;
  e.request_id = request_id_;
  e.stream = type_;
  switch (type_) {
    case RecordType::kStdout:
    case RecordType::kStderr:
      if (content_length_ == 0) e.kind = Event::kStreamEnd;
      break;
    case RecordType::kEndRequest:
      e.kind = Event::kEndRequest;
      e.app_status = get_u32(body_);
      e.protocol_status = static_cast<ProtocolStatus>(body_[4]);
      break;
    default: e.kind = Event::kOther; break;
  }
  return e;
}

}  // namespace tern::fastcgi
