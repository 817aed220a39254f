#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/launch.h"
#include "engine/backend/cuda/weight_kernels.h"

// How the kernels read weights
// ----------------------------
// Every kernel streams a weight row in "stages" of a fixed number of columns (128 to 1024, per type). A warp
// copies a stage of each of its rows into its own slice of shared memory with 16-byte cp.async copies of the
// aligned 16-byte chunks that cover the stage's bytes (so blocks of 18, 34 or 210 bytes need no alignment of
// their own), then decodes from shared memory. The copies skip L1 (.cg), which is left to x.
//
// Within a stage, lane l handles columns 128 s + 4 l .. + 3 at step s: each step reads x as one float4 per
// lane and token, the warp's 32 lanes covering 512 contiguous bytes, so x comes through L1 in full lines
// with no staging. K-quant scales (6-bit packed, or int8 times f16) would cost more to unpack per four
// columns than the columns themselves, so a pre-pass of the warp turns a stage's scales into floats first.
//
// weight_gemv: a warp owns kRows rows, reusing every x value kRows times from registers, and double-buffers its stages
// with two in flight (the first two issued before the kernel waits for the one before it, so they stream in while that
// one finishes); one to four warps share a row group (each taking every ksplit-th stage) when that fills the GPU's
// block slots more evenly. A 4- to 6-bit level becomes the float 0.5 + q / 256 in one byte permute; its scale, offset
// and min fold into a * f + b, and with one token the 0.5 and b are applied once per four columns through the sum of x.
// Q8_0's 8-bit levels take the exact 2^23 magic instead. Accumulation is f32 FMA throughout: on an H200 the float types
// stream at about full bandwidth, while the quantized types are bound by instruction issue (one permute and one FMA per
// element at least), not by memory.

namespace engine::cuda {
namespace {

using quant::WeightType;

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;  // warps per block
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRows = 4;                  // gemv rows per warp: each x value loaded once serves this many rows
constexpr int kStepCols = 4 * kWarpSize;  // columns a warp covers per step (four per lane)

// ---- Device helpers ----------------------------------------------------------------------------------

__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, std::uint32_t src_bytes) {
  // Bytes past src_bytes are zero-filled, not read: the last chunk of a row range never reads past its end.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void copy_u16_to_shared(std::uint32_t dst, const void* src) {
  std::uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];\n" : "=h"(v) : "l"(src));
  asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(dst), "h"(v) : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Waits until at most one committed group (the newest) is still in flight.
__device__ __forceinline__ void cp_async_wait_all_but_newest() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

template <class F, int... Is>
__device__ __forceinline__ void static_for_impl(F&& f, std::integer_sequence<int, Is...>) {
  (f(std::integral_constant<int, Is>{}), ...);
}

// Calls f(std::integral_constant<int, I>) for I = 0 .. N-1, so that I can index and shift at compile time.
template <int N, class F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

// Shared-memory reads by byte offset from the block's shared array.
__device__ __forceinline__ int lds_s8(const std::uint32_t* sm, std::uint32_t off) {
  return reinterpret_cast<const std::int8_t*>(sm)[off];
}
__device__ __forceinline__ std::uint32_t lds_u16(const std::uint32_t* sm, std::uint32_t off) {
  return reinterpret_cast<const std::uint16_t*>(sm)[off >> 1];
}
__device__ __forceinline__ std::uint32_t lds_u32(const std::uint32_t* sm, std::uint32_t off) {
  return sm[off >> 2];
}
// Four bytes at a 2-byte aligned offset: blocks of 18, 34 and 210 bytes leave fields at any even offset.
__device__ __forceinline__ std::uint32_t lds_u32_unaligned(const std::uint32_t* sm, std::uint32_t off) {
  const std::uint32_t i = off >> 2;
  return __funnelshift_r(sm[i], sm[i + 1], (off & 3) * 8);
}

__device__ __forceinline__ float f16_bits_to_float(std::uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

constexpr float kMagic = 8388608.0f;  // 2^23: a byte in the low mantissa bits of this float is added to it

// 2^23 + (byte K of v), exactly; subtracting kMagic (plus a level offset) leaves the byte as a float.
template <int K>
__device__ __forceinline__ float magic_byte(std::uint32_t v) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440 + K));
}

// The four bytes of v as exact levels minus Offset: two instructions per element.
template <int Offset>
__device__ __forceinline__ void bytes_to_levels(std::uint32_t v, float (&out)[4]) {
  constexpr float kBias = kMagic + static_cast<float>(Offset);
  out[0] = magic_byte<0>(v) - kBias;
  out[1] = magic_byte<1>(v) - kBias;
  out[2] = magic_byte<2>(v) - kBias;
  out[3] = magic_byte<3>(v) - kBias;
}

// 0.5 + (byte K of v) / 256 for bytes below 128: the byte becomes the top of the mantissa of 0.5 in one
// instruction. A weight a * f + b then takes the level's scale, offset and min in a and b, and in a dot
// product the 0.5 folds into b times the sum of x; the constant costs about three bits of the f32 sum.
template <int K>
__device__ __forceinline__ float half_magic_byte(std::uint32_t v) {
  return __uint_as_float(__byte_perm(v, 0x3F000000u, 0x7044 + (K << 8)));
}

__device__ __forceinline__ void bytes_to_half_magic(std::uint32_t v, float (&out)[4]) {
  out[0] = half_magic_byte<0>(v);
  out[1] = half_magic_byte<1>(v);
  out[2] = half_magic_byte<2>(v);
  out[3] = half_magic_byte<3>(v);
}

// Four consecutive elements of one row as a lane decodes them. Float types: v holds the values. Quantized
// types, for the gemv (kExact false): weight = a * v + b (Codec::kAffine) or a * v. For dequantization
// (kExact true): v holds the integer levels and the value is computed as quant.cc does, a * v - b
// (Codec::kExactMin) or a * v.
struct Quad {
  float v[4];
  float a;
  float b;
};

// ---- Codecs: per type, the stage geometry, the scale pre-pass and the decoding of a lane's four columns ----
// quad<S, kExact>(sm, seg, scales, lane, q): the four columns 128 S + 4 lane .. of the stage whose bytes start
// at shared offset seg (its pre-pass scales, if any, at `scales`). prepass<kExact> fills those scales.

