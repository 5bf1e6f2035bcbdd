// The load generator's trace CSV (loadgen/trace.h) on hostile text. The
// parser promises timestamps in non-decreasing order and 1-based line
// numbers; anything it accepts must keep those promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "loadgen/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto trace = somm::loadgen::ParseTraceCsv(text, "fuzz.csv");
  if (!trace.ok()) return 0;
  for (size_t i = 0; i < trace->queries.size(); ++i) {
    if (trace->queries[i].line < 1) std::abort();
    if (i > 0 && trace->queries[i].timestamp_ms < trace->queries[i - 1].timestamp_ms) std::abort();
  }
  return 0;
}
