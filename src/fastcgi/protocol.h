// The FastCGI protocol, client side (the web server talking to an
// application such as php-fpm): record encoders that write straight into a
// connection's output Buffer, a decoder for name-value pairs, and an
// incremental, zero-copy parser for the records an application sends back.
//
// Every record starts with an 8-byte header (FastCGI 1.0, section 3.3):
//
//   version(1) = 1 | type(1) | requestId(2, BE) | contentLength(2, BE) |
//   paddingLength(1) | reserved(1)
//
// followed by contentLength bytes of content and paddingLength bytes of
// padding. The encoders pad every record to a multiple of 8 bytes, with zero
// bytes (Buffer storage is not zero-filled, so padding is always written).
//
// A request is BEGIN_REQUEST, a PARAMS stream (ended by an empty PARAMS
// record), then a STDIN stream (ended by an empty STDIN record):
//
//   append_begin_request(out, id, Role::kResponder, /*keep_conn=*/true);
//   ParamsWriter params(out, id);
//   params.add("SCRIPT_FILENAME", path);
//   params.add("REQUEST_METHOD", "GET");
//   params.finish();
//   append_stream(out, RecordType::kStdin, id, body);  // if there is a body
//   append_stream(out, RecordType::kStdin, id, {});    // end of STDIN
//
// The application answers with STDOUT (a CGI response, see cgi_response.h)
// and STDERR streams and one END_REQUEST record, which RecordParser turns
// into events.
//
// Free functions and value types; a ParamsWriter or RecordParser belongs to
// one connection on one loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "net/buffer.h"

namespace tern::fastcgi {

enum class RecordType : uint8_t {
  kBeginRequest = 1,
  kAbortRequest,
  kEndRequest,
  kParams,
  kStdin,
  kStdout,
  kStderr,
  kData,
  kGetValues,
  kGetValuesResult,
  kUnknownType,
};

enum class Role : uint16_t { kResponder = 1, kAuthorizer, kFilter };

// BEGIN_REQUEST flag: keep the connection open after the request.
constexpr uint8_t kKeepConn = 1;

// END_REQUEST protocolStatus. A parsed value is passed through as sent, so
// it may lie outside the enumerators.
enum class ProtocolStatus : uint8_t {
  kRequestComplete = 0,
  kCantMpxConn,
  kOverloaded,
  kUnknownRole,
};

constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderSize = 8;
constexpr size_t kMaxContent = 65535;  // contentLength is 16 bits

// Encoders. Each appends complete records to `out`.

void append_begin_request(net::Buffer& out, uint16_t request_id, Role role, bool keep_conn);
void append_abort_request(net::Buffer& out, uint16_t request_id);
// Splits data into records of at most kMaxContent bytes, padded to a multiple
// of 8; empty data appends the empty record that ends the stream.
void append_stream(net::Buffer& out, RecordType type, uint16_t request_id, std::string_view data);

// Writes a PARAMS stream of name-value pairs directly into `out`, without a
// staging copy: it appends a record header, then pair bytes, and patches the
// header's contentLength and paddingLength when it closes the record (when
// the record is full, or at finish()). A pair that does not fit in the rest
// of a record continues in the next one: the spec lets a stream be split
// anywhere, and php-fpm reassembles the stream before decoding it.
//
// Lengths under 128 take one byte, longer ones four (high bit set); a name or
// value must be shorter than 2^31 bytes. Nothing is allocated except by the
// Buffer growing.
//
// Between the constructor and finish(), the open record's header in `out`
// is incomplete: append nothing else to `out`, and neither send nor retrieve
// its bytes, until finish() has returned. Call finish() exactly once.
class ParamsWriter {
 public:
  ParamsWriter(net::Buffer& out, uint16_t request_id);
  ParamsWriter(const ParamsWriter&) = delete;
  ParamsWriter& operator=(const ParamsWriter&) = delete;

  void add(std::string_view name, std::string_view value);
  // Closes the last PARAMS record and appends the empty PARAMS record.
  void finish();

 private:
  void write(std::string_view bytes);
  void close_record();