struct FloatTraits {
  static constexpr int kColMultiple = 8;
  static constexpr bool kAligned = true;  // every stage starts 16-byte aligned (cols a multiple of 8)
  static constexpr bool kQuantized = false;
  static constexpr bool kAffine = false;
  static constexpr int kScaleBytes = 0;
  template <bool kExact>
  __device__ static void prepass(std::uint32_t*, std::uint32_t, std::uint32_t, int, int) {}
};

template <WeightType T>
struct Codec;

template <>
struct Codec<WeightType::F32> : FloatTraits {
  static constexpr int kStageCols = 128;
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols * 4; }
  struct Lane {
    std::uint32_t off;
    __device__ explicit Lane(int lane) : off(16u * static_cast<std::uint32_t>(lane)) {}
  };
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t, const Lane& l, Quad& q) {
    const uint4 w = reinterpret_cast<const uint4*>(sm)[(seg + l.off) >> 4];
    q.v[0] = __uint_as_float(w.x);
    q.v[1] = __uint_as_float(w.y);
    q.v[2] = __uint_as_float(w.z);
    q.v[3] = __uint_as_float(w.w);
  }
};

template <bool kBf16>
struct HalfCodec : FloatTraits {
  static constexpr int kStageCols = 256;
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols * 2; }
  struct Lane {
    std::uint32_t off;
    __device__ explicit Lane(int lane) : off(8u * static_cast<std::uint32_t>(lane)) {}
  };
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t, const Lane& l, Quad& q) {
    const uint2 w = reinterpret_cast<const uint2*>(sm)[(seg + 256 * S + l.off) >> 3];
    if constexpr (kBf16) {
      q.v[0] = __uint_as_float(w.x << 16);
      q.v[1] = __uint_as_float(w.x & 0xFFFF0000u);
      q.v[2] = __uint_as_float(w.y << 16);
      q.v[3] = __uint_as_float(w.y & 0xFFFF0000u);
    } else {
      const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&w.x));
      const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&w.y));
      q.v[0] = lo.x;
      q.v[1] = lo.y;
      q.v[2] = hi.x;
      q.v[3] = hi.y;
    }
  }
};

template <>
struct Codec<WeightType::F16> : HalfCodec<false> {};
template <>
struct Codec<WeightType::BF16> : HalfCodec<true> {};

struct QuantTraits {
  static constexpr bool kQuantized = true;
  template <bool kExact>
  __device__ static void prepass(std::uint32_t*, std::uint32_t, std::uint32_t, int, int) {}
};

// Q8_0 { f16 d; int8 qs[32]; }: a step covers four blocks, eight lanes per block, one qs word per lane.
template <>
struct Codec<WeightType::Q8_0> : QuantTraits {
  static constexpr int kColMultiple = 32;
  static constexpr int kStageCols = 512;
  static constexpr bool kAligned = false;
  static constexpr bool kAffine = false;  // levels up to 255 do not fit the half-magic form
  static constexpr bool kExactMin = false;
  static constexpr int kScaleBytes = 0;
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols / 32 * 34; }
  struct Lane {
    std::uint32_t block;  // byte offset of the lane's block within a step's four blocks
    std::uint32_t word;   // offset of its qs word within that block
    __device__ explicit Lane(int lane)
        : block(34u * static_cast<std::uint32_t>(lane >> 3)), word(2u + 4u * static_cast<std::uint32_t>(lane & 7)) {}
  };
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t, const Lane& l, Quad& q) {
    const std::uint32_t b = seg + 136 * S + l.block;
    q.a = f16_bits_to_float(lds_u16(sm, b));
    // Flipping the sign bits makes the bytes unsigned (level + 128), which the magic conversion needs.
    bytes_to_levels<128>(lds_u32_unaligned(sm, b + l.word) ^ 0x80808080u, q.v);
  }
};

// Q4_0 { f16 d; u8 qs[16]; }: element j in the low nibble of qs[j], j + 16 in the high nibble; x = (q - 8) d.
template <>
struct Codec<WeightType::Q4_0> : QuantTraits {
  static constexpr int kColMultiple = 32;
  static constexpr int kStageCols = 1024;
  static constexpr bool kAligned = false;
  static constexpr bool kAffine = true;
  static constexpr bool kExactMin = false;
  static constexpr int kScaleBytes = 0;
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols / 32 * 18; }
  struct Lane {
    std::uint32_t block, word, shift;
    __device__ explicit Lane(int lane)
        : block(18u * static_cast<std::uint32_t>(lane >> 3)),
          word(2u + 4u * static_cast<std::uint32_t>(lane & 3)),
          shift(4u * static_cast<std::uint32_t>((lane >> 2) & 1)) {}
  };
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t, const Lane& l, Quad& q) {
    const std::uint32_t b = seg + 72 * S + l.block;
    const float d = f16_bits_to_float(lds_u16(sm, b));
    const std::uint32_t levels = (lds_u32_unaligned(sm, b + l.word) >> l.shift) & 0x0F0F0F0Fu;
    if constexpr (kExact) {
      bytes_to_levels<8>(levels, q.v);
      q.a = d;
    } else {
      bytes_to_half_magic(levels, q.v);  // d (q - 8) = 256 d f - 136 d
      q.a = 256.0f * d;
      q.b = -136.0f * d;
    }
  }
};

