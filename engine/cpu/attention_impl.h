#pragma once

// Causal attention over the paged KV cache (kernels.h's AttentionTask), written once over a vector traits
// type V; kernels_impl.h includes it, so every ISA unit gets its own copy. Internal linkage only, nothing
// instantiated from the standard library (see kernels.h).
//
// A task is a tile of rows (queries × the q heads sharing a kv head) run against the keys in tiles of
// kAttentionKeyTile positions aligned to multiples of it, flash-attention style, keeping per row a running
// max m, a running sum l and an f32 output o:
//   scores  s_j = dot(q·scale, k_j), one chain over the head's dimensions in order per key, the keys in lanes
//           (keys are stored transposed, so one vector load feeds a tile of rows);
//   softmax the row's keys at or before its position (n of the tile's); m' = max(m, max_j s_j),
//           c = exp(m - m'), p_j = exp(s_j - m'), l' = l·c + Σ p_j (lanes summed in a fixed order);
//   values  o' = o·c, then o' = fma(p_j, v_j, o') for j < n in order, the head's dimensions in lanes;
//   at the end, out = o · (1 / l). An attention sink (gpt-oss) starts a row at m = sink, l = 1: one more key
//   in the softmax whose value is 0.
// Every step of a row depends only on its position and the cached keys and values, never on the other rows
// of the tile, the tile's size or where it starts: a query gives the same bits in a decode step, in any
// batch and in any chunk of a prefill. Lanes past a row's n are masked to exactly 0 and never multiply a
// value; keys past the end of the sequence are copied as zeros, so no lane reads unwritten cache.

