// AVX-512 VNNI: the avx512bf16 table with an int8 kernel for each quantized weight type (Table::int8_matmul:
// vpdpbusd against activations quantized to two int8 bytes, avx512vnni_impl.h), and the weights of every such type
// repacked at load into the lanes those kernels read; float weights keep avx512bf16's kernels.
// Nothing from the standard library may be instantiated here (see kernels.h).

#include "engine/cpu/avx512vnni_impl.h"
#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

// The type's weights repacked at load and read so (every type repacks() names).
template <int Type>
void repacked(Table& table) {
  table.repack_weights[Type] = repack_tiles<Type>;
  table.int8_matmul_repacked[Type] = repacked_product<Type>;
}

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
  table.int8_matmul[kQ4_1] = int_product<Vnni, kQ4_1>;
  table.int8_matmul[kQ5_0] = int_product<Vnni, kQ5_0>;
  table.int8_matmul[kQ5_1] = int_product<Vnni, kQ5_1>;
  table.int8_matmul[kQ3_K] = int_product<Vnni, kQ3_K>;
  table.int8_matmul[kIQ4_NL] = int_product<Vnni, kIQ4_NL>;
  table.int8_matmul[kIQ4_XS] = int_product<Vnni, kIQ4_XS>;
  table.int8_matmul[kQ2_K] = int_product<Vnni, kQ2_K>;
  repacked<kQ8_0>(table);
  repacked<kQ4_0>(table);
  repacked<kQ4_1>(table);
  repacked<kQ5_0>(table);
  repacked<kQ5_1>(table);
  repacked<kIQ4_NL>(table);
  repacked<kIQ4_XS>(table);
  repacked<kQ2_K>(table);
  repacked<kQ3_K>(table);
  repacked<kQ4_K>(table);
  repacked<kQ5_K>(table);
  repacked<kQ6_K>(table);
  return table;
}

}  // namespace

const Table& avx512vnni_table() {
  static const Table kTable = make_vnni_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
