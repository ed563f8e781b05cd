#include "acme/certificates.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>
#include <stdexcept>

#include "base/base64.h"
#include "tls/openssl_layer.h"

namespace tern::acme {
namespace {

using tls::throw_openssl_error;

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Certificate = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Request = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

// The OID of RFC 8737's acmeIdentifier extension (id-pe 31).
constexpr const char* kAcmeIdentifier = "1.3.6.1.5.5.7.1.31";
constexpr size_t kSha256 = 32;

Key new_key() {
  Key key(EVP_EC_gen(SN_X9_62_prime256v1));
  if (!key) throw_openssl_error("making a certificate key");
  return key;
}

// What `write` puts into a memory BIO.
template <typename Write>
std::string write_text(const char* doing, Write write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) throw_openssl_error(doing);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// subjectAltName: `names` as dNSNames.
Extension alt_names(const std::vector<std::string>& names) {
  GENERAL_NAMES* list = sk_GENERAL_NAME_new_null();
  bool built = list != nullptr;
  for (const std::string& name : names) {
    if (!built) break;
    GENERAL_NAME* entry = GENERAL_NAME_new();
    ASN1_IA5STRING* text = ASN1_IA5STRING_new();
    built = entry != nullptr && text != nullptr && ASN1_STRING_set(text, name.data(), static_cast<int>(name.size())) == 1;
    if (!built) {
      GENERAL_NAME_free(entry);
      ASN1_IA5STRING_free(text);
      break;
    }
    GENERAL_NAME_set0_value(entry, GEN_DNS, text);
    built = sk_GENERAL_NAME_push(list, entry) > 0;
    if (!built) GENERAL_NAME_free(entry);
  }
  Extension extension(built ? X509V3_EXT_i2d(NID_subject_alt_name, 0, list) : nullptr);
  GENERAL_NAMES_free(list);
  if (!extension) throw_openssl_error("naming a certificate");
  return extension;
}

// A self-signed certificate of `key` for `names`, valid from now for
// `lifetime`, with `extra` among its extensions (may be null).
Certificate self_signed(EVP_PKEY* key, const std::vector<std::string>& names, std::chrono::seconds lifetime,
                        X509_EXTENSION* extra) {
  Certificate cert(X509_new());
  if (!cert) throw_openssl_error("making a certificate");
  BIGNUM* serial = BN_new();
  // A random positive serial of 127 bits: two certificates never share one.
  const bool numbered = serial != nullptr && BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
                        BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(serial);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string& common = names.front();
  const bool made =
      numbered && X509_set_version(cert.get(), 2) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(lifetime.count())) != nullptr &&
      X509_set_pubkey(cert.get(), key) == 1 &&
      // A common name has at most 64 characters; the alt names are what count.
      (common.size() > 64 ||
       X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common.data()),
                                  static_cast<int>(common.size()), -1, 0) == 1) &&
      X509_set_issuer_name(cert.get(), subject) == 1 && X509_add_ext(cert.get(), alt_names(names).get(), -1) == 1 &&
      (extra == nullptr || X509_add_ext(cert.get(), extra, -1) == 1) && X509_sign(cert.get(), key, EVP_sha256()) > 0;
  if (!made) throw_openssl_error("making a certificate");
  return cert;
}

PemPair pair_of(X509* cert, EVP_PKEY* key) {
  return {write_text("writing a certificate", [cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); }),
          private_key_pem(key)};
}

int64_t unix_time(const ASN1_TIME* time) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(time, &tm) != 1) throw_openssl_error("reading a certificate's validity");
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

