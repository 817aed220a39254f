#pragma once

// Large buffers the kernels stream (repacked weights, the KV cache) in 2 MiB pages where Linux's transparent huge
// pages allow it. Under its "madvise" setting (Debian's default) a buffer gets them only when asked: then writing
// hundreds of MiB costs a page fault per 2 MiB instead of per 4 KiB, and a decode step that streams the buffer
// misses the TLB 512 times less often (each of the KV cache's per-head pieces of keys and values is a few KiB
// on a page of its own otherwise).

#include <cstddef>
#include <memory>

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

}  // namespace engine::cpu
