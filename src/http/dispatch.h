// The handler chain asked about a request and answering it, the same for
// every protocol (http1/http1_connection.cc and http2/http2_connection.cc
// call these; what differs between them is only how a response that
// cannot be finished is cut off):
//
//   - choose_handler: a complete head goes to the handlers in order; the
//     first that claims it takes it (handler.h), unless its method is one
//     tern does not know (501, no handler asked);
//   - answer: a request answered at once gets its response: 501 for an
//     unknown method, 404 when no handler claimed it, else the handler's;
//     a handler that returns without finishing its response is a bug,
//     answered 500 when nothing went out yet.
//
// Loop thread of the connection.
#pragma once

#include <cstdint>
#include <vector>

#include "http/handler.h"
#include "http/request.h"
#include "http/response_writer.h"

namespace tern::net {
class TcpConnection;
}  // namespace tern::net

namespace tern::http {

// Which handler took a request, and how.
struct Dispatch {
  RequestHandler* handler = nullptr;  // null: none claimed it
  Claim claim = Claim::kPass;         // what the handler's claim() said
};

// Fills `route` for `request`, which came on `conn`, and asks `handlers`.
Dispatch choose_handler(const std::vector<RequestHandler*>& handlers, const Request& request,
                        const net::TcpConnection& conn, Route* route);

// Answers `request` as `dispatch` says. False when the handler began a
// response and did not finish it: the caller must cut it off (close the
// connection, reset the stream); logged with the connection and the
// stream (HTTP/2; 0 for HTTP/1, which has none).
bool answer(const Dispatch& dispatch, const Route& route, const Request& request, ResponseWriter& writer,
            uint64_t conn_id, int32_t stream_id);

}  // namespace tern::http
