#include "tests/support/serverd/test_certificates.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string_view>

namespace serverd_test {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertificateFree {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Certificate = std::unique_ptr<X509, CertificateFree>;

[[noreturn]] void fail(std::string_view what) {
  char reason[256] = "no reason given";
  if (const unsigned long code = ERR_get_error()) ERR_error_string_n(code, reason, sizeof reason);
  throw std::runtime_error("test certificates: " + std::string(what) + ": " + reason);
}

Key new_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) fail("generating a P-256 key");
  return key;
}

void add_extension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  if (extension == nullptr || X509_add_ext(certificate, extension, -1) != 1) fail(std::string("extension ") + value);
  X509_EXTENSION_free(extension);
}

// A certificate for `key` named `common_name`, signed by `issuer` with `issuer_key` (itself when null).
Certificate new_certificate(EVP_PKEY* key, const char* common_name, X509* issuer, EVP_PKEY* issuer_key, long serial,
                            const char* const* extensions) {
  Certificate certificate(X509_new());
  if (!certificate) fail("X509_new");
  X509* cert = certificate.get();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* signer = issuer ? issuer : cert;
  X509_set_issuer_name(cert, X509_get_subject_name(signer));
  add_extension(cert, signer, NID_subject_key_identifier, "hash");
  add_extension(cert, signer, NID_authority_key_identifier, "keyid:always");
  for (; *extensions != nullptr; extensions += 2) {
    add_extension(cert, signer, OBJ_txt2nid(extensions[0]), extensions[1]);
  }
  if (X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256()) == 0) fail("signing a certificate");
  return certificate;
}

std::string write_certificate(const std::filesystem::path& path, X509* certificate) {
  std::unique_ptr<BIO, BioFree> out(BIO_new_file(path.c_str(), "w"));
  if (!out || PEM_write_bio_X509(out.get(), certificate) != 1) fail("writing " + path.string());
  return path.string();
}

std::string write_key(const std::filesystem::path& path, EVP_PKEY* key) {
  std::unique_ptr<BIO, BioFree> out(BIO_new_file(path.c_str(), "w"));
  if (!out || PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail("writing " + path.string());
  }
  return path.string();
}

}  // namespace

TestCertificates write_test_certificates(const std::filesystem::path& directory) {
  static constexpr const char* kCa[] = {"basicConstraints", "critical,CA:TRUE", "keyUsage",
                                        "critical,keyCertSign,cRLSign", nullptr};
  static constexpr const char* kServer[] = {
      "basicConstraints",           "CA:FALSE", "extendedKeyUsage", "serverAuth", "subjectAltName",
      "IP:127.0.0.1,DNS:localhost", nullptr};
  static constexpr const char* kClient[] = {"basicConstraints", "CA:FALSE", "extendedKeyUsage", "clientAuth", nullptr};

  const Key ca_key = new_key();
  const Certificate ca = new_certificate(ca_key.get(), "serverd test CA", nullptr, nullptr, 1, kCa);
  const Key server_key = new_key();
  const Certificate server = new_certificate(server_key.get(), "127.0.0.1", ca.get(), ca_key.get(), 2, kServer);
  const Key client_key = new_key();
  const Certificate client =
      new_certificate(client_key.get(), "serverd test client", ca.get(), ca_key.get(), 3, kClient);
  const Key stranger_key = new_key();
  const Certificate stranger = new_certificate(stranger_key.get(), "stranger", nullptr, nullptr, 4, kClient);

  TestCertificates out;
  out.ca_certificate = write_certificate(directory / "ca.pem", ca.get());
  out.server_certificate = write_certificate(directory / "server.pem", server.get());
  out.server_key = write_key(directory / "server-key.pem", server_key.get());
  out.client_certificate = write_certificate(directory / "client.pem", client.get());
  out.client_key = write_key(directory / "client-key.pem", client_key.get());
  out.stranger_certificate = write_certificate(directory / "stranger.pem", stranger.get());
  out.stranger_key = write_key(directory / "stranger-key.pem", stranger_key.get());
  return out;
}

}  // namespace serverd_test
