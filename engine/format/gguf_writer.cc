#include "engine/format/gguf_writer.h"

#include <fstream>
#include <stdexcept>

#include "engine/format/little_endian.h"

namespace engine::format {

namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<std::byte>& out) : out_(out) {}

  template <typename T>
  void scalar(T value) {
    const auto at = out_.size();
    out_.resize(at + sizeof(T));
    store_le<T>(out_.data() + at, value);
  }
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  void string(const std::string& s) {
    scalar<std::uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(std::uint64_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment); }

  void value(const GgufValue& v) {
    if (const auto* s = v.as_string()) return string(*s);
    if (!v.is_array()) {
      const auto bits = v.scalar_bits();
      return bytes(&bits, gguf_scalar_size(v.type()));
    }
    scalar<std::uint32_t>(static_cast<std::uint32_t>(v.element_type()));
    scalar<std::uint64_t>(v.size());
    if (const auto* raw = v.numeric_raw()) return bytes(raw->data(), raw->size());
    if (const auto* strings = v.strings()) {
      for (const auto& s : *strings) string(s);
      return;
    }
    for (const auto& item : *v.nested()) value(item);
  }

 private:
  std::vector<std::byte>& out_;
};

}  // namespace

GgufWriter::GgufWriter(std::uint32_t version, std::uint32_t alignment) : version_(version), alignment_(alignment) {
  if (alignment != 32) add_metadata("general.alignment", GgufValue::scalar<std::uint32_t>(alignment));
}

void GgufWriter::add_metadata(std::string key, GgufValue value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, std::vector<std::uint64_t> dims, const GgmlTypeInfo& type,
                            std::vector<std::byte> data) {
  std::uint64_t elements = 1;
  for (const auto d : dims) elements *= d;
  const auto expected = ggml_byte_size(type, elements);
  if (!expected || *expected != data.size()) {
    throw std::invalid_argument("tensor '" + name + "': dims and type need " +
                                (expected ? std::to_string(*expected) : std::string("whole blocks")) + ", data has " +
                                std::to_string(data.size()) + " bytes");
  }
  tensors_.push_back({std::move(name), std::move(dims), &type, std::move(data)});
}

std::vector<std::byte> GgufWriter::serialize() const {
  std::vector<std::byte> out;
  ByteSink sink(out);
  sink.bytes("GGUF", 4);
  sink.scalar<std::uint32_t>(version_);
  sink.scalar<std::uint64_t>(tensors_.size());
  sink.scalar<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    sink.string(key);
    sink.scalar<std::uint32_t>(static_cast<std::uint32_t>(value.type()));
    sink.value(value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    sink.string(t.name);
    sink.scalar<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
    for (const auto d : t.dims) sink.scalar<std::uint64_t>(d);
    sink.scalar<std::uint32_t>(t.type->id);
    sink.scalar<std::uint64_t>(offset);
    offset = (offset + t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  sink.pad_to(alignment_);
  for (const auto& t : tensors_) {
    sink.bytes(t.data.data(), t.data.size());
    sink.pad_to(alignment_);
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const auto bytes = serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace engine::format
