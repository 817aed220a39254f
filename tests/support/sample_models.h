#pragma once

#include <cstdint>

#include "engine/format/gguf_writer.h"

namespace testing_support {

// A GGUF writer filled with one value of every metadata type (scalars, strings, numeric, string and
// nested arrays, edge values such as -0.0 and UINT64_MAX) and tensors of several ggml types with
// deterministic bytes. Used by the reader's tests and the interop check against other readers.
engine::format::GgufWriter sample_gguf(std::uint32_t version = 3, std::uint32_t alignment = 32);

}  // namespace testing_support
