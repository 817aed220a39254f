// xet-bench: throughput of the Xet core on generated data, one thread, beside the b3sum tool on the same
// bytes in the same run. A measurement, not a test: `build/fetchd/xet-bench [MiB]` (default 256).
// docs/xet-core-numbers.md records its output.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/splitmix64.h"
#include "fetchd/xet/chunker.h"
#include "fetchd/xet/xet_hash.h"
#include "fetchd/xet/xorb_chunk.h"

namespace {

using namespace fetchd::xet;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

constexpr int kRepeats = 3;  // each figure is the best of this many runs

// Incompressible bytes (SplitMix64), what chunking and hashing meet in most model files.
Bytes random_bytes(std::size_t size) {
  Bytes data(size);
  base::SplitMix64(0).fill(data);
  return data;
}

// Text that LZ4 compresses a few times over (config files, tokenizers, JSON).
Bytes text_bytes(std::size_t size) {
  static const char* const kWords[] = {"\"tensor\": ", "\"weight\", ", "layers.", "self_attn.", "q_proj ", "0.0125, ",
                                       "-3.5e-2, ",    "\"model\": ",  "norm\n",  "mlp.",       "bias ",   "[1, 4096]"};
  std::mt19937_64 random(1);
  Bytes data;
  data.reserve(size + 32);
  while (data.size() < size) {
    const char* word = kWords[random() % std::size(kWords)];
    for (const char* c = word; *c; ++c) data.push_back(static_cast<std::byte>(*c));
  }
  data.resize(size);
  return data;
}

// bf16 weights (normal, sigma 0.02), as most checkpoints hold them: LZ4 alone finds almost nothing, byte
// grouping gathers the low-entropy sign/exponent bytes so LZ4 can shrink them — the case scheme 2 exists for.
Bytes bf16_weight_bytes(std::size_t size) {
  std::mt19937_64 random(2);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  Bytes data(size);
  for (std::size_t at = 0; at + 2 <= size; at += 2) {
    const float value = normal(random);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    const auto bf16 = static_cast<std::uint16_t>(bits >> 16);  // truncation: the top half of the float
    std::memcpy(data.data() + at, &bf16, 2);
  }
  return data;
}

double best_seconds(const std::function<void()>& run) {
  double best = 1e30;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

void report(const char* what, std::size_t bytes, double seconds, const std::string& note = "") {
  std::printf("%-34s %9.1f MB/s  %s\n", what, static_cast<double>(bytes) / seconds / 1e6, note.c_str());
}

std::vector<std::span<const std::byte>> split(std::span<const std::byte> data, const std::vector<std::uint64_t>& ends) {
  std::vector<std::span<const std::byte>> chunks;
  std::uint64_t start = 0;
  for (const auto end : ends) {
    chunks.push_back(data.subspan(start, end - start));
    start = end;
  }
  return chunks;
}

// Decoding a whole xorb of `data` encoded in `scheme`, measured through the range reader.
void measure_decode(const char* what, const Bytes& data, CompressionScheme scheme) {
  const auto chunks = split(data, chunk_boundaries(data));
  Bytes xorb;
  for (const auto& chunk : chunks) {
    const auto record = encode_chunk(chunk, scheme);
    xorb.insert(xorb.end(), record.begin(), record.end());
  }
  std::size_t checksum = 0;
  const double seconds = best_seconds([&] {
    ChunkReader reader(xorb);
    while (const auto chunk = reader.next()) checksum += std::to_integer<std::size_t>(chunk->bytes.back());
  });
  const double payload_percent = 100.0 * static_cast<double>(xorb.size()) / static_cast<double>(data.size());
  char note[128];
  std::snprintf(note, sizeof note, "(output; records are %.1f%% of the data%s)", payload_percent,
                payload_percent >= 100.0 ? ": LZ4 stored its blocks, decoding is a copy" : "");
  report(what, data.size(), seconds, note);
  if (checksum == 1) std::printf(" ");  // keeps the decode from being optimized away
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// b3sum over a file of the same bytes; the file is read once first so both sides read from memory.
void measure_b3sum(const Bytes& data) {
  std::string path = (std::filesystem::temp_directory_path() / "xet-bench-XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) {
    std::printf("b3sum: cannot create a temporary file\n");
    return;
  }
  ::close(fd);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  const auto run = [&](const std::string& command) {
    return best_seconds([&] {
      if (std::system(command.c_str()) != 0) std::printf("b3sum failed: %s\n", command.c_str());
    });
  };
  run("b3sum --no-names '" + path + "' > /dev/null");  // warm the page cache
  report("b3sum --num-threads 1", data.size(), run("b3sum --num-threads 1 --no-names '" + path + "' > /dev/null"),
         "(whole file, one thread, process start included)");
  report("b3sum (default threads)", data.size(), run("b3sum --no-names '" + path + "' > /dev/null"),
         "(whole file, all CPUs)");
  report("hash_file_by_chunks (same file)", data.size(), best_seconds([&] { hash_file_by_chunks(path); }),
         "(read + chunk + hash + merkle)");
  std::filesystem::remove(path);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  if (mib == 0) {
    std::fprintf(stderr, "usage: xet-bench [MiB of data per measurement, default 256]\n");
    return 2;
  }
  const std::size_t size = mib * 1024 * 1024;
  std::printf("xet-bench: %zu MiB per measurement, best of %d, one thread (MB = 10^6 bytes)\n", mib, kRepeats);
  std::printf("machine: %u CPUs, %s\n\n", std::thread::hardware_concurrency(), cpu_model().c_str());

  const Bytes data = random_bytes(size);
  std::vector<std::uint64_t> ends;
  report("chunking (gear CDC boundaries)", size, best_seconds([&] { ends = chunk_boundaries(data); }));
  const auto chunks = split(data, ends);
  std::printf("%-34s %9zu chunks, mean %.1f KiB\n", "", chunks.size(),
              static_cast<double>(size) / static_cast<double>(chunks.size()) / 1024.0);

  std::vector<MerkleLeaf> leaves(chunks.size());
  report("chunk hashing (keyed BLAKE3)", size, best_seconds([&] {
           for (std::size_t i = 0; i < chunks.size(); ++i) leaves[i] = {chunk_hash(chunks[i]), chunks[i].size()};
         }));

  XetHash root{};
  const double merkle_seconds = best_seconds([&] { root = merkle_root(leaves); });
  char merkle_note[96];
  std::snprintf(merkle_note, sizeof merkle_note, "(%zu leaves in %.3f ms, MB/s of the data they cover)", leaves.size(),
                merkle_seconds * 1e3);
  report("merkle root", size, merkle_seconds, merkle_note);
  report("incremental MerkleBuilder", size, best_seconds([&] {
           MerkleBuilder builder;
           for (const auto& leaf : leaves) builder.add(leaf);
           if (builder.root() != root) std::printf("MerkleBuilder disagrees with merkle_root\n");
         }));

  report("ContentHasher (chunk+hash+merkle)", size, best_seconds([&] {
           ContentHasher hasher;
           for (std::size_t at = 0; at < size; at += 1 << 20) {
             hasher.update(std::span(data).subspan(at, std::min<std::size_t>(1 << 20, size - at)));
           }
           hasher.finish();
         }));
  report("BLAKE3 in one piece (keyed)", size, best_seconds([&] { keyed_hash(kDataKey, data); }),
         "(the library on one long input)");
  measure_b3sum(data);

  std::printf("\n");
  measure_decode("LZ4 decode (text)", text_bytes(size), CompressionScheme::Lz4);
  const Bytes weights = bf16_weight_bytes(size);
  measure_decode("LZ4 decode (bf16 weights)", weights, CompressionScheme::Lz4);
  measure_decode("BG4+LZ4 decode (bf16 weights)", weights, CompressionScheme::ByteGrouping4Lz4);
  return 0;
}
