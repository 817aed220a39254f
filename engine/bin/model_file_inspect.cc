// model-file-inspect: validates a safetensors or GGUF file with the project's readers and describes it,
// as text or (--json) in a form the interop tests compare with other readers.
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "base/printable.h"
#include "engine/format/format_error.h"
#include "engine/format/gguf.h"
#include "engine/format/safetensors.h"

namespace {

using Json = rapidjson::PrettyWriter<rapidjson::StringBuffer>;
using engine::format::GgufType;
using engine::format::GgufValue;

void write_string(Json& json, std::string_view s) {
  json.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// 64-bit integers are written as strings so JSON readers with 53-bit numbers keep every digit.
void write_scalar(Json& json, const GgufValue& v) {
  if (const auto* s = v.as_string()) return write_string(json, *s);
  if (const auto b = v.as_bool()) return static_cast<void>(json.Bool(*b));
  if (v.type() == GgufType::Float32 || v.type() == GgufType::Float64) {
    const double d = *v.as_float();
    if (std::isfinite(d)) return static_cast<void>(json.Double(d));
    return write_string(json, std::isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity"));
  }
  if (v.type() == GgufType::UInt64) return write_string(json, std::to_string(*v.as_uint()));
  if (v.type() == GgufType::Int64) return write_string(json, std::to_string(*v.as_int()));
  json.Int64(*v.as_int());
}

void write_value(Json& json, const GgufValue& v) {
  if (!v.is_array()) return write_scalar(json, v);
  json.StartArray();
  if (const auto* strings = v.strings()) {
    for (const auto& s : *strings) write_string(json, s);
  } else if (const auto* nested = v.nested()) {
    for (const auto& item : *nested) write_value(json, item);
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) write_scalar(json, v.element(i));
  }
  json.EndArray();
}

void describe_gguf(const engine::format::GgufFile& file, Json& json) {
  const auto& layout = file.layout();
  json.StartObject();
  json.Key("format");
  json.String("gguf");
  json.Key("version");
  json.Uint(layout.version);
  json.Key("alignment");
  json.Uint64(layout.alignment);
  json.Key("data_offset");
  write_string(json, std::to_string(layout.data_offset));
  json.Key("metadata");
  json.StartObject();
  for (const auto& [key, value] : layout.metadata) {
    write_string(json, key);
    json.StartObject();
    json.Key("type");
    write_string(json, gguf_type_name(value.type()));
    if (value.is_array()) {
      json.Key("element_type");
      write_string(json, gguf_type_name(value.element_type()));
    }
    json.Key("value");
    write_value(json, value);
    json.EndObject();
  }
  json.EndObject();
  json.Key("tensors");
  json.StartArray();
  for (const auto& t : layout.tensors) {
    json.StartObject();
    json.Key("name");
    write_string(json, t.name);
    json.Key("dims");
    json.StartArray();
    for (const auto d : t.dims) write_string(json, std::to_string(d));
    json.EndArray();
    json.Key("type");
    write_string(json, t.type->name);
    json.Key("type_id");
    json.Uint(t.type->id);
    json.Key("offset");
    write_string(json, std::to_string(t.offset));
    json.Key("size");
    write_string(json, std::to_string(t.size));
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

void describe_safetensors(const engine::format::SafetensorsFile& file, Json& json) {
  const auto& layout = file.layout();
  json.StartObject();
  json.Key("format");
  json.String("safetensors");
  json.Key("header_length");
  json.Uint64(layout.header_length);
  json.Key("metadata");
  json.StartObject();
  for (const auto& [k, v] : layout.metadata) {
    write_string(json, k);
    write_string(json, v);
  }
  json.EndObject();
  json.Key("tensors");
  json.StartArray();
  for (const auto& t : layout.tensors) {
    json.StartObject();
    json.Key("name");
    write_string(json, t.name);
    json.Key("dtype");
    write_string(json, dtype_name(t.dtype));
    json.Key("shape");
    json.StartArray();
    for (const auto d : t.shape) json.Uint64(d);
    json.EndArray();
    json.Key("data_offsets");
    json.StartArray();
    json.Uint64(t.begin);
    json.Uint64(t.end);
    json.EndArray();
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

int usage(std::FILE* out) {
  std::fputs(
      "usage: model-file-inspect [--json] FILE\n"
      "Validates a .safetensors or .gguf file (every tensor span against the file size) and describes it.\n"
      "Exit status: 0 valid, 1 invalid or unreadable, 2 usage.\n",
      out);
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return usage(stdout);
    if (arg == "--json") {
      as_json = true;
    } else if (path.empty() && !arg.starts_with("-")) {
      path = arg;
    } else {
      return usage(stderr);
    }
  }
  if (path.empty()) return usage(stderr);

  try {
    rapidjson::StringBuffer buffer;
    Json json(buffer);
    const bool is_gguf = std::string_view(path).ends_with(".gguf");
    if (is_gguf) {
      const auto file = engine::format::GgufFile::open(path);
      if (!as_json) {
        std::printf("%s: GGUF v%u, %zu metadata entries, %zu tensors, data at byte %llu\n", path.c_str(),
                    file.layout().version, file.layout().metadata.size(), file.layout().tensors.size(),
                    static_cast<unsigned long long>(file.layout().data_offset));
        return 0;
      }
      describe_gguf(file, json);
    } else {
      const auto file = engine::format::SafetensorsFile::open(path);
      if (!as_json) {
        std::printf("%s: safetensors, %zu tensors, header %llu bytes\n", path.c_str(), file.tensors().size(),
                    static_cast<unsigned long long>(file.layout().header_length));
        return 0;
      }
      describe_safetensors(file, json);
    }
    std::cout << buffer.GetString() << '\n';
    return 0;
  } catch (const engine::format::FormatError& e) {
    std::cerr << "model-file-inspect: " << base::printable(e.what()) << '\n';
    return 1;
  }
}
