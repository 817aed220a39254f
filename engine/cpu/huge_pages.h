#pragma once

// Large buffers the kernels stream (repacked weights, the KV cache) in 2 MiB pages where Linux's transparent huge
// pages allow it. Under its "madvise" setting (Debian's default) a buffer gets them only when asked: then writing
// hundreds of MiB costs a page fault per 2 MiB instead of per 4 KiB, and a decode step that streams the buffer
// misses the TLB 512 times less often (each of the KV cache's per-head pieces of keys and values is a few KiB
// on a page of its own otherwise).

#include <cstddef>
#include <memory>
#include <vector>

namespace engine::cpu {

struct HugePagesFree {
  void operator()(std::byte* p) const;
};
using HugePagesBuffer = std::unique_ptr<std::byte[], HugePagesFree>;

// At least `bytes` (and 64) bytes, 64-byte aligned; from 2 MiB on, 2 MiB aligned with its whole 2 MiB pages
// advised into huge pages (only advice: 4 KiB pages where it is declined; the tail past the last whole one stays
// in 4 KiB pages). Pages are not touched here, so memory is taken as the buffer is first written. std::bad_alloc
// when there is no memory.
HugePagesBuffer allocate_huge_pages(std::size_t bytes);

// Many buffers, most of them under 2 MiB, carved one after another out of a few large allocate_huge_pages
// buffers, so that each lies in 2 MiB pages too and consecutive ones lie side by side: the repacked weights a
// decode step streams matrix after matrix (Qwen3-0.6B's q, k, v, o, gate and up matrices are each under 2 MiB
// in Q4_K, so in buffers of their own they took 4 KiB pages, and every one of them cost its own page faults at
// load). A buffer is 64-byte aligned and lives as long as the arena; the unused end of a chunk is never
// touched, so it never becomes resident (up to the rest of its last 2 MiB page). Not thread-safe: one thread
// allocates.
class HugePagesArena {
 public:
  // Chunks of `chunk_bytes`; a buffer over half of that gets a chunk of its own (the current chunk goes on).
  explicit HugePagesArena(std::size_t chunk_bytes = std::size_t{64} << 20);

  std::byte* allocate(std::size_t bytes);
  std::size_t chunks() const { return chunks_.size(); }

 private:
  std::size_t chunk_bytes_;
  std::vector<HugePagesBuffer> chunks_;
  std::byte* next_ = nullptr;  // in the current chunk
  std::size_t left_ = 0;       // bytes after next_ in it
};

}  // namespace engine::cpu
