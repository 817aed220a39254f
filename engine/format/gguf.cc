#include "engine/format/gguf.h"

#include <algorithm>
#include <limits>
#include <set>

#include "engine/format/format_error.h"
#include "engine/format/little_endian.h"

namespace engine::format {

namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr std::uint64_t kDefaultAlignment = 32;

bool is_known_type(std::uint32_t t) {
  return t <= static_cast<std::uint32_t>(GgufType::Float64);
}

bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::UInt8:
    case GgufType::Int8:
    case GgufType::UInt16:
    case GgufType::Int16:
    case GgufType::UInt32:
    case GgufType::Int32:
    case GgufType::UInt64:
    case GgufType::Int64: return true;
    default: return false;
  }
}

bool is_signed_type(GgufType t) {
  return t == GgufType::Int8 || t == GgufType::Int16 || t == GgufType::Int32 || t == GgufType::Int64;
}

// Sign-extends the stored bits of a signed integer type.
std::int64_t signed_value(GgufType t, std::uint64_t bits) {
  switch (t) {
    case GgufType::Int8: return static_cast<std::int8_t>(bits);
    case GgufType::Int16: return static_cast<std::int16_t>(bits);
    case GgufType::Int32: return static_cast<std::int32_t>(bits);
    default: return static_cast<std::int64_t>(bits);
  }
}

// Reads the file image front to back. Every read checks the bytes left, and every allocation is charged
// against the metadata budget, so a lying count or length fails cleanly instead of allocating.
class Reader {
 public:
  Reader(std::span<const std::byte> file, std::string_view name, const GgufLimits& limits)
      : file_(file), name_(name), limits_(limits) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(std::string(name_) + ": not a valid GGUF file: " + what);
  }

  std::uint64_t pos() const { return pos_; }
  std::uint64_t remaining() const { return file_.size() - pos_; }

  void need(std::uint64_t bytes, const std::string& what) const {
    if (bytes > remaining()) {
      fail(what + " needs " + std::to_string(bytes) + " bytes at offset " + std::to_string(pos_) +
           " but the file has " + std::to_string(remaining()) + " left");
    }
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    const T value = load_le<T>(file_.data() + pos_);
    pos_ += sizeof(T);
    return value;
  }

  std::span<const std::byte> take(std::uint64_t bytes, const std::string& what) {
    need(bytes, what);
    const auto out = file_.subspan(pos_, bytes);
    pos_ += bytes;
    return out;
  }

  void charge(std::uint64_t bytes, const std::string& what) {
    if (bytes > limits_.max_metadata_bytes - used_) {
      fail(what + " would take the decoded metadata past the limit of " + std::to_string(limits_.max_metadata_bytes) +
           " bytes");
    }
    used_ += bytes;
  }

  std::string read_string(const std::string& what) {
    const auto length = read<std::uint64_t>(what + " length");
    if (length > limits_.max_string_bytes) {
      fail(what + " claims " + std::to_string(length) + " bytes, over the limit of " +
           std::to_string(limits_.max_string_bytes));
    }
    const auto bytes = take(length, what);
    charge(length + sizeof(std::string), what);
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

  GgufType read_type(const std::string& what) {
    const auto raw = read<std::uint32_t>(what);
    if (!is_known_type(raw)) fail(what + " is " + std::to_string(raw) + ", not a GGUF value type (0..12)");
    return static_cast<GgufType>(raw);
  }

  GgufValue read_value(GgufType type, const std::string& what, std::uint32_t depth) {
    if (type == GgufType::String) return GgufValue::string(read_string(what));
    if (type != GgufType::Array) {
      const auto bytes = take(gguf_scalar_size(type), what);
      std::uint64_t bits = 0;
      std::memcpy(&bits, bytes.data(), bytes.size());
      if (type == GgufType::Bool && bits > 1) fail(what + " is a bool with value " + std::to_string(bits));
      return GgufValue::scalar_u64(type, bits);
    }
    if (depth >= limits_.max_array_depth) {
      fail(what + " nests arrays deeper than " + std::to_string(limits_.max_array_depth) + " levels");
    }
    const GgufType element = read_type(what + " element type");
    const auto count = read<std::uint64_t>(what + " count");
    // Every element takes at least this many bytes of the file, so the count is checked before allocating.
    const std::uint64_t min_element = element == GgufType::String  ? 8
                                      : element == GgufType::Array ? 12
                                                                   : gguf_scalar_size(element);
    if (count > remaining() / min_element) {
      fail(what + " claims " + std::to_string(count) + " elements of " + std::string(gguf_type_name(element)) +
           " (at least " + std::to_string(min_element) + " bytes each) but only " + std::to_string(remaining()) +
           " bytes remain");
    }
    if (element == GgufType::String) {
      charge(count * sizeof(std::string), what);
      std::vector<std::string> items;
      items.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) items.push_back(read_string(what + "[" + std::to_string(i) + "]"));
      return GgufValue::string_array(std::move(items));
    }
    if (element == GgufType::Array) {
      charge(count * sizeof(GgufValue), what);
      std::vector<GgufValue> items;
      items.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) {
        items.push_back(read_value(GgufType::Array, what + "[" + std::to_string(i) + "]", depth + 1));
      }
      return GgufValue::nested_array(std::move(items));
    }
    const auto bytes = take(count * min_element, what);
    charge(bytes.size(), what);
    if (element == GgufType::Bool) {
      for (std::uint64_t i = 0; i < count; ++i) {
        if (static_cast<unsigned>(bytes[i]) > 1) fail(what + "[" + std::to_string(i) + "] is not a bool (0 or 1)");
      }
    }
    return GgufValue::numeric_array(element, {bytes.begin(), bytes.end()});
  }

 private:
  std::span<const std::byte> file_;
  std::string_view name_;
  const GgufLimits& limits_;
  std::uint64_t pos_ = 0;
  std::uint64_t used_ = 0;
};

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

