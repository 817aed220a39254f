// AVX-512 VNNI: the avx512bf16 table with an int8 kernel for each quantized weight type (Table::int8_matmul:
// vpdpbusd against activations quantized to two int8 bytes, avx512vnni_impl.h), and the weights of every such type
// repacked at load into the lanes those kernels read; float weights keep avx512bf16's kernels.
// Nothing from the standard library may be instantiated here (see kernels.h).

#include "engine/cpu/avx512vnni_impl.h"
#include "engine/cpu/int_matmul_impl.h"
#include "engine/cpu/kernels.h"

namespace engine::cpu::kernels {
namespace {

// Each type's integer kernel, and its weights repacked at load and read so (every integer type repacks).
template <int... Types>
void integer_types(Table& table) {
  static_assert((repacks(Types) && ...));
  ((table.int8_matmul[Types] = int_product<Vnni, Types>), ...);
  ((table.repack_weights[Types] = repack_tiles<Types>), ...);
  ((table.int8_matmul_repacked[Types] = repacked_product<Types>), ...);
}

Table make_vnni_table() {
  Table table = avx512bf16_table();
  table.name = "avx512vnni";
  table.row_tile = kLanes;
  table.quantize_activations = quantize_token;
  table.quantized_token_bytes = token_bytes;
  integer_types<kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS>(table);
  return table;
}

}  // namespace

const Table& avx512vnni_table() {
  static const Table kTable = make_vnni_table();
  return kTable;
}

}  // namespace engine::cpu::kernels
