// AVX-512 with BF16: the avx512 table under its own name, BF16 weights included. Its former vdpbf16ps kernels
// rounded the activations to bf16 (as llama.cpp's do for BF16 weights), which moved the tiny models'
// log-probabilities from the float64 reference as far as llama.cpp's move; splitting the activations into two
// bf16 parts kept f32's precision but ran slower than avx512's f32 kernels (docs/cpu-kernels.md). So BF16
// weights multiply f32 activations here as at avx512. The level is the base of avx512vnni and the place an
// AMX-BF16 path would go.
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

Table make_bf16_table() {
  Table table = avx512_table();
  table.name = "avx512bf16";
  return table;
}

}  // namespace

const Table& avx512bf16_table() {
  static const Table kTable = make_bf16_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
