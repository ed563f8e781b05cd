// RequestState: what a connection holds only while a request is in
// progress, and the per-loop pool that recycles it. Loop thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/spool.h"
#include "http/chunked_decoder.h"
#include "http/exchange.h"
#include "http/handler.h"
#include "http/request.h"
#include "http/request_parser.h"

namespace tern::http {

// What a connection needs only while a request is in progress: the parser
// with its field table, the parsed head, the body decoder and store. A few
// KiB, so idle keep-alive connections hand theirs back to a per-loop pool.
struct RequestState {
  RequestParser parser;
  ChunkedDecoder chunked;
  Request request;
  Spool body;             // a body read for a Router handler, when spooled
  std::string head_copy;  // the head, when the input buffer cannot keep it
  Exchange exchange;      // for a request taken as one
  // Which handler claimed the request, how, and the route it was given.
  Route route;
  RequestHandler* handler = nullptr;
  Claim claim = Claim::kPass;
};

// Recycles RequestState objects for one loop, keeping at most kMaxSpare
// (a burst of slow requests does not pin their memory). Loop thread only.
class RequestStatePool {
 public:
  static constexpr size_t kMaxSpare = 128;

  std::unique_ptr<RequestState> acquire();
  void release(std::unique_ptr<RequestState> state);
  size_t idle() const { return free_.size(); }

 private:
  std::vector<std::unique_ptr<RequestState>> free_;
};

}  // namespace tern::http
