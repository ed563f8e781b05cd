// Chain: the web server's requests, from a complete head to the handler
// that answers (server/handler.h). It holds the compiled Sites and, per
// location, its handlers in order; ChainLoop is one loop's side of it:
// the open-file caches of the document roots, and the route of the
// request being resolved.
//
//   request head -> SitesHandler::claim()   (a handler of HttpServer's chain)
//     -> ChainLoop::claim(): site by Host, path decoded and normalised
//        (400), an ACME CA's HTTP-01 validation (server/acme), dotfiles
//        (403), location by path (404), the location's handlers' claims
//        in order
//     -> respond(): the claiming handler answers at once (a body the
//        request carries is dropped), or start(): it takes the exchange
//
// Built on the main thread (and again on reload), shared by the loops;
// an exchange keeps the Chain it began under alive until it ends, so a
// reload never changes a request in flight.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/exchange.h"
#include "http/request.h"
#include "http/response_writer.h"
#include "server/config/config.h"
#include "net/loop_local.h"
#include "server/handler.h"
#include "http/error_page.h"
#include "files/static_files.h"
#include "files/mime_types.h"
#include "server/sites.h"

namespace tern::auth {
class UsersApp;
}

namespace tern {
class TaskPool;
}

namespace tern::server {

class AcmeChallenges;
class Chain;
class ChainLoop;
class FastCgiRoutes;
class Metrics;
struct LoopMetrics;
class KeyLimits;
class ProxyRoutes;

// A location's error_page on a response's writer: the status answered
// with a file of the site (served by the loop's static files, keeping the
// status) instead of the built-in page. Falls back to the built-in page
// when the path names no file, or when the loop has moved on to a newer
// configuration than the one the request began under.
class ErrorPages final : public http::ErrorPageHook {
 public:
  void bind(const Chain* chain, const Route& route);
  // For an exchange: keeps the chain too.
  void keep(std::shared_ptr<const Chain> chain) { kept_ = std::move(chain); }
  bool write(http::ResponseWriter& writer, int status, http::ErrorField field) override;

 private:
  const Chain* chain_ = nullptr;
  const Site* site_ = nullptr;
  const Location* location_ = nullptr;
  std::shared_ptr<const Chain> kept_;
};

class Chain : public std::enable_shared_from_this<Chain> {
 public:
  // `fastcgi` has the blocks of sites->fastcgi() (null when there are
  // none), `proxy` the groups of the locations' proxies (null without);
  // `users` is null without [auth]; `loops` is where the loops keep their
  // ChainLoop (for error pages); `limits` are config's [[limit]] tables
  // (null: new ones); `tasks` checks auth_basic's passwords (null: every
  // check is a 503); `acme` answers the CA's HTTP-01 validations (null:
  // none are). Reads the htpasswd files auth_basic names: throws
  // std::runtime_error naming one that does not load.
  Chain(std::shared_ptr<const Sites> sites, const Config& config,
        std::shared_ptr<const files::MimeTypes> mime, FastCgiRoutes* fastcgi, const ProxyRoutes* proxy,
        const auth::UsersApp* users,
        const net::LoopLocal<ChainLoop>* loops, const Metrics* metrics = nullptr,
        std::shared_ptr<const KeyLimits> limits = nullptr, TaskPool* tasks = nullptr,
        std::shared_ptr<const AcmeChallenges> acme = nullptr);
  ~Chain();

  const Sites& sites() const { return *sites_; }
  const std::shared_ptr<const Sites>& shared_sites() const { return sites_; }
  const std::vector<Handler*>& handlers(const Location& location) const {
    return chains_[location.id];
  }
  // StaticFiles options for a store (its root and index, and [static]).
  files::StaticFilesOptions static_options(const StaticStore& store) const;
  bool deny_dotfiles() const { return deny_dotfiles_; }
  // The config's blocked networks, for a client real_ip found behind a
  // proxy (the connection's own were judged at accept).
  const IpFilter& blocked() const { return blocked_; }
  bool use_mmap() const { return use_mmap_; }
  const net::LoopLocal<ChainLoop>& loops() const { return *loops_; }
  // The [[limit]] tables its locations count in.
  const std::shared_ptr<const KeyLimits>& key_limits() const { return key_limits_; }
  // What answers the CA's HTTP-01 validations before anything else; null
  // without ACME.
  Handler* acme_handler() const { return acme_.get(); }

