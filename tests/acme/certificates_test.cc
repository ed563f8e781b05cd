// What ACME needs of X.509, read back with OpenSSL: the request's names and
// signature, the self-signed stand-in loaded by a ServerContext, RFC 8737's
// challenge certificate, and what read_certificate() finds in a certificate
// made elsewhere (Python's cryptography package) with RFC 9773's example
// authority key identifier and serial number.
#include "acme/certificates.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tls/server_context.h"

namespace tern::acme {
namespace {

constexpr const char* kIssued =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBZzCCAQ2gAwIBAgIFAIdlQyEwCgYIKoZIzj0EAwIwFDESMBAGA1UEAwwJdGVy\n"
    "biB0ZXN0MB4XDTI2MDEwMTAwMDAwMFoXDTI2MDQwMTAwMDAwMFowFDESMBAGA1UE\n"
    "AwwJdGVybiB0ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERxw+dYxJBChb\n"
    "un5TEY7Q9SSt6wdX0lvS+Oew1236cUzdUg96yoqLkXrMN/Ud6PDJu+OthYOC5wLc\n"
    "JaEtCfeoWKNMMEowHwYDVR0jBBgwFoAUaYhba4dGQEHhs3uEe6CuLN4ByNQwJwYD\n"
    "VR0RBCAwHoILZXhhbXBsZS5jb22CD3d3dy5leGFtcGxlLmNvbTAKBggqhkjOPQQD\n"
    "AgNIADBFAiEA/k3PTMvmOH+ch2q5Huosz29J4C6frpGQboflKypjt+ACICU5W4XH\n"
    "yehi1jwDDn5DpPU3aFok53B0sVaciVLIeAOP\n"
    "-----END CERTIFICATE-----\n";

std::vector<std::string> dns_names(const GENERAL_NAMES* names) {
  std::vector<std::string> out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name->d.dNSName)),
                       static_cast<size_t>(ASN1_STRING_length(name->d.dNSName)));
    }
  }
  return out;
}

X509* parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

TEST(Certificates, ASigningRequestNamesEveryHostAndIsSignedByItsKey) {
  const SigningRequest request = make_signing_request({"example.com", "www.example.com"});
  const auto* der = reinterpret_cast<const unsigned char*>(request.der.data());
  X509_REQ* parsed = d2i_X509_REQ(nullptr, &der, static_cast<long>(request.der.size()));
  ASSERT_NE(parsed, nullptr);
  EVP_PKEY* key = X509_REQ_get0_pubkey(parsed);
  EXPECT_EQ(X509_REQ_verify(parsed, key), 1);
  STACK_OF(X509_EXTENSION)* extensions = X509_REQ_get_extensions(parsed);
  auto* names = static_cast<GENERAL_NAMES*>(X509V3_get_d2i(extensions, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(names, nullptr);
  EXPECT_EQ(dns_names(names), (std::vector<std::string>{"example.com", "www.example.com"}));
  // The key given back is the one the request carries.
  BIO* bio = BIO_new_mem_buf(request.key_pem.data(), static_cast<int>(request.key_pem.size()));
  EVP_PKEY* private_key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(private_key, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(private_key, key), 1);
  EVP_PKEY_free(private_key);
  GENERAL_NAMES_free(names);
  sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
  X509_REQ_free(parsed);
  EXPECT_THROW(make_signing_request({}), std::runtime_error);
}

TEST(Certificates, ASelfSignedCertificateLoadsAsASitesIdentity) {
  const PemPair pair = make_self_signed({"example.com", "example.net"}, std::chrono::hours(24));
  const CertificateFacts facts = read_certificate(pair.cert);
  EXPECT_EQ(facts.names, (std::vector<std::string>{"example.com", "example.net"}));
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  EXPECT_LE(facts.not_before, now);
  EXPECT_NEAR(static_cast<double>(facts.not_after - facts.not_before), 86400.0, 1.0);
  EXPECT_EQ(facts.renewal_id, "");  // no authority named
  EXPECT_TRUE(facts.self_signed);
  // Written as storage writes it, it loads as a site's certificate.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tern-acme-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cert.pem") << pair.cert;
  std::ofstream(dir / "key.pem") << pair.key;
  std::filesystem::permissions(dir / "key.pem", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  tls::Identity identity;
  identity.pairs.push_back({(dir / "cert.pem").string(), (dir / "key.pem").string()});
  tls::Settings settings;
  settings.identities.push_back(std::move(identity));
  EXPECT_NO_THROW(tls::ServerContext context(std::move(settings)));
  std::filesystem::remove_all(dir);
}

TEST(Certificates, AChallengeCertificateCarriesTheKeyAuthorizationsDigest) {
  const std::string authorization = "token.thumbprint";
  const PemPair pair = make_challenge_certificate("example.com", authorization);
  X509* cert = parse(pair.cert);
  ASSERT_NE(cert, nullptr);
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  EXPECT_EQ(dns_names(names), std::vector<std::string>{"example.com"});
  GENERAL_NAMES_free(names);
  ASN1_OBJECT* oid = OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1);
  const int at = X509_get_ext_by_OBJ(cert, oid, -1);
  ASSERT_GE(at, 0);
  X509_EXTENSION* extension = X509_get_ext(cert, at);
  EXPECT_EQ(X509_EXTENSION_get_critical(extension), 1);
  // extnValue: the DER of an OCTET STRING of SHA-256(authorization).
  const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(extension);
  unsigned char digest[32];
  unsigned int size = 0;
  EVP_Digest(authorization.data(), authorization.size(), digest, &size, EVP_sha256(), nullptr);
  std::string expected = "\x04\x20";
  expected.append(reinterpret_cast<const char*>(digest), size);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                        static_cast<size_t>(ASN1_STRING_length(value))),
            expected);
  ASN1_OBJECT_free(oid);
  X509_free(cert);
}

TEST(Certificates, ReadsNamesValidityAndTheRenewalIdentifier) {
  const CertificateFacts facts = read_certificate(kIssued);
  EXPECT_EQ(facts.names, (std::vector<std::string>{"example.com", "www.example.com"}));
  EXPECT_EQ(facts.not_before, 1767225600);  // 2026-01-01T00:00:00Z
  EXPECT_EQ(facts.not_after, 1775001600);   // 2026-04-01T00:00:00Z
  // RFC 9773 section 4.1's example: key identifier 69:88:5B:...:D4, serial 0x0087654321.
  EXPECT_EQ(facts.renewal_id, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
  EXPECT_FALSE(facts.self_signed);  // a CA's
  EXPECT_THROW(read_certificate("not a certificate"), std::runtime_error);
}

}  // namespace
}  // namespace tern::acme
