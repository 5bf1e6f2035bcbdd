// bench_hostile_soak: hostile requests against a live somm over REST and
// gRPC while a steady stream of normal queries runs beside them
// (docs/hostile-input.md). bench/hostile_soak.sh starts the server, samples its
// RSS and calls this binary twice: --phase baseline (the normal stream
// alone) and --phase attack (the stream and the attack).
//
// The attack, spread over --threads threads until --requests requests were
// sent (each kind in turn, so every kind gets its share):
//   REST: random garbage; a truncated body; a huge header (64 KiB); a huge
//   declared body (1 GiB, 1 MiB sent); deeply nested JSON; NaN and Inf
//   values; wrong types; wrong and negative shapes; a shape of 10^12
//   elements; a binary header whose length lies; broken chunked encoding;
//   a garbled gzip body; an unknown model; a bad path and method.
//   gRPC: requests with a wrong datatype, a shape that does not match the
//   contents, raw contents of the wrong size, a huge shape, NaN values, an
//   unknown model, no inputs; and raw garbage bytes to the gRPC port.
//   Beside them, --slowloris connections that drip one header byte at a
//   time, and a flood that opens --flood connections at once and drops them.
// Every answer is counted by kind and by outcome (HTTP status class, gRPC
// code, or the connection closed); a normal query that is not answered 200
// with ten logits is a failure. The summary is one JSON object on stdout.
//
// Usage: bench_hostile_soak --http PORT --grpc PORT --phase baseline|attack
//          [--requests N] [--threads T] [--normal-qps Q] [--seconds S]
//          [--slowloris C] [--flood C]
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "proto/inference.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one HTTP response (its head, then Content-Length bytes); the status,
// or 0 when the connection closed or timed out first. `body` gets the body.
int ReadResponse(int fd, std::string* body = nullptr) {
  std::string in;
  char buf[65536];
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    in.append(buf, static_cast<size_t>(n));
    head_end = in.find("\r\n\r\n");
  }
  const int status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
  size_t length = 0;
  std::string lower = in.substr(0, head_end);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (auto at = lower.find("content-length:"); at != std::string::npos) {
    length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
  }
  while (in.size() < head_end + 4 + length) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    in.append(buf, static_cast<size_t>(n));
  }
  if (body) *body = in.substr(head_end + 4, length);
  return status;
}

std::string Post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string DigitsBody(const std::string& data) {
  return R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[1,64],"data":)" + data + "}]}";
}

std::string Ones(int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ",1" : "1");
  return s + "]";
}

struct Tally {
  std::mutex mu;
  std::map<std::string, std::map<std::string, int64_t>> by_kind;  // kind -> outcome -> n
  void Add(const std::string& kind, const std::string& outcome) {
    std::lock_guard lock(mu);
    ++by_kind[kind][outcome];
  }
};

std::string StatusClass(int status) {
  if (status == 0) return "closed";
  return std::to_string(status / 100) + "xx";
}

// One hostile REST request of kind `k`; returns the kind's name.
std::string HostileRest(int port, int k, std::mt19937& rng, Tally& tally) {
  static const char* const kNames[] = {
      "garbage",      "truncated_body", "huge_header",  "huge_body",     "nested_json",
      "nan_inf",      "wrong_types",    "wrong_shape",  "negative_dims", "giant_shape",
      "binary_lies",  "bad_chunked",    "bad_gzip",     "unknown_model", "bad_path_method"};
  const int kinds = sizeof kNames / sizeof kNames[0];
  const std::string name = kNames[k % kinds];
  std::string bytes;
  bool half_close = false;  // a request that never completes: we close
  switch (k % kinds) {
    case 0: {
      bytes.resize(64 + rng() % 2048);
      for (char& c : bytes) c = static_cast<char>(rng());
      half_close = true;
      break;
    }
    case 1:
      bytes = "POST /v2/models/digits-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n" +
              DigitsBody(Ones(64)).substr(0, 100);
      half_close = true;
      break;
    case 2:
      bytes = Post("/v2/models/digits-mlp/infer", DigitsBody(Ones(64)),
                   "X-Huge: " + std::string(64 * 1024, 'a') + "\r\n");
      break;
    case 3:
      bytes = "POST /v2/models/digits-mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n" +
              std::string(1 << 20, '[');
      break;
    case 4:
      bytes = Post("/v2/models/digits-mlp/infer",
                   std::string(100000, '[') + std::string(100000, ']'));
      break;
    case 5: {
      // Inf as JSON writes it (1e999), then the NaN that JSON has no word for.
      std::string data = Ones(62);
      data = (rng() % 2 ? "[1e999,-1e999," : "[NaN,Infinity,") + data.substr(1);
      bytes = Post("/v2/models/digits-mlp/infer", DigitsBody(data));
      break;
    }
    case 6:
      bytes = Post("/v2/models/digits-mlp/infer",
                   R"({"inputs":[{"name":7,"datatype":["FP32"],"shape":"1,64","data":{"a":1}}]})");
      break;
    case 7:
      bytes = Post("/v2/models/digits-mlp/infer",
                   R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[1,63],"data":)" +
                       Ones(63) + "}]}");
      break;
    case 8:
      bytes = Post("/v2/models/digits-mlp/infer",
                   R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[-1,-64],"data":[1]}]})");
      break;
    case 9:
      bytes = Post("/v2/models/digits-mlp/infer",
                   R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[1000000,1000000],"data":[1]}]})");
      break;
    case 10: {
      const std::string header =
          R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[1,64],"parameters":{"binary_data_size":256}}]})";
      bytes = Post("/v2/models/digits-mlp/infer", header + std::string(10, '\0'),
                   "Inference-Header-Content-Length: 99999\r\n");
      break;
    }
    case 11:
      bytes = "POST /v2/models/digits-mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              "zz\r\nabc\r\nffffffffffffffff\r\n" + std::string(100, 'x') + "\r\n0\r\n\r\n";
      break;
    case 12:
      bytes = Post("/v2/models/digits-mlp/infer", std::string("\x1f\x8b\x08\x00garbage", 12) + std::string(500, 'q'),
                   "Content-Encoding: gzip\r\n");
      break;
    case 13:
      bytes = Post("/v2/models/no-such-model/infer", DigitsBody(Ones(64)));
      break;
    default:
      bytes = "BREW /v2/../../etc/passwd%00 HTTP/1.1\r\nHost: x\r\n\r\n";
      break;
  }
  const int fd = Connect(port);
  if (fd < 0) {
    tally.Add("rest:" + name, "connect_failed");
    return name;
  }
  const bool sent = SendAll(fd, bytes);
  if (half_close) shutdown(fd, SHUT_WR);
  const int status = sent || half_close ? ReadResponse(fd) : 0;
  close(fd);
  tally.Add("rest:" + name, StatusClass(status));
  return name;
}