// Q4_K / Q5_K { f16 d; f16 dmin; u8 scales[12]; [u8 qh[32];] u8 qs[128]; }: column c of a block is in chunk
// c / 64 (qs bytes 32 (c/64) .. + 31), low nibble for (c / 32) even; its sub-block c / 32 has a 6-bit scale
// and min (scale_min_k4 in quant.cc). Q5_K's fifth bit of column c is bit c / 32 of qh[c % 32].
template <int kBlockBytes, bool kFiveBit>
struct KCodec : QuantTraits {
  static constexpr int kColMultiple = 256;
  static constexpr int kStageCols = 1024;
  static constexpr bool kAligned = true;  // 144- and 176-byte blocks keep 16-byte alignment
  static constexpr bool kAffine = true;
  static constexpr bool kExactMin = true;
  static constexpr int kScaleBytes = 4 * 8 * 8;  // per row and stage: 4 blocks x 8 sub-blocks x float2
  static constexpr std::uint32_t kQs = kFiveBit ? 48 : 16;
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols / 256 * kBlockBytes; }
  struct Lane {
    std::uint32_t qs, qh, shift, sub;
    __device__ explicit Lane(int lane)
        : qs(kQs + 32u * static_cast<std::uint32_t>(lane >> 4) + 4u * static_cast<std::uint32_t>(lane & 7)),
          qh(16u + 4u * static_cast<std::uint32_t>(lane & 7)),
          shift(4u * static_cast<std::uint32_t>((lane >> 3) & 1)),
          sub(static_cast<std::uint32_t>(lane >> 3)) {}
  };
  // Lane l turns sub-block l % 8 of block l / 8 into (d * scale, dmin * min), as dequantize_q4_k does, or
  // for the gemv into the a, b of its half-magic levels: d scale q - dmin min = 256 d scale f - 128 d scale
  // - dmin min.
  template <bool kExact>
  __device__ static void prepass(std::uint32_t* sm, std::uint32_t seg, std::uint32_t scales, int cols, int lane) {
    const int block = lane >> 3;
    if (block * 256 >= cols) return;
    // The block header in one read: d | dmin << 16, then the 12 packed scale bytes.
    const uint4 h = reinterpret_cast<const uint4*>(sm)[(seg + kBlockBytes * block) >> 4];
    const std::uint32_t shift = 8u * static_cast<std::uint32_t>(lane & 3);
    const std::uint32_t b0 = (h.y >> shift) & 0xFF;  // scales[j % 4]
    const std::uint32_t b4 = (h.z >> shift) & 0xFF;  // scales[j % 4 + 4]
    const std::uint32_t b8 = (h.w >> shift) & 0xFF;  // scales[j % 4 + 8]
    const bool high = (lane & 4) != 0;               // sub-blocks 4..7
    const std::uint32_t sc = high ? (b8 & 0xF) | ((b0 >> 6) << 4) : b0 & 63;
    const std::uint32_t m = high ? (b8 >> 4) | ((b4 >> 6) << 4) : b4 & 63;
    const float scale = __fmul_rn(f16_bits_to_float(h.x & 0xFFFF), static_cast<float>(sc));
    const float min = __fmul_rn(f16_bits_to_float(h.x >> 16), static_cast<float>(m));
    reinterpret_cast<float2*>(sm)[(scales >> 3) + lane] =
        kExact ? make_float2(scale, min) : make_float2(256.0f * scale, -fmaf(128.0f, scale, min));
  }
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t scales, const Lane& l,
                              Quad& q) {
    constexpr std::uint32_t kBlock = kBlockBytes * (S >> 1);
    constexpr std::uint32_t kHalf = 64 * (S & 1);  // columns 128 .. 255 of a block are in chunks 2 and 3
    std::uint32_t levels = (lds_u32(sm, seg + kBlock + kHalf + l.qs) >> l.shift) & 0x0F0F0F0Fu;
    if constexpr (kFiveBit) {
      const std::uint32_t qh = lds_u32(sm, seg + kBlock + l.qh);
      levels |= ((qh >> (4 * (S & 1) + l.sub)) & 0x01010101u) << 4;
    }
    if constexpr (kExact) {
      bytes_to_levels<0>(levels, q.v);
    } else {
      bytes_to_half_magic(levels, q.v);
    }
    const float2 ab = reinterpret_cast<const float2*>(sm)[(scales >> 3) + 8 * (S >> 1) + 4 * (S & 1) + l.sub];
    q.a = ab.x;
    q.b = ab.y;
  }
};

template <>
struct Codec<WeightType::Q4_K> : KCodec<144, false> {};
template <>
struct Codec<WeightType::Q5_K> : KCodec<176, true> {};

// Q6_K { u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d; }: column c = 128 h + 32 k + l (l < 32) has its low
// nibble in ql[64 h + 32 (k & 1) + l] (high nibble for k >= 2), its top two bits at bit 2k of qh[32 h + l]
// and its scale in scales[c / 16]; x = d * scale * (q - 32).
template <>
struct Codec<WeightType::Q6_K> : QuantTraits {
  static constexpr int kColMultiple = 256;
  static constexpr int kStageCols = 512;
  static constexpr bool kAligned = false;
  static constexpr bool kAffine = true;
  static constexpr bool kExactMin = false;
  static constexpr int kScaleBytes = 2 * 16 * 8;  // per row and stage: 2 blocks x 16 scales x float2
  __host__ __device__ static constexpr std::size_t bytes_for(std::size_t cols) { return cols / 256 * 210; }
  struct Lane {
    std::uint32_t ql, qh, ql_shift, qh_shift, scale;
    __device__ explicit Lane(int lane)
        : ql(32u * static_cast<std::uint32_t>((lane >> 3) & 1) + 4u * static_cast<std::uint32_t>(lane & 7)),
          qh(128u + 4u * static_cast<std::uint32_t>(lane & 7)),
          ql_shift(4u * static_cast<std::uint32_t>(lane >> 4)),
          qh_shift(2u * static_cast<std::uint32_t>(lane >> 3)),
          scale(static_cast<std::uint32_t>(lane >> 2)) {}
  };
  // Lane l turns scale l % 16 of block l / 16 into d * scale, as dequantize_q6_k does, or for the gemv into
  // the a, b of its half-magic levels: d scale (q - 32) = 256 d scale f - 160 d scale.
  template <bool kExact>
  __device__ static void prepass(std::uint32_t* sm, std::uint32_t seg, std::uint32_t scales, int cols, int lane) {
    const int block = lane >> 4;
    if (block * 256 >= cols) return;
    const std::uint32_t b = seg + 210 * block;
    const float d = f16_bits_to_float(lds_u16(sm, b + 208));
    const float scale = __fmul_rn(d, static_cast<float>(lds_s8(sm, b + 192 + (lane & 15))));
    reinterpret_cast<float2*>(sm)[(scales >> 3) + lane] =
        kExact ? make_float2(scale, 0.0f) : make_float2(256.0f * scale, -160.0f * scale);
  }
  template <int S, bool kExact>
  __device__ static void quad(const std::uint32_t* sm, std::uint32_t seg, std::uint32_t scales, const Lane& l,
                              Quad& q) {
    constexpr std::uint32_t kBlock = 210 * (S >> 1);
    constexpr std::uint32_t kHalf = S & 1;
    const std::uint32_t ql = lds_u32_unaligned(sm, seg + kBlock + 64 * kHalf + l.ql);
    const std::uint32_t qh = lds_u32_unaligned(sm, seg + kBlock + 32 * kHalf + l.qh);
    const std::uint32_t levels = ((ql >> l.ql_shift) & 0x0F0F0F0Fu) | (((qh >> l.qh_shift) & 0x03030303u) << 4);
    if constexpr (kExact) {
      bytes_to_levels<32>(levels, q.v);
    } else {
      bytes_to_half_magic(levels, q.v);
    }
    const float2 ab = reinterpret_cast<const float2*>(sm)[(scales >> 3) + 16 * (S >> 1) + 8 * kHalf + l.scale];
    q.a = ab.x;
    q.b = ab.y;
  }
};

