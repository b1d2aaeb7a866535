// normd's transport security: plaintext, TLS (--tls-cert, --tls-key) or mutual TLS
// (--tls-client-ca: a client certificate signed by that CA is required). Certificates and
// keys are read by gRPC's FileWatcherCertificateProvider, which rereads the files every
// reload interval: a certificate that cert-manager rotates is served without a restart.
//
// Stateless; safe from any thread.
#ifndef NORMD_SERVER_TLS_H_
#define NORMD_SERVER_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"

namespace normd::server {

struct TlsOptions {
  std::string cert_file;       // PEM certificate chain; empty: plaintext
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // PEM CA bundle; set: mutual TLS, client certificate required
  absl::Duration reload_interval = absl::Seconds(10);
};

// INVALID_ARGUMENT when the files are inconsistent (a key without a certificate, a client
// CA without TLS) or cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options);

}  // namespace normd::server

#endif  // NORMD_SERVER_TLS_H_
