#include "acme/acme_client.h"

#include <openssl/evp.h>

#include <charconv>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "base/base64.h"
#include "http/http_date.h"
#include "tls/openssl_layer.h"

namespace tern::acme {
namespace {

using nlohmann::json;
using Response = HttpsClient::Response;

constexpr std::string_view kErrorPrefix = "urn:ietf:params:acme:error:";
constexpr std::string_view kJose = "application/jose+json";

json parse_json(const Response& r, std::string_view what) {
  json value = json::parse(r.body, nullptr, false);
  if (value.is_discarded() || !value.is_object()) {
    throw Problem(r.status, "", std::string("the CA's ") + std::string(what) + " is not a JSON object",
                  std::chrono::seconds(0));
  }
  return value;
}

std::string text(const json& object, const char* name) {
  const auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::chrono::seconds retry_after(const Response& r) {
  const std::string_view value = r.field("Retry-After");
  int64_t seconds = 0;
  if (const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
      error == std::errc() && end == value.data() + value.size()) {
    return std::chrono::seconds(std::max<int64_t>(seconds, 0));
  }
  if (const std::optional<time_t> at = http::parse_http_date(value)) {
    return std::chrono::seconds(std::max<int64_t>(*at - std::time(nullptr), 0));
  }
  return std::chrono::seconds(0);
}

// RFC 3339's date-time ("2025-01-02T04:00:00Z", fractions and offsets
// allowed), as Unix seconds; nullopt when it is not one.
std::optional<int64_t> parse_rfc3339(std::string_view value) {
  std::tm tm{};
  int consumed = 0;
  const std::string s(value);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t at = static_cast<int64_t>(timegm(&tm));
  std::string_view rest = value.substr(static_cast<size_t>(consumed));
  if (rest.starts_with('.')) {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') rest.remove_prefix(1);
  }
  if (rest == "Z" || rest == "z") return at;
  int hours = 0, minutes = 0;
  if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') &&
      std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &hours, &minutes) == 2) {
    const int64_t offset = (hours * 60 + minutes) * 60;
    return rest[0] == '+' ? at - offset : at + offset;
  }
  return std::nullopt;
}

AcmeClient::Order parse_order(const json& body, std::string url) {
  AcmeClient::Order order;
  order.url = std::move(url);
  order.status = text(body, "status");
  order.finalize = text(body, "finalize");
  order.certificate = text(body, "certificate");
  if (const auto it = body.find("authorizations"); it != body.end() && it->is_array()) {
    for (const json& a : *it) {
      if (a.is_string()) order.authorizations.push_back(a.get<std::string>());
    }
  }
  return order;
}

// What the CA wrote of an object's "error" (a problem document).
std::string error_of(const json& object) {
  const auto it = object.find("error");
  if (it == object.end() || !it->is_object()) return {};
  std::string detail = text(*it, "detail");
  const std::string type = text(*it, "type");
  return type.empty() ? detail : detail + " (" + type + ")";
}

AcmeClient::Authorization parse_authorization(const json& body) {
  AcmeClient::Authorization a;
  if (const auto id = body.find("identifier"); id != body.end() && id->is_object()) a.name = text(*id, "value");
  a.status = text(body, "status");
  if (const auto list = body.find("challenges"); list != body.end() && list->is_array()) {
    for (const json& c : *list) {
      if (!c.is_object()) continue;
      a.challenges.push_back({text(c, "type"), text(c, "url"), text(c, "token"), text(c, "status")});
      if (a.error.empty()) a.error = error_of(c);
    }
  }
  return a;
}

}  // namespace

Problem::Problem(int status, std::string type, std::string detail, std::chrono::seconds retry_after)
    : std::runtime_error(type.empty() ? detail : detail + " (" + type + ")"),
      status_(status),
      type_(std::move(type)),
      detail_(std::move(detail)),
      retry_after_(retry_after) {}

bool Problem::is(std::string_view name) const {
  return type_.size() == kErrorPrefix.size() + name.size() && std::string_view(type_).starts_with(kErrorPrefix) &&
         std::string_view(type_).ends_with(name);
}

