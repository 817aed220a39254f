#include "engine/format/safetensors_writer.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fstream>
#include <stdexcept>

#include "engine/format/little_endian.h"

namespace engine::format {

void SafetensorsWriter::add(std::string name, SafetensorsDType dtype, std::vector<std::uint64_t> shape,
                            std::span<const std::byte> data) {
  std::uint64_t elements = 1;
  for (const auto d : shape) elements *= d;
  if (elements * dtype_size(dtype) != data.size()) {
    throw std::invalid_argument("tensor '" + name + "': shape needs " + std::to_string(elements * dtype_size(dtype)) +
                                " bytes, data has " + std::to_string(data.size()));
  }
  for (const auto& e : entries_) {
    if (e.name == name) throw std::invalid_argument("tensor '" + name + "' added twice");
  }
  entries_.push_back({std::move(name), dtype, std::move(shape), {data.begin(), data.end()}});
}

std::string SafetensorsWriter::header_json() const {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> json(buffer);
  json.StartObject();
  if (!metadata_.empty()) {
    json.Key("__metadata__");
    json.StartObject();
    for (const auto& [k, v] : metadata_) {
      json.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
      json.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
    }
    json.EndObject();
  }
  std::uint64_t offset = 0;
  for (const auto& e : entries_) {
    json.Key(e.name.c_str(), static_cast<rapidjson::SizeType>(e.name.size()));
    json.StartObject();
    json.Key("dtype");
    const auto dtype = dtype_name(e.dtype);
    json.String(dtype.data(), static_cast<rapidjson::SizeType>(dtype.size()));
    json.Key("shape");
    json.StartArray();
    for (const auto d : e.shape) json.Uint64(d);
    json.EndArray();
    json.Key("data_offsets");
    json.StartArray();
    json.Uint64(offset);
    offset += e.data.size();
    json.Uint64(offset);
    json.EndArray();
    json.EndObject();
  }
  json.EndObject();
  std::string header(buffer.GetString(), buffer.GetSize());
  header.resize((header.size() + 7) / 8 * 8, ' ');  // keeps the data section 8-byte aligned
  return header;
}

std::vector<std::byte> SafetensorsWriter::serialize() const {
  const std::string header = header_json();
  std::vector<std::byte> out(8 + header.size());
  store_le<std::uint64_t>(out.data(), header.size());
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (const auto& e : entries_) out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  const std::string header = header_json();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::byte length[8];
  store_le<std::uint64_t>(length, header.size());
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& e : entries_) {
    out.write(reinterpret_cast<const char*>(e.data.data()), static_cast<std::streamsize>(e.data.size()));
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

}  // namespace engine::format
