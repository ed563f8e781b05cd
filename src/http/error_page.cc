#include "http/error_page.h"

#include <string>

#include "http/status.h"

namespace tern::http {

void write_error_page(ResponseWriter& writer, int status, ErrorField field) {
  // After these nginx stops reusing the connection, and so do we: the
  // request was malformed or the server is in trouble.
  if (status == 400 || status == 413 || status == 414 || status == 500 || status == 501) {
    writer.close_after();
  }
  if (ErrorPageHook* hook = writer.error_pages(); hook != nullptr && !writer.started()) {
    writer.set_error_pages(nullptr);  // once: a page that fails falls back to ours
    if (hook->write(writer, status, field)) return;
  }
  std::string_view reason = reason_phrase(status);
  // Small enough to build on the stack; error paths may allocate anyway.
  std::string page;
  page.reserve(160);
  page += "<!DOCTYPE html>\n<html><head><title>";
  page += std::to_string(status);
  page += ' ';
  page += reason;
  page += "</title></head>\n<body><h1>";
  page += std::to_string(status);
  page += ' ';
  page += reason;
  page += "</h1></body></html>\n";
  writer.start(status).header("Content-Type", "text/html; charset=utf-8");
  if (!field.name.empty()) writer.header(field.name, field.value);
  writer.body(page);
}

}  // namespace tern::http
