#include "server/tls.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace normd::server {
namespace {

// The provider reads the files on its own thread and only logs what it cannot read; a
// misspelt path is found here, at start, with the flag named.
absl::Status Readable(const std::string& path, absl::string_view flag) {
  if (!std::ifstream(path).good()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& o) {
  if (o.cert_file.empty() && o.key_file.empty()) {
    if (!o.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "tls-client-ca: mutual TLS needs --tls-cert and --tls-key as well");
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.cert_file.empty() || o.key_file.empty()) {
    return absl::InvalidArgumentError("tls-cert, tls-key: give both or neither");
  }
  for (const auto& [path, flag] :
       {std::pair{o.cert_file, "tls-cert"}, std::pair{o.key_file, "tls-key"},
        std::pair{o.client_ca_file, "tls-client-ca"}}) {
    if (!path.empty()) {
      if (absl::Status s = Readable(path, flag); !s.ok()) return s;
    }
  }
  const auto interval =
      static_cast<unsigned int>(std::max<int64_t>(1, absl::ToInt64Seconds(o.reload_interval)));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      o.key_file, o.cert_file, o.client_ca_file, interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!o.client_ca_file.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace normd::server