 private:
  std::shared_ptr<const Sites> sites_;
  std::shared_ptr<const files::MimeTypes> mime_;
  files::StaticFilesOptions static_base_;
  bool deny_dotfiles_;
  IpFilter blocked_;
  bool use_mmap_;
  std::vector<std::unique_ptr<Handler>> owned_;
  std::vector<std::vector<Handler*>> chains_;  // by Location::id
  const net::LoopLocal<ChainLoop>* loops_;
  std::shared_ptr<const KeyLimits> key_limits_;
  std::unique_ptr<Handler> acme_;
};

class ChainLoop {
 public:
  // Opens the document roots (throws std::system_error when one cannot be
  // opened); their caches count into `counts` (null: not counted). On the
  // loop's thread.
  explicit ChainLoop(std::shared_ptr<const Chain> chain, LoopMetrics* counts = nullptr);
  ChainLoop(const ChainLoop&) = delete;
  ChainLoop& operator=(const ChainLoop&) = delete;

  // Resolves the request `route` names (its request and addresses): how
  // it is answered, by respond() or start() right after. Sets the
  // location's body limit on `route`.
  Claim claim(http::Route& route);
  void respond(const http::Request& request, http::ResponseWriter& writer);
  void start(http::Exchange& exchange);
  // An exchange that waited for its turn under a [[limit]] goes on to the
  // location's other handlers (its limits are not counted again); its
  // held body is released to whichever takes it.
  void resume(http::Exchange& exchange);

  const Chain& chain() const { return *chain_; }
  // Answers `status` with the file at `path` of `site` (ErrorPages).
  bool serve_error_page(const Site& site, std::string_view path, int status, http::ErrorField field,
                        http::ResponseWriter& writer);
  // Answers `request` with the static file `uri` names in `site` (an
  // application's X-Accel-Redirect), `fields` added; false when it names
  // no location with static files.
  bool serve_internal(const Site& site, std::string_view uri, const http::ExtraFields& fields,
                      const http::Request& request, http::ResponseWriter& writer);
  // The process is out of descriptors: the open-file caches of this loop
  // let go of some (OpenFileCache::shed_descriptors). How many closed.
  size_t shed_descriptors();

 private:
  // `connection_client`: the connection's client, which the site's real_ip
  // may replace (as the request's client) with one its proxies name.
  void resolve(const http::Request& request, const net::InetAddress& connection_client,
               const net::InetAddress& local, bool limited = false);
  void refuse(int status);
  bool has_error_pages() const;
  // The location's output filters (fields, compression) on `writer`.
  void set_filters(const http::Request& request, http::ResponseWriter& writer) const;

  std::shared_ptr<const Chain> chain_;
  std::vector<std::unique_ptr<files::StaticFiles>> stores_;  // by store index
  Route route_;
  std::string path_;  // the normalised path route_.path views, when it is not the request's
  const http::Request* resolved_for_ = nullptr;
  Handler* handler_ = nullptr;
  Claim claim_ = Claim::kPass;
  ErrorPages error_pages_;  // for the request being answered at once
};

// The web server's sites as one handler of HttpServer's chain: each call
// goes to the current loop's ChainLoop.
class SitesHandler final : public http::RequestHandler {
 public:
  explicit SitesHandler(const net::LoopLocal<ChainLoop>* loops) : loops_(loops) {}
  Claim claim(http::Route& route) override { return loops_->current()->claim(route); }
  void respond(const http::Route& route, http::ResponseWriter& writer) override {
    loops_->current()->respond(*route.request, writer);
  }
  void start(const http::Route& /*route*/, http::Exchange& exchange) override {
    loops_->current()->start(exchange);
  }

 private:
  const net::LoopLocal<ChainLoop>* loops_;
};

// Hands an exchange that waited (its turn under a [[limit]], a password
// check) back to `chain` on this loop, as ChainLoop::resume; a loop that
// has moved on to a newer configuration answers 503 instead (its handlers
// are no longer this chain's).
void resume_on(const Chain* chain, http::Exchange& exchange);

}  // namespace tern::server