namespace engine::cpu::kernels {
namespace {

constexpr int kKeyTile = static_cast<int>(kAttentionKeyTile);

// Windows for masking a vector to its first c lanes: loadu(window + W - c) has c leading lanes of the
// first value and the rest of the second. W is at most 16.
constexpr float kNegInf = -__builtin_inff();
alignas(64) constexpr float kKeepWindow[32] = {0,       0,       0,       0,       0,       0,       0,       0,
                                               0,       0,       0,       0,       0,       0,       0,       0,
                                               kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf,
                                               kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
alignas(64) constexpr float kOneWindow[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
// Their mirror images: loadu(window + W - c) has c leading lanes of the second value and the rest of the first
// (the keys before a sliding window's start).
alignas(64) constexpr float kDropWindow[32] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf,
                                               kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf,
                                               0,       0,       0,       0,       0,       0,       0,       0,
                                               0,       0,       0,       0,       0,       0,       0,       0};
alignas(64) constexpr float kZeroWindow[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                               1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// exp(x) for x <= 0 (softmax arguments), to about 2 ulp: x = n·ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2 (ln2 in two parts, Cody and Waite), e^r by a degree-7 polynomial (Cephes' expf
// coefficients), times 2^n built in the exponent bits. x is clamped at -86 so 2^n stays a normal number
// (e^-86 ≈ 4e-38: below that the result is that tiny value, not 0; masked lanes are zeroed by the caller).
template <class V>
ENGINE_KERNEL_INLINE typename V::F exp_nonpositive(typename V::F x) {
  using F = typename V::F;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer, kept in the low mantissa bits
  x = V::max(x, V::set1(-86.0f));
  const F t = V::fma(x, V::set1(1.44269504088896341f), V::set1(kRound));
  const F n = V::add(t, V::set1(-kRound));
  F r = V::fma(n, V::set1(-0.693359375f), x);
  r = V::fma(n, V::set1(2.12194440e-4f), r);
  F p = V::set1(1.9875691500e-4f);
  p = V::fma(p, r, V::set1(1.3981999507e-3f));
  p = V::fma(p, r, V::set1(8.3334519073e-3f));
  p = V::fma(p, r, V::set1(4.1665795894e-2f));
  p = V::fma(p, r, V::set1(1.6666665459e-1f));
  p = V::fma(p, r, V::set1(5.0000001201e-1f));
  p = V::add(V::fma(p, V::mul(r, r), r), V::set1(1.0f));
  // t's bits are those of kRound plus n: (n + 127) << 23 is 2^n.
  const F two_n = V::as_float(V::sll(V::sub(V::as_int(t), 0x4B400000 - 127), 23));
  return V::mul(p, two_n);
}

template <class V>
float exp_scalar(float x) {
  alignas(64) float lanes[V::W];
  V::storeu(lanes, exp_nonpositive<V>(V::set1(x)));
  return lanes[0];
}

template <class V>
float hmax(typename V::F v) {
  alignas(64) float lanes[V::W];
  V::storeu(lanes, v);
  float m = lanes[0];
  for (int i = 1; i < V::W; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

template <int Type>
constexpr std::size_t kv_bytes() {
  return Type == kF32 ? 4 : 2;
}

template <class V, int Type>
ENGINE_KERNEL_INLINE float kv_scalar(const std::uint8_t* p) {
  if constexpr (Type == kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  } else if constexpr (Type == kF16) {
    return V::half_to_float(load_u16(p));
  } else {
    const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(p)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
}

// Where a task's scratch lives: 64-byte aligned pieces of one buffer.
struct AttentionScratch {
  float* q;                     // rows × head_dim: the queries times the scale
  float* o;                     // rows × head_dim
  float* s;                     // rows × kKeyTile: scores, then probabilities
  float* m;                     // rows
  float* l;                     // rows
  float* c;                     // rows: this tile's correction
  std::uint32_t* n;             // rows: this tile's keys at or before the row's position
  std::uint8_t* keys;           // a key tile gathered as [head_dim][kKeyTile]
  const std::uint8_t** values;  // kKeyTile value rows
  std::size_t bytes;
};

inline AttentionScratch attention_scratch_layout(std::byte* base, std::size_t head_dim, std::size_t rows) {
  AttentionScratch a{};
  std::size_t at = 0;
  const auto take = [&](std::size_t bytes) {
    std::byte* p = base == nullptr ? nullptr : base + at;
    at += round_up(bytes, 64);
    return p;
  };
  a.q = reinterpret_cast<float*>(take(rows * head_dim * 4));
  a.o = reinterpret_cast<float*>(take(rows * head_dim * 4));
  a.s = reinterpret_cast<float*>(take(rows * kKeyTile * 4));
  a.m = reinterpret_cast<float*>(take(rows * 4));
  a.l = reinterpret_cast<float*>(take(rows * 4));
  a.c = reinterpret_cast<float*>(take(rows * 4));
  a.n = reinterpret_cast<std::uint32_t*>(take(rows * 4));
  a.keys = reinterpret_cast<std::uint8_t*>(take(head_dim * kKeyTile * 4));
  a.values = reinterpret_cast<const std::uint8_t**>(take(kKeyTile * sizeof(void*)));
  a.bytes = at;
  return a;
}

std::size_t attention_scratch_bytes(std::size_t head_dim, std::size_t rows) {
  return attention_scratch_layout(nullptr, head_dim, rows).bytes;
}

// Scores of R rows against the tile's keys: s[r][j] = dot(q_r, k_j), one fma chain per (row, key) over the
// dimensions in order. key[v] points at dimension 0 of keys v·W .. v·W + W - 1; dimension i is i·stride
// bytes further.
template <class V, int Type, int R>
void tile_scores(const float* q, std::size_t d, const std::uint8_t* const* key, std::size_t stride, float* s) {
  using F = typename V::F;
  constexpr int kVectors = kKeyTile / V::W;
  F acc[R][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) acc[r][v] = V::zero();
  }
  for (std::size_t i = 0; i < d; ++i) {
    F k[kVectors];
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) k[v] = load_float_group<V, Type>(key[v] + i * stride, 0);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F qv = V::set1(q[static_cast<std::size_t>(r) * d + i]);
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) acc[r][v] = V::fma(qv, k[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) V::storeu(s + r * kKeyTile + v * V::W, acc[r][v]);
  }
}

// tile_scores for `count` < R rows.
template <class V, int Type, int R>
void tile_scores_left(std::size_t count, const float* q, std::size_t d, const std::uint8_t* const* key,
                      std::size_t stride, float* s) {
  if constexpr (R > 0) {
    if (count == R) {
      tile_scores<V, Type, R>(q, d, key, stride, s);
    } else {
      tile_scores_left<V, Type, R - 1>(count, q, d, key, stride, s);
    }
  }
}

// The lanes of vector v (keys v·W ..) that come before key `count` of the tile.
template <class V>
ENGINE_KERNEL_INLINE int lanes_before(std::size_t count, int v) {
  const std::size_t before = static_cast<std::size_t>(v) * V::W;
  return count <= before ? 0 : static_cast<int>(min_size(count - before, V::W));
}

// One row's online-softmax step over keys [lo, n) of its scores (in place: they become probabilities; the
// others exactly 0). lo is past 0 only where a sliding window starts within the tile.
template <class V>
ENGINE_KERNEL_INLINE void softmax_step(float* s, std::size_t lo, std::size_t n, float& m, float& l, float& c) {
  using F = typename V::F;
  constexpr int kVectors = kKeyTile / V::W;
  F x[kVectors];
  F top = V::set1(kNegInf);
#pragma GCC unroll 16
  for (int v = 0; v < kVectors; ++v) {
    const std::size_t before = static_cast<std::size_t>(v) * V::W;
    x[v] = V::add(V::loadu(s + before), V::loadu(kKeepWindow + 16 - lanes_before<V>(n, v)));
    if (lo > 0) x[v] = V::add(x[v], V::loadu(kDropWindow + 16 - lanes_before<V>(lo, v)));
    top = V::max(top, x[v]);
  }
  const float tile_max = hmax<V>(top);
  const float m_new = tile_max > m ? tile_max : m;
  c = exp_scalar<V>(m - m_new);  // 0 (well, e^-86) on the first tile, where m is -inf and o and l are 0
  const F minus_m = V::set1(-m_new);
  F sum = V::zero();
#pragma GCC unroll 16
  for (int v = 0; v < kVectors; ++v) {
    const std::size_t before = static_cast<std::size_t>(v) * V::W;
    F p = V::mul(exp_nonpositive<V>(V::add(x[v], minus_m)), V::loadu(kOneWindow + 16 - lanes_before<V>(n, v)));
    if (lo > 0) p = V::mul(p, V::loadu(kZeroWindow + 16 - lanes_before<V>(lo, v)));
    V::storeu(s + before, p);
    sum = V::add(sum, p);
  }
  l = l * c + V::hsum(sum);
  m = m_new;
}

// o = o·c + Σ_{j<n} p_j v_j for R rows sharing n, over the C vectors of dimensions from `first`.
template <class V, int Type, int R, int C>
void tile_values(float* o, std::size_t d, std::size_t first, const float* p, const float* c, std::size_t n,
                 const std::uint8_t* const* values) {
  using F = typename V::F;
  F acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const F cr = V::set1(c[r]);
#pragma GCC unroll 16
    for (int k = 0; k < C; ++k) acc[r][k] = V::mul(V::loadu(o + r * d + first + k * V::W), cr);
  }
  for (std::size_t j = 0; j < n; ++j) {
    F pr[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) pr[r] = V::set1(p[r * kKeyTile + j]);
#pragma GCC unroll 16
    for (int k = 0; k < C; ++k) {
      const F v = load_float_group<V, Type>(values[j], first + k * V::W);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][k] = V::fma(pr[r], v, acc[r][k]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int k = 0; k < C; ++k) V::storeu(o + r * d + first + k * V::W, acc[r][k]);
  }
}

template <class V, int Type, int R, int C>
void tile_values_vectors(std::size_t vectors, float* o, std::size_t d, std::size_t first, const float* p,
                         const float* c, std::size_t n, const std::uint8_t* const* values) {
  if constexpr (C > 0) {
    if (vectors == C) {
      tile_values<V, Type, R, C>(o, d, first, p, c, n, values);
    } else {
      tile_values_vectors<V, Type, R, C - 1>(vectors, o, d, first, p, c, n, values);
    }
  }
}

// The value step of `count` <= kValueRows rows sharing n: whole vectors of dimensions, then a scalar tail
// (the same operations, one lane at a time).
template <class V, int Type, int R>
void rows_values(std::size_t count, float* o, std::size_t d, const float* p, const float* c, std::size_t n,
                 const std::uint8_t* const* values) {
  if constexpr (R > 0) {
    if (count != R) {
      rows_values<V, Type, R - 1>(count, o, d, p, c, n, values);
      return;
    }
    constexpr std::size_t kChunk = static_cast<std::size_t>(V::kValueVectors) * V::W;
    const std::size_t whole = d / V::W * V::W;
    std::size_t first = 0;
    for (; first + kChunk <= whole; first += kChunk) {
      tile_values<V, Type, R, V::kValueVectors>(o, d, first, p, c, n, values);
    }
    if (first < whole) {
      tile_values_vectors<V, Type, R, V::kValueVectors - 1>((whole - first) / V::W, o, d, first, p, c, n, values);
    }
    for (int r = 0; r < R; ++r) {
      for (std::size_t e = whole; e < d; ++e) {
        float acc = o[r * d + e] * c[r];
        for (std::size_t j = 0; j < n; ++j)
          acc = p[r * kKeyTile + j] * kv_scalar<V, Type>(values[j] + e * kv_bytes<Type>()) + acc;
        o[r * d + e] = acc;
      }
    }
  }
}

// Asks for a tile's keys and values ahead of their use. One kv head's keys (or values) in a block are a few
// KiB of their own, a page away from the next block's, where the hardware prefetcher stops: without this a
// long-context decode waits on memory at every block.
template <class V, int Type, class BlockAt>
void prefetch_tile(const AttentionTask& t, const BlockAt& block_at, std::size_t start, std::size_t tile_keys) {
  constexpr std::size_t kElem = kv_bytes<Type>();
  const std::size_t d = t.head_dim, bs = t.block_size;
  for (std::size_t j = 0; j < tile_keys;) {
    const std::size_t position = start + j, offset = position % bs;
    const std::size_t run = min_size(bs - offset, tile_keys - j);
    const std::uint8_t* block = block_at(position);
    const std::uint8_t* keys = block + t.key_offset + offset * kElem;
    if (run == bs) {
      prefetch_span<V>(keys, d * bs * kElem);
    } else {
      for (std::size_t i = 0; i < d; ++i) prefetch_span<V>(keys + i * bs * kElem, run * kElem);
    }
    prefetch_span<V>(block + t.value_offset + offset * d * kElem, run * d * kElem);
    j += run;
  }
}

template <class V, int Type>
void attention_typed(const AttentionTask& t, std::byte* scratch_base) {
  constexpr std::size_t W = V::W;
  constexpr std::size_t kElem = kv_bytes<Type>();
  constexpr int kVectors = kKeyTile / V::W;
  const std::size_t d = t.head_dim, bs = t.block_size, group = t.group;
  const std::size_t rows = t.queries * group;
  const AttentionScratch a = attention_scratch_layout(scratch_base, d, rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* q = t.q + (r / group) * t.q_stride + (r % group) * d;
    for (std::size_t i = 0; i < d; ++i) a.q[r * d + i] = q[i] * t.scale;
    for (std::size_t i = 0; i < d; ++i) a.o[r * d + i] = 0.0f;
    // A sink is a key of score `sink` and value 0 seen before all others: the running max starts at it and the
    // running sum at e^0.
    a.m[r] = t.sinks != nullptr ? t.sinks[r % group] : kNegInf;
    a.l[r] = t.sinks != nullptr ? 1.0f : 0.0f;
  }
  const auto block_at = [&](std::size_t position) {
    return reinterpret_cast<const std::uint8_t*>(t.cache) +
           static_cast<std::size_t>(t.block_table[position / bs]) * t.block_bytes;
  };
  const std::size_t keys = t.first_position + t.queries;  // positions 0 .. the last query's
  // The first key a row's window holds (0 without a window). Rows are in position order, so it never falls.
  const auto window_start = [&](std::size_t r) {
    const std::size_t position = t.first_position + r / group;
    return t.window == 0 || position < t.window ? 0 : position + 1 - t.window;
  };
  // Tiles wholly before every row's window are skipped; the others start at multiples of kKeyTile as without
  // one, so a row meets the same tiles whatever else its task holds.
  for (std::size_t start = window_start(0) / kKeyTile * kKeyTile; start < keys; start += kKeyTile) {
    const std::size_t tile_keys = min_size(kKeyTile, keys - start);
    if (start + kKeyTile < keys) {
      prefetch_tile<V, Type>(t, block_at, start + kKeyTile, min_size(kKeyTile, keys - start - kKeyTile));
    }
    // Rows from here on reach this tile (their position is at least `start`); rows from end_row on have
    // windows that start past it.
    const std::size_t first_row = (start > t.first_position ? start - t.first_position : 0) * group;
    std::size_t end_row = rows;
    while (end_row > first_row && window_start(end_row - 1) >= start + tile_keys) --end_row;
    const std::uint8_t* key[kVectors];
    std::size_t key_stride;
    if (tile_keys == static_cast<std::size_t>(kKeyTile) && bs % W == 0) {
      // Each vector of W keys lies in one block, whose transposed keys are read in place.
      for (int v = 0; v < kVectors; ++v) {
        const std::size_t position = start + static_cast<std::size_t>(v) * W;
        key[v] = block_at(position) + t.key_offset + (position % bs) * kElem;
      }
      key_stride = bs * kElem;
    } else {
      // A short last tile (zeros past the sequence's end) or blocks narrower than a vector: gathered.
      // Runs of positions within one block, each copied a dimension at a time.
      for (std::size_t j = 0; j < tile_keys;) {
        const std::size_t position = start + j, offset = position % bs;
        const std::size_t run = min_size(bs - offset, tile_keys - j);
        const std::uint8_t* src = block_at(position) + t.key_offset + offset * kElem;
        for (std::size_t i = 0; i < d; ++i) {
          std::memcpy(a.keys + (i * kKeyTile + j) * kElem, src + i * bs * kElem, run * kElem);
        }
        j += run;
      }
      if (tile_keys < static_cast<std::size_t>(kKeyTile)) {
        for (std::size_t i = 0; i < d; ++i) {
          std::memset(a.keys + (i * kKeyTile + tile_keys) * kElem, 0, (kKeyTile - tile_keys) * kElem);
        }
      }
      for (int v = 0; v < kVectors; ++v) key[v] = a.keys + static_cast<std::size_t>(v) * W * kElem;
      key_stride = kKeyTile * kElem;
    }
    for (std::size_t j = 0; j < tile_keys; ++j) {
      const std::size_t position = start + j;
      a.values[j] = block_at(position) + t.value_offset + (position % bs) * d * kElem;
    }

    constexpr std::size_t kRows = V::kScoreRows;
    std::size_t r = first_row;
    for (; r + kRows <= end_row; r += kRows) {
      tile_scores<V, Type, V::kScoreRows>(a.q + r * d, d, key, key_stride, a.s + r * kKeyTile);
    }
    if (r < end_row)
      tile_scores_left<V, Type, V::kScoreRows - 1>(end_row - r, a.q + r * d, d, key, key_stride, a.s + r * kKeyTile);
    if (t.softcap > 0) {
      for (std::size_t j = first_row * kKeyTile; j < end_row * kKeyTile; ++j)
        a.s[j] = t.softcap * __builtin_tanhf(a.s[j] / t.softcap);
    }

    for (r = first_row; r < end_row; ++r) {
      const std::size_t position = t.first_position + r / group;
      const std::size_t lo = window_start(r);
      a.n[r] = static_cast<std::uint32_t>(min_size(tile_keys, position - start + 1));
      softmax_step<V>(a.s + r * kKeyTile, lo > start ? lo - start : 0, a.n[r], a.m[r], a.l[r], a.c[r]);
    }

    // Rows sharing n (all of them off the diagonal; the q heads of one query on it), a few at a time. Keys
    // before a window's start have probability 0.
    for (r = first_row; r < end_row;) {
      std::size_t count = 1;
      while (count < static_cast<std::size_t>(V::kValueRows) && r + count < end_row && a.n[r + count] == a.n[r])
        ++count;
      rows_values<V, Type, V::kValueRows>(count, a.o + r * d, d, a.s + r * kKeyTile, a.c + r, a.n[r], a.values);
      r += count;
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {
    float* out = t.out + (r / group) * t.out_stride + (r % group) * d;
    const float inv = 1.0f / a.l[r];
    for (std::size_t i = 0; i < d; ++i) out[i] = a.o[r * d + i] * inv;
  }
}

template <class V>
void attention_tile(const AttentionTask& task, std::byte* scratch) {
  switch (task.kv_type) {
    case kF16: attention_typed<V, kF16>(task, scratch); break;
    case kBF16: attention_typed<V, kBF16>(task, scratch); break;
    default: attention_typed<V, kF32>(task, scratch); break;
  }
}

}  // namespace
}  // namespace engine::cpu::kernels
