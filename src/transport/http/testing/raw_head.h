// SendHead: writes `head` (a request's head, and whatever body bytes a test
// wants) on a new loopback connection to `port` and returns what the server
// answers within `wait_ms` ("" = nothing): for tests of what a server does
// before it reads a body that was declared but never sent. Test-only.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace somm::testing {

inline std::string SendHead(int port, const std::string& head, int wait_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  std::string got;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) == 1) {
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) got.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

}  // namespace somm::testing
