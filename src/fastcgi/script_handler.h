// ScriptHandler: the scripts beneath a directory, run by a FastCGI
// application (php-fpm) for the requests on HttpServer's chain that name
// them:
//
//   fastcgi::ScriptHandlerOptions php;
//   php.application = net::SocketAddress::parse("unix:/run/php/php8.2-fpm.sock").value();
//   php.root = "/srv/app";
//   server.add_handler(std::make_unique<fastcgi::ScriptHandler>(php));
//
// Which requests, as the web server's FastCGI locations decide (nginx's
// usual PHP set-up): the request's path is decoded and normalised, and
//   - a path ending in '/' runs the directory's index script ("/" ->
//     "/index.php") when that file exists;
//   - otherwise the script is the longest part of the path, ending at a
//     segment, that ends with the extension and exists as a regular file
//     beneath the root; what follows is PATH_INFO ("/app.php/users/7");
//   - a path that ends with the extension but names no script is 404 here,
//     without asking the application, and one beneath a dot directory
//     ("/.git/x.php") 403;
//   - every other path passes on (to a DirectoryHandler after it, for the
//     site's other files). A script's source is never sent.
// Every method goes to the application, with the body, gathered before a
// connection is taken (a chunked one always: PHP reads CONTENT_LENGTH
// bytes). The application's response is read as fast as it comes while the
// client takes it at its own pace (nginx's fastcgi_buffering; off with
// `buffering`); one that is not a FastCGI response is 502, and one that
// does not come in time 504 (fastcgi/relay.h).
//
// Each loop keeps its own connections to the application (up to
// `connections`, reused: php-fpm's pm.max_children should cover loops x
// connections) and its own cache of which scripts exist. Shared by the
// loops.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "files/open_file_cache.h"
#include "http/handler.h"
#include "net/loop_local.h"
#include "net/socket_address.h"
#include "upstream/group_per_loop.h"

namespace tern::fastcgi {

// What a ScriptHandler is made with.
struct ScriptHandlerOptions {
  // php-fpm: an IP address and port, or a Unix socket (SocketAddress::parse).
  net::SocketAddress application = net::InetAddress(9000, /*loopback_only=*/true);
  std::string root;                // the scripts' directory: SCRIPT_FILENAME is root + path
  std::string prefix = "/";        // the paths it takes
  std::string extension = ".php";  // what a script's name ends with
  std::string index = "index.php";  // a directory's script; empty: none
  size_t connections = 8;          // to the application, per loop
  size_t queue = 256;              // requests waiting for a connection, per loop
  uint64_t max_body = 0;           // a request body's bound (then 413); 0: the server's (HttpLimits)
  std::chrono::milliseconds connect_timeout{5000};  // to the application (then 502)
  std::chrono::milliseconds read_timeout{60000};  // for each read of the response
  bool buffering = true;  // request and response bodies (see above); false: streamed
  std::string server_name;  // SERVER_NAME; empty: the request's host, without a port
  std::string server_software = "tern";  // SERVER_SOFTWARE
  std::string temp_dir = "/tmp";  // for bodies larger than kept in memory
};

class ScriptHandler final : public http::RequestHandler {
 public:
  // Throws std::invalid_argument for a prefix that does not start with
  // '/' or an empty extension, std::system_error when the root cannot be
  // opened.
  explicit ScriptHandler(ScriptHandlerOptions options);

  ~ScriptHandler() override;
  ScriptHandler(const ScriptHandler&) = delete;
  ScriptHandler& operator=(const ScriptHandler&) = delete;

  // A path that names a script is an exchange; one that ends with the
  // extension but names none is answered here; any other passes.
  http::Claim claim(http::Route& route) override;
  // The 404 (or 403) of a script that is not there.
  void respond(const http::Route& route, http::ResponseWriter& writer) override;
  // Runs the script: the request relayed to the application.
  void start(const http::Route& route, http::Exchange& exchange) override;
  // Closes this loop's connections to the application.
  void close_loop(net::EventLoop* loop) override;

 private:
  struct LoopScripts;
  // Which script the request's path names (see above).
  struct Found {
    int status = 0;  // 0: run `script`; else the error (404, 403) to answer; -1: not ours
    std::string_view script;     // its URI path
    std::string_view path_info;  // what followed it
    std::string_view path;       // the whole normalised path
  };
  Found find(std::string_view request_path, LoopScripts& loop) const;
  LoopScripts& loop_scripts();

  ScriptHandlerOptions options_;  // the root without a final '/'
  std::string prefix_;  // normalised, without a final '/': "" for "/"
  std::string log_name_;
  net::LoopLocal<LoopScripts> loops_;
  upstream::GroupPerLoop groups_;
};

}  // namespace tern::fastcgi