// ---- Stage loading -----------------------------------------------------------------------------------

// Shared-memory layout of one stage buffer of a warp: kR row slots, then the rows' scale floats.
template <class C, int kR>
struct StageLayout {
  static constexpr int kSegBytes = static_cast<int>(C::bytes_for(C::kStageCols));
  // An unaligned segment may start up to 14 bytes into its first chunk.
  static constexpr int kChunks = C::kAligned ? kSegBytes / 16 : (kSegBytes + 14 + 15) / 16;
  // One spare chunk: an unaligned word read near the end touches the word after the data.
  static constexpr int kSlotBytes = kChunks * 16 + 16;
  static constexpr int kScaleOffset = kR * kSlotBytes;
  static constexpr int kBufferBytes = kScaleOffset + kR * C::kScaleBytes;
  static_assert(C::kStageCols % kStepCols == 0 && kBufferBytes % 16 == 0);
};

// The last chunk of a range: bytes [src, end) into shared address `to`, with a smaller cp.async where the
// whole chunk lies before `limit` (the end of the memory known to be there), else two bytes at a time: even
// with a smaller source size, a 16-byte cp.async counts as a 16-byte read for compute-sanitizer. Out of
// line: the copy loops below stay small.
__device__ __noinline__ void copy_tail(std::uint32_t to, std::uintptr_t src, std::uintptr_t end, std::uintptr_t limit) {
  if (src + 16 <= limit) {
    cp_async_16(to, reinterpret_cast<const void*>(src), static_cast<std::uint32_t>(end - src));
    return;
  }
  for (std::uintptr_t p = src; p < end; p += 2) {  // fields are 2-byte aligned, so is the range's end
    copy_u16_to_shared(to + static_cast<std::uint32_t>(p - src), reinterpret_cast<const void*>(p));
  }
}

// Issues the copies of bytes [begin, begin + len) of each row in rows[] into the slots of the buffer at
// shared address dst: the 16-byte chunks that cover the range from its aligned start (inside the weight,
// whose base is 16-byte aligned), reading nothing past the range's end.
template <class C, int kR>
__device__ __forceinline__ void load_stage(const unsigned char* const (&rows)[kR], std::size_t begin, std::uint32_t len,
                                           const unsigned char* limit, std::uint32_t dst, int lane) {
  using L = StageLayout<C, kR>;
  constexpr int kIterations = (L::kChunks + kWarpSize - 1) / kWarpSize;
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const auto start = reinterpret_cast<std::uintptr_t>(rows[r] + begin);
    const std::uintptr_t end = start + len;
    const std::uintptr_t first = (start & ~std::uintptr_t{15}) + 16u * static_cast<std::uintptr_t>(lane);
    const std::uint32_t slot = dst + static_cast<std::uint32_t>(r * L::kSlotBytes + 16 * lane);
    static_for<kIterations>([&](auto iteration) {
      constexpr int kChunk = kWarpSize * decltype(iteration)::value;
      if constexpr (kChunk + kWarpSize > L::kChunks) {
        if (kChunk + lane >= L::kChunks) return;
      }
      const std::uintptr_t src = first + 16u * kChunk;
      if (src + 16 <= end) {
        cp_async_16(slot + 16u * kChunk, reinterpret_cast<const void*>(src), 16);
      } else if (src < end) {
        copy_tail(slot + 16u * kChunk, src, end, reinterpret_cast<std::uintptr_t>(limit));
      }
    });
  }
}

// Offset of a stage's first byte in its slot: its address's misalignment (zero for the aligned types).
template <class C>
__device__ __forceinline__ std::uint32_t stage_misalignment(const unsigned char* p) {
  if constexpr (C::kAligned) {
    return 0;
  } else {
    return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(p) & 15);
  }
}

// ---- Warp reduction -----------------------------------------------------------------------------------

// Sums each of v[0..N) over the warp's 32 lanes with N - 1 + (5 - log2 N) shuffles instead of 5 N: each
// halving step exchanges half of the values still held, so lane bits from 16 down spread the values over
// lanes. Returns the sum of v[index]; lanes with writer set hold distinct indices (index may be >= N).
template <int N>
__device__ __forceinline__ float warp_reduce_spread(const float (&v)[N], int lane, int& index, bool& writer) {
  constexpr int kLevels = N <= 1 ? 0 : N <= 2 ? 1 : N <= 4 ? 2 : N <= 8 ? 3 : N <= 16 ? 4 : 5;
  constexpr int kPad = 1 << kLevels;
  static_assert(N <= 32);
  float b[kPad];
#pragma unroll
  for (int i = 0; i < kPad; ++i) b[i] = i < N ? v[i] : 0.0f;
  index = 0;
  static_for<kLevels>([&](auto level) {
    constexpr int kOffset = 16 >> decltype(level)::value;
    constexpr int kHalf = kPad >> (decltype(level)::value + 1);
    const bool upper = (lane & kOffset) != 0;
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      const float send = upper ? b[j] : b[j + kHalf];
      const float keep = upper ? b[j + kHalf] : b[j];
      b[j] = keep + __shfl_xor_sync(0xFFFFFFFFu, send, kOffset);
    }
    if (upper) index += kHalf;
  });
#pragma unroll
  for (int offset = 16 >> kLevels; offset > 0; offset >>= 1) b[0] += __shfl_xor_sync(0xFFFFFFFFu, b[0], offset);
  writer = (lane & ((32 >> kLevels) - 1)) == 0;
  return b[0];
}

// ---- weight_gemv kernel ----------------------------------------------------------------------------------

