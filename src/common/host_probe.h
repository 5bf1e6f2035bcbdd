// Host probes for variant generation: what the CPU can do and how much
// memory this process holds. Each is a tiny function over /proc so that the
// pipeline can take a fake instead (VariantPipelineOptions::cpu_features,
// ::resident_bytes) and tests need no particular machine.
//
// Thread-safe: no state.
#pragma once

#include <cstdint>
#include <string>

namespace somm {

// The CPU features that make a bf16 variant worth building. Without either,
// libtorch emulates bf16 arithmetic in fp32 registers: slower than fp32 and
// less accurate, so the variant would never be chosen.
struct CpuFeatures {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool UsefulBf16() const { return avx512_bf16 || amx_bf16; }
};

// Parses the text of /proc/cpuinfo (the "flags" lines).
CpuFeatures ParseCpuFeatures(const std::string& cpuinfo_text);
// Reads /proc/cpuinfo; all false when it cannot be read.
CpuFeatures DetectCpuFeatures();

// Resident set size of this process in bytes (/proc/self/statm); -1 when
// unreadable.
int64_t ResidentBytes();

// MemAvailable from /proc/meminfo in bytes (what the kernel could give new
// allocations without swapping); 0 when unreadable.
int64_t AvailableMemoryBytes();
// Hands freed heap memory back to the OS (glibc malloc_trim). glibc's
// allocator keeps freed memory in its arenas for reuse, and raises its mmap
// threshold after large frees, so a model's weights come from (and stay in)
// the heap. The profiler calls it so that a resident-set delta measures what
// a load adds rather than what an earlier load left in the free lists; the
// libtorch backend calls it after each unload, without which an unloaded
// model's memory mostly stays in the process. It takes each arena's lock in
// turn, and the pages it drops are faulted back in by whoever allocates there
// next: it costs a busy neighbour a little (docs/isolation.md), so the
// backend runs it once per unload, not more often.
void ReleaseFreeMemory();

}  // namespace somm
