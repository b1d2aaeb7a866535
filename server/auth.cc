#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace normd::server {
namespace {

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> out;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

// What identifies a version of the file: its modification time and size.
std::pair<int64_t, int64_t> Stamp(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {-1, -1};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size)};
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TokenAuthenticator::Tokens>> TokenAuthenticator::Load(
    const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    return absl::InvalidArgumentError(absl::StrCat("auth-token-file: cannot read '", path, "'"));
  }
  auto tokens = std::make_shared<Tokens>();
  std::string line;
  while (std::getline(in, line)) {
    const absl::string_view token = absl::StripAsciiWhitespace(line);
    if (token.empty() || token.front() == '#') continue;
    tokens->push_back(Sha256(token));
  }
  if (tokens->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("auth-token-file: '", path, "' lists no token"));
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Start(
    const std::string& path, absl::Duration reload) {
  absl::StatusOr<std::shared_ptr<const Tokens>> tokens = Load(path);
  if (!tokens.ok()) return tokens.status();
  std::unique_ptr<TokenAuthenticator> a(new TokenAuthenticator());
  a->path_ = path;
  a->tokens_.store(*std::move(tokens));
  a->reloader_ = std::thread([a = a.get(), reload, stamp = Stamp(path)]() mutable {
    while (!a->stop_.WaitForNotificationWithTimeout(reload)) {
      const auto now = Stamp(a->path_);
      if (now == stamp) continue;
      absl::StatusOr<std::shared_ptr<const Tokens>> fresh = Load(a->path_);
      if (!fresh.ok()) {
        spdlog::warn("{}; keeping the tokens loaded before", std::string(fresh.status().message()));
        continue;
      }
      stamp = now;
      spdlog::info("auth-token-file: reloaded {} token(s)", (*fresh)->size());
      a->tokens_.store(*std::move(fresh));
    }
  });
  return a;
}

TokenAuthenticator::~TokenAuthenticator() {
  stop_.Notify();
  if (reloader_.joinable()) reloader_.join();
}

absl::Status TokenAuthenticator::CheckHeader(absl::string_view authorization) const {
  // "Bearer" is case-insensitive (RFC 6750 via RFC 7235).
  if (authorization.size() < 7 || !absl::EqualsIgnoreCase(authorization.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError(
        "authorization: expected a `Bearer <token>` header (see --auth-token-file)");
  }
  const Digest presented = Sha256(absl::StripAsciiWhitespace(authorization.substr(7)));
  const std::shared_ptr<const Tokens> tokens = tokens_.load();
  int match = 0;
  for (const Digest& d : *tokens) {  // every token compared: no early exit
    match |= CRYPTO_memcmp(d.data(), presented.data(), d.size()) == 0;
  }
  if (match) return absl::OkStatus();
  return absl::UnauthenticatedError("authorization: the bearer token is not accepted");
}

absl::Status TokenAuthenticator::Check(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "authorization: expected a `Bearer <token>` header (see --auth-token-file)");
  }
  return CheckHeader(absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace normd::server
