#include "auth/users_app.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::auth {
namespace {

constexpr size_t kMaxBody = 4096;  // a username and a password, as JSON

int64_t unix_now() { return static_cast<int64_t>(::time(nullptr)); }

struct Field {
  std::string_view name;
  std::string_view value;
};

// Every answer of the API goes out here: JSON (or nothing for 204), never
// stored by a cache, with any extra fields.
void answer(http::Exchange& exchange, int status, const nlohmann::json& body,
            std::initializer_list<Field> fields = {}) {
  http::ResponseWriter& w = exchange.writer();
  w.start(status).header("Cache-Control", "no-store");
  for (const Field& f : fields) w.header(f.name, f.value);
  if (status == 204) {
    w.end();
  } else {
    w.header("Content-Type", "application/json");
    w.body(body.dump() + "\n");
  }
  exchange.finish();
}

void send_error(http::Exchange& exchange, int status, std::string_view message) {
  answer(exchange, status, nlohmann::json{{"error", message}});
}

void send_method_not_allowed(http::Exchange& exchange, std::string_view allow) {
  answer(exchange, 405, nlohmann::json{{"error", "method not allowed"}}, {{"Allow", allow}});
}

void send_too_many(http::Exchange& exchange, int64_t retry_after, std::string_view message) {
  const std::string seconds = std::to_string(std::max<int64_t>(retry_after, 1));
  answer(exchange, 429, nlohmann::json{{"error", message}}, {{"Retry-After", seconds}});
}

bool valid_username(std::string_view name) {
  if (name.size() < 3 || name.size() > 32) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// "application/json", "application/json; charset=utf-8".
bool is_json(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  return http::iequals(type, "application/json");
}

// Over HTTPS the cookie says Secure: a browser then never sends it over
// plain HTTP, where anyone on the path could read it.
std::string cookie(std::string_view value, int64_t max_age, bool secure) {
  std::string c(SessionSigner::kCookieName);
  c += '=';
  c += value;
  c += "; Path=/; Max-Age=" + std::to_string(max_age) + "; HttpOnly; SameSite=Lax";
  if (secure) c += "; Secure";
  return c;
}

}  // namespace

// A task's answer comes back to the exchange's loop and finds the exchange
// by its id: if the client went away meanwhile, there is none, and the
// answer is dropped.
template <typename F>
void answer_later(const http::ExchangeId& id, F f) {
  id.loop->run_in_loop([id, f = std::move(f)]() mutable {
    if (http::Exchange* exchange = http::Exchange::find(id)) f(*exchange);
  });
}

UsersApp::UsersApp(std::unique_ptr<UserStore> store, const UsersOptions& options, TaskPool* tasks)
    : store_(std::move(store)),
      options_(options),
      tasks_(tasks),
      signer_(options.secret, options.session_ttl),
      login_limiter_(options.login_attempts, std::chrono::seconds(60)),
      register_limiter_(options.register_attempts, std::chrono::seconds(3600)),
      account_throttle_(options.account_login_failures, options.account_backoff,
                        options.max_account_backoff) {
  char hash[crypto_pwhash_STRBYTES];
  unsigned char random[16];
  randombytes_buf(random, sizeof random);
  if (crypto_pwhash_str(hash, reinterpret_cast<const char*>(random), sizeof random,
                        options_.password_ops, options_.password_memory) == 0) {
    dummy_hash_ = hash;
  }
  register_ = [this](http::Exchange& ex) { on_register(ex); };
  login_ = [this](http::Exchange& ex) { on_login(ex); };
  me_ = [this](http::Exchange& ex) { on_me(ex); };
  logout_ = [this](http::Exchange& ex) { on_logout(ex); };
}

UsersApp::~UsersApp() = default;

const http::ExchangeHandler* UsersApp::route(const http::Request& request) const {
  std::string_view path = request.path();
  if (!path.starts_with("/api/")) return nullptr;
  if (path == "/api/register") return &register_;
  if (path == "/api/login") return &login_;
  if (path == "/api/me") return &me_;
  if (path == "/api/logout") return &logout_;
  return nullptr;
}

void UsersApp::on_register(http::Exchange& exchange) {
  if (exchange.request().method() != http::Method::kPost) {
    return send_method_not_allowed(exchange, "POST");
  }
  int64_t retry_after = 0;
  if (!register_limiter_.allow(address_key(exchange.client_address()), unix_now(),
                               &retry_after)) {
    return send_too_many(exchange, retry_after, "too many registrations; try again later");
  }
  read_credentials(exchange, &UsersApp::do_register);
}

void UsersApp::on_login(http::Exchange& exchange) {
  if (exchange.request().method() != http::Method::kPost) {
    return send_method_not_allowed(exchange, "POST");
  }
  int64_t retry_after = 0;
  if (!login_limiter_.allow(address_key(exchange.client_address()), unix_now(),
                            &retry_after)) {
    return send_too_many(exchange, retry_after, "too many login attempts; try again later");
  }
  read_credentials(exchange, &UsersApp::do_login);
}

void UsersApp::on_me(http::Exchange& exchange) {
  const http::Method method = exchange.request().method();
  if (method != http::Method::kGet && method != http::Method::kHead) {
    return send_method_not_allowed(exchange, "GET, HEAD");
  }
  std::string_view value = SessionSigner::find_cookie(exchange.request().header(http::FieldId::kCookie));
  auto session = value.empty() ? std::nullopt : signer_.verify(value, unix_now());
  if (!session) return send_error(exchange, 401, "not logged in");
  // The signature is good; whether the session outlived a logout (on any
  // node) only the store knows.
  run_task(exchange, [this, id = exchange.id(), session = std::move(*session)] {
    UserStore::User user;
    const UserStore::Status status = store_->find_user(session.username, &user);
    answer_later(id, [status, user = std::move(user), generation = session.generation](http::Exchange& ex) {
      if (status == UserStore::Status::kUnavailable) {
        return send_error(ex, 503, "the user database is unavailable; try again shortly");
      }
      if (status != UserStore::Status::kOk || user.session_generation != generation) {
        return send_error(ex, 401, "not logged in");
      }
      answer(ex, 200, nlohmann::json{{"username", user.username}});
    });
  });
}

void UsersApp::on_logout(http::Exchange& exchange) {
  const http::Request& request = exchange.request();
  if (request.method() != http::Method::kPost) return send_method_not_allowed(exchange, "POST");
  // As for the other POSTs: a cross-site form cannot send this type, so it
  // cannot log anyone out.
  if (!is_json(request.header(http::FieldId::kContentType))) {
    return send_error(exchange, 415, "send JSON with Content-Type: application/json");
  }
  std::string_view value = SessionSigner::find_cookie(request.header(http::FieldId::kCookie));
  auto session = value.empty() ? std::nullopt : signer_.verify(value, unix_now());
  if (!session) {
    const std::string clear = cookie("", 0, exchange.secure() != nullptr);
    return answer(exchange, 204, nullptr, {{"Set-Cookie", clear}});
  }
  end_sessions(exchange, std::move(session->username));
}

void UsersApp::end_sessions(http::Exchange& exchange, std::string username) {
  run_task(exchange, [this, id = exchange.id(), username = std::move(username)] {
    const UserStore::Status status = store_->end_sessions(username);
    answer_later(id, [status](http::Exchange& ex) {
      const std::string clear = cookie("", 0, ex.secure() != nullptr);
      if (status == UserStore::Status::kUnavailable) {
        // This browser forgets the cookie; other copies of it stay valid
        // until the store is back and the user logs out again.
        return answer(ex, 503,
                      nlohmann::json{{"error", "the user database is unavailable; the session "
                                               "could not be ended everywhere"}},
                      {{"Set-Cookie", clear}});
      }
      answer(ex, 204, nullptr, {{"Set-Cookie", clear}});
    });
  });
}

void UsersApp::read_credentials(
    http::Exchange& exchange,
    void (UsersApp::*then)(http::Exchange&, std::string, std::string)) {
  const http::Request& request = exchange.request();
  if (!is_json(request.header(http::FieldId::kContentType))) {
    return send_error(exchange, 415, "send JSON with Content-Type: application/json");
  }
  if (request.body_framing() == http::BodyFraming::kContentLength && request.content_length() > kMaxBody) {
    return send_error(exchange, 413, "request body too large");
  }
  auto parse = [this, then](http::Exchange& ex, std::string_view body) {
    auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object()) {
      return send_error(ex, 400, "malformed JSON: expected an object");
    }
    auto username = json.find("username");
    auto password = json.find("password");
    if (username == json.end() || !username->is_string() || password == json.end() ||
        !password->is_string()) {
      return send_error(ex, 400, "\"username\" and \"password\" strings are required");
    }
    (this->*then)(ex, username->get<std::string>(), password->get<std::string>());
  };
  if (exchange.body_complete()) return parse(exchange, {});
  // The exchange drops this handler (and the body gathered in it) when it
  // ends, so the reference to it cannot outlive it.
  exchange.set_body_handler([&exchange, parse, body = std::string()](std::string_view piece,
                                                                      bool last) mutable {
    if (body.size() + piece.size() > kMaxBody) return send_error(exchange, 413, "request body too large");
    body.append(piece);
    if (last) parse(exchange, body);
  });
}

