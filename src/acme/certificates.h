// What ACME needs of X.509, on OpenSSL 3: a site's new key and its
// certificate signing request, the self-signed certificate a site shows
// until the CA has issued one, the certificate that answers a TLS-ALPN-01
// challenge (RFC 8737), and what an issued certificate says: its names,
// its validity and its identifier for renewal information (RFC 9773).
//
//   SigningRequest request = make_signing_request({"example.com", "www.example.com"});
//   // finalize with base64url(request.der); keep request.key_pem for the certificate
//   CertificateFacts facts = read_certificate(issued_chain_pem);
//   if (now > facts.not_before + (facts.not_after - facts.not_before) * 2 / 3) renew();
//
// Keys are ECDSA P-256. Every function throws std::runtime_error when
// OpenSSL fails, or when a certificate does not parse. Any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace tern::acme {

// A private key as PKCS #8 PEM (unencrypted).
std::string private_key_pem(evp_pkey_st* key);

// A certificate (then its chain) and its private key, PEM texts.
struct PemPair {
  std::string cert;
  std::string key;
};

struct SigningRequest {
  std::string der;      // the CSR (PKCS #10, DER): the names as DNS subjectAltNames
  std::string key_pem;  // the new certificate's private key
};
// A new key and a request, signed by it, for a certificate of `names`
// (host names, not empty).
SigningRequest make_signing_request(const std::vector<std::string>& names);

// A new key and a certificate of `names` signed by itself, valid from now
// for `lifetime`: what a site presents until its own is issued.
PemPair make_self_signed(const std::vector<std::string>& names, std::chrono::seconds lifetime);

// The certificate a TLS-ALPN-01 challenge for `name` is answered with
// (RFC 8737 section 3): self-signed, `name` its only subjectAltName, and
// the critical acmeIdentifier extension holding SHA-256 of
// `key_authorization`. Valid for a week from now.
PemPair make_challenge_certificate(std::string_view name, std::string_view key_authorization);

// What the first certificate of a PEM chain says.
struct CertificateFacts {
  std::vector<std::string> names;  // its DNS subjectAltNames, in order
  int64_t not_before = 0;          // Unix seconds
  int64_t not_after = 0;
  // RFC 9773's identifier: base64url of its authority key identifier, '.',
  // base64url of its serial number's bytes. Empty when it names no
  // authority key (a self-signed one).
  std::string renewal_id;
  // Signed by its own key (a stand-in of make_self_signed's), not by a CA.
  bool self_signed = false;
};
CertificateFacts read_certificate(std::string_view pem);

}  // namespace tern::acme