std::string private_key_pem(evp_pkey_st* key) {
  return write_text("writing a key", [key](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

SigningRequest make_signing_request(const std::vector<std::string>& names) {
  if (names.empty()) throw std::runtime_error("a certificate request names no host");
  Key key = new_key();
  Request request(X509_REQ_new());
  STACK_OF(X509_EXTENSION)* extensions = sk_X509_EXTENSION_new_null();
  Extension names_extension = alt_names(names);
  const bool made = request && extensions != nullptr && X509_REQ_set_version(request.get(), 0) == 1 &&
                    X509_REQ_set_pubkey(request.get(), key.get()) == 1 &&
                    sk_X509_EXTENSION_push(extensions, names_extension.get()) > 0 &&
                    X509_REQ_add_extensions(request.get(), extensions) == 1 &&
                    X509_REQ_sign(request.get(), key.get(), EVP_sha256()) > 0;
  sk_X509_EXTENSION_free(extensions);  // the extension stays names_extension's
  if (!made) throw_openssl_error("making a certificate request");
  const int size = i2d_X509_REQ(request.get(), nullptr);
  if (size <= 0) throw_openssl_error("writing a certificate request");
  std::string der(static_cast<size_t>(size), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_X509_REQ(request.get(), &out) != size) throw_openssl_error("writing a certificate request");
  return {std::move(der), private_key_pem(key.get())};
}

PemPair make_self_signed(const std::vector<std::string>& names, std::chrono::seconds lifetime) {
  if (names.empty()) throw std::runtime_error("a certificate names no host");
  Key key = new_key();
  Certificate cert = self_signed(key.get(), names, lifetime, nullptr);
  return pair_of(cert.get(), key.get());
}

PemPair make_challenge_certificate(std::string_view name, std::string_view key_authorization) {
  // extnValue holds the DER of an OCTET STRING of the 32 bytes.
  unsigned char value[2 + kSha256] = {V_ASN1_OCTET_STRING, kSha256};
  unsigned int digest_size = 0;
  if (EVP_Digest(key_authorization.data(), key_authorization.size(), value + 2, &digest_size, EVP_sha256(),
                 nullptr) != 1) {
    throw_openssl_error("hashing a key authorization");
  }
  ASN1_OCTET_STRING* octets = ASN1_OCTET_STRING_new();
  ASN1_OBJECT* oid = OBJ_txt2obj(kAcmeIdentifier, 1);
  Extension identifier(octets != nullptr && oid != nullptr && ASN1_OCTET_STRING_set(octets, value, sizeof value) == 1
                           ? X509_EXTENSION_create_by_OBJ(nullptr, oid, 1, octets)
                           : nullptr);
  ASN1_OCTET_STRING_free(octets);
  ASN1_OBJECT_free(oid);
  if (!identifier) throw_openssl_error("making a challenge certificate");
  Key key = new_key();
  Certificate cert = self_signed(key.get(), {std::string(name)}, std::chrono::hours(24 * 7), identifier.get());
  return pair_of(cert.get(), key.get());
}

CertificateFacts read_certificate(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Certificate cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) throw_openssl_error("reading a certificate");
  CertificateFacts facts;
  facts.not_before = unix_time(X509_get0_notBefore(cert.get()));
  facts.not_after = unix_time(X509_get0_notAfter(cert.get()));
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* entry = sk_GENERAL_NAME_value(names, i);
    if (entry->type != GEN_DNS) continue;
    const ASN1_STRING* text = entry->d.dNSName;
    facts.names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                             static_cast<size_t>(ASN1_STRING_length(text)));
  }
  GENERAL_NAMES_free(names);
  facts.self_signed = X509_NAME_cmp(X509_get_issuer_name(cert.get()), X509_get_subject_name(cert.get())) == 0 &&
                      X509_verify(cert.get(), X509_get0_pubkey(cert.get())) == 1;
  ERR_clear_error();
  const ASN1_OCTET_STRING* authority = X509_get0_authority_key_id(cert.get());
  if (authority != nullptr) {
    // The serial's DER, less its tag and length (a serial has at most 20
    // bytes, so its length is one byte).
    const ASN1_INTEGER* serial = X509_get0_serialNumber(cert.get());
    const int size = i2d_ASN1_INTEGER(serial, nullptr);
    std::string der(size > 0 ? static_cast<size_t>(size) : 0, '\0');
    auto* out = reinterpret_cast<unsigned char*>(der.data());
    if (size <= 2 || i2d_ASN1_INTEGER(serial, &out) != size || static_cast<unsigned char>(der[1]) >= 0x80) {
      throw std::runtime_error("a certificate's serial number does not parse");
    }
    facts.renewal_id = base64url_encode(std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(authority)),
                                                         static_cast<size_t>(ASN1_STRING_length(authority))));
    facts.renewal_id += '.';
    facts.renewal_id += base64url_encode(std::string_view(der).substr(2));
  }
  return facts;
}

}  // namespace tern::acme
