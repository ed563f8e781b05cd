#include "server/handlers/static_handler.h"

#include "http/error_page.h"
#include "http/uri.h"
#include "files/autoindex.h"
#include "files/file_response.h"
#include "server/handlers/location_handlers.h"
#include "server/sites.h"
#include "net/event_loop.h"

namespace tern::server {


StaticHandler::StaticHandler(const Location& location, bool use_mmap)
    : prefix_(location.alias && !location.regex ? location.config.pattern : std::string()),
      regex_alias_(location.alias && location.regex ? split_regex_alias(location.config.alias).rest : std::string()),
      use_mmap_(use_mmap) {
  const std::vector<std::string>& entries = location.config.try_files;
  for (size_t i = 0; i + 1 < entries.size(); ++i) {
    // As nginx: an entry written with a final '/' ("$uri/") wants a
    // directory, any other a file, whatever the expansion ends with.
    std::string_view entry = entries[i];
    const bool directory = entry.size() > 1 && entry.back() == '/';
    if (directory) entry.remove_suffix(1);
    try_entries_.push_back({VariableText(entry), directory});
  }
  if (!entries.empty()) {
    try_last_ = entries.back();
    if (try_last_.front() != '=' && try_last_.front() != '@') try_fallback_ = VariableText(try_last_);
  }
}

RegexAlias split_regex_alias(std::string_view alias) {
  const size_t variable = std::min(alias.find('$'), alias.size());
  const size_t slash = alias.rfind('/', variable == alias.size() ? alias.size() - 1 : variable);
  RegexAlias out;
  out.root = std::string(alias.substr(0, slash == 0 ? 1 : slash));
  out.rest = std::string(alias.substr(slash));
  return out;
}

bool StaticHandler::file_path(std::string_view path, std::string* out) const {
  return alias_file_path(prefix_, path, out);
}

bool alias_file_path(std::string_view prefix, std::string_view path, std::string* out) {
  if (prefix.empty()) {
    out->assign(path);
    return true;
  }
  std::string_view rest = path.substr(std::min(path.size(), prefix.size()));
  if (prefix.back() == '/') {
    out->assign("/").append(rest);
  } else if (rest.empty() || rest.front() == '/') {
    out->assign(rest.empty() ? "/" : rest);
  } else {
    return false;
  }
  return true;
}

Claim StaticHandler::claim(Route& route) {
  if (!regex_alias_.empty()) return Claim::kRespond;  // one file, named by the captures
  if (!try_last_.empty()) {
    const Claim claim = try_files(route);
    if (claim != Claim::kRespond || route.status != 0) return claim;
  }
  return index(route);
}

Claim StaticHandler::index(Route& route) const {
  // nginx's index module takes GET, HEAD and POST; serve() answers the rest.
  const http::Method method = route.request->method();
  if (route.path.empty() || route.path.back() != '/' ||
      (method != http::Method::kGet && method != http::Method::kHead && method != http::Method::kPost)) {
    return Claim::kRespond;
  }
  std::string directory;
  if (!file_path(route.path, &directory)) return Claim::kRespond;
  const std::string_view name = route.files->index_name(directory, net::EventLoop::current()->clock().now());
  if (name.empty()) return Claim::kRespond;  // 403, a listing, or 404: serve() says
  std::string target;  // route.path may view route.target
  target.reserve(route.path.size() + name.size());
  target.append(route.path).append(name);
  route.target = std::move(target);
  route.path = route.target;
  return Claim::kRedirect;
}

Claim StaticHandler::try_files(Route& route) {
  std::string candidate, file;
  const auto now = net::EventLoop::current()->clock().now();
  for (const TryEntry& entry : try_entries_) {
    // The slash of an entry that wants a directory is not part of the URI
    // tried, so that "/docs" found as a directory is 301 to "/docs/"
    // (relative links work) and "/docs/" goes on to its index.
    const bool directory = entry.directory;
    candidate.clear();
    entry.path.expand(route, false, &candidate);
    for (size_t at = candidate.find("//"); at != std::string::npos; at = candidate.find("//", at)) {
      candidate.erase(at, 1);
    }
    if (candidate.empty() || candidate.front() != '/' || !file_path(candidate, &file)) continue;
    files::OpenFileCache::FileResult found = route.files->cache().find(file, now);
    if (found && (directory ? found.value()->is_directory() : found.value()->is_regular())) {
      route.target = std::move(candidate);
      route.path = route.target;
      return Claim::kRespond;
    }
  }
  const std::string& last = try_last_;
  if (last.front() == '=') {
    route.status = std::stoi(last.substr(1));
    return Claim::kRespond;
  }
  if (last.front() == '@') {
    // A named location takes the request as it is (nginx's try_files ... @app).
    route.named = last;
    return Claim::kRedirect;
  }
  candidate.clear();
  try_fallback_.expand(route, false, &candidate);
  // The query a fallback URI names is not applied: the request keeps its own.
  candidate.resize(std::min(candidate.size(), candidate.find('?')));
  route.target = std::move(candidate);
  route.path = route.target;
  return Claim::kRedirect;
}

void StaticHandler::respond(const Route& route, http::ResponseWriter& writer) {
  if (route.status != 0) return http::write_error_page(writer, route.status);
  const auto now = net::EventLoop::current()->clock().now();
  if (!regex_alias_.empty()) {
    // The captures fill the alias in; the result is a path beneath its
    // root, normalised again (a capture may hold "//").
    std::string expanded;
    regex_alias_.expand(route, false, &expanded);
    std::string scratch;
    bool dot_segment = false;
    Result<std::string_view> file = http::normalized_path(expanded, &scratch, &dot_segment);
    if (!file || dot_segment) return http::write_error_page(writer, 404);
    return files::respond_static(*route.files, *route.request, {*file, true, route.path, false}, writer, now, use_mmap_);
  }
  if (prefix_.empty()) {
    return files::respond_static(*route.files, *route.request, {route.path, true, route.path, false}, writer, now, use_mmap_);
  }
  std::string file;
  if (!file_path(route.path, &file)) return http::write_error_page(writer, 404);
  files::respond_static(*route.files, *route.request, {file, true, route.path, false}, writer, now, use_mmap_);
}

}  // namespace tern::server
