// bench_json_decode: what decoding one JSON inference request costs the REST
// frontend, per body, on the decoders somm has: the fast path
// (frontend/http/fast_infer_json.cc, simdjson On Demand) and the general
// decoder (nlohmann; every error message comes from it). For the demo
// bodies: digits (64 numbers, 342 bytes) and resnet18 (150,528 numbers,
// 1.6 MB). Prints µs per body (median of --rounds rounds) and MB/s.
//
// Usage: build/bench/bench_json_decode [--rounds R] BODY.json...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/http/fast_infer_json.h"
#include "frontend/http/oip_json.h"
#include "median_us.h"

using somm::bench::MedianUs;

int main(int argc, char** argv) {
  int rounds = 7;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: bench_json_decode [--rounds R] BODY.json...\n");
    return 2;
  }
  std::printf("| body | bytes | fast path (simdjson) µs | general (nlohmann) µs | ratio | fast MB/s |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 1;
    }
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    if (!somm::oip::internal::FastDecodeInferRequest(body)) {
      std::fprintf(stderr, "%s: not on the fast path\n", file.c_str());
      return 1;
    }
    // About 50 ms of work per round whatever the body's size.
    const int calls = std::max<int>(1, static_cast<int>(20'000'000 / (body.size() + 1000)));
    const double fast = MedianUs(
        [&] {
          if (!somm::oip::internal::FastDecodeInferRequest(body)) std::abort();
        },
        rounds, calls);
    const double general = MedianUs(
        [&] {
          if (!somm::oip::internal::GeneralDecodeInferRequest(body, std::nullopt).ok()) {
            std::abort();
          }
        },
        rounds, std::max(1, calls / 5));
    const char* name = std::strrchr(file.c_str(), '/');
    std::printf("| %s | %zu | %.1f | %.1f | %.1fx | %.0f |\n", name ? name + 1 : file.c_str(),
                body.size(), fast, general, general / fast, body.size() / fast);
  }
  return 0;
}