const AcmeClient::Challenge* AcmeClient::Authorization::challenge(std::string_view type) const {
  for (const Challenge& c : challenges) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

AcmeClient::AcmeClient(HttpsClient* https, std::string directory_url, const AccountKey* key, Wait wait)
    : https_(https), directory_url_(std::move(directory_url)), key_(key), wait_(std::move(wait)) {}

void AcmeClient::check(const Response& r) {
  if (r.status >= 200 && r.status < 300) return;
  const json body = json::parse(r.body, nullptr, false);
  std::string type, detail;
  if (body.is_object()) {
    type = text(body, "type");
    detail = text(body, "detail");
  }
  if (detail.empty()) detail = "the CA answered " + std::to_string(r.status);
  throw Problem(r.status, std::move(type), std::move(detail), retry_after(r));
}

const AcmeClient::Directory& AcmeClient::directory() {
  if (directory_) return *directory_;
  const Response r = https_->send("GET", directory_url_);
  check(r);
  const json body = parse_json(r, "directory");
  Directory d;
  d.new_nonce = text(body, "newNonce");
  d.new_account = text(body, "newAccount");
  d.new_order = text(body, "newOrder");
  d.renewal_info = text(body, "renewalInfo");
  if (const auto meta = body.find("meta"); meta != body.end() && meta->is_object()) {
    d.terms_of_service = text(*meta, "termsOfService");
    const auto required = meta->find("externalAccountRequired");
    d.external_account_required = required != meta->end() && required->is_boolean() && required->get<bool>();
  }
  if (d.new_nonce.empty() || d.new_account.empty() || d.new_order.empty()) {
    throw Problem(r.status, "", "the CA's directory lacks newNonce, newAccount or newOrder", std::chrono::seconds(0));
  }
  directory_ = std::move(d);
  return *directory_;
}

std::string AcmeClient::fresh_nonce() {
  if (!nonce_.empty()) return std::exchange(nonce_, {});
  const Response r = https_->send("HEAD", directory().new_nonce);
  check(r);
  std::string nonce(r.field("Replay-Nonce"));
  if (nonce.empty()) throw Problem(r.status, "", "the CA gave no Replay-Nonce", std::chrono::seconds(0));
  return nonce;
}

Response AcmeClient::post(const std::string& url, std::string_view payload, bool by_key) {
  for (int attempt = 0;; ++attempt) {
    const std::string body = key_->sign(url, fresh_nonce(), by_key ? std::string_view() : account_url_, payload);
    Response r = https_->send("POST", url, kJose, body);
    if (const std::string_view nonce = r.field("Replay-Nonce"); !nonce.empty()) nonce_ = nonce;
    if (r.status == 400 || r.status == 403) {
      const json problem = json::parse(r.body, nullptr, false);
      const std::string type = problem.is_object() ? text(problem, "type") : std::string();
      // A nonce the CA no longer honours: once more with the one it sent.
      if (type == std::string(kErrorPrefix) + "badNonce" && attempt < 2) continue;
      // An account the CA no longer has (its database was reset, the
      // account deactivated): the next account() makes it again.
      if (type == std::string(kErrorPrefix) + "accountDoesNotExist" && !by_key) account_url_.clear();
    }
    return r;
  }
}

Response AcmeClient::fetch(const std::string& url) {
  Response r = post(url, "");
  check(r);
  return r;
}

const std::string& AcmeClient::account(const std::vector<std::string>& contact, bool agree_tos,
                                       const ExternalAccount* external) {
  if (!account_url_.empty()) return account_url_;
  const std::string& url = directory().new_account;
  json payload = {{"termsOfServiceAgreed", agree_tos}};
  if (!contact.empty()) payload["contact"] = contact;
  if (external != nullptr) {
    // A JWS of the account's key, by the MAC key (RFC 8555 7.3.4).
    std::string mac_key;
    if (!base64url_decode(external->mac_key, &mac_key)) {
      throw Problem(0, "", "the external account's MAC key is not base64url", std::chrono::seconds(0));
    }
    const std::string protected_part =
        base64url_encode(json({{"alg", "HS256"}, {"kid", external->key_id}, {"url", url}}).dump());
    const std::string payload_part = base64url_encode(key_->jwk());
    const std::string input = protected_part + "." + payload_part;
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t mac_size = 0;
    if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, mac_key.data(), mac_key.size(),
                  reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof mac,
                  &mac_size) == nullptr) {
      tls::throw_openssl_error("signing the external account binding");
    }
    payload["externalAccountBinding"] = {
        {"protected", protected_part},
        {"payload", payload_part},
        {"signature", base64url_encode(std::string_view(reinterpret_cast<const char*>(mac), mac_size))}};
  }
  const Response r = post(url, payload.dump(), /*by_key=*/true);
  check(r);
  account_url_ = r.field("Location");
  if (account_url_.empty()) throw Problem(r.status, "", "the CA named no account URL", std::chrono::seconds(0));
  return account_url_;
}