  net::Buffer& out_;
  const uint16_t request_id_;
  bool open_ = false;   // a record header has been appended and not patched
  size_t content_ = 0;  // content bytes in the open record
};

// Decodes a whole run of name-value pairs (the concatenated content of a
// PARAMS stream, or of a GET_VALUES_RESULT record), calling `each` with views
// into `data`. Returns false, having called `each` for the pairs before it,
// on a truncated or invalid pair.
bool decode_pairs(std::string_view data,
                  const std::function<void(std::string_view, std::string_view)>& each);

// What RecordParser::next() found. Views point into the input passed to it.
struct Event {
  enum Kind : uint8_t {
    kNeedMore,   // all of the input was consumed; call again with more
    kStdout,     // data: a non-empty piece of STDOUT content
    kStderr,     // data: a non-empty piece of STDERR content
    kStreamEnd,  // an empty STDOUT or STDERR record (stream says which)
    kEndRequest, // app_status, protocol_status
    kOther,      // a record a client does not act on (see RecordParser)
    kError,      // see RecordParser::error()
  };
  Kind kind = kNeedMore;
  uint16_t request_id = 0;
  std::string_view data;  // content piece for kStdout, kStderr, kOther
  RecordType stream{};    // the record's type, for every kind but kNeedMore and kError
  uint32_t app_status = 0;                                            // kEndRequest
  ProtocolStatus protocol_status = ProtocolStatus::kRequestComplete;  // kEndRequest
};

// Parses the records an application sends, incrementally and without
// copying content. next() consumes a prefix of its input (*used bytes) and
// reports one event; the caller drops those bytes and calls again with what
// follows, until kNeedMore:
//
//   for (;;) {
//     size_t used;
//     Event e = parser.next(input.view(), &used);
//     input.retrieve(used);
//     if (e.kind == Event::kNeedMore || e.kind == Event::kError) break;
//     handle(e);
//   }
//
// STDOUT and STDERR content is handed out in pieces as soon as bytes arrive,
// never held back until the record is complete, so memory stays bounded
// whatever the record size. Header bytes are copied as they come (a header
// may be split), so kNeedMore always consumes all of the input. Padding is
// skipped. Events that end a record (kStreamEnd, kEndRequest, the closing
// kOther) are reported once its padding is consumed, so at_record_boundary()
// is true right after them.
//
// GET_VALUES_RESULT and UNKNOWN_TYPE records are passed over as kOther: their
// content in non-empty pieces, like STDOUT, then one kOther with empty data
// when the record ends (a caller that wants the content, say GET_VALUES_RESULT
// for decode_pairs, collects the pieces; others ignore kOther).
//
// Errors: a version other than 1; a record type an application never sends
// (BEGIN_REQUEST, ABORT_REQUEST, PARAMS, STDIN, DATA, GET_VALUES) or an
// unknown one; END_REQUEST content shorter than 8 bytes. After kError the
// parser stays failed until reset(). It does not check request ids.
//
// The events do not depend on how the input is split, except that STDOUT,
// STDERR and kOther content may come in more or fewer pieces.
class RecordParser {
 public:
  Event next(std::string_view input, size_t* used);

  // No part of a record has been consumed (and the parser is not failed).
  bool at_record_boundary() const;
  std::string_view error() const { return error_; }
  void reset();

 private:
  enum State : uint8_t { kHeader, kContent, kPadding, kFailed };

  Event start_record();
  Event end_record();
  Event fail(std::string_view reason);

  State state_ = kHeader;
  RecordType type_{};
  uint16_t request_id_ = 0;
  uint16_t content_length_ = 0;
  uint16_t content_left_ = 0;
  uint8_t padding_left_ = 0;
  uint8_t header_len_ = 0;      // header bytes collected so far
  uint8_t body_len_ = 0;        // END_REQUEST body bytes collected so far
  uint8_t header_[kHeaderSize] = {};
  uint8_t body_[8] = {};        // END_REQUEST body
  std::string_view error_;
};

}  // namespace tern::fastcgi
