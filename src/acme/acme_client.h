// AcmeClient: RFC 8555's conversation with a CA, over an HttpsClient: the
// directory, replay nonces, the account, orders and their authorizations,
// challenges, finalization and the certificate, and the CA's renewal
// information (RFC 9773).
//
//   AcmeClient ca(&https, "https://acme-v02.api.letsencrypt.org/directory", &key);
//   ca.account({"mailto:ops@example.com"}, /*agree_tos=*/true, nullptr);
//   AcmeClient::Order order = ca.new_order({"example.com"}, "");
//   for (const std::string& url : order.authorizations) {
//     AcmeClient::Authorization authz = ca.authorization(url);
//     const AcmeClient::Challenge* c = authz.challenge("http-01");
//     publish(c->token, key.key_authorization(c->token));       // tern answers it
//     ca.respond(c->url);
//     ca.wait_for_authorization(url, deadline);
//   }
//   order = ca.finalize(order, request.der, deadline);
//   std::string chain = ca.certificate(order.certificate);
//
// Every request but the directory's and the renewal information's is a
// POST signed by the account key with a fresh nonce; a badNonce answer is
// retried with the nonce it brought (RFC 8555 6.5). What the CA refuses
// throws a Problem with its problem document; what cannot reach it,
// HttpsClient::Failure. Blocking; one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "acme/account_key.h"
#include "acme/https_client.h"

namespace tern::acme {

// A CA's answer of failure: its problem document (RFC 7807, RFC 8555 6.7).
class Problem : public std::runtime_error {
 public:
  Problem(int status, std::string type, std::string detail, std::chrono::seconds retry_after);
  int status() const { return status_; }
  // "urn:ietf:params:acme:error:rateLimited", ...; empty when the CA sent
  // no problem document.
  const std::string& type() const { return type_; }
  const std::string& detail() const { return detail_; }
  // From Retry-After (0: none): when a rate limit lets go.
  std::chrono::seconds retry_after() const { return retry_after_; }
  // type() ends in ":name" (the ACME namespace's short name).
  bool is(std::string_view name) const;

 private:
  int status_;
  std::string type_;
  std::string detail_;
  std::chrono::seconds retry_after_;
};

// An account key the CA's operator issued beside the account (RFC 8555
// 7.3.4): its key identifier and its MAC key, base64url.
struct ExternalAccount {
  std::string key_id;
  std::string mac_key;
};

// Thrown out of a wait when the client's Wait said stop.
class Stopped : public std::runtime_error {
 public:
  Stopped() : std::runtime_error("stopped") {}
};

class AcmeClient {
 public:
  // Waits `delay` between two polls of an authorization or an order; false:
  // the process is stopping (the wait throws Stopped).
  using Wait = std::function<bool(std::chrono::milliseconds delay)>;

  // `https` and `key` outlive it. Null `wait`: sleeps.
  AcmeClient(HttpsClient* https, std::string directory_url, const AccountKey* key, Wait wait = nullptr);

  struct Directory {
    std::string new_nonce;
    std::string new_account;
    std::string new_order;
    std::string renewal_info;  // empty: the CA has none (RFC 9773)
    std::string terms_of_service;
    bool external_account_required = false;
  };
  // Read once, at the first call.
  const Directory& directory();

  // The account of the key: made with `contact` ("mailto:..."), or the one
  // the CA already has for it. Its URL, which signs every later request;
  // asked for again after the CA answered that it has no such account.
  // A CA that needs an external account binding gets it from `external`.
  const std::string& account(const std::vector<std::string>& contact, bool agree_tos,
                             const ExternalAccount* external);

  struct Order {
    std::string url;
    std::string status;  // pending, ready, processing, valid, invalid
    std::vector<std::string> authorizations;
    std::string finalize;
    std::string certificate;  // once valid
  };
  // An order for `names` (DNS names); `replaces`: the renewal identifier of
  // the certificate it renews (RFC 9773 section 5), or empty.
  Order new_order(const std::vector<std::string>& names, std::string_view replaces);
  Order order(const std::string& url);

  struct Challenge {
    std::string type;  // http-01, tls-alpn-01, dns-01, ...
    std::string url;
    std::string token;
    std::string status;
  };
  struct Authorization {
    std::string name;    // the identifier's value
    std::string status;  // pending, valid, invalid, ...
    std::vector<Challenge> challenges;
    // Why it is invalid: the failed challenge's error, as the CA wrote it.
    std::string error;
    const Challenge* challenge(std::string_view type) const;
  };
  Authorization authorization(const std::string& url);
  // Tells the CA the challenge can be validated now.
  void respond(const std::string& challenge_url);

  using Deadline = std::chrono::steady_clock::time_point;
  // Asks again (after the CA's Retry-After, or a second) until the
  // authorization is no longer pending. Throws a Problem when it turned
  // invalid or the deadline passed.
  Authorization wait_for_authorization(const std::string& url, Deadline deadline);
  // Asks for the order until it is ready (`order` may be new_order's,
  // still pending), sends the request (DER) to its finalize URL and asks again
  // until the order is valid (its certificate URL set). Throws a Problem
  // when it turned invalid or the deadline passed.
  Order finalize(const Order& order, std::string_view request_der, Deadline deadline);
  // The certificate and its chain, PEM.
  std::string certificate(const std::string& url);

  struct RenewalWindow {
    int64_t start = 0;  // Unix seconds: renew at a moment between them
    int64_t end = 0;
    std::chrono::seconds retry_after{0};  // ask again after (0: not said)
  };
  // The CA's window for renewing the certificate of `renewal_id`
  // (CertificateFacts::renewal_id); nullopt when the CA has no renewal
  // information.
  std::optional<RenewalWindow> renewal_window(std::string_view renewal_id);

 private:
  // A signed POST of `payload` (empty: POST-as-GET) by the account
  // (`by_key`: by the key itself, for newAccount). Takes the response's
  // nonce for the next; retries a badNonce answer twice.
  HttpsClient::Response post(const std::string& url, std::string_view payload, bool by_key = false);
  std::string fresh_nonce();
  // Throws the Problem of a response that is not 2xx.
  static void check(const HttpsClient::Response& response);
  // A POST-as-GET of `url`, checked.
  HttpsClient::Response fetch(const std::string& url);
  // Waits before the next poll: the response's Retry-After or a second,
  // bounded by `deadline` (false: it has passed).
  bool pause(const HttpsClient::Response& response, Deadline deadline);

  HttpsClient* const https_;
  const std::string directory_url_;
  const AccountKey* const key_;
  const Wait wait_;
  std::optional<Directory> directory_;
  std::string nonce_;  // the last Replay-Nonce, unused
  std::string account_url_;
};

}  // namespace tern::acme
