#include "tests/hub/hub_xet_store.h"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <utility>

#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xorb_chunk.h"

namespace testing_support::hub {
namespace {

namespace xet = fetchd::xet;

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

// Where one chunk of a file being stored lives: in a xorb already published, or in the `pending`-th xorb
// this file is creating.
struct ChunkRef {
  std::shared_ptr<const XetXorb> stored;
  std::size_t pending = 0;
  std::uint32_t index = 0;
  std::uint64_t size = 0;
};

std::shared_ptr<const XetXorb> encode(const std::vector<std::span<const std::byte>>& chunks) {
  xet::EncodedXorb encoded = xet::encode_xorb(chunks);
  auto xorb = std::make_shared<XetXorb>();
  xorb->hash = encoded.hash;
  xorb->hex = xet::to_hex(encoded.hash);
  xorb->bytes =
      std::make_shared<const std::string>(reinterpret_cast<const char*>(encoded.bytes.data()), encoded.bytes.size());
  xorb->record_offsets = std::move(encoded.record_offsets);
  xorb->chunks = std::move(encoded.chunks);
  return xorb;
}

}  // namespace

std::shared_ptr<const XetFile> XetStore::add(std::string_view content) {
  std::lock_guard build(build_mutex_);
  const std::span<const std::byte> bytes = as_bytes(content);
  const std::vector<std::uint64_t> ends = xet::chunk_boundaries(bytes);

  // Place every chunk: an existing copy wins, new chunks fill pending xorbs in file order.
  std::vector<ChunkRef> refs;
  std::vector<std::vector<std::span<const std::byte>>> pending;
  std::vector<std::size_t> pending_bytes;
  std::map<xet::XetHash, std::pair<std::size_t, std::uint32_t>> pending_index;
  xet::FileHasher file_hasher;
  std::uint64_t start = 0;
  for (const std::uint64_t end : ends) {
    const std::span<const std::byte> chunk = bytes.subspan(start, end - start);
    start = end;
    const xet::XetHash hash = xet::chunk_hash(chunk);
    file_hasher.add_chunk(hash, chunk.size());
    if (const auto found = chunk_index_.find(hash); found != chunk_index_.end()) {
      refs.push_back({found->second.xorb, 0, found->second.index, chunk.size()});
      continue;
    }
    if (const auto found = pending_index.find(hash); found != pending_index.end()) {
      refs.push_back({nullptr, found->second.first, found->second.second, chunk.size()});
      continue;
    }
    // A record is never larger than its header plus the raw bytes (writers store raw when compression does
    // not pay), so this bound keeps every xorb within max_xorb_bytes.
    const std::size_t record_bound = xet::kChunkHeaderSize + chunk.size();
    if (pending.empty() || pending.back().size() >= options_.max_chunks_per_xorb ||
        pending_bytes.back() + record_bound > options_.max_xorb_bytes) {
      pending.emplace_back();
      pending_bytes.push_back(0);
    }
    const auto index = static_cast<std::uint32_t>(pending.back().size());
    pending.back().push_back(chunk);
    pending_bytes.back() += record_bound;
    pending_index.emplace(hash, std::make_pair(pending.size() - 1, index));
    refs.push_back({nullptr, pending.size() - 1, index, chunk.size()});
  }

  auto file = std::make_shared<XetFile>();
  file->hash = file_hasher.file_hash();
  file->hex = xet::to_hex(file->hash);
  file->size = content.size();
  if (auto existing = this->file(file->hex)) return existing;

  std::vector<std::shared_ptr<const XetXorb>> created;
  for (const auto& chunks : pending) created.push_back(encode(chunks));
  // Consecutive chunks of one xorb form one term.
  for (const ChunkRef& ref : refs) {
    const std::shared_ptr<const XetXorb>& xorb = ref.stored != nullptr ? ref.stored : created[ref.pending];
    if (!file->terms.empty() && file->terms.back().xorb == xorb && file->terms.back().end_chunk == ref.index) {
      file->terms.back().end_chunk = ref.index + 1;
      file->terms.back().unpacked_length += ref.size;
    } else {
      file->terms.push_back({xorb, ref.index, ref.index + 1, ref.size});
    }
  }

  for (const auto& xorb : created) {
    for (std::uint32_t i = 0; i < xorb->chunk_count(); ++i) chunk_index_.try_emplace(xorb->chunks[i].first, xorb, i);
  }
  std::lock_guard lock(mutex_);
  for (const auto& xorb : created) xorbs_.try_emplace(xorb->hex, xorb);
  files_.try_emplace(file->hex, file);
  return file;
}

void XetStore::set_options(const XetStoreOptions& options) {
  if (options.max_chunks_per_xorb == 0) throw std::invalid_argument("test hub: a xorb needs room for a chunk");
  if (options.max_xorb_bytes < xet::kChunkHeaderSize + xet::kMaxUncompressedChunkSize) {
    throw std::invalid_argument("test hub: max_xorb_bytes must hold at least one largest chunk");
  }
  std::lock_guard build(build_mutex_);
  options_ = options;
}

std::shared_ptr<const XetFile> XetStore::file(std::string_view hex) const {
  std::lock_guard lock(mutex_);
  const auto found = files_.find(hex);
  return found == files_.end() ? nullptr : found->second;
}

std::shared_ptr<const XetXorb> XetStore::xorb(std::string_view hex) const {
  std::lock_guard lock(mutex_);
  const auto found = xorbs_.find(hex);
  return found == xorbs_.end() ? nullptr : found->second;
}

XorbByteRange record_byte_range(const XetXorb& xorb, std::uint32_t first_chunk, std::uint32_t end_chunk) {
  return {xorb.record_offsets.at(first_chunk), xorb.record_offsets.at(end_chunk) - 1};
}

std::optional<XetReconstruction> plan_reconstruction(const XetFile& file,
                                                     std::optional<std::pair<std::uint64_t, std::uint64_t>> range) {
  XetReconstruction plan;
  if (!range) {
    plan.terms = file.terms;
    return plan;
  }
  const std::uint64_t first = range->first;
  if (first >= file.size) return std::nullopt;
  const std::uint64_t last = std::min(range->second, file.size - 1);

  // Keep the chunks that hold any byte of [first, last]; a term keeps its run of them.
  std::uint64_t chunk_start = 0;  // file offset of the chunk being looked at
  bool started = false;
  for (const XetTerm& term : file.terms) {
    XetTerm kept{term.xorb, 0, 0, 0};
    for (std::uint32_t chunk = term.first_chunk; chunk < term.end_chunk; ++chunk) {
      const std::uint64_t size = term.xorb->chunks[chunk].second;
      const std::uint64_t chunk_end = chunk_start + size;  // exclusive
      if (chunk_end > first && chunk_start <= last) {
        if (!started) {
          plan.offset_into_first_range = first - chunk_start;
          started = true;
        }
        if (kept.unpacked_length == 0) kept.first_chunk = chunk;
        kept.end_chunk = chunk + 1;
        kept.unpacked_length += size;
      }
      chunk_start = chunk_end;
    }
    if (kept.unpacked_length > 0) plan.terms.push_back(kept);
    if (chunk_start > last) break;
  }
  return plan;
}

std::string reconstruct(const XetFile& file) {
  std::string content;
  content.reserve(file.size);
  for (const XetTerm& term : file.terms) {
    const XorbByteRange range = record_byte_range(*term.xorb, term.first_chunk, term.end_chunk);
    const std::span<const std::byte> records =
        as_bytes(*term.xorb->bytes).subspan(range.first, range.last - range.first + 1);
    xet::ChunkReader reader(records, term.first_chunk);
    while (const auto chunk = reader.next()) {
      content.append(reinterpret_cast<const char*>(chunk->bytes.data()), chunk->bytes.size());
    }
  }
  return content;
}

}  // namespace testing_support::hub
