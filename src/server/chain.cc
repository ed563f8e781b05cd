#include "server/chain.h"

#include <map>

#include "auth/users_app.h"
#include "files/file_response.h"
#include "http/error_page.h"
#include "http/uri.h"
#include "net/event_loop.h"
#include "net/inet_address.h"
#include "server/acme/acme_challenges.h"
#include "server/handlers/fastcgi_handler.h"
#include "server/handlers/proxy_handler.h"
#include "server/handlers/location_handlers.h"
#include "server/handlers/metrics_handler.h"
#include "server/observability/metrics.h"
#include "server/handlers/static_handler.h"
#include "server/access/basic_auth.h"
#include "server/access/forward_auth.h"
#include "server/limits/limit_handler.h"
#include "tls/server_context.h"

namespace tern::server {
namespace {

// The chain's own answers: a path that cannot be decoded, a dotfile, no
// location, too many internal redirects.
StatusHandler kBadRequest(400), kForbidden(403), kNotFound(404), kLoop(500);
SlashHandler kAddSlash;

// Internal redirects one request may take (nginx allows 10).
constexpr int kMaxRedirects = 10;

}  // namespace

Chain::Chain(std::shared_ptr<const Sites> sites, const Config& config,
             std::shared_ptr<const files::MimeTypes> mime, FastCgiRoutes* fastcgi, const ProxyRoutes* proxy,
             const auth::UsersApp* users, const net::LoopLocal<ChainLoop>* loops, const Metrics* metrics,
             std::shared_ptr<const KeyLimits> limits, TaskPool* tasks, std::shared_ptr<const AcmeChallenges> acme)
    : sites_(std::move(sites)),
      mime_(std::move(mime)),
      deny_dotfiles_(config.static_files.deny_dotfiles),
      blocked_(config.blocked),
      loops_(loops),
      key_limits_(limits != nullptr ? std::move(limits) : std::make_shared<const KeyLimits>(config.key_limits, nullptr)) {
  const StaticConfig& st = config.static_files;
  static_base_.symlinks = st.allow_symlinks_outside_root ? files::SymlinkPolicy::kAnywhere : files::SymlinkPolicy::kInsideRoot;
  static_base_.gzip_static = st.gzip_static;
  static_base_.cache_max_entries = st.cache_entries;
  static_base_.cache_max_bytes = st.cache_bytes;
  static_base_.cache_valid_for = st.cache_valid;
  static_base_.memory_max_file_bytes = st.memory_file_bytes;
  static_base_.deny_dotfiles = st.deny_dotfiles;
  static_base_.mime_types = mime_.get();
  const bool use_mmap = use_mmap_ = st.zero_copy == StaticConfig::ZeroCopy::kMmap;
  if (acme != nullptr) acme_ = std::make_unique<AcmeChallengeHandler>(std::move(acme));

  chains_.resize(sites_->location_count());
  auto add = [this](std::vector<Handler*>& chain, std::unique_ptr<Handler> handler) {
    chain.push_back(handler.get());
    owned_.push_back(std::move(handler));
  };
  // One BasicUsers per htpasswd file (and attempts), whatever names it.
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<BasicUsers>> basic_users;
  auto users_of = [&basic_users](const AuthBasicConfig& a) {
    std::shared_ptr<BasicUsers>& file = basic_users[{a.users, a.attempts}];
    if (!file) file = std::make_shared<BasicUsers>(a.users, a.attempts);
    return file;
  };
  for (const auto& site : sites_->sites()) {
    for (const Location& location : site->locations()) {
      std::vector<Handler*>& chain = chains_[location.id];
      const LocationConfig& lc = location.config;
      if (const TlsConfig& tls = site->config().tls; tls.verify_client != "off") {
        add(chain, std::make_unique<ClientCertHandler>(
                       lc.require_client_cert, tls::client_demands(tls.client_ca, tls.client_crl, tls.verify_depth)));
      }
      if (!lc.limit.empty()) add(chain, std::make_unique<LimitHandler>(key_limits_, lc, this));
      if (AccessHandler::needed(lc)) add(chain, std::make_unique<AccessHandler>(lc));
      if (lc.auth_basic && lc.auth_basic->on()) {
        add(chain, std::make_unique<BasicAuthHandler>(users_of(*lc.auth_basic), *lc.auth_basic, this, tasks));
      }
      if (lc.auth_forward && lc.auth_forward->on()) {
        // Never a location left open: the check's group comes with the config.
        if (proxy == nullptr) throw std::runtime_error("auth_forward: no upstream group for " + lc.auth_forward->check->pass);
        add(chain, std::make_unique<ForwardAuthHandler>(proxy, *lc.auth_forward, this));
      }
      if (!lc.methods.empty()) add(chain, std::make_unique<MethodsHandler>(lc.methods, location.allow));
      if (lc.ret.status != 0) {
        add(chain, std::make_unique<ReturnHandler>(lc));
        continue;  // nothing after a return runs
      }
      if (!lc.metrics.empty() && metrics != nullptr) {
        add(chain, std::make_unique<MetricsHandler>(metrics, lc.metrics == "prometheus"
                                                                 ? MetricsHandler::Kind::kPrometheus
                                                                 : MetricsHandler::Kind::kStatus));
        continue;  // it answers every request
      }
      if (lc.users && users != nullptr) add(chain, std::make_unique<UsersHandler>(users));
      if (lc.proxy && proxy != nullptr) {
        add(chain, std::make_unique<ProxyHandler>(proxy, location, this));
        continue;  // it answers every request
      }
      for (size_t block : location.fastcgi) add(chain, std::make_unique<FastCgiHandler>(fastcgi, block, this));
      if (lc.static_files) add(chain, std::make_unique<StaticHandler>(location, use_mmap));
    }
  }
}

Chain::~Chain() = default;

files::StaticFilesOptions Chain::static_options(const StaticStore& store) const {
  files::StaticFilesOptions options = static_base_;
  options.root = store.root;
  options.index = store.index;
  options.autoindex = store.autoindex;
  return options;
}

ChainLoop::ChainLoop(std::shared_ptr<const Chain> chain, LoopMetrics* counts) : chain_(std::move(chain)) {
  for (const StaticStore& store : chain_->sites().stores()) {
    stores_.push_back(std::make_unique<files::StaticFiles>(chain_->static_options(store)));
    if (counts != nullptr) stores_.back()->cache().set_counters(&counts->file_cache_hits, &counts->file_cache_misses);
  }
}

void ChainLoop::refuse(int status) {
  route_.status = status;
  claim_ = Claim::kRespond;
  switch (status) {
    case 400: handler_ = &kBadRequest; break;
    case 403: handler_ = &kForbidden; break;
    case 404: handler_ = &kNotFound; break;
    default: handler_ = &kLoop; break;
  }
}

void ChainLoop::resolve(const http::Request& request, const net::InetAddress& connection_client,
                        const net::InetAddress& local, bool limited) {
  Route& r = route_;
  r.request = &request;
  r.local = &local;
  r.connection_client = &connection_client;
  r.location = nullptr;
  r.app = nullptr;
  r.status = 0;
  r.redirects = 0;
  r.internal = false;
  r.named = {};
  r.limited = limited;
  r.wait = {};
  resolved_for_ = &request;
  r.site = &chain_->sites().select(request.host(), local);
  const RealIpConfig& real_ip = r.site->config().real_ip;
  request.set_client_address(real_ip.enabled() ? real_client(real_ip, request, connection_client) : connection_client);
  r.client = &request.client_address();
  if (real_ip.enabled() && !chain_->blocked().empty() && chain_->blocked().blocked(*r.client)) return refuse(403);
  request.set_tag(r.site->series());
  bool dot_segment = false;
  Result<std::string_view> path = http::normalized_path(request.path(), &path_, &dot_segment);
  if (!path) return refuse(400);
  r.path = *path;
  // The CA's HTTP-01 validation, before any rule of the site (its
  // redirects, its locations, the dotfiles it denies).
  if (Handler* acme = chain_->acme_handler(); acme != nullptr && acme->claim(r) != Claim::kPass) {
    claim_ = Claim::kRespond;
    handler_ = acme;
    return;
  }
  if (dot_segment && chain_->deny_dotfiles() && files::names_a_dotfile(*path)) return refuse(403);
  if (r.site->wants_slash(r.path)) {
    claim_ = Claim::kRespond;
    handler_ = &kAddSlash;
    return;
  }
  for (;;) {
    r.captures.clear();
    r.location = r.named.empty() ? r.site->match(r.path, &r.captures) : r.site->named(r.named);
    r.named = {};
    // An internal location is for try_files' redirects, not for clients.
    if (r.location == nullptr || (r.location->config.internal && !r.internal)) {
      r.location = nullptr;
      request.set_tag(r.site->series());
      return refuse(404);
    }
    r.files = stores_[r.location->store].get();
    request.set_tag(r.location->series);
    Claim claim = Claim::kPass;
    for (Handler* handler : chain_->handlers(*r.location)) {
      claim = handler->claim(r);
      if (claim == Claim::kPass) continue;
      handler_ = handler;
      claim_ = claim;
      break;
    }
    if (claim == Claim::kPass) return refuse(404);
    if (claim != Claim::kRedirect) return;
    if (++r.redirects > kMaxRedirects) {
      r.location = nullptr;
      return refuse(500);
    }
    r.internal = true;
  }
}

Claim ChainLoop::claim(http::Route& route) {
  route_.secure = route.secure;
  resolve(*route.request, *route.client, *route.local);
  if (route_.location != nullptr) route.max_body = route_.location->config.body_bytes;
  return claim_;
}

bool ChainLoop::has_error_pages() const {
  return route_.location != nullptr ? !route_.location->error_pages->empty()
                                    : !route_.site->config().error_pages.empty();
}

void ChainLoop::set_filters(const http::Request& request, http::ResponseWriter& writer) const {
  const Location* location = route_.location;
  if (location == nullptr) {
    if (route_.site != nullptr && !route_.site->fields().empty()) writer.set_extra_fields(&route_.site->fields());
    return;
  }
  if (!location->fields.empty()) writer.set_extra_fields(&location->fields);
  if (location->compression != nullptr) {
    writer.set_compression(location->compression, request.header(http::FieldId::kAcceptEncoding));
  }
}

void ChainLoop::start(http::Exchange& exchange) {
  resolved_for_ = nullptr;
  // The configuration this request began under stays until it ends.
  if (has_error_pages()) {
    auto hook = std::make_shared<ErrorPages>();
    hook->bind(chain_.get(), route_);
    hook->keep(chain_);
    exchange.writer().set_error_pages(hook.get());
    exchange.keep(std::move(hook));
  } else {
    exchange.keep(chain_);
  }
  set_filters(exchange.request(), exchange.writer());
  handler_->start(route_, exchange);
}

void ChainLoop::resume(http::Exchange& exchange) {
  // The same request again, from its head: its site, location and claims
  // (what the exchange's writer carries, fields and error pages, stays).
  route_.secure = exchange.secure();
  resolve(exchange.request(), exchange.connection_client(), exchange.local_address(), /*limited=*/true);
  resolved_for_ = nullptr;
  switch (claim_) {
    case Claim::kExchange:
      handler_->start(route_, exchange);
      break;
    case Claim::kRespond:
    case Claim::kRespondWithBody:  // no location handler reads a body to answer
    default:
      handler_->respond(route_, exchange.writer());
      exchange.finish();
      return;  // what is left of the body is dropped
  }
  exchange.release_body();
}

void resume_on(const Chain* chain, http::Exchange& exchange) {
  ChainLoop* here = chain->loops().current();
  if (here == nullptr || &here->chain() != chain) {
    http::write_error_page(exchange.writer(), 503);
    return exchange.finish();
  }
  here->resume(exchange);
}

void ChainLoop::respond(const http::Request& request, http::ResponseWriter& writer) {
  if (resolved_for_ != &request) {
    // Only claim() resolves (HttpServer asks it for every request head).
    return http::write_error_page(writer, 500);
  }
  resolved_for_ = nullptr;
  if (has_error_pages()) {
    error_pages_.bind(chain_.get(), route_);
    writer.set_error_pages(&error_pages_);
  }
  set_filters(request, writer);
  handler_->respond(route_, writer);
}

void ErrorPages::bind(const Chain* chain, const Route& route) {
  chain_ = chain;
  site_ = route.site;
  location_ = route.location;
}

bool ErrorPages::write(http::ResponseWriter& writer, int status, http::ErrorField field) {
  const std::string_view page = site_->error_page(location_, status);
  if (page.empty()) return false;
  const std::optional<ErrorPageTarget> target = parse_error_page(page);
  if (!target) return false;  // the config checked it
  if (!target->url.empty()) {
    writer.start(target->status != 0 ? target->status : 302).header("Location", target->url);
    writer.header("Content-Type", "text/html; charset=utf-8");
    writer.body("<!DOCTYPE html>\n<html><body>Moved</body></html>\n");
    return true;
  }
  ChainLoop* loop = chain_->loops().current();
  if (loop == nullptr || &loop->chain() != chain_) return false;
  return loop->serve_error_page(*site_, target->path, target->status != 0 ? target->status : status, field, writer);
}

namespace {

// The location of `site` that serves `path` with static files, and the
// file beneath its root; null when none does.
const Location* static_target(const Site& site, std::string_view path, std::string* file) {
  Captures captures;
  const Location* target = site.match(path, &captures);
  if (target == nullptr || !target->config.static_files || (target->alias && target->regex) ||
      !alias_file_path(target->alias ? target->config.pattern : std::string_view(), path, file)) {
    return nullptr;
  }
  return target;
}

}  // namespace

bool ChainLoop::serve_error_page(const Site& site, std::string_view path, int status,
                                 http::ErrorField field, http::ResponseWriter& writer) {
  std::string file;
  const Location* target = static_target(site, path, &file);
  if (target == nullptr) return false;
  files::StaticRequest query;
  query.path = file;
  query.normalized = true;
  files::StaticResult result = stores_[target->store]->serve(query, net::EventLoop::current()->clock().now());
  if (result.status != 200 || result.listing) return false;
  // An internal redirect, as with nginx: the page's own location's fields
  // (its `always` ones, for an error status), not the failed request's.
  writer.set_extra_fields(target->fields.empty() ? nullptr : &target->fields);
  writer.start(status).header("Content-Type", result.content_type);
  if (!field.name.empty()) writer.header(field.name, field.value);
  if (result.file->has_content()) {
    writer.body(result.file->content());
    return true;
  }
  net::FileRegion region;
  region.fd = result.file->fd();
  region.offset = 0;
  region.length = result.length;
  region.keep_alive = result.file;
  writer.file(std::move(region));
  return true;
}

size_t ChainLoop::shed_descriptors() {
  size_t closed = 0;
  for (const auto& store : stores_) closed += store->cache().shed_descriptors();
  return closed;
}

bool ChainLoop::serve_internal(const Site& site, std::string_view uri, const http::ExtraFields& fields,
                               const http::Request& request, http::ResponseWriter& writer) {
  std::string scratch;
  bool dot_segment = false;
  Result<std::string_view> path = http::normalized_path(uri.substr(0, uri.find('?')), &scratch, &dot_segment);
  if (!path || (dot_segment && chain_->deny_dotfiles() && files::names_a_dotfile(*path))) return false;
  std::string file;
  const Location* target = static_target(site, *path, &file);
  if (target == nullptr) return false;
  // The location's fields and the application's, together.
  http::ExtraFields extra = target->fields;
  extra.always.append(fields.always);
  writer.set_extra_fields(&extra);
  files::respond_static(*stores_[target->store], request, {file, true, *path, /*as_get=*/true}, writer,
                 net::EventLoop::current()->clock().now(),
                 chain_->use_mmap());
  return true;
}

}  // namespace tern::server
