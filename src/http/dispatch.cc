#include "http/dispatch.h"

#include "base/log.h"
#include "http/error_page.h"
#include "net/tcp_connection.h"

namespace tern::http {

Dispatch choose_handler(const std::vector<RequestHandler*>& handlers, const Request& request,
                        const net::TcpConnection& conn, Route* route) {
  *route = Route{};
  Dispatch dispatch;
  if (request.method() == Method::kOther) return dispatch;
  route->request = &request;
  if (!request.has_client_address()) request.set_client_address(conn.client_address());
  route->client = &conn.client_address();
  route->local = &conn.local_address();
  route->secure = conn.secure_layer();
  route->path = request.path();
  for (RequestHandler* handler : handlers) {
    const Claim claim = handler->claim(*route);
    if (claim == Claim::kPass || claim == Claim::kRedirect) continue;
    dispatch.handler = handler;
    dispatch.claim = claim;
    break;
  }
  return dispatch;
}

bool answer(const Dispatch& dispatch, const Route& route, const Request& request, ResponseWriter& writer,
            uint64_t conn_id, int32_t stream_id) {
  if (request.method() == Method::kOther) {
    write_error_page(writer, 501);
  } else if (dispatch.handler == nullptr) {
    write_error_page(writer, 404);
  } else {
    dispatch.handler->respond(route, writer);
  }
  if (writer.finished()) return true;
  if (stream_id != 0) {
    TERN_LOG_ERROR("conn {} stream {}: handler for {} {} did not finish its response (request {})", conn_id,
                   stream_id, request.method_text(), request.target(), request.id());
  } else {
    TERN_LOG_ERROR("conn {}: handler for {} {} did not finish its response (request {})", conn_id,
                   request.method_text(), request.target(), request.id());
  }
  if (writer.started()) return false;
  // Before any byte we can still answer.
  writer.close_after();
  write_error_page(writer, 500);
  return true;
}

}  // namespace tern::http