void HostileGrpc(inference::GRPCInferenceService::Stub& stub, int grpc_port, int k,
                 std::mt19937& rng, Tally& tally) {
  static const char* const kNames[] = {"wrong_datatype", "shape_mismatch", "raw_wrong_size",
                                       "huge_shape",     "nan_values",     "unknown_model",
                                       "no_inputs",      "garbage_bytes"};
  const int kinds = sizeof kNames / sizeof kNames[0];
  const std::string name = kNames[k % kinds];
  if (k % kinds == 7) {
    const int fd = Connect(grpc_port);
    if (fd < 0) return tally.Add("grpc:" + name, "connect_failed");
    std::string junk(256 + rng() % 4096, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    SendAll(fd, junk);
    shutdown(fd, SHUT_WR);
    char buf[4096];
    while (recv(fd, buf, sizeof buf, 0) > 0) {
    }
    close(fd);
    return tally.Add("grpc:" + name, "closed");
  }
  inference::ModelInferRequest req;
  req.set_model_name(k % kinds == 5 ? "no-such-model" : "digits-mlp");
  if (k % kinds != 6) {
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype(k % kinds == 0 ? "BF17" : "FP32");
    in->add_shape(k % kinds == 3 ? 1000000000 : 1);
    in->add_shape(k % kinds == 3 ? 1000000000 : 64);
    if (k % kinds == 2) {
      req.add_raw_input_contents(std::string(17, 'x'));
    } else {
      const int n = k % kinds == 1 ? 10 : 64;
      const float v = k % kinds == 4 ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
      for (int i = 0; i < n; ++i) in->mutable_contents()->add_fp32_contents(v);
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  inference::ModelInferResponse resp;
  const grpc::Status s = stub.ModelInfer(&ctx, req, &resp);
  tally.Add("grpc:" + name, s.ok() ? "OK" : std::to_string(static_cast<int>(s.error_code())));
}

int Flag(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

std::string StringFlag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int http_port = Flag(argc, argv, "--http", 0);
  const int grpc_port = Flag(argc, argv, "--grpc", 0);
  const std::string phase = StringFlag(argc, argv, "--phase", "attack");
  const int64_t requests = Flag(argc, argv, "--requests", 1000000);
  const int threads = Flag(argc, argv, "--threads", 4);
  const int normal_qps = Flag(argc, argv, "--normal-qps", 50);
  const int seconds = Flag(argc, argv, "--seconds", 20);
  const int slowloris = Flag(argc, argv, "--slowloris", 64);
  const int flood = Flag(argc, argv, "--flood", 512);
  if (http_port <= 0 || grpc_port <= 0 || (phase != "baseline" && phase != "attack")) {
    std::fprintf(stderr, "usage: %s --http PORT --grpc PORT --phase baseline|attack [...]\n", argv[0]);
    return 2;
  }
  const bool attack = phase == "attack";
  std::atomic<bool> stop{false};
  Tally tally;

  // The normal stream: one keep-alive connection, a query every 1/Q s.
  std::vector<double> normal_ms;
  int64_t normal_failed = 0;
  std::thread normal([&] {
    const std::string query = Post("/v2/models/digits-mlp/infer", DigitsBody(Ones(64)));
    int fd = Connect(http_port);
    auto next = Clock::now();
    while (!stop) {
      next += std::chrono::microseconds(1000000 / std::max(1, normal_qps));
      std::this_thread::sleep_until(next);
      if (fd < 0) fd = Connect(http_port);
      const auto t0 = Clock::now();
      std::string body;
      const int status = fd >= 0 && SendAll(fd, query) ? ReadResponse(fd, &body) : 0;
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (status == 200 && body.find("\"logits\"") != std::string::npos) {
        normal_ms.push_back(ms);
      } else {
        ++normal_failed;
        if (fd >= 0) close(fd);
        fd = -1;
      }
    }
    if (fd >= 0) close(fd);
  });

  std::atomic<int64_t> sent{0};
  std::vector<std::thread> attackers;
  const auto started = Clock::now();
  if (attack) {
    for (int t = 0; t < threads; ++t) {
      attackers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<uint32_t>(t + 1));
        auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port),
                                           grpc::InsecureChannelCredentials());
        auto stub = inference::GRPCInferenceService::NewStub(channel);
        for (int64_t i = sent++; i < requests && !stop; i = sent++) {
          // Two REST kinds for each gRPC one: REST has more decoders.
          if (i % 3 == 2) {
            HostileGrpc(*stub, grpc_port, static_cast<int>(i / 3), rng, tally);
          } else {
            HostileRest(http_port, static_cast<int>(i - i / 3), rng, tally);
          }
        }
      });
    }
    // Slowloris: connections that send one header byte every 200 ms.
    attackers.emplace_back([&] {
      const std::string head = "POST /v2/models/digits-mlp/infer HTTP/1.1\r\nHost: x\r\nX-Slow: ";
      std::vector<int> fds;
      std::vector<size_t> at;
      int64_t opened = 0;
      while (!stop && sent < requests) {
        while (static_cast<int>(fds.size()) < slowloris) {
          const int fd = Connect(http_port);
          if (fd < 0) break;
          fds.push_back(fd);
          at.push_back(0);
          ++opened;
        }
        for (size_t i = 0; i < fds.size();) {
          const char c = at[i] < head.size() ? head[at[i]] : 'a';
          if (send(fds[i], &c, 1, MSG_NOSIGNAL) != 1) {
            close(fds[i]);
            tally.Add("rest:slowloris", "closed_by_server");
            fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
            at.erase(at.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
          }
          ++at[i];
          ++i;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      for (int fd : fds) close(fd);
      tally.Add("rest:slowloris", "opened:" + std::to_string(opened));
    });
    // Floods: every 5 s, open --flood connections at once, then drop them.
    attackers.emplace_back([&] {
      while (!stop && sent < requests) {
        std::vector<int> fds;
        for (int i = 0; i < flood; ++i) {
          const int fd = Connect(http_port);
          if (fd < 0) {
            tally.Add("rest:flood", "connect_failed");
            continue;
          }
          fds.push_back(fd);
        }
        tally.Add("rest:flood", "opened");
        std::this_thread::sleep_for(std::chrono::seconds(1));
        for (int fd : fds) close(fd);
        for (int i = 0; i < 40 && !stop && sent < requests; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    });
    for (size_t i = 0; i + 2 < attackers.size(); ++i) attackers[i].join();
    stop = true;
    for (size_t i = attackers.size() - 2; i < attackers.size(); ++i) attackers[i].join();
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    stop = true;
  }
  normal.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();

  std::sort(normal_ms.begin(), normal_ms.end());
  auto quantile = [&](double q) {
    return normal_ms.empty() ? 0.0 : normal_ms[std::min(normal_ms.size() - 1,
                                                        static_cast<size_t>(q * normal_ms.size()))];
  };
  std::printf("{\"phase\": \"%s\", \"seconds\": %.1f, \"hostile_requests\": %lld, "
              "\"hostile_per_s\": %.0f, \"normal_answered\": %zu, \"normal_failed\": %lld, "
              "\"normal_p50_ms\": %.3f, \"normal_p99_ms\": %.3f, \"normal_max_ms\": %.3f, \"by_kind\": {",
              phase.c_str(), elapsed, static_cast<long long>(std::min<int64_t>(sent, requests) * attack),
              attack ? static_cast<double>(std::min<int64_t>(sent, requests)) / elapsed : 0.0,
              normal_ms.size(), static_cast<long long>(normal_failed), quantile(0.5), quantile(0.99),
              normal_ms.empty() ? 0.0 : normal_ms.back());
  bool first_kind = true;
  for (const auto& [kind, outcomes] : tally.by_kind) {
    std::printf("%s\"%s\": {", first_kind ? "" : ", ", kind.c_str());
    bool first = true;
    for (const auto& [outcome, n] : outcomes) {
      std::printf("%s\"%s\": %lld", first ? "" : ", ", outcome.c_str(), static_cast<long long>(n));
      first = false;
    }
    std::printf("}");
    first_kind = false;
  }
  std::printf("}}\n");
  return normal_failed == 0 ? 0 : 1;
}