// One weight of a launch: its blocks are blockIdx.x = first_block, first_block + 1, ...
struct GemvPart {
  const unsigned char* weight;
  const float* bias;
  float* y;
  std::size_t rows;
  std::size_t ldy;
  unsigned first_block;
  bool accumulate;  // y += instead of y =
};

struct GemvArgs {
  GemvPart parts[kMaxGemvOutputs];
  int num_parts;
  const float* x;
  const float* up;    // when not null, the input is silu(x) * up
  const float* norm;  // when not null, the input is rms_norm(x) * norm, row by row
  float eps;
  std::size_t row_bytes;
  int cols;
  int stages;  // ceil(cols / kStageCols)
  int ksplit;  // warps sharing a group of kRows rows (1, 2 or 4), warp k taking stages k, k + ksplit, ...
};

// SwiGLU's product, as silu_mul computes it (same operations, same order).
__device__ __forceinline__ float silu_times(float gate, float up) {
  return gate / (1.0f + __expf(-gate)) * up;
}

// One token: fewer registers, so more blocks per SM; more tokens: up to 128 registers without spilling.
template <int kTokens>
constexpr int gemv_min_blocks() {
  return kTokens == 1 ? 6 : 4;
}

template <WeightType kType, int kTokens>
__global__ void __launch_bounds__(kThreads, gemv_min_blocks<kTokens>()) gemv_kernel(const GemvArgs a) {
  using C = Codec<kType>;
  using L = StageLayout<C, kRows>;
  constexpr int kSteps = C::kStageCols / kStepCols;
  constexpr int kOut = kRows * kTokens;
  // One token: the per-step dot product of levels and x is scaled once (fewer instructions per column).
  constexpr bool kFactored = C::kQuantized && kTokens == 1;
  __shared__ __align__(16) std::uint32_t sm[kWarps * 2 * L::kBufferBytes / 4];
  __shared__ float partial[kWarps][kOut];

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int groups = kWarps / a.ksplit;
  const int group = warp / a.ksplit;
  const int split = warp - group * a.ksplit;
  // This block's weight, picked with constant indices (a dynamic index would copy the parameters to memory).
  const bool in2 = a.num_parts > 2 && blockIdx.x >= a.parts[2].first_block;
  const bool in1 = a.num_parts > 1 && blockIdx.x >= a.parts[1].first_block;
  const GemvPart part = in2 ? a.parts[2] : in1 ? a.parts[1] : a.parts[0];
  const std::size_t row0 = (static_cast<std::size_t>(blockIdx.x - part.first_block) * groups + group) * kRows;

  const unsigned char* rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // Rows past the end load the last row again (keeping every read inside the weight) and are not written.
    rows[r] = part.weight + min(row0 + r, part.rows - 1) * a.row_bytes;
  }
  const std::uint32_t warp_buffers = static_cast<std::uint32_t>(warp) * 2 * L::kBufferBytes;
  const auto sm_address = static_cast<std::uint32_t>(__cvta_generic_to_shared(sm));
  const int my_stages = split < a.stages ? (a.stages - split + a.ksplit - 1) / a.ksplit : 0;
  const unsigned char* const end = part.weight + part.rows * a.row_bytes;

  auto issue = [&](int k) {
    const int col0 = (split + k * a.ksplit) * C::kStageCols;
    const int ncols = min(C::kStageCols, a.cols - col0);
    load_stage<C, kRows>(rows, C::bytes_for(col0), static_cast<std::uint32_t>(C::bytes_for(ncols)), end,
                         sm_address + warp_buffers + static_cast<std::uint32_t>((k & 1) * L::kBufferBytes), lane);
  };

  float acc[kRows][kTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  }
  const typename C::Lane lane_code(lane);
  __shared__ float inv_rms[kTokens];

  // The weights need nothing from the kernel before this one: the first two stages stream in while it
  // finishes. One commit group per stage, empty ones included, so that group k is always stage k.
  allow_next_kernel();
  if (my_stages > 0) issue(0);
  cp_async_commit();
  if (my_stages > 1) issue(1);
  cp_async_commit();
  wait_for_prior_kernels();
  if (a.norm != nullptr) {  // each token's 1 / rms(x), once per block
    for (int t = warp; t < kTokens; t += kWarps) {
      const float* row = a.x + static_cast<std::size_t>(t) * a.cols;
      float squares = 0.0f;
      for (int c = 4 * lane; c < a.cols; c += 4 * kWarpSize) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(row + c));
        squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xFFFFFFFFu, squares, offset);
      if (lane == 0) inv_rms[t] = rsqrtf(squares / static_cast<float>(a.cols) + a.eps);
    }
    __syncthreads();
  }
  for (int k = 0; k < my_stages; ++k) {
    // Double buffering with two stages in flight: stage k has landed once only stage k + 1 may be pending.
    cp_async_wait_all_but_newest();
    __syncwarp();

    const int col0 = (split + k * a.ksplit) * C::kStageCols;
    const int ncols = min(C::kStageCols, a.cols - col0);
    const std::uint32_t buffer = warp_buffers + static_cast<std::uint32_t>((k & 1) * L::kBufferBytes);
    std::uint32_t seg[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      seg[r] =
          buffer + static_cast<std::uint32_t>(r * L::kSlotBytes) + stage_misalignment<C>(rows[r] + C::bytes_for(col0));
    }
    const std::uint32_t scales = buffer + L::kScaleOffset;
    if constexpr (C::kScaleBytes > 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) C::template prepass<false>(sm, seg[r], scales + r * C::kScaleBytes, ncols, lane);
      __syncwarp();
    }

    const std::size_t x0 = static_cast<std::size_t>(col0 + 4 * lane);
    auto step = [&](auto step_tag, auto checked) {
      constexpr int S = decltype(step_tag)::value;
      if constexpr (decltype(checked)::value) {
        if (S * kStepCols + 4 * lane >= ncols) return;
      }
      float4 xv[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        const std::size_t at = x0 + static_cast<std::size_t>(t) * a.cols + S * kStepCols;
        xv[t] = __ldg(reinterpret_cast<const float4*>(a.x + at));
        // The same branches for the whole launch: one kernel serves every kind of input.
        if (a.up != nullptr) {
          const float4 u = __ldg(reinterpret_cast<const float4*>(a.up + at));
          xv[t] = make_float4(silu_times(xv[t].x, u.x), silu_times(xv[t].y, u.y), silu_times(xv[t].z, u.z),
                              silu_times(xv[t].w, u.w));
        } else if (a.norm != nullptr) {
          const float4 w = __ldg(reinterpret_cast<const float4*>(a.norm + x0 + S * kStepCols));
          const float inv = inv_rms[t];
          xv[t] = make_float4(xv[t].x * inv * w.x, xv[t].y * inv * w.y, xv[t].z * inv * w.z, xv[t].w * inv * w.w);
        }
      }
      [[maybe_unused]] float xsum = 0.0f;
      if constexpr (kFactored && C::kAffine) xsum = (xv[0].x + xv[0].y) + (xv[0].z + xv[0].w);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        Quad q;
        C::template quad<S, false>(sm, seg[r], scales + r * C::kScaleBytes, lane_code, q);
        if constexpr (!C::kQuantized) {
#pragma unroll
          for (int t = 0; t < kTokens; ++t) {
            acc[r][t] = fmaf(q.v[0], xv[t].x, acc[r][t]);
            acc[r][t] = fmaf(q.v[1], xv[t].y, acc[r][t]);
            acc[r][t] = fmaf(q.v[2], xv[t].z, acc[r][t]);
            acc[r][t] = fmaf(q.v[3], xv[t].w, acc[r][t]);
          }
        } else if constexpr (kFactored) {
          const float dot = fmaf(q.v[3], xv[0].w, fmaf(q.v[2], xv[0].z, fmaf(q.v[1], xv[0].y, q.v[0] * xv[0].x)));
          acc[r][0] = fmaf(q.a, dot, acc[r][0]);
          if constexpr (C::kAffine) acc[r][0] = fmaf(q.b, xsum, acc[r][0]);
        } else {
          float w[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if constexpr (C::kAffine) {
              w[i] = fmaf(q.v[i], q.a, q.b);
            } else {
              w[i] = q.v[i] * q.a;
            }
          }
#pragma unroll
          for (int t = 0; t < kTokens; ++t) {
            acc[r][t] = fmaf(w[0], xv[t].x, acc[r][t]);
            acc[r][t] = fmaf(w[1], xv[t].y, acc[r][t]);
            acc[r][t] = fmaf(w[2], xv[t].z, acc[r][t]);
            acc[r][t] = fmaf(w[3], xv[t].w, acc[r][t]);
          }
        }
      }
    };
    // Full stages (all but a row's last) check no columns, so the steps' loads can be scheduled together;
    // with more than four tokens that freedom costs more registers than there are.
    if (kTokens <= 4 && ncols == C::kStageCols) {
      static_for<kSteps>([&](auto s) { step(s, std::false_type{}); });
    } else {
      static_for<kSteps>([&](auto s) { step(s, std::true_type{}); });
    }
    // Every lane is done with this buffer before stage k + 2 is copied into it.
    __syncwarp();
    if (k + 2 < my_stages) issue(k + 2);
    cp_async_commit();
  }

  float flat[kOut];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) flat[r * kTokens + t] = acc[r][t];
  }
  int index = 0;
  bool writer = false;
  float sum = warp_reduce_spread(flat, lane, index, writer);
  if (a.ksplit > 1) {
    if (writer && index < kOut) partial[warp][index] = sum;
    __syncthreads();
    if (split != 0) return;
    writer = lane < kOut;
    index = lane;
    if (writer) {
      sum = 0.0f;
      for (int k = 0; k < a.ksplit; ++k) sum += partial[warp + k][lane];
    }
  }
  if (writer && index < kOut) {
    const std::size_t row = row0 + static_cast<std::size_t>(index / kTokens);
    const int t = index % kTokens;
    if (row < part.rows) {
      float* y = part.y + static_cast<std::size_t>(t) * part.ldy + row;
      const float value = sum + (part.bias != nullptr ? part.bias[row] : 0.0f);
      *y = part.accumulate ? *y + value : value;
    }
  }
}