// ---- GgufType ----------------------------------------------------------------------------------------

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::UInt8: return "UINT8";
    case GgufType::Int8: return "INT8";
    case GgufType::UInt16: return "UINT16";
    case GgufType::Int16: return "INT16";
    case GgufType::UInt32: return "UINT32";
    case GgufType::Int32: return "INT32";
    case GgufType::Float32: return "FLOAT32";
    case GgufType::Bool: return "BOOL";
    case GgufType::String: return "STRING";
    case GgufType::Array: return "ARRAY";
    case GgufType::UInt64: return "UINT64";
    case GgufType::Int64: return "INT64";
    case GgufType::Float64: return "FLOAT64";
  }
  return "UNKNOWN";
}

std::size_t gguf_scalar_size(GgufType type) {
  switch (type) {
    case GgufType::UInt8:
    case GgufType::Int8:
    case GgufType::Bool: return 1;
    case GgufType::UInt16:
    case GgufType::Int16: return 2;
    case GgufType::UInt32:
    case GgufType::Int32:
    case GgufType::Float32: return 4;
    case GgufType::UInt64:
    case GgufType::Int64:
    case GgufType::Float64: return 8;
    case GgufType::String:
    case GgufType::Array: return 0;
  }
  return 0;
}

// ---- GgufValue ---------------------------------------------------------------------------------------

GgufValue GgufValue::scalar_u64(GgufType type, std::uint64_t bits) {
  if (gguf_scalar_size(type) == 0) throw std::invalid_argument("scalar_u64 needs a fixed-size GGUF type");
  return GgufValue(type, bits);
}
GgufValue GgufValue::string(std::string text) {
  return GgufValue(GgufType::String, std::move(text));
}
GgufValue GgufValue::numeric_array(GgufType element_type, std::vector<std::byte> raw) {
  const std::size_t size = gguf_scalar_size(element_type);
  if (size == 0 || raw.size() % size != 0) throw std::invalid_argument("numeric_array needs whole fixed-size elements");
  return GgufValue(GgufType::Array, NumericArray{element_type, std::move(raw)});
}
GgufValue GgufValue::string_array(std::vector<std::string> items) {
  return GgufValue(GgufType::Array, std::move(items));
}
GgufValue GgufValue::nested_array(std::vector<GgufValue> items) {
  for (const auto& item : items) {
    if (!item.is_array()) throw std::invalid_argument("nested_array items must be arrays");
  }
  return GgufValue(GgufType::Array, NestedArray{std::move(items)});
}

GgufType GgufValue::element_type() const {
  if (const auto* n = std::get_if<NumericArray>(&data_)) return n->element_type;
  if (std::holds_alternative<std::vector<std::string>>(data_)) return GgufType::String;
  if (std::holds_alternative<NestedArray>(data_)) return GgufType::Array;
  return type_;
}

std::size_t GgufValue::size() const {
  if (const auto* n = std::get_if<NumericArray>(&data_)) return n->raw.size() / gguf_scalar_size(n->element_type);
  if (const auto* s = std::get_if<std::vector<std::string>>(&data_)) return s->size();
  if (const auto* a = std::get_if<NestedArray>(&data_)) return a->items.size();
  return 1;
}

