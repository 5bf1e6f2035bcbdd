// jemalloc's options for the somm binary, read at its first allocation
// (linked only when SOMM_ALLOCATOR is jemalloc; MALLOC_CONF in the
// environment still overrides them).
//
// oversize_threshold:0: jemalloc serves allocations of 8 MiB and more from
// a dedicated arena that hands their pages back to the kernel at once, so
// every resnet18 batch faulted its activations in anew: somm served 58-60
// images/s against 66-83 on glibc's malloc (resnet18 over gRPC, 16
// clients, 2026-11-27). With the threshold off they live in the ordinary
// arenas, whose dirty pages go back after jemalloc's decay time (10 s), and
// it served 81 images/s.
//
// background_thread:true: that decay runs on jemalloc's own thread, so dirty
// pages go back to the kernel while the server is idle too. Without it they
// went back only when later allocations came along: four concurrent 63 MB
// hostile JSON bodies left the RSS at 1,848 MiB 30 s after their 400s
// (187 MiB idle before); with it, 189 MiB (bench/rss_burst.py, 2026-11-28).
extern "C" {
const char* malloc_conf = "oversize_threshold:0,background_thread:true";
}
