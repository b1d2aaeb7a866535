#include "bench/tcp_echo.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace normd::bench {
namespace {

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpEcho>> TcpEcho::Start() {
  std::unique_ptr<TcpEcho> echo(new TcpEcho);
  echo->listener_ = socket(AF_INET, SOCK_STREAM, 0);
  if (echo->listener_ < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(echo->listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(echo->listener_, 1) != 0 ||
      getsockname(echo->listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("listen");
  }
  echo->client_ = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(echo->client_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Errno("connect");
  }
  NoDelay(echo->client_);
  const int server = accept(echo->listener_, nullptr, nullptr);
  if (server < 0) return Errno("accept");
  NoDelay(server);
  // The echo: whatever arrives goes straight back, until the client closes.
  echo->echo_ = std::thread([server] {
    std::vector<char> buf(1 << 20);
    for (;;) {
      const ssize_t n = read(server, buf.data(), buf.size());
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(server, buf.data() + done, n - done);
        if (w <= 0) break;
        done += w;
      }
    }
    close(server);
  });
  return echo;
}

TcpEcho::~TcpEcho() {
  if (client_ >= 0) close(client_);
  if (echo_.joinable()) echo_.join();
  if (listener_ >= 0) close(listener_);
}

absl::StatusOr<absl::Duration> TcpEcho::RoundTrip(const std::string& bytes) {
  back_.resize(bytes.size());
  size_t sent = 0, received = 0;
  const absl::Time start = absl::Now();
  while (received < bytes.size()) {
    pollfd p{client_, static_cast<short>(POLLIN | (sent < bytes.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 10000) <= 0) return Errno("poll");
    if ((p.revents & POLLOUT) && sent < bytes.size()) {
      const ssize_t w = send(client_, bytes.data() + sent,
                             std::min<size_t>(bytes.size() - sent, 4 << 20), MSG_DONTWAIT);
      if (w > 0) sent += w;
    }
    if (p.revents & POLLIN) {
      const ssize_t r =
          recv(client_, back_.data() + received, back_.size() - received, MSG_DONTWAIT);
      if (r == 0) return absl::InternalError("the echo closed the connection");
      if (r > 0) received += r;
    }
  }
  const absl::Duration took = absl::Now() - start;
  if (back_ != bytes) return absl::InternalError("the echo returned other bytes");
  return took;
}

}  // namespace normd::bench
