// Test support: self-signed certificates made with OpenSSL, written as PEM
// files (the key readable by its owner only, as tern requires).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>
#include <random>
#include <string>

namespace tern::testing {

// A self-signed certificate for `name` and its key, as PEM files in `dir`.
struct TestCert {
  std::string cert;
  std::string key;
};

inline TestCert make_cert(const std::string& dir, const std::string& name, bool rsa = false,
                          long valid_from = 0, long valid_until = 86400) {
  EVP_PKEY* key = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), static_cast<long>(std::random_device()() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(x), valid_from - 60);
  X509_gmtime_adj(X509_getm_notAfter(x), valid_until);
  X509_set_pubkey(x, key);
  X509_NAME* subject = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(name.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(x, subject);
  X509_sign(x, key, EVP_sha256());
  const std::string base = dir + "/" + name + (rsa ? ".rsa" : ".ec");
  TestCert out{base + ".pem", base + ".key"};
  FILE* f = std::fopen(out.cert.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(out.key.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  ::chmod(out.key.c_str(), 0600);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

}  // namespace tern::testing
