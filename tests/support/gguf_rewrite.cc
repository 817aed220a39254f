#include "tests/support/gguf_rewrite.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/format/gguf_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/weight_blocks.h"

namespace testing_support {

void rewrite_gguf(const std::filesystem::path& src, const std::filesystem::path& dst,
                  const std::function<std::optional<RestoredTensor>(const engine::format::GgufTensor&,
                                                                    std::span<const std::byte>)>& restore) {
  const auto written = read_file(src);
  const std::span<const std::byte> bytes(written);
  const auto layout = engine::format::parse_gguf(bytes, src.filename().string());
  engine::format::GgufWriter copy(layout.version, static_cast<std::uint32_t>(layout.alignment));
  for (const auto& [key, value] : layout.metadata) copy.add_metadata(key, value);
  for (const auto& t : layout.tensors) {
    const auto data = bytes.subspan(layout.data_offset + t.offset, t.size);
    if (auto restored = restore(t, data)) {
      copy.add_tensor(t.name, t.dims, *restored->type, std::move(restored->data));
    } else {
      copy.add_tensor(t.name, t.dims, *t.type, {data.begin(), data.end()});
    }
  }
  copy.write(dst);
}

int write_random_block_copy(const std::filesystem::path& src, const std::filesystem::path& dst,
                            engine::quant::WeightType type, std::uint32_t seed) {
  const auto id = engine::quant::ggml_type_id(type);
  const auto* info = id ? engine::format::ggml_type_info(*id) : nullptr;
  if (info == nullptr) throw std::logic_error("no ggml type for " + std::string(engine::quant::weight_type_name(type)));
  int restored = 0;
  rewrite_gguf(
      src, dst,
      [&](const engine::format::GgufTensor& t, std::span<const std::byte> data) -> std::optional<RestoredTensor> {
        // Matrices only: gpt-oss's stacked expert biases are 2-D too, but vectors to llama.cpp and the engine.
        if (t.dims.size() != 2 || t.dims[0] % 256 != 0 || t.type == nullptr || t.type->name != "F32" ||
            t.name.ends_with(".bias")) {
          return std::nullopt;
        }
        std::vector<float> values(t.elements());
        std::memcpy(values.data(), data.data(), values.size() * sizeof(float));
        ++restored;
        return RestoredTensor{info, random_blocks_like(type, values, seed + static_cast<std::uint32_t>(restored))};
      });
  return restored;
}

}  // namespace testing_support