// ---- Row decoding: dequantize_to_bf16 and gather_weight_rows ---------------------------------------------

struct DecodeArgs {
  const unsigned char* weight;
  const std::int32_t* ids;  // null: output row i is weight row row_begin + i
  // The end of the memory known to be there: the requested rows' end; null for a gather (each row's end).
  const unsigned char* limit;
  void* out;
  std::size_t row_begin;
  std::size_t row_bytes;
  std::size_t pieces;  // output rows x stages: each warp decodes one stage of one row
  int cols;
  int stages;
};

// The stored value of each element, computed as quant.cc's dequantize_row does (same operations, same
// order, no contraction), so that results match the CPU bit for bit.
template <class C>
__device__ __forceinline__ float exact_value(const Quad& q, int i) {
  if constexpr (!C::kQuantized) {
    return q.v[i];
  } else if constexpr (C::kExactMin) {
    return __fsub_rn(__fmul_rn(q.a, q.v[i]), q.b);
  } else {
    return __fmul_rn(q.a, q.v[i]);
  }
}

template <WeightType kType, bool kBf16Out>
__global__ void __launch_bounds__(kThreads) decode_kernel(const DecodeArgs a) {
  using C = Codec<kType>;
  using L = StageLayout<C, 1>;
  constexpr int kSteps = C::kStageCols / kStepCols;
  __shared__ __align__(16) std::uint32_t sm[kWarps * L::kBufferBytes / 4];
  start_after_prior_kernels();

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::size_t piece = static_cast<std::size_t>(blockIdx.x) * kWarps + warp;
  if (piece >= a.pieces) return;  // whole warps leave; nothing below synchronises the block
  const std::size_t out_row = piece / static_cast<std::size_t>(a.stages);
  const int stage = static_cast<int>(piece % static_cast<std::size_t>(a.stages));
  const std::size_t row = a.ids != nullptr ? static_cast<std::size_t>(a.ids[out_row]) : a.row_begin + out_row;
  const int col0 = stage * C::kStageCols;
  const int ncols = min(C::kStageCols, a.cols - col0);

  const unsigned char* rows[1] = {a.weight + row * a.row_bytes};
  const std::uint32_t buffer = static_cast<std::uint32_t>(warp) * L::kBufferBytes;
  const unsigned char* const limit = a.limit != nullptr ? a.limit : rows[0] + a.row_bytes;
  load_stage<C, 1>(rows, C::bytes_for(col0), static_cast<std::uint32_t>(C::bytes_for(ncols)), limit,
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(sm)) + buffer, lane);
  cp_async_commit();
  cp_async_wait_all();
  __syncwarp();
  const std::uint32_t seg = buffer + stage_misalignment<C>(rows[0] + C::bytes_for(col0));
  const std::uint32_t scales = buffer + L::kScaleOffset;
  if constexpr (C::kScaleBytes > 0) {
    C::template prepass<true>(sm, seg, scales, ncols, lane);
    __syncwarp();
  }

  const typename C::Lane lane_code(lane);
  const std::size_t out0 = out_row * static_cast<std::size_t>(a.cols) + static_cast<std::size_t>(col0 + 4 * lane);
  static_for<kSteps>([&](auto step) {
    constexpr int S = decltype(step)::value;
    if (S * kStepCols + 4 * lane >= ncols) return;
    Quad q;
    C::template quad<S, true>(sm, seg, scales, lane_code, q);
    const std::size_t o = out0 + S * kStepCols;
    if constexpr (kBf16Out) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(exact_value<C>(q, 0), exact_value<C>(q, 1));
      const __nv_bfloat162 hi = __floats2bfloat162_rn(exact_value<C>(q, 2), exact_value<C>(q, 3));
      uint2 packed;
      packed.x = *reinterpret_cast<const std::uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const std::uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(a.out) + o) = packed;
    } else {
      *reinterpret_cast<float4*>(static_cast<float*>(a.out) + o) =
          make_float4(exact_value<C>(q, 0), exact_value<C>(q, 1), exact_value<C>(q, 2), exact_value<C>(q, 3));
    }
  });
}

