#include "server/handlers/metrics_handler.h"

#include "http/error_page.h"
#include "http/request.h"
#include "http/response_writer.h"
#include "server/observability/metrics.h"
#include "server/observability/metrics_text.h"
#include "server/observability/status_page.h"

#ifndef TERN_VERSION
#define TERN_VERSION "0.0.0"
#endif

namespace tern::server {
namespace {

// ?format=json among the query's parameters.
bool asks_for_json(std::string_view query) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    if (query.substr(0, amp) == "format=json") return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

}  // namespace

void MetricsHandler::respond(const Route& route, http::ResponseWriter& writer) {
  const http::Request& request = *route.request;
  if (request.method() != http::Method::kGet && request.method() != http::Method::kHead) {
    return http::write_error_page(writer, 405, "GET, HEAD");
  }
  std::string body;
  std::string_view type;
  std::string_view page;
  if (kind_ == Kind::kPrometheus) {
    body = prometheus_text(metrics_->snapshot(), TERN_VERSION);
    type = kPrometheusContentType;
  } else if (asks_for_json(request.query())) {
    body = status_json(metrics_->snapshot(), TERN_VERSION);
    type = "application/json";
  } else {
    page = status_page_html();
    type = "text/html; charset=utf-8";
  }
  const std::string_view out = page.empty() ? std::string_view(body) : page;
  (void)writer.compress_for(type, out.size());
  writer.start(200).header("Content-Type", type).header("Cache-Control", "no-store");
  writer.body(out);
}

}  // namespace tern::server