AcmeClient::Order AcmeClient::new_order(const std::vector<std::string>& names, std::string_view replaces) {
  json identifiers = json::array();
  for (const std::string& name : names) identifiers.push_back({{"type", "dns"}, {"value", name}});
  json payload = {{"identifiers", identifiers}};
  if (!replaces.empty()) payload["replaces"] = replaces;
  const Response r = post(directory().new_order, payload.dump());
  check(r);
  return parse_order(parse_json(r, "order"), std::string(r.field("Location")));
}

AcmeClient::Order AcmeClient::order(const std::string& url) {
  return parse_order(parse_json(fetch(url), "order"), url);
}

AcmeClient::Authorization AcmeClient::authorization(const std::string& url) {
  return parse_authorization(parse_json(fetch(url), "authorization"));
}

void AcmeClient::respond(const std::string& challenge_url) {
  const Response r = post(challenge_url, "{}");
  check(r);
}

bool AcmeClient::pause(const Response& response, Deadline deadline) {
  std::chrono::milliseconds delay = retry_after(response);
  if (delay.count() == 0) delay = std::chrono::seconds(1);
  delay = std::min(delay, std::chrono::milliseconds(std::chrono::seconds(30)));
  if (std::chrono::steady_clock::now() + delay > deadline) return false;
  if (!wait_) {
    std::this_thread::sleep_for(delay);
  } else if (!wait_(delay)) {
    throw Stopped();
  }
  return true;
}

AcmeClient::Authorization AcmeClient::wait_for_authorization(const std::string& url, Deadline deadline) {
  for (;;) {
    const Response r = fetch(url);
    Authorization a = parse_authorization(parse_json(r, "authorization"));
    if (a.status == "valid") return a;
    if (a.status != "pending" && a.status != "processing") {
      throw Problem(0, "", "the authorization of " + a.name + " is " + a.status +
                               (a.error.empty() ? std::string() : ": " + a.error),
                    std::chrono::seconds(0));
    }
    if (!pause(r, deadline)) {
      throw Problem(0, "", "the CA did not validate " + a.name + " in time", std::chrono::seconds(0));
    }
  }
}

AcmeClient::Order AcmeClient::finalize(const Order& pending, std::string_view request_der, Deadline deadline) {
  // `pending` may be as new_order left it: asked again until it is ready
  // (its authorizations valid), then the request sent once.
  Order current = pending;
  bool sent = false;
  for (;;) {
    if (current.status == "ready" && !sent) {
      const json payload = {{"csr", base64url_encode(request_der)}};
      const Response r = post(current.finalize, payload.dump());
      check(r);
      current = parse_order(parse_json(r, "order"), pending.url);
      sent = true;
      continue;
    }
    if (current.status == "valid" && !current.certificate.empty()) return current;
    const Response r = fetch(current.url);
    const json body = parse_json(r, "order");
    current = parse_order(body, pending.url);
    if (current.status == "invalid") {
      throw Problem(0, "", "the order was refused: " + error_of(body), std::chrono::seconds(0));
    }
    if ((current.status == "ready" && !sent) || (current.status == "valid" && !current.certificate.empty())) continue;
    if (!pause(r, deadline)) throw Problem(0, "", "the CA did not issue the certificate in time", std::chrono::seconds(0));
  }
}

std::string AcmeClient::certificate(const std::string& url) { return fetch(url).body; }

std::optional<AcmeClient::RenewalWindow> AcmeClient::renewal_window(std::string_view renewal_id) {
  const std::string& base = directory().renewal_info;
  if (base.empty() || renewal_id.empty()) return std::nullopt;
  std::string url = base;
  if (!url.ends_with('/')) url += '/';
  url += renewal_id;
  const Response r = https_->send("GET", url);
  if (r.status == 404) return std::nullopt;  // a certificate the CA does not know
  check(r);
  const json body = parse_json(r, "renewal information");
  const auto window = body.find("suggestedWindow");
  if (window == body.end() || !window->is_object()) {
    throw Problem(r.status, "", "the CA's renewal information has no suggestedWindow", std::chrono::seconds(0));
  }
  const std::optional<int64_t> start = parse_rfc3339(text(*window, "start"));
  const std::optional<int64_t> end = parse_rfc3339(text(*window, "end"));
  if (!start || !end || *end < *start) {
    throw Problem(r.status, "", "the CA's renewal window does not parse", std::chrono::seconds(0));
  }
  return RenewalWindow{*start, *end, retry_after(r)};
}

}  // namespace tern::acme