// ---- Host side -----------------------------------------------------------------------------------------

template <WeightType T>
using TypeTag = std::integral_constant<WeightType, T>;

template <class F>
void with_type(WeightType type, F&& f) {
  switch (type) {
    case WeightType::F32: f(TypeTag<WeightType::F32>{}); return;
    case WeightType::F16: f(TypeTag<WeightType::F16>{}); return;
    case WeightType::BF16: f(TypeTag<WeightType::BF16>{}); return;
    case WeightType::Q8_0: f(TypeTag<WeightType::Q8_0>{}); return;
    case WeightType::Q4_0: f(TypeTag<WeightType::Q4_0>{}); return;
    case WeightType::Q4_K: f(TypeTag<WeightType::Q4_K>{}); return;
    case WeightType::Q5_K: f(TypeTag<WeightType::Q5_K>{}); return;
    case WeightType::Q6_K: f(TypeTag<WeightType::Q6_K>{}); return;
    default: break;  // weight_type_supported lists the types without a Codec
  }
  throw std::invalid_argument("CUDA weight kernels: no kernels for " + std::string(quant::weight_type_name(type)) +
                              " weights");
}

}  // namespace

bool weight_type_supported(WeightType type) {
  // The types with_type has no Codec for (it throws for them).
  switch (type) {
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::Q3_K:
    case WeightType::IQ4_NL:
    case WeightType::IQ4_XS:
    case WeightType::Q2_K:
    case WeightType::IQ2_XXS:
    case WeightType::IQ2_XS:
    case WeightType::IQ2_S:
    case WeightType::IQ3_XXS:
    case WeightType::IQ3_S:
    case WeightType::IQ1_S:
    case WeightType::IQ1_M:
    case WeightType::MXFP4:
    case WeightType::F8_E4M3: return false;
    default: return true;
  }
}

namespace {

template <int T>
using TokensTag = std::integral_constant<int, T>;

template <class F>
void with_tokens(std::size_t tokens, F&& f) {
  switch (tokens) {
    case 1: f(TokensTag<1>{}); return;
    case 2: f(TokensTag<2>{}); return;
    case 3: f(TokensTag<3>{}); return;
    case 4: f(TokensTag<4>{}); return;
    case 5: f(TokensTag<5>{}); return;
    case 6: f(TokensTag<6>{}); return;
    case 7: f(TokensTag<7>{}); return;
    case 8: f(TokensTag<8>{}); return;
    default: break;
  }
  throw std::invalid_argument("weight_gemv: " + std::to_string(tokens) + " tokens (at most " +
                              std::to_string(kGemvMaxTokens) + ")");
}

static_assert(kGemvMaxTokens == 8, "with_tokens instantiates the gemv for 1..8 tokens");

std::string type_name(WeightType type) {
  return std::string(quant::weight_type_name(type));
}

bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Checks what every kernel here needs of a weight and its column count.
template <class C>
void check_weight(const char* what, WeightType type, const void* weight, std::size_t cols) {
  if (cols % C::kColMultiple != 0) {
    throw std::invalid_argument(std::string(what) + ": cols " + std::to_string(cols) + " is not a multiple of " +
                                std::to_string(C::kColMultiple) + ", which the " + type_name(type) + " kernels need");
  }
  if (cols > static_cast<std::size_t>(INT_MAX / 8)) {
    throw std::invalid_argument(std::string(what) + ": cols " + std::to_string(cols) + " is too large");
  }
  if (!aligned_to(weight, 16)) {
    throw std::invalid_argument(std::string(what) + ": the weight's device address must be 16-byte aligned");
  }
}

// The current device's multiprocessors (a cheap attribute read; nothing is cached between calls).
int multiprocessors() {
  int device = 0;
  int count = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// Blocks of kKernel that fit on one multiprocessor (a fact of the compiled kernel, computed once).
template <auto kKernel>
int resident_blocks() {
  static const int count = [] {
    int blocks = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, 0));
    return std::max(blocks, 1);
  }();
  return count;
}

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// Warps per row group for the gemv (1, 2 or 4, at most one per stage): the split whose blocks fill the
// GPU's resident block slots most evenly over whole waves. A last wave of a few blocks leaves most SMs idle
// while it runs: 1024 blocks on 924 slots take two block lifetimes, not 1.1. Near-ties go to the smaller
// split, which pipelines more stages per warp and needs no cross-warp sum.
int choose_ksplit(std::size_t rows, int stages, std::size_t slots) {
  int best = 1;
  double best_score = -1.0;
  for (int split = 1; split <= kWarps && split <= stages; split *= 2) {
    const std::size_t blocks = ceil_div(rows, static_cast<std::size_t>(kRows) * (kWarps / split));
    const double filled = static_cast<double>(blocks) / static_cast<double>(ceil_div(blocks, slots) * slots);
    const double score = filled - 0.03 * (split == 1 ? 0 : split == 2 ? 1 : 2);
    if (score > best_score) {
      best = split;
      best_score = score;
    }
  }
  return best;
}

}  // namespace

