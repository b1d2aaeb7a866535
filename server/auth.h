// Bearer-token authentication of normd's own services (NormService, DiagnosticsService):
// a call must carry `authorization: Bearer <token>` with a token listed in the token file
// (one a line; blank lines and lines starting with # are skipped), else UNAUTHENTICATED.
// Health and reflection stay open: they are not normd's call classes. Tokens are kept as
// SHA-256 digests and compared in constant time (CRYPTO_memcmp), so neither a token's
// content nor its length leaks through timing. The file is reread when it changes
// (checked every reload interval), so tokens rotate without a restart; a file that
// cannot be read keeps the tokens already loaded.
//
// Thread safety: Check may be called from any thread at once; the reloading thread swaps
// the token set atomically.
#ifndef NORMD_SERVER_AUTH_H_
#define NORMD_SERVER_AUTH_H_

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace normd::server {

class TokenAuthenticator {
 public:
  // INVALID_ARGUMENT (naming --auth-token-file) when the file cannot be read or lists no
  // token.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Start(const std::string& path,
                                                                   absl::Duration reload);
  ~TokenAuthenticator();

  // OK, or UNAUTHENTICATED (the message never repeats what the client sent).
  absl::Status Check(const grpc::ServerContext& context) const;
  // The same for a header value, e.g. "Bearer abc".
  absl::Status CheckHeader(absl::string_view authorization) const;

 private:
  using Digest = std::array<unsigned char, 32>;
  using Tokens = std::vector<Digest>;
  TokenAuthenticator() = default;
  // The file's tokens, or why not.
  static absl::StatusOr<std::shared_ptr<const Tokens>> Load(const std::string& path);

  std::string path_;
  std::atomic<std::shared_ptr<const Tokens>> tokens_;
  absl::Notification stop_;
  std::thread reloader_;
};

}  // namespace normd::server

#endif  // NORMD_SERVER_AUTH_H_
