#include "transport/http/tls_io.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>

#include <spdlog/spdlog.h>

namespace somm::http {
namespace {

// Responses up to this size go out as one TLS record (one write, one MAC)
// instead of one record per part.
constexpr size_t kTlsJoinBytes = 16 << 10;

}  // namespace

ssize_t WriteTls(crypto::TlsStream& tls, const std::string_view* parts, int count) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += parts[i].size();
  std::string_view joined_view;
  if (count > 1 && total <= kTlsJoinBytes) {
    thread_local std::string joined;
    joined.clear();
    for (int i = 0; i < count; ++i) joined.append(parts[i]);
    joined_view = joined;
    parts = &joined_view;
    count = 1;
  }
  ssize_t written = 0;
  for (int i = 0; i < count; ++i) {
    for (size_t offset = 0; offset < parts[i].size();) {
      const ssize_t n = tls.Write(parts[i].substr(offset));
      if (n == crypto::TlsStream::kError) return -1;
      if (n <= 0) return written;  // the socket is full (or the stream reads first)
      offset += static_cast<size_t>(n);
      written += n;
    }
  }
  return written;
}

void LogTlsRefusal(int fd, const std::string& reason) {
  static std::atomic<int64_t> last_ms{0};
  static std::atomic<int> suppressed{0};
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = last_ms.load();
  if (now_ms - last < 1000 || !last_ms.compare_exchange_strong(last, now_ms)) {
    ++suppressed;
    return;
  }
  sockaddr_in peer{};
  socklen_t len = sizeof(peer);
  char address[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0) {
    inet_ntop(AF_INET, &peer.sin_addr, address, sizeof(address));
  }
  const int more = suppressed.exchange(0);
  spdlog::warn("TLS: refused the connection from {}:{}: {}{}", address, ntohs(peer.sin_port),
               reason, more > 0 ? " (" + std::to_string(more) + " more since the last line)" : "");
}

}  // namespace somm::http