std::optional<std::uint64_t> GgufValue::as_uint() const {
  if (!is_integer_type(type_)) return std::nullopt;
  const auto bits = std::get<std::uint64_t>(data_);
  if (!is_signed_type(type_)) return bits;
  const auto v = signed_value(type_, bits);
  if (v < 0) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

std::optional<std::int64_t> GgufValue::as_int() const {
  if (!is_integer_type(type_)) return std::nullopt;
  const auto bits = std::get<std::uint64_t>(data_);
  if (is_signed_type(type_)) return signed_value(type_, bits);
  if (bits > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
  return static_cast<std::int64_t>(bits);
}

std::optional<double> GgufValue::as_float() const {
  if (type_ == GgufType::Float32) {
    float f;
    const auto bits = static_cast<std::uint32_t>(std::get<std::uint64_t>(data_));
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  if (type_ == GgufType::Float64) {
    double d;
    const auto bits = std::get<std::uint64_t>(data_);
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  if (is_signed_type(type_)) return static_cast<double>(*as_int());
  if (is_integer_type(type_)) return static_cast<double>(std::get<std::uint64_t>(data_));
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ != GgufType::Bool) return std::nullopt;
  return std::get<std::uint64_t>(data_) != 0;
}

const std::string* GgufValue::as_string() const {
  return std::get_if<std::string>(&data_);
}

const std::vector<std::string>* GgufValue::strings() const {
  return std::get_if<std::vector<std::string>>(&data_);
}

const std::vector<GgufValue>* GgufValue::nested() const {
  const auto* a = std::get_if<NestedArray>(&data_);
  return a ? &a->items : nullptr;
}

const std::vector<std::byte>* GgufValue::numeric_raw() const {
  const auto* n = std::get_if<NumericArray>(&data_);
  return n ? &n->raw : nullptr;
}

GgufValue GgufValue::element(std::size_t i) const {
  const auto& n = std::get<NumericArray>(data_);
  const std::size_t size = gguf_scalar_size(n.element_type);
  if (i >= n.raw.size() / size) throw std::out_of_range("GGUF array element index");
  std::uint64_t bits = 0;
  std::memcpy(&bits, n.raw.data() + i * size, size);
  return scalar_u64(n.element_type, bits);
}

std::optional<std::vector<double>> GgufValue::floats() const {
  if (!std::holds_alternative<NumericArray>(data_)) return std::nullopt;
  std::vector<double> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto v = element(i).as_float();
    if (!v) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

std::optional<std::vector<std::int64_t>> GgufValue::ints() const {
  if (!std::holds_alternative<NumericArray>(data_)) return std::nullopt;
  std::vector<std::int64_t> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto v = element(i).as_int();
    if (!v) return std::nullopt;
    out[i] = *v;
  }
  return out;
}

// ---- layout ------------------------------------------------------------------------------------------

std::uint64_t GgufTensor::elements() const {
  std::uint64_t n = 1;
  for (const auto d : dims) n *= d;  // checked for overflow when the file was parsed
  return n;
}

const GgufValue* GgufLayout::find(std::string_view key) const {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufTensor* GgufLayout::find_tensor(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view name, const GgufLimits& limits) {
  Reader in(file, name, limits);
  GgufLayout layout;

  const auto magic = in.read<std::uint32_t>("the magic number");
  if (magic != kGgufMagic) in.fail("the file does not start with the magic 'GGUF'");
  layout.version = in.read<std::uint32_t>("the version");
  if (layout.version == 1) in.fail("version 1 (32-bit counts) is not supported; convert the file to version 3");
  if (layout.version != 2 && layout.version != 3) {
    in.fail(
        "version " + std::to_string(layout.version) + " is not 2 or 3" +
        ((layout.version & 0xFFFF) == 0 ? " (the file may be big-endian, which this reader does not support)" : ""));
  }
  const auto tensor_count = in.read<std::uint64_t>("the tensor count");
  const auto kv_count = in.read<std::uint64_t>("the metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least 8+4+4+8.
  if (kv_count > in.remaining() / 13) {
    in.fail("the header claims " + std::to_string(kv_count) + " metadata entries but only " +
            std::to_string(in.remaining()) + " bytes follow");
  }
  if (tensor_count > in.remaining() / 24) {
    in.fail("the header claims " + std::to_string(tensor_count) + " tensors but only " +
            std::to_string(in.remaining()) + " bytes follow");
  }

  std::set<std::string, std::less<>> keys;
  layout.metadata.reserve(kv_count);
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.read_string("metadata key #" + std::to_string(i));
    if (!keys.insert(key).second) in.fail("metadata key '" + key + "' appears twice");
    const auto type = in.read_type("the type of '" + key + "'");
    auto value = in.read_value(type, "metadata '" + key + "'", 0);
    layout.metadata.emplace_back(std::move(key), std::move(value));
  }

  if (const auto* alignment = layout.find("general.alignment")) {
    const auto a = alignment->as_uint();
    if (alignment->type() != GgufType::UInt32 || !a || *a == 0 || (*a & (*a - 1)) != 0) {
      in.fail("general.alignment must be a UINT32 power of two");
    }
    layout.alignment = *a;
  } else {
    layout.alignment = kDefaultAlignment;
  }

  std::set<std::string, std::less<>> names;
  layout.tensors.reserve(tensor_count);
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor;
    tensor.name = in.read_string("tensor name #" + std::to_string(i));
    const std::string where = "tensor '" + tensor.name + "'";
    if (!names.insert(tensor.name).second) in.fail(where + " appears twice");
    const auto n_dims = in.read<std::uint32_t>(where + " dimension count");
    if (n_dims == 0 || n_dims > limits.max_dims) {
      in.fail(where + " has " + std::to_string(n_dims) + " dimensions; 1 to " + std::to_string(limits.max_dims) +
              " are allowed");
    }
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto dim = in.read<std::uint64_t>(where + " dimension");
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          __builtin_mul_overflow(elements, dim, &elements)) {
        in.fail(where + " has dimensions whose product overflows");
      }
      tensor.dims.push_back(dim);
    }
    const auto type_id = in.read<std::uint32_t>(where + " type");
    tensor.type = ggml_type_info(type_id);
    if (tensor.type == nullptr) {
      in.fail(where + " has ggml type " + std::to_string(type_id) +
              ", which this reader does not know (known: " + ggml_known_type_names() + ")");
    }
    const auto bytes = ggml_byte_size(*tensor.type, elements);
    if (!bytes) {
      in.fail(where + " has " + std::to_string(elements) + " elements of " + std::string(tensor.type->name) +
              ", which is not a whole number of its " + std::to_string(tensor.type->block_size) + "-element blocks");
    }
    tensor.size = *bytes;
    tensor.offset = in.read<std::uint64_t>(where + " offset");
    if (tensor.offset % layout.alignment != 0) {
      in.fail(where + " starts at data offset " + std::to_string(tensor.offset) + ", not a multiple of the alignment " +
              std::to_string(layout.alignment));
    }
    layout.tensors.push_back(std::move(tensor));
  }

  layout.data_offset = align_up(in.pos(), layout.alignment);
  const std::uint64_t file_size = file.size();
  const std::uint64_t data_size = file_size > layout.data_offset ? file_size - layout.data_offset : 0;

  // Every span inside the data section, none overlapping another.
  std::vector<const GgufTensor*> by_offset;
  for (const auto& t : layout.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) { return a->offset < b->offset; });
  std::uint64_t end = 0;
  const GgufTensor* previous = nullptr;
  for (const auto* t : by_offset) {
    if (t->offset < end) {
      in.fail("tensor '" + t->name + "' starts at data offset " + std::to_string(t->offset) + " inside tensor '" +
              previous->name + "', which ends at " + std::to_string(end));
    }
    if (t->size > data_size || t->offset > data_size - t->size) {
      in.fail("tensor '" + t->name + "' (" + std::string(t->type->name) + ", " + std::to_string(t->size) +
              " bytes at data offset " + std::to_string(t->offset) + ") ends at file offset " +
              std::to_string(layout.data_offset + t->offset + t->size) + " but the file has " +
              std::to_string(file_size) + " bytes (truncated)");
    }
    end = t->offset + t->size;
    previous = t;
  }

  // A file ends right after the last tensor's data or after its alignment padding (without tensors: after
  // the metadata, padded or not). Any other size is a truncated or extended copy.
  const std::uint64_t exact = layout.tensors.empty() ? in.pos() : layout.data_offset + end;
  const std::uint64_t padded =
      layout.tensors.empty() ? layout.data_offset : layout.data_offset + align_up(end, layout.alignment);
  if (file_size != exact && file_size != padded) {
    in.fail("the file has " + std::to_string(file_size) + " bytes but its " +
            (layout.tensors.empty() ? "metadata" : "last tensor's data") + " ends at " + std::to_string(exact) + " (" +
            std::to_string(padded) + " with alignment padding): " +
            (file_size < exact || (file_size > exact && file_size < padded) ? "truncated" : "trailing bytes"));
  }
  return layout;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto file = MappedFile::open(path);
  auto layout = parse_gguf(file.bytes(), path.string());
  return GgufFile(std::move(file), std::move(layout));
}

std::span<const std::byte> GgufFile::data(const GgufTensor& tensor) const {
  return file_.bytes().subspan(layout_.data_offset + tensor.offset, tensor.size);
}

}  // namespace engine::format
