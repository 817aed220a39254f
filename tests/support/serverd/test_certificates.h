#pragma once

// Certificates for TLS tests over loopback, made fresh with OpenSSL in a test's own directory: a CA, a
// server certificate for 127.0.0.1 and localhost, a client certificate the CA signed, and a self-signed
// client certificate the CA does not know. Every file is PEM; keys are unencrypted P-256 keys.

#include <filesystem>
#include <string>

namespace serverd_test {

struct TestCertificates {
  std::string ca_certificate;
  std::string server_certificate;
  std::string server_key;
  std::string client_certificate;
  std::string client_key;
  std::string stranger_certificate;  // self-signed
  std::string stranger_key;
};

// Writes them into `directory`; throws std::runtime_error with OpenSSL's reason when that fails.
TestCertificates write_test_certificates(const std::filesystem::path& directory);

}  // namespace serverd_test