void UsersApp::run_task(http::Exchange& exchange, std::function<void()> task) {
  if (!tasks_->submit(std::move(task))) {
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "users: task queue full; answering 503 (request {})",
                          exchange.request().id());
    send_error(exchange, 503, "server busy; try again shortly");
  }
}

void UsersApp::do_register(http::Exchange& exchange, std::string username, std::string password) {
  if (!valid_username(username)) {
    return send_error(exchange, 400,
                      "username must be 3 to 32 characters of A-Z, a-z, 0-9, '_', '.' and '-'");
  }
  if (password.size() < 8 || password.size() > 128) {
    return send_error(exchange, 400, "password must be 8 to 128 bytes");
  }
  run_task(exchange, [this, id = exchange.id(), username = std::move(username),
                      password = std::move(password)] {
    char hash[crypto_pwhash_STRBYTES];
    UserStore::Status status = UserStore::Status::kUnavailable;
    if (crypto_pwhash_str(hash, password.data(), password.size(), options_.password_ops,
                          options_.password_memory) == 0) {
      status = store_->create_user(username, hash);
    } else {
      TERN_LOG_ERROR("users: out of memory hashing a password");
    }
    answer_later(id, [status, username](http::Exchange& ex) {
      switch (status) {
        case UserStore::Status::kOk:
          return answer(ex, 201, nlohmann::json{{"username", username}});
        case UserStore::Status::kTaken:
          return send_error(ex, 409, "that username is taken");
        default:
          return send_error(ex, 503, "the user database is unavailable; try again shortly");
      }
    });
  });
}

