// AVX-512 VNNI: the avx512bf16 table with an int8 kernel for each quantized weight type (Table::int8_matmul:
// vpdpbusd against activations quantized to two int8 bytes, avx512vnni_impl.h), and Q8_0, Q4_0, Q4_K, Q5_K and
// Q6_K weights repacked at load into the lanes those kernels read; float weights keep avx512bf16's kernels.
// Nothing from the standard library may be instantiated here (see kernels.h).

#include "engine/cpu/avx512vnni_impl.h"
#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

Table make_vnni_table() {
  Table table = avx512bf16_table();
  table.name = "avx512vnni";
  table.row_tile = kLanes;
  table.quantize_activations = quantize_token;
  table.quantized_token_bytes = token_bytes;
  table.int8_matmul[kQ8_0] = int_product<Vnni, kQ8_0>;
  table.int8_matmul[kQ4_0] = int_product<Vnni, kQ4_0>;
  table.int8_matmul[kQ4_K] = int_product<Vnni, kQ4_K>;
  table.int8_matmul[kQ5_K] = int_product<Vnni, kQ5_K>;
  table.int8_matmul[kQ6_K] = int_product<Vnni, kQ6_K>;
  table.repack_weights[kQ8_0] = repack_tiles<kQ8_0>;
  table.repack_weights[kQ4_0] = repack_tiles<kQ4_0>;
  table.repack_weights[kQ4_K] = repack_tiles<kQ4_K>;
  table.repack_weights[kQ5_K] = repack_tiles<kQ5_K>;
  table.repack_weights[kQ6_K] = repack_tiles<kQ6_K>;
  table.int8_matmul_repacked[kQ8_0] = repacked_product<kQ8_0>;
  table.int8_matmul_repacked[kQ4_0] = repacked_product<kQ4_0>;
  table.int8_matmul_repacked[kQ4_K] = repacked_product<kQ4_K>;
  table.int8_matmul_repacked[kQ5_K] = repacked_product<kQ5_K>;
  table.int8_matmul_repacked[kQ6_K] = repacked_product<kQ6_K>;
  return table;
}

}  // namespace

const Table& avx512vnni_table() {
  static const Table kTable = make_vnni_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