void weight_gemv_group(quant::WeightType type, std::span<const GemvOutput> outputs, std::size_t cols, GemvInput input,
                       std::size_t tokens, Stream stream) {
  if (tokens > kGemvMaxTokens) {
    throw std::invalid_argument("weight_gemv: " + std::to_string(tokens) + " tokens exceed kGemvMaxTokens (" +
                                std::to_string(kGemvMaxTokens) + "); use a GEMM");
  }
  if (outputs.empty() || outputs.size() > kMaxGemvOutputs) {
    throw std::invalid_argument("weight_gemv: " + std::to_string(outputs.size()) + " outputs in one launch (1 to " +
                                std::to_string(kMaxGemvOutputs) + ")");
  }
  with_type(type, [&](auto type_tag) {
    constexpr WeightType kType = decltype(type_tag)::value;
    using C = Codec<kType>;
    std::size_t total_rows = 0;
    for (const auto& out : outputs) {
      check_weight<C>("weight_gemv", type, out.weight, cols);
      if (out.ldy < out.rows) {
        throw std::invalid_argument("weight_gemv: ldy " + std::to_string(out.ldy) + " is less than rows " +
                                    std::to_string(out.rows));
      }
      total_rows += out.rows;
    }
    if (!aligned_to(input.x, 16) || !aligned_to(input.up, 16) || !aligned_to(input.norm, 16)) {
      throw std::invalid_argument("weight_gemv: x, up and norm must be 16-byte aligned");
    }
    if (input.up != nullptr && input.norm != nullptr) {
      throw std::invalid_argument("weight_gemv: an input is gated (up) or normed (norm), not both");
    }
    if (total_rows == 0 || tokens == 0) return;

    GemvArgs args{};
    args.num_parts = static_cast<int>(outputs.size());
    args.x = input.x;
    args.up = input.up;
    args.norm = input.norm;
    args.eps = input.eps;
    args.row_bytes = C::bytes_for(cols);
    args.cols = static_cast<int>(cols);
    args.stages = static_cast<int>(ceil_div(cols, C::kStageCols));
    with_tokens(tokens, [&](auto tokens_tag) {
      constexpr int kTokens = decltype(tokens_tag)::value;
      constexpr auto kernel = gemv_kernel<kType, kTokens>;
      const int blocks_per_sm = resident_blocks<kernel>();
      const auto slots = static_cast<std::size_t>(blocks_per_sm) * multiprocessors();
      args.ksplit = choose_ksplit(total_rows, args.stages, slots);
      const std::size_t rows_per_block = static_cast<std::size_t>(kRows) * (kWarps / args.ksplit);
      std::size_t blocks = 0;
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        const auto& out = outputs[i];
        args.parts[i] = GemvPart{static_cast<const unsigned char*>(out.weight),
                                 out.bias,
                                 out.y,
                                 out.rows,
                                 out.ldy,
                                 static_cast<unsigned>(blocks),
                                 out.accumulate};
        blocks += ceil_div(out.rows, rows_per_block);
      }
      if (blocks > static_cast<std::size_t>(INT_MAX)) {
        throw std::invalid_argument("weight_gemv: " + std::to_string(total_rows) + " rows is too many for one launch");
      }
      launch(kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, args);
    });
  });
}

void weight_gemv(quant::WeightType type, const void* weight, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t tokens, const float* bias, float* y, std::size_t ldy, Stream stream) {
  const GemvOutput output{weight, rows, bias, y, ldy};
  weight_gemv_group(type, std::span(&output, 1), cols, GemvInput{x, nullptr}, tokens, stream);
}

namespace {

template <bool kBf16Out>
void decode_rows(const char* what, quant::WeightType type, const void* weight, std::size_t row_begin,
                 std::size_t out_rows, std::size_t cols, const std::int32_t* ids, void* out, Stream stream) {
  with_type(type, [&](auto type_tag) {
    constexpr WeightType kType = decltype(type_tag)::value;
    using C = Codec<kType>;
    check_weight<C>(what, type, weight, cols);
    if (!aligned_to(out, kBf16Out ? 8 : 16)) {
      throw std::invalid_argument(std::string(what) + ": out must be " + (kBf16Out ? "8" : "16") + "-byte aligned");
    }
    if (out_rows == 0 || cols == 0) return;
    DecodeArgs args{};
    args.weight = static_cast<const unsigned char*>(weight);
    args.ids = ids;
    args.limit = ids != nullptr ? nullptr : args.weight + (row_begin + out_rows) * C::bytes_for(cols);
    args.out = out;
    args.row_begin = row_begin;
    args.row_bytes = C::bytes_for(cols);
    args.cols = static_cast<int>(cols);
    args.stages = static_cast<int>(ceil_div(cols, C::kStageCols));
    args.pieces = out_rows * static_cast<std::size_t>(args.stages);
    const std::size_t blocks = ceil_div(args.pieces, kWarps);
    if (blocks > static_cast<std::size_t>(INT_MAX)) {
      throw std::invalid_argument(std::string(what) + ": " + std::to_string(out_rows) + " rows of " +
                                  std::to_string(cols) + " columns is too many for one launch");
    }
    launch(decode_kernel<kType, kBf16Out>, static_cast<unsigned>(blocks), kThreads, 0, stream, args);
  });
}

}  // namespace

void dequantize_to_bf16(quant::WeightType type, const void* weight, std::size_t row_begin, std::size_t rows,
                        std::size_t cols, __nv_bfloat16* out, Stream stream) {
  decode_rows<true>("dequantize_to_bf16", type, weight, row_begin, rows, cols, nullptr, out, stream);
}

void gather_weight_rows(quant::WeightType type, const void* weight, std::size_t cols, const std::int32_t* ids,
                        std::size_t count, float* out, Stream stream) {
  decode_rows<false>("gather_weight_rows", type, weight, 0, count, cols, ids, out, stream);
}

}  // namespace engine::cuda