void UsersApp::do_login(http::Exchange& exchange, std::string username, std::string password) {
  // Refused before any hashing: a guesser spread over many addresses still
  // meets the account's back-off.
  int64_t retry_after = 0;
  if (!account_throttle_.allow(username, unix_now(), &retry_after)) {
    return send_too_many(exchange, retry_after,
                         "too many failed logins for this account; try again later");
  }
  run_task(exchange, [this, id = exchange.id(), username = std::move(username),
                      password = std::move(password)] {
    UserStore::User user;
    UserStore::Status status = valid_username(username) ? store_->find_user(username, &user)
                                                        : UserStore::Status::kNotFound;
    bool ok = false;
    if (status == UserStore::Status::kOk) {
      ok = crypto_pwhash_str_verify(user.password_hash.c_str(), password.data(), password.size()) == 0;
    } else if (status == UserStore::Status::kNotFound && !dummy_hash_.empty()) {
      // As slow as a real check, so timing does not tell which names exist.
      [[maybe_unused]] int ignored =
          crypto_pwhash_str_verify(dummy_hash_.c_str(), password.data(), password.size());
    }
    // Counted here, on the task thread (the throttle is thread-safe), so
    // that a client gone meanwhile still counts: unknown names too, so the
    // back-off does not tell which exist.
    if (status != UserStore::Status::kUnavailable) {
      if (ok) {
        account_throttle_.succeeded(username);
      } else {
        account_throttle_.failed(username, unix_now());
      }
    }
    answer_later(id, [this, status, ok, user = std::move(user)](http::Exchange& ex) {
      if (status == UserStore::Status::kUnavailable) {
        return send_error(ex, 503, "the user database is unavailable; try again shortly");
      }
      if (!ok) return send_error(ex, 401, "wrong username or password");
      // The name as registered, whatever case it was typed in.
      const std::string set = cookie(signer_.sign(user.username, user.session_generation, unix_now()),
                                     signer_.ttl().count(), ex.secure() != nullptr);
      answer(ex, 200, nlohmann::json{{"username", user.username}}, {{"Set-Cookie", set}});
    });
  });
}

Result<std::string> load_or_create_secret(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[256];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n < 32) return Error{EINVAL, "session key file shorter than 32 bytes"};
    return std::string(buf, static_cast<size_t>(n));
  }
  if (errno != ENOENT) return Error{errno, "open session key file"};
  unsigned char key[32];
  randombytes_buf(key, sizeof key);
  char hex[sizeof key * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, key, sizeof key);
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return load_or_create_secret(path);  // another process won the race
    return Error{errno, "create session key file"};
  }
  const std::string secret(hex, sizeof key * 2);
  const bool written = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ::close(fd);
  if (!written) return Error{EIO, "write session key file"};
  return secret;
}

}  // namespace tern::auth
