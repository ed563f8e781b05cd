// RequestState: what a connection holds only while a request is in
// progress, and the per-loop pool that recycles it. Loop thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/spool.h"
#include "http/exchange.h"
#include "http/dispatch.h"
#include "http/handler.h"
#include "http/request.h"
#include "http1/chunked_decoder.h"
#include "http1/request_parser.h"

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
  uint64_t body_consumed = 0;  // framing bytes of the body read so far
  Exchange exchange;      // for a request taken as one
  // Which handler claimed the request, how, and the route it was given.
  Route route;
  Dispatch dispatch;
};

// Recycles RequestState objects for one loop, keeping at most kMaxSpare
// (a burst of slow requests does not pin their memory). Loop thread only.
// Spare RequestStates for the next requests of a loop, with the memory
// their parser and fields grew. A loop keeps as many as it lately had in
// use at once (1,000 connections waiting on an upstream: 1,000 states
// that would otherwise be freed and made again for every request), and
// gives back each period the spares it did not need in the last one, down
// to kMinSpare: a burst costs its memory for one or two periods.
class RequestStatePool {
 public:
  using Time = std::chrono::steady_clock::time_point;
  static constexpr size_t kMinSpare = 128;
  static constexpr std::chrono::seconds kPeriod{10};

  std::unique_ptr<RequestState> acquire();
  // `now`: the loop's clock (the period is checked here, not by a timer).
  void release(std::unique_ptr<RequestState> state, Time now);
  // A burst of connections is over: keeps kMinSpare spares at most.
  void trim();
  size_t idle() const { return free_.size(); }

 private:
  std::vector<std::unique_ptr<RequestState>> free_;
  size_t fewest_idle_ = 0;  // the fewest spares since the period began
  Time period_start_{};
};

}  // namespace tern::http
