// Object transfers move 4 MiB chunks, and gRPC and protobuf allocate a few
// buffers of that size per chunk. glibc serves such sizes with mmap and gives
// them back with munmap, so every chunk page-faults its buffers in again:
// measured on a 2-core VM, that doubled the CPU time of a 512 MiB put. Keeping
// chunk-sized blocks in the heap (and not trimming it eagerly) makes a
// process's transfers reuse them. Every program that streams objects calls
// this first thing in main().
#pragma once

#include <malloc.h>

namespace weightd::api {

inline void keep_transfer_buffers() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);   // blocks below 64 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // return memory to the OS past 256 MiB free
}

}  // namespace weightd::api
