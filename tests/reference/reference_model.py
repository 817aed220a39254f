#!/usr/bin/env python3
"""An independent float64 reference for the engine's decoder-only models (Qwen3, Qwen2, Llama, Gemma 2 and 3,
SmolLM3, Phi-3, the Qwen and Mixtral mixtures of experts, gpt-oss).

Written from the architectures' definitions, not from the engine's code, with numpy only. It reads a
Hugging Face model directory (config.json and safetensors, one file or shards listed by
model.safetensors.index.json; F32, F16 or BF16, FP8 E4M3 matrices with the scales their config's
quantization_config names, and gpt-oss's MXFP4 experts as blocks and scales) or a GGUF file (every type in
GGML_TYPES below, the K-quants, IQ4, MXFP4 and the IQ1/IQ2/IQ3 codebook types included, dequantized here from
their block bytes; llama Q/K rows un-permuted back to the Hugging Face order), and runs the forward pass in
float64.

Commands:
  logits  --model PATH --tokens 1,2,3[;4,5,...] --out FILE   logits at every position of every sequence
  greedy  --model PATH --tokens 1,2,3 --steps N --out FILE    N greedy tokens (argmax of float64 logits)
  dequant --type TYPE --in BLOCKS.bin --out VALUES.bin        raw blocks of a GGUF type to float64
  quantize --type TYPE --in VALUES.bin --out BLOCKS.bin       float32 values to blocks, as ggml's reference
                                                               quantizers round (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
                                                               Q2_K, Q3_K, IQ4_NL, IQ4_XS, IQ3_XXS,
                                                               IQ3_S, IQ2_S, IQ1_M, MXFP4; IQ2_XXS, IQ2_XS and
                                                               IQ1_S with a uniform importance matrix)

Output files, all little-endian:
  logits:  b"RLOGITS1", u32 sequences S, u32 vocabulary V, S x u32 sequence lengths L_s, then for each
           sequence in order L_s x V float64 (position-major: all of position 0's logits, then position 1's)
  greedy:  b"RGREEDY1", u32 count N, N x i64 token ids
  dequant: b"RDEQUAN1", u64 count N, N x float64
  quantize: b"RQUANT01", u64 byte count N, N bytes of blocks (VALUES.bin: float32 values)
"""

import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np

F64 = np.float64

# ---- value conversions --------------------------------------------------------------------------------


def f16_values(raw):
    return np.frombuffer(raw, dtype="<f2").astype(F64)


def bf16_values(raw):
    # bfloat16 is the upper half of a float32.
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view("<f4").astype(F64)


def f32_values(raw):
    return np.frombuffer(raw, dtype="<f4").astype(F64)


def e4m3_table():
    """The 256 FP8 E4M3 codes (OCP 8-bit floats): sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0
    is subnormal, S.1111.111 NaN."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, (codes & 7).astype(F64)
    magnitude = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7.0))
    return np.where((codes & 0x7F) == 0x7F, np.nan, sign * magnitude)


E4M3 = e4m3_table()


def e4m3_values(raw):
    return E4M3[np.frombuffer(raw, dtype=np.uint8)]


# ---- GGUF block dequantization (ggml's layouts) -------------------------------------------------------

QK_K = 256

# name: (ggml type id, elements per block, bytes per block)
GGML_TYPES = {
    "F32": (0, 1, 4),
    "F16": (1, 1, 2),
    "Q4_0": (2, 32, 18),
    "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
    "Q2_K": (10, QK_K, 84),
    "Q3_K": (11, QK_K, 110),
    "IQ4_NL": (20, 32, 18),
    "IQ4_XS": (23, QK_K, 136),
    "Q4_K": (12, QK_K, 144),
    "Q5_K": (13, QK_K, 176),
    "Q6_K": (14, QK_K, 210),
    "IQ2_XXS": (16, QK_K, 66),
    "IQ2_XS": (17, QK_K, 74),
    "IQ3_XXS": (18, QK_K, 98),
    "IQ1_S": (19, QK_K, 50),
    "IQ3_S": (21, QK_K, 110),
    "IQ2_S": (22, QK_K, 82),
    "IQ1_M": (29, QK_K, 56),
    "BF16": (30, 1, 2),
    "MXFP4": (39, 32, 17),
}
GGML_NAMES = {info[0]: name for name, info in GGML_TYPES.items()}


def blocks_of(raw, block_bytes):
    data = np.frombuffer(raw, dtype=np.uint8)
    if data.size % block_bytes != 0:
        raise ValueError(f"{data.size} bytes are not a whole number of {block_bytes}-byte blocks")
    return data.reshape(-1, block_bytes)


def half_column(blocks, at):
    return blocks[:, at : at + 2].copy().view("<f2").astype(F64)  # (nb, 1)


def dequant_q8_0(raw):
    b = blocks_of(raw, 34)
    d = half_column(b, 0)
    q = b[:, 2:34].view(np.int8).astype(F64)
    return (d * q).reshape(-1)


def dequant_q4_0(raw):
    # 32 values: the low nibbles of the 16 bytes are values 0-15, the high nibbles 16-31; zero is 8.
    b = blocks_of(raw, 18)
    d = half_column(b, 0)
    qs = b[:, 2:18].astype(np.int64)
    q = np.concatenate([(qs & 0xF) - 8, (qs >> 4) - 8], axis=1).astype(F64)
    return (d * q).reshape(-1)


def nibble_levels(b, qs_at, qh_at=None):
    """The 32 levels of blocks with 16 nibble bytes at qs_at (value j low, j + 16 high) and, for the five-bit
    types, a little-endian word at qh_at whose bit j is value j's fifth bit."""
    qs = b[:, qs_at : qs_at + 16].astype(np.int64)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)
    if qh_at is not None:
        qh = b[:, qh_at : qh_at + 4].copy().view("<u4").astype(np.int64)  # (nb, 1)
        q = q | (((qh >> np.arange(32)) & 1) << 4)
    return q.astype(F64)


def dequant_q4_1(raw):
    b = blocks_of(raw, 20)
    return (half_column(b, 0) * nibble_levels(b, 4) + half_column(b, 2)).reshape(-1)


def dequant_q5_0(raw):
    b = blocks_of(raw, 22)
    return (half_column(b, 0) * (nibble_levels(b, 6, 2) - 16)).reshape(-1)


def dequant_q5_1(raw):
    b = blocks_of(raw, 24)
    return (half_column(b, 0) * nibble_levels(b, 8, 4) + half_column(b, 2)).reshape(-1)


# ---- ggml's reference quantizers of the 32-value block types, in float32 as ggml computes them -----------

f32 = np.float32


def halves_of(values):
    """float32 values as the bytes of float16 (round to nearest even, as ggml's conversion)."""
    return np.asarray(values, dtype=f32).astype("<f2").view(np.uint8).reshape(-1, 2)


def truncated(values):
    """C's float-to-integer conversion: toward zero."""
    return np.trunc(values.astype(np.float64)).astype(np.int64)


def pack_nibbles(levels):
    """(nb, 32) levels as 16 bytes each: value j in the low nibble of byte j, value j + 16 in the high."""
    return ((levels[:, :16] & 0xF) | ((levels[:, 16:] & 0xF) << 4)).astype(np.uint8)


def pack_fifth_bits(levels):
    """(nb, 32) levels' fifth bits as a little-endian word per block, bit j for value j."""
    words = (((levels >> 4) & 1) << np.arange(32, dtype=np.int64)).sum(axis=1)
    return words.astype("<u4").view(np.uint8).reshape(-1, 4)


def inverse(d):
    """1 / d, and 0 where d is 0 (ggml's `d ? 1.0f/d : 0.0f`)."""
    safe = np.where(d != 0, d, f32(1)).astype(f32)
    return np.where(d != 0, f32(1) / safe, f32(0)).astype(f32)


def quantize_q8_0(x):
    d = (np.abs(x).max(axis=1, keepdims=True) / f32(127)).astype(f32)
    v = (x * inverse(d)).astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)  # roundf: halves away from zero (exact in float64)
    return np.concatenate([halves_of(d), q.astype(np.int8).view(np.uint8)], axis=1)


def signed_largest(x):
    """The value of largest magnitude, the first among equals."""
    return np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)


def quantize_symmetric(x, levels):
    """Q4_0 (16 levels) and Q5_0 (32): d maps the largest magnitude to the lowest level exactly."""
    half = levels // 2
    d = (signed_largest(x) / f32(-half)).astype(f32)
    q = np.minimum(levels - 1, truncated((x * inverse(d)).astype(f32) + f32(half + 0.5)))
    parts = [halves_of(d)]
    if levels == 32:
        parts.append(pack_fifth_bits(q))
    return np.concatenate(parts + [pack_nibbles(q)], axis=1)


def quantize_offset(x, levels):
    """Q4_1 (16 levels, clamped) and Q5_1 (32, ggml does not clamp): d spans [min, max] in levels - 1 steps."""
    low = x.min(axis=1, keepdims=True)
    d = ((x.max(axis=1, keepdims=True) - low) / f32(levels - 1)).astype(f32)
    q = truncated(((x - low) * inverse(d)).astype(f32) + f32(0.5))
    if levels == 16:
        q = np.minimum(15, q)
    parts = [halves_of(d), halves_of(low)]
    if levels == 32:
        parts.append(pack_fifth_bits(q))
    return np.concatenate(parts + [pack_nibbles(q)], axis=1)


# Q3_K, IQ4_NL and IQ4_XS: ggml's searches, value by value in float32 (f32() on every constant: numpy
# would widen a float32 combined with a Python number to float64).


def nearest(v):
    """ggml's nearest_int: round half to even (exact on the float32 value)."""
    return int(np.rint(np.float64(v)))


def clamp(v, low, high):
    return max(low, min(high, v))


def fit_q3(x, nmax):
    """make_q3_quants with its weighted (x^2) refinement: levels + nmax, and the scale."""
    amax, largest = f32(0), f32(0)
    for v in x:
        if abs(v) > amax:
            amax, largest = abs(v), v
    if amax < f32(1e-15):
        return f32(0), [0] * len(x)
    iscale = f32(-nmax) / largest
    levels = [clamp(nearest(iscale * v), -nmax, nmax - 1) for v in x]
    sumlx, suml2 = f32(0), f32(0)
    for v, l in zip(x, levels):
        w = v * v
        sumlx = sumlx + w * v * f32(l)
        suml2 = suml2 + w * f32(l) * f32(l)
    for _ in range(5):
        changed = 0
        for i, v in enumerate(x):
            w = v * v
            slx = sumlx - w * v * f32(levels[i])
            if slx > 0:
                sl2 = suml2 - w * f32(levels[i]) * f32(levels[i])
                new = clamp(nearest(v * sl2 / slx), -nmax, nmax - 1)
                if new != levels[i]:
                    slx = slx + w * v * f32(new)
                    sl2 = sl2 + w * f32(new) * f32(new)
                    if sl2 > 0 and slx * slx * suml2 > sumlx * sumlx * sl2:
                        levels[i], sumlx, suml2 = new, slx, sl2
                        changed += 1
        if changed == 0:
            break
    return (sumlx / suml2 if suml2 > 0 else f32(0)), [l + nmax for l in levels]


def quantize_q3_k(x):
    out = np.zeros((x.shape[0], 110), dtype=np.uint8)
    for n, block in enumerate(x):
        scales, levels = [], []
        for j in range(16):
            scale, l = fit_q3(block[16 * j : 16 * j + 16], 4)
            scales.append(scale)
            levels += l
        amax, max_scale = f32(0), f32(0)
        for s in scales:
            if abs(s) > amax:
                amax, max_scale = abs(s), s
        packed = out[n, 96:108]
        if max_scale != 0:
            iscale = f32(-32) / max_scale
            for j, s in enumerate(scales):
                l = clamp(nearest(iscale * s), -32, 31) + 32
                packed[j % 8] |= (l & 0xF) << (0 if j < 8 else 4)
                packed[8 + j % 4] |= (l >> 4) << (2 * (j // 4))
            out[n, 108:110] = halves_of([f32(1) / iscale])[0]
        d_all = f32(out[n, 108:110].copy().view("<f2")[0])
        stored = q3_k_scales(packed[None, :])[0]
        for j in range(16):
            d = d_all * f32(stored[j])
            if d == 0:
                continue
            for i in range(16):
                levels[16 * j + i] = clamp(nearest(block[16 * j + i] / d), -4, 3) + 4
        for e, l in enumerate(levels):
            h, k, i = e // 128, (e % 128) // 32, e % 32
            if l > 3:
                out[n, i] |= 1 << (4 * h + k)
                l -= 4
            out[n, 32 + 32 * h + i] |= l << (2 * k)
    return out


def fit_qkx2(x, weights, nmax, rmin, rdelta, steps, absolute):
    """make_qkx2_quants: an offset (min <= 0) and scale for n values, the best of steps + 1 stretched grids by
    weighted squared or absolute error. Returns (scale, -min, levels)."""
    low, high = x[0], x[0]
    sum_w = weights[0]
    sum_x = sum_w * x[0]
    for v, w in zip(x[1:], weights[1:]):
        low, high = min(low, v), max(high, v)
        sum_w = sum_w + w
        sum_x = sum_x + w * v
    if low > 0:
        low = f32(0)
    if high == low:
        return f32(0), -low, [0] * len(x)

    def error(diff):
        return abs(diff) if absolute else diff * diff

    iscale = f32(nmax) / (high - low)
    scale = f32(1) / iscale
    levels = [clamp(nearest(iscale * (v - low)), 0, nmax) for v in x]
    best = f32(0)
    for v, w, l in zip(x, weights, levels):
        best = best + w * error(scale * f32(l) + low - v)
    for step in range(steps + 1):
        iscale = (f32(rmin) + f32(rdelta) * f32(step) + f32(nmax)) / (high - low)
        trial = [clamp(nearest(iscale * (v - low)), 0, nmax) for v in x]
        sum_l, sum_l2, sum_xl = f32(0), f32(0), f32(0)
        for v, w, l in zip(x, weights, trial):
            sum_l = sum_l + w * f32(l)
            sum_l2 = sum_l2 + w * f32(l) * f32(l)
            sum_xl = sum_xl + w * f32(l) * v
        det = sum_w * sum_l2 - sum_l * sum_l
        if det > 0:
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
            if this_min > 0:
                this_min = f32(0)
                this_scale = sum_xl / sum_l2
            err = f32(0)
            for v, w, l in zip(x, weights, trial):
                err = err + w * error(this_scale * f32(l) + this_min - v)
            if err < best:
                levels, best, scale, low = trial, err, this_scale, this_min
    return scale, -low, levels


def quantize_q2_k(x):
    out = np.zeros((x.shape[0], 84), dtype=np.uint8)
    for n, block in enumerate(x):
        scales, mins, levels = [], [], []
        for j in range(16):
            part = block[16 * j : 16 * j + 16]
            scale, neg_min, l = fit_qkx2(part, [abs(v) for v in part], 3, -0.5, 0.1, 15, True)
            scales.append(scale)
            mins.append(neg_min)
            levels += l
        max_scale, max_min = f32(0), f32(0)
        for s, m in zip(scales, mins):
            max_scale, max_min = max(max_scale, s), max(max_min, m)
        if max_scale > 0:
            iscale = f32(15) / max_scale
            for j, s in enumerate(scales):
                out[n, j] = nearest(iscale * s)
            out[n, 80:82] = halves_of([max_scale / f32(15)])[0]
        if max_min > 0:
            iscale = f32(15) / max_min
            for j, m in enumerate(mins):
                out[n, j] |= nearest(iscale * m) << 4
            out[n, 82:84] = halves_of([max_min / f32(15)])[0]
        d_all = f32(out[n, 80:82].copy().view("<f2")[0])
        m_all = f32(out[n, 82:84].copy().view("<f2")[0])
        for j in range(16):
            d = d_all * f32(out[n, j] & 0xF)
            if d == 0:
                continue
            dm = m_all * f32(out[n, j] >> 4)
            for i in range(16):
                levels[16 * j + i] = clamp(nearest((block[16 * j + i] + dm) / d), 0, 3)
        for e, l in enumerate(levels):
            out[n, 16 + 32 * (e // 128) + e % 32] |= l << (2 * ((e % 128) // 32))
    return out


def nearest_iq4(v):
    """ggml's best_index_int8 over the IQ4 levels (the lower on ties)."""
    levels = [f32(l) for l in IQ4_LEVELS]
    if v <= levels[0]:
        return 0
    if v >= levels[15]:
        return 15
    low, high = 0, 15
    while high - low > 1:
        mid = (low + high) // 2
        if v < levels[mid]:
            high = mid
        else:
            low = mid
    return high - 1 if v - levels[high - 1] < levels[high] - v else high


def fit_iq4(x, tries):
    """One block of 32 (weights x^2): the scale of the nearest levels' weighted fit, then the 2 tries + 1
    rescaled fits, the best kept. A zero block: scale 0, levels 0."""
    amax, largest = f32(0), f32(0)
    for v in x:
        if abs(v) > amax:
            amax, largest = abs(v), v
    if amax < f32(1e-15):
        return f32(0), [0] * 32
    first = f32(IQ4_LEVELS[0])

    def fit(inverse):
        levels = [nearest_iq4(inverse * v) for v in x]
        sumqx, sumq2 = f32(0), f32(0)
        for v, l in zip(x, levels):
            q, w = f32(IQ4_LEVELS[l]), v * v
            sumqx = sumqx + w * q * v
            sumq2 = sumq2 + w * q * q
        return levels, sumqx, sumq2

    d = -largest / first if tries > 0 else largest / first
    levels, sumqx, sumq2 = fit(f32(1) / d)
    d = sumqx / sumq2
    best = d * sumqx
    for t in range(-tries, tries + 1):
        _, sumqx, sumq2 = fit(f32(t + IQ4_LEVELS[0]) / largest)
        if sumq2 > 0 and sumqx * sumqx > best * sumq2:
            d = sumqx / sumq2
            best = d * sumqx
    return d, levels


def pack_iq4(levels):
    return [levels[j] | (levels[16 + j] << 4) for j in range(16)]


def quantize_iq4_nl(x):
    out = np.zeros((x.shape[0], 18), dtype=np.uint8)
    for n, block in enumerate(x):
        d, levels = fit_iq4(block, -1)
        out[n, 0:2] = halves_of([d])[0]
        out[n, 2:18] = pack_iq4(levels)
    return out


# MXFP4 (OCP Microscaling Formats v1.0): per 32 values one E8M0 scale byte e (2^(e - 127); ggml gives e = 255
# the value 2^128 rather than NaN, and so does this) and 32 FP4 E2M1 values as nibbles (value j the low
# nibble of byte 1 + j, value j + 16 its high one).


def e2m1_values(nibbles):
    """FP4 E2M1 from its bits: sign, two exponent bits (bias 1), one mantissa bit; exponent 0 is subnormal."""
    n = nibbles.astype(np.int64)
    exponent, mantissa = (n >> 1) & 3, n & 1
    magnitude = np.where(exponent == 0, 0.5 * mantissa, np.ldexp(1.0 + 0.5 * mantissa, exponent - 1))
    return np.where(n & 8, -magnitude, magnitude)


def dequant_mxfp4(raw):
    b = blocks_of(raw, 17)
    scale = np.ldexp(1.0, b[:, 0:1].astype(np.int64) - 127)
    q = b[:, 1:17]
    return (scale * e2m1_values(np.concatenate([q & 0xF, q >> 4], axis=1))).reshape(-1)


def mxfp4_hf_values(blocks, scales):
    """gpt-oss's safetensors MXFP4 (transformers' layout, not ggml's): blocks (..., G, 16) bytes whose low nibble
    is the even value and high nibble the odd one, scales (..., G) E8M0 bytes, one per 32 values; the (..., G * 32)
    values."""
    codes = np.stack([blocks & 0xF, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    values = e2m1_values(codes) * np.ldexp(1.0, scales.astype(np.int64) - 127)[..., None]
    return values.reshape(*blocks.shape[:-2], -1)


def quantize_mxfp4(x):
    """ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (0 for zeros; clamped to a byte), each
    value the nearest of the 16 levels at scale 2^(e - 127), the first on ties, in float32."""
    levels = (e2m1_values(np.arange(16)) * 2).astype(f32)  # doubled, at half the scale, as ggml keeps them
    out = np.zeros((x.shape[0], 17), dtype=np.uint8)
    for n, block in enumerate(x):
        amax = np.abs(block).max()
        e = int(np.clip(np.floor(np.log2(amax)) - 2 + 127, 0, 255)) if amax > 0 else 0
        d = f32(np.ldexp(1.0, e - 128))
        index = [int(np.argmin(np.abs((levels * d).astype(f32) - v))) for v in block]
        out[n, 0] = e
        out[n, 1:17] = [index[j] | (index[16 + j] << 4) for j in range(16)]
    return out


def quantize_iq4_xs(x):
    out = np.zeros((x.shape[0] // 8, 136), dtype=np.uint8)
    for n in range(out.shape[0]):
        block = x[8 * n : 8 * n + 8]
        scales = [fit_iq4(block[ib], 7)[0] for ib in range(8)]
        amax, max_scale = f32(0), f32(0)
        for s in scales:
            if abs(s) > amax:
                amax, max_scale = abs(s), s
        d = -max_scale / f32(32)
        out[n, 0:2] = halves_of([d])[0]
        inverse = f32(1) / d if d != 0 else f32(0)
        scales_h = 0
        for ib in range(8):
            l = clamp(nearest(inverse * scales[ib]), -32, 31)
            dl = d * f32(l)
            idl = f32(1) / dl if dl != 0 else f32(0)
            out[n, 8 + 16 * ib : 24 + 16 * ib] = pack_iq4([nearest_iq4(idl * v) for v in block[ib]])
            out[n, 4 + ib // 2] |= ((l + 32) & 0xF) << (4 * (ib % 2))
            scales_h |= ((l + 32) >> 4) << (2 * ib)
        out[n, 2:4] = np.array([scales_h], dtype="<u2").view(np.uint8)
    return out



# IQ3_XXS and IQ3_S: ggml's quantize_row_iq3_xxs_impl and quantize_row_iq3_s_impl as their reference
# quantizers run them (no importance weights: each weight x^2), value by value in float32. Levels l in 0..7
# stand for magnitudes 2 l + 1; a group of 4 levels is a point l0 + 8 l1 + 64 l2 + 512 l3, on the codebook or
# replaced by the best of the codebook points at its two (IQ3_XXS) or three (IQ3_S) smallest squared
# distances.
_IQ3_BOOKS = {}


def iq3_book(kind):
    if kind not in _IQ3_BOOKS:
        grid, per_level, distances = {"XXS": ("kIq3XxsGrid", 8, 2), "S": ("kIq3SGrid", 2, 3)}[kind]
        levels = iq_grid(grid, 4) // per_level  # IQ3_XXS bytes 4, 12, ..., 52, 62; IQ3_S 1, 3, ..., 15
        size = levels.shape[0]
        entry = {int(p): k for k, p in enumerate((levels << (3 * np.arange(4))).sum(axis=1))}
        mags = 2 * levels + 1
        points = 2 * ((np.arange(4096)[:, None] >> (3 * np.arange(4))) & 7) + 1  # (4096, 4)
        d2 = ((points[:, None, :] - mags[None, :, :]) ** 2).sum(axis=2)  # (4096, size)
        nearby = {}
        for p in range(4096):
            if p not in entry:
                limit = np.unique(d2[p])[:distances][-1]
                nearby[p] = [int(k) for k in np.lexsort((np.arange(size), d2[p])) if d2[p, k] <= limit]
        _IQ3_BOOKS[kind] = dict(entry=entry, mags=mags, nearby=nearby)
    return _IQ3_BOOKS[kind]


def iq3_levels_at(xval, id_):
    """The 4 levels nearest 0.5 (id * x - 1), clamped to 0..7, and their point."""
    ls = [clamp(nearest(f32(0.5) * (id_ * v - f32(1))), 0, 7) for v in xval]
    return ls, sum(l << (3 * i) for i, l in enumerate(ls))


def codebook_nearby(book, point, xval, root, scale):
    """The levels of the best of an off-codebook point's nearby entries (weighted by root, the first of equals)."""
    best, best_k = f32(np.finfo(np.float32).max), None
    for k in book["nearby"][point]:
        d2 = f32(0)
        for i in range(len(xval)):
            diff = scale * f32(book["mags"][k, i]) - xval[i]
            d2 = d2 + root[i] * diff * diff
        if d2 < best:
            best, best_k = d2, k
    return [int((book["mags"][best_k, i] - 1) // 2) for i in range(len(xval))]


def codebook_fit(xval, weight, ls):
    sumqx, sumq2 = f32(0), f32(0)
    for v, w, l in zip(xval, weight, ls):
        q = f32(2 * l + 1)
        sumqx = sumqx + w * v * q
        sumq2 = sumq2 + w * q * q
    return sumqx, sumq2


def iq3_block(kind, xb):
    """One block of 32: (scale, 8 codebook entries, 4 sign bytes), or None below ggml's cut-off."""
    book = iq3_book(kind)
    xxs = kind == "XXS"
    weight = [v * v for v in xb]
    root = [np.sqrt(w) for w in weight]
    xval = [v if v >= 0 else -v for v in xb]
    signs = []
    for k in range(4):
        negative = [i for i in range(8) if xb[8 * k + i] < 0]
        bits = sum(1 << i for i in negative)
        if xxs and len(negative) % 2:
            # IQ3_XXS stores 7 sign bits, their count even: flip the weight that matters least.
            cost = [weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i] for i in range(8)]
            least = min(range(8), key=lambda i: (cost[i], i))
            xval[8 * k + least] = -xval[8 * k + least]
            bits ^= 1 << least
        signs.append(bits & 127 if xxs else bits)
    top = max(xval)
    if (top < f32(1e-8)) if xxs else (top == 0):
        return None
    levels, on_grid = [0] * 32, [xxs] * 8
    best, scale = f32(0), top / f32(15)
    tries = 15 if xxs else 9
    for step in range(-tries, tries + 1):
        id_ = (f32(15) + f32(step) * f32(0.2)) / top
        trial_scale = f32(1) / id_
        trial, trial_on = [], []
        for k in range(8):
            ls, point = iq3_levels_at(xval[4 * k : 4 * k + 4], id_)
            trial_on.append(point in book["entry"])
            if not trial_on[-1]:
                ls = codebook_nearby(book, point, xval[4 * k : 4 * k + 4], root[4 * k : 4 * k + 4], trial_scale)
            trial += ls
        sumqx, sumq2 = codebook_fit(xval, weight, trial)
        if sumq2 > 0 and sumqx * sumqx > best * sumq2:
            scale = sumqx / sumq2
            best = scale * sumqx
            levels, on_grid = trial, trial_on
    if not all(on_grid) and scale > 0:
        # Off-codebook groups (IQ3_XXS) or every group (IQ3_S) re-rounded at the chosen scale, then refitted.
        id_ = f32(1) / scale
        levels = list(levels)
        for k in range(8):
            if xxs and on_grid[k]:
                continue
            ls, point = iq3_levels_at(xval[4 * k : 4 * k + 4], id_)
            if point not in book["entry"]:
                ls = codebook_nearby(book, point, xval[4 * k : 4 * k + 4], root[4 * k : 4 * k + 4], scale)
            levels[4 * k : 4 * k + 4] = ls
        sumqx, sumq2 = codebook_fit(xval, weight, levels)
        if sumq2 > 0:
            scale = sumqx / sumq2
    if scale < 0:
        scale = -scale
        signs = [~s & (127 if xxs else 255) for s in signs]
    entries = [book["entry"][sum(l << (3 * i) for i, l in enumerate(levels[4 * k : 4 * k + 4]))] for k in range(8)]
    return scale, entries, signs


def codebook_scale_code(id_, scale):
    return clamp(nearest(f32(0.5) * (id_ * scale - f32(1))), 0, 15)


def quantize_iq3_xxs(x):
    out = np.zeros((x.shape[0], 98), dtype=np.uint8)
    for n, row in enumerate(x):
        blocks = [iq3_block("XXS", row[32 * ib : 32 * ib + 32]) for ib in range(8)]
        scales = [f32(0) if b is None else b[0] for b in blocks]
        if max(scales) == 0:
            continue
        d = max(scales) / f32(31)
        out[n, 0:2] = halves_of([d * f32(1.0125)])[0]
        words = []
        for ib, b in enumerate(blocks):
            word = codebook_scale_code(f32(1) / d, scales[ib]) << 28
            if b is not None:
                out[n, 2 + 8 * ib : 10 + 8 * ib] = b[1]
                word |= b[2][0] | (b[2][1] << 7) | (b[2][2] << 14) | (b[2][3] << 21)
            words.append(word)
        out[n, 66:98] = np.array(words, dtype="<u4").view(np.uint8)
    return out


def quantize_iq3_s(x):
    out = np.zeros((x.shape[0], 110), dtype=np.uint8)
    for n, row in enumerate(x):
        blocks = [iq3_block("S", row[32 * ib : 32 * ib + 32]) for ib in range(8)]
        # ggml moves its index and sign pointers past quantized blocks only (the ninth bits go by block
        # number): after a block of zeros the later blocks' bytes sit one block early.
        done = [b for b in blocks if b is not None]
        for slot, b in enumerate(done):
            out[n, 2 + 8 * slot : 10 + 8 * slot] = [e & 255 for e in b[1]]
            out[n, 74 + 4 * slot : 78 + 4 * slot] = b[2]
        for ib, b in enumerate(blocks):
            if b is not None:
                out[n, 66 + ib] = sum((e >> 8) << k for k, e in enumerate(b[1]))
        scales = [f32(0) if b is None else b[0] for b in blocks]
        if max(scales) == 0:
            continue
        d = max(scales) / f32(31)
        out[n, 0:2] = halves_of([d * f32(1.033)])[0]
        id_ = f32(1) / d
        for ib in range(0, 8, 2):
            out[n, 106 + ib // 2] = codebook_scale_code(id_, scales[ib]) | (codebook_scale_code(id_, scales[ib + 1]) << 4)
    return out


# IQ2_XXS and IQ2_XS: ggml's quantize_row_iq2_xxs_impl and quantize_row_iq2_xs_impl with a uniform importance
# matrix (each importance 1, so each weight sqrt(sigma^2 + x^2), sigma^2 the super-block's mean square); IQ2_S:
# quantize_row_iq2_s_impl as its reference quantizer runs it (no importance matrix: each weight 0.25 sigma^2 +
# x^2, sigma^2 twice the mean square; 8 sign bits per group, no parity). Value by value in float32. Levels l in
# 0..2 stand for magnitudes 2 l + 1 (grid bytes 8, 25, 43); a group of 8 levels is a point l0 + 4 l1 + ... +
# 4^7 l7, on the codebook or replaced by the best of the codebook points at its two (IQ2_S: one) smallest
# squared distances.
_IQ2_BOOKS = {}


def iq2_book(kind):
    if kind not in _IQ2_BOOKS:
        levels = iq_grid({"XXS": "kIq2XxsGrid", "XS": "kIq2XsGrid", "S": "kIq2SGrid"}[kind], 8) // 17
        distances = 1 if kind == "S" else 2
        size = levels.shape[0]
        place = 4 ** np.arange(8)
        entry = {int(p): k for k, p in enumerate((levels * place).sum(axis=1))}
        mags = 2 * levels + 1
        every = (np.arange(3**8)[:, None] // (3 ** np.arange(8))) % 3  # each point whose levels are 0..2
        nearby = {}
        for at in range(0, every.shape[0], 729):
            chunk = every[at : at + 729]
            d2 = (((2 * chunk + 1)[:, None, :] - mags[None, :, :]) ** 2).sum(axis=2)  # (729, size)
            for row, ls in enumerate(chunk):
                p = int((ls * place).sum())
                if p not in entry:
                    limit = np.unique(d2[row])[:distances][-1]
                    nearby[p] = [int(k) for k in np.lexsort((np.arange(size), d2[row])) if d2[row, k] <= limit]
        _IQ2_BOOKS[kind] = dict(entry=entry, mags=mags, nearby=nearby)
    return _IQ2_BOOKS[kind]


def iq2_onto_codebook(book, xval, root, id_, scale):
    """A group of 8 rounded at id_ onto the codebook: (levels, on the codebook itself)."""
    ls = [clamp(nearest(f32(0.5) * (id_ * v - f32(1))), 0, 2) for v in xval]
    point = sum(l << (2 * i) for i, l in enumerate(ls))
    if point in book["entry"]:
        return ls, True
    return codebook_nearby(book, point, xval, root, scale), False


def make_qp_quants(x, nmax, weight):
    """ggml's make_qp_quants: the scale of a fit of non-negative x by levels 0..nmax under weight."""
    top = f32(0)
    for v in x:
        top = max(top, v)
    if top == 0:
        return f32(0)
    iscale = f32(nmax) / top
    scale = f32(1) / iscale
    best_mse = f32(0)
    for v, w in zip(x, weight):
        diff = v - scale * f32(nearest(iscale * v))
        best_mse = best_mse + w * diff * diff
    for step in range(-4, 5):
        if step == 0:
            continue
        iscale_is = (f32(0.1) * f32(step) + f32(nmax)) / top
        scale_is = f32(1) / iscale_is
        mse = f32(0)
        for v, w in zip(x, weight):
            diff = v - scale_is * f32(min(nmax, nearest(iscale_is * v)))
            mse = mse + w * diff * diff
        if mse < best_mse:
            best_mse, iscale = mse, iscale_is
    ls = [min(nmax, nearest(iscale * v)) for v in x]
    sumlx, suml2 = f32(0), f32(0)
    for v, w, l in zip(x, weight, ls):
        sumlx = sumlx + w * v * f32(l)
        suml2 = suml2 + w * f32(l) * f32(l)
    for _ in range(5):
        changed = 0
        for i, (v, w) in enumerate(zip(x, weight)):
            slx = sumlx - w * v * f32(ls[i])
            sl2 = suml2 - w * f32(ls[i]) * f32(ls[i])
            if slx > 0 and sl2 > 0:
                new_l = min(nmax, nearest(v * sl2 / slx))
                if new_l != ls[i]:
                    slx = slx + w * v * f32(new_l)
                    sl2 = sl2 + w * f32(new_l) * f32(new_l)
                    if slx * slx * suml2 > sumlx * sumlx * sl2:
                        ls[i], sumlx, suml2 = new_l, slx, sl2
                        changed += 1
        if not changed:
            break
    return sumlx / suml2


def iq2_block(kind, xb, sigma2):
    """One block (32 weights for IQ2_XXS, 16 for IQ2_XS): (scale, entries, 7-bit signs), or None where ggml skips it."""
    book = iq2_book(kind)
    xxs, s = kind == "XXS", kind == "S"
    n, groups = len(xb), len(xb) // 8
    weight = [f32(0.25) * sigma2 + v * v if s else np.sqrt(sigma2 + v * v) for v in xb]
    root = [np.sqrt(w) for w in weight]
    xval = [v if v >= 0 else -v for v in xb]
    signs = []
    for k in range(groups):
        negative = [i for i in range(8) if xb[8 * k + i] < 0]
        bits = sum(1 << i for i in negative)
        if not s and len(negative) % 2:
            cost = [weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i] for i in range(8)]
            least = min(range(8), key=lambda i: (cost[i], i))
            xval[8 * k + least] = -xval[8 * k + least]
            bits ^= 1 << least
        signs.append(bits if s else bits & 127)
    top = max(xval)
    if top < (f32(1e-8) if s else f32(1e-15)):
        return None
    levels, on_grid = [0] * n, [True] * groups
    if xxs:
        scale = make_qp_quants(xval, 4, weight)
        reach = scale * f32(3)
        if reach <= 0:
            return None
    else:
        scale, reach = top / f32(5), top
    best = f32(0)
    tries = 6 if xxs else 9
    for step in range(-tries, tries + 1):
        id_ = (f32(5) + f32(step) * f32(0.1)) / reach
        trial, trial_on = [], []
        for k in range(groups):
            ls, on = iq2_onto_codebook(book, xval[8 * k : 8 * k + 8], root[8 * k : 8 * k + 8], id_, f32(1) / id_)
            trial += ls
            trial_on.append(on)
        sumqx, sumq2 = codebook_fit(xval, weight, trial)
        if sumq2 > 0 and sumqx * sumqx > best * sumq2:
            scale = sumqx / sumq2
            best = scale * sumqx
            levels, on_grid = trial, trial_on
    if (xxs or not all(on_grid)) and scale > 0:
        # Every group (IQ2_XXS) or those off the codebook (IQ2_XS) re-rounded at the chosen scale, then refitted.
        id_ = f32(1) / scale
        levels = list(levels)
        for k in range(groups):
            if xxs or not on_grid[k]:
                ls, _ = iq2_onto_codebook(book, xval[8 * k : 8 * k + 8], root[8 * k : 8 * k + 8], id_, scale)
                levels[8 * k : 8 * k + 8] = ls
        sumqx, sumq2 = codebook_fit(xval, weight, levels)
        if sumq2 > 0:
            scale = sumqx / sumq2
    if scale < 0:
        scale = -scale
        signs = [~bits & (255 if s else 127) for bits in signs]
    entries = [book["entry"][sum(l << (2 * i) for i, l in enumerate(levels[8 * k : 8 * k + 8]))] for k in range(groups)]
    return scale, entries, signs


def iq2_super_block(kind, row, out):
    """The blocks of one super-block and their scales; the super-scale d written to out[0:2] and returned
    (None for a super-block that stays zeros)."""
    n = 32 if kind == "XXS" else 16
    sumx2 = f32(0)
    for v in row:
        sumx2 = sumx2 + v * v
    sigma2 = (f32(2) * sumx2 if kind == "S" else sumx2) / f32(QK_K)
    blocks = [iq2_block(kind, row[n * ib : n * ib + n], sigma2) for ib in range(QK_K // n)]
    scales = [f32(0) if b is None else b[0] for b in blocks]
    if max(scales) == 0:
        return blocks, scales, None
    d = max(scales) / f32(31)
    out[0:2] = halves_of([d * f32(0.9875) if kind == "S" else d])[0]  # IQ2_S: ggml's fudge factor
    return blocks, scales, d


def quantize_iq2_xxs(x):
    out = np.zeros((x.shape[0], 66), dtype=np.uint8)
    for n, row in enumerate(x):
        blocks, scales, d = iq2_super_block("XXS", row, out[n])
        if d is None:
            continue
        words = []
        for ib, b in enumerate(blocks):
            low, high = 0, codebook_scale_code(f32(1) / d, scales[ib]) << 28
            if b is not None:
                low = sum(e << (8 * k) for k, e in enumerate(b[1]))
                high |= sum(s << (7 * k) for k, s in enumerate(b[2]))
            words += [low, high]
        out[n, 2:66] = np.array(words, dtype="<u4").view(np.uint8)
    return out


def quantize_iq2_xs(x):
    out = np.zeros((x.shape[0], 74), dtype=np.uint8)
    for n, row in enumerate(x):
        blocks, scales, d = iq2_super_block("XS", row, out[n])
        if d is None:
            continue
        halves = []
        for b in blocks:
            halves += [0, 0] if b is None else [e | (s << 9) for e, s in zip(b[1], b[2])]
        out[n, 2:66] = np.array(halves, dtype="<u2").view(np.uint8)
        for ib in range(16):
            out[n, 66 + ib // 2] |= codebook_scale_code(f32(1) / d, scales[ib]) << (4 * (ib % 2))
    return out


def quantize_iq2_s(x):
    out = np.zeros((x.shape[0], 82), dtype=np.uint8)
    for n, row in enumerate(x):
        blocks, scales, d = iq2_super_block("S", row, out[n])
        # A group's index: low 8 bits at 2 + group, high 2 bits at 66 (four groups a byte); signs at 34 + group.
        for ib, b in enumerate(blocks):
            if b is None:
                continue
            for k in range(2):
                group, entry = 2 * ib + k, b[1][k]
                out[n, 2 + group] = entry & 255
                out[n, 66 + group // 4] |= (entry >> 8) << (2 * (group % 4))
                out[n, 34 + group] = b[2][k]
        if d is None:
            continue
        for ib in range(16):
            out[n, 74 + ib // 2] |= codebook_scale_code(f32(1) / d, scales[ib]) << (4 * (ib % 2))
    return out

# IQ1_S: ggml's quantize_row_iq1_s_impl with a uniform importance matrix (each weight sqrt(sigma^2 + x^2),
# sigma^2 twice the super-block's mean square). A block of 32 takes the values {-1, 0, 1} + delta, delta +-1/8:
# the best split of its sorted values (stable order) into three levels under either delta, then each group of
# 8 off the codebook replaced by its nearest (in value, weighted) of the entries at its three smallest squared
# distances, and the scale refitted.
_IQ1_BOOK = {}


def iq1_book():
    if not _IQ1_BOOK:
        levels = iq_grid("kIq1SGrid", 8, signed=True) + 1
        size = levels.shape[0]
        place = 4 ** np.arange(8)
        entry = {int(p): k for k, p in enumerate((levels * place).sum(axis=1))}
        mags = (2 * levels + 1).astype(np.int32)
        every = (np.arange(3**8)[:, None] // (3 ** np.arange(8))) % 3
        nearby = {}
        for at in range(0, every.shape[0], 243):
            chunk = every[at : at + 243].astype(np.int32)
            d2 = (((2 * chunk + 1)[:, None, :] - mags[None, :, :]) ** 2).sum(axis=2)
            for row, ls in enumerate(chunk):
                p = int((ls * place).sum())
                if p not in entry:
                    limit = np.unique(d2[row])[:3][-1]
                    nearby[p] = [int(k) for k in np.lexsort((np.arange(size), d2[row])) if d2[row, k] <= limit]
        _IQ1_BOOK.update(entry=entry, levels=levels, nearby=nearby)
    return _IQ1_BOOK


def iq1_values(pair, group):
    """The three values of a group under sign pair `pair`: the first group's delta minus for pair >= 2, the
    others' for odd pair (IQ1_S: 0 or 3)."""
    delta = f32(0.125)
    minus = pair >= 2 if group == 0 else pair % 2 == 1
    return [f32(-1) - delta, -delta, f32(1) - delta] if minus else [f32(-1) + delta, delta, f32(1) + delta]


def iq1_onto_codebook(xb, weight, order, i1, i2, scale, pair):
    """The split onto the codebook: (scale, pair, entries), a negative fit flipping levels and deltas, groups
    off the codebook replaced by their nearest nearby entry, the scale refitted where one was."""
    book = iq1_book()
    n = len(xb)
    ls = [0] * n
    for j, i in enumerate(order):
        ls[i] = 0 if j < i1 else 1 if j < i2 else 2
    if scale < 0:
        ls = [2 - l for l in ls]
        scale, pair = -scale, 3 - pair
    entries, on_grid = [], True
    for g in range(n // 8):
        point = sum(l << (2 * i) for i, l in enumerate(ls[8 * g : 8 * g + 8]))
        if point in book["entry"]:
            entries.append(book["entry"][point])
            continue
        on_grid = False
        values = iq1_values(pair, g)
        best_d2, best_e = f32(np.finfo(np.float32).max), None
        for e in book["nearby"][point]:
            d2 = f32(0)
            for i in range(8):
                diff = scale * values[book["levels"][e, i]] - xb[8 * g + i]
                d2 = d2 + weight[8 * g + i] * diff * diff
            if d2 < best_d2:
                best_d2, best_e = d2, e
        entries.append(best_e)
        ls[8 * g : 8 * g + 8] = [int(l) for l in book["levels"][best_e]]
    if not on_grid:
        sumqx, sumq2 = f32(0), f32(0)
        for i in range(n):
            q = iq1_values(pair, i // 8)[ls[i]]
            sumqx = sumqx + weight[i] * q * xb[i]
            sumq2 = sumq2 + weight[i] * q * q
        if sumqx > 0 and sumq2 > 0:
            scale = sumqx / sumq2
    return scale, pair, entries


def quantize_iq1_s(x):
    out = np.zeros((x.shape[0], 50), dtype=np.uint8)
    for n, row in enumerate(x):
        sumx2 = f32(0)
        for v in row:
            sumx2 = sumx2 + v * v
        sigma2 = f32(2) * sumx2 / f32(QK_K)
        scales, pairs, highs = [f32(0)] * 8, [0] * 8, [0] * 8
        for ib in range(8):
            xb = row[32 * ib : 32 * ib + 32]
            weight = [np.sqrt(sigma2 + v * v) for v in xb]
            top = max(abs(v) for v in xb)
            if top < f32(1e-12):
                continue
            order = sorted(range(32), key=lambda i: xb[i])  # stable
            sumx, sumw = [f32(0)], [f32(0)]
            for i in order:
                sumx.append(sumx[-1] + weight[i] * xb[i])
                sumw.append(sumw[-1] + weight[i])
            best, scale, split = -f32(np.finfo(np.float32).tiny), top, None
            for i1 in range(33):
                for i2 in range(i1, 33):
                    for pair in (0, 3):
                        v = iq1_values(pair, 0)
                        sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[32] - sumx[i2]) * v[2]
                        sumq2 = (
                            (sumw[i1] - sumw[0]) * v[0] * v[0]
                            + (sumw[i2] - sumw[i1]) * v[1] * v[1]
                            + (sumw[32] - sumw[i2]) * v[2] * v[2]
                        )
                        if sumq2 > 0 and sumqx * sumqx > best * sumq2:
                            scale = sumqx / sumq2
                            best = scale * sumqx
                            split = (i1, i2, pair)
            scales[ib], pairs[ib], entries = iq1_onto_codebook(xb, weight, order, split[0], split[1], scale, split[2])
            for k in range(4):
                out[n, 2 + 4 * ib + k] = entries[k] & 255
                highs[ib] |= (entries[k] >> 8) << (3 * k)
        top = max(scales)
        if top > 0:
            d = top / f32(15)
            out[n, 0:2] = halves_of([d * f32(1.125)])[0]
            for ib in range(8):
                code = clamp(nearest(f32(0.5) * (f32(1) / d * scales[ib] - f32(1))), 0, 7)
                highs[ib] |= (code | (8 if pairs[ib] else 0)) << 12
        out[n, 34:50] = np.array(highs, dtype="<u2").view(np.uint8)
    return out


# IQ1_M: ggml's quantize_row_iq1_m_impl without importance weights (each weight x^2): IQ1_S's search over blocks
# of 16 under all four sign pairs (sums taken afresh for each), the block scales coded against max / 15, then the
# super-scale refitted to the coded values and stored as f16 in the top nibbles of the four 16-bit scale words.
def quantize_iq1_m(x):
    book = iq1_book()
    out = np.zeros((x.shape[0], 56), dtype=np.uint8)
    for n, row in enumerate(x):
        scales, pairs = [f32(0)] * 16, [0] * 16
        for ib in range(16):
            xb = row[16 * ib : 16 * ib + 16]
            weight = [v * v for v in xb]
            top = max(abs(v) for v in xb)
            if top < f32(1e-7):
                continue
            order = sorted(range(16), key=lambda i: xb[i])  # stable
            best, scale, split = -f32(np.finfo(np.float32).tiny), top, None
            for i1 in range(17):
                for i2 in range(i1, 17):
                    for pair in range(4):
                        sumqx, sumq2 = f32(0), f32(0)
                        for j, i in enumerate(order):
                            v = iq1_values(pair, i // 8)[0 if j < i1 else 1 if j < i2 else 2]
                            sumqx = sumqx + weight[i] * v * xb[i]
                            sumq2 = sumq2 + weight[i] * v * v
                        if sumq2 > 0 and sumqx * sumqx > best * sumq2:
                            scale = sumqx / sumq2
                            best = scale * sumqx
                            split = (i1, i2, pair)
            scales[ib], pairs[ib], entries = iq1_onto_codebook(xb, weight, order, split[0], split[1], scale, split[2])
            out[n, 2 * ib] = entries[0] & 255
            out[n, 2 * ib + 1] = entries[1] & 255
            out[n, 32 + ib] = (entries[0] >> 8) | ((entries[1] >> 8) << 4)
        if max(scales) == 0:
            continue
        words = [0, 0, 0, 0]
        d = max(scales) / f32(15)
        id_ = f32(1) / d
        sumqx, sumq2 = f32(0), f32(0)
        for ib in range(16):
            code = clamp(nearest(f32(0.5) * (id_ * scales[ib] - f32(1))), 0, 7)
            words[ib // 4] |= code << (3 * (ib % 4))
            out[n, 32 + ib] |= (0x00, 0x80, 0x08, 0x88)[pairs[ib]]
            xb = row[16 * ib : 16 * ib + 16]
            for g in range(2):
                entry = int(out[n, 2 * ib + g]) | ((int(out[n, 32 + ib]) >> (4 * g)) & 7) << 8
                values = iq1_values(pairs[ib], g)
                for i in range(8):
                    w = xb[8 * g + i] * xb[8 * g + i]
                    q = values[book["levels"][entry, i]] * f32(2 * code + 1)
                    sumqx = sumqx + w * q * xb[8 * g + i]
                    sumq2 = sumq2 + w * q * q
        if sumq2 > 0:
            d = sumqx / sumq2
        half = int(halves_of([d * f32(1.1125)])[0].view("<u2")[0])
        words = [w | (((half >> (4 * i)) & 0xF) << 12) for i, w in enumerate(words)]
        out[n, 48:56] = np.array(words, dtype="<u2").view(np.uint8)
    return out

QUANTIZE = {
    "Q8_0": quantize_q8_0,
    "Q4_0": lambda x: quantize_symmetric(x, 16),
    "Q5_0": lambda x: quantize_symmetric(x, 32),
    "Q4_1": lambda x: quantize_offset(x, 16),
    "Q5_1": lambda x: quantize_offset(x, 32),
    "Q2_K": lambda x: quantize_q2_k(x.reshape(-1, QK_K)),
    "Q3_K": lambda x: quantize_q3_k(x.reshape(-1, QK_K)),
    "IQ4_NL": quantize_iq4_nl,
    "IQ4_XS": quantize_iq4_xs,
    "IQ3_XXS": lambda x: quantize_iq3_xxs(x.reshape(-1, QK_K)),
    "IQ3_S": lambda x: quantize_iq3_s(x.reshape(-1, QK_K)),
    "IQ2_XXS": lambda x: quantize_iq2_xxs(x.reshape(-1, QK_K)),
    "IQ2_XS": lambda x: quantize_iq2_xs(x.reshape(-1, QK_K)),
    "IQ2_S": lambda x: quantize_iq2_s(x.reshape(-1, QK_K)),
    "IQ1_S": lambda x: quantize_iq1_s(x.reshape(-1, QK_K)),
    "IQ1_M": lambda x: quantize_iq1_m(x.reshape(-1, QK_K)),
    "MXFP4": quantize_mxfp4,
}


def k_scales_mins(scales):
    """The eight 6-bit scales and mins of a Q4_K/Q5_K super-block, packed into 12 bytes."""
    s = scales.astype(np.int64)
    sc = np.empty((s.shape[0], 8), dtype=np.int64)
    mn = np.empty((s.shape[0], 8), dtype=np.int64)
    for j in range(4):
        sc[:, j] = s[:, j] & 63
        mn[:, j] = s[:, j + 4] & 63
    for j in range(4, 8):
        sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
        mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc.astype(F64), mn.astype(F64)


def dequant_q4_k(raw):
    # d, dmin (f16), 12 bytes of scales/mins, 128 bytes of nibbles. Each 64 values share 32 bytes: low
    # nibbles are sub-block 2c, high nibbles sub-block 2c+1; value = d*scale*q - dmin*min.
    b = blocks_of(raw, 144)
    d, dmin = half_column(b, 0), half_column(b, 2)
    sc, mn = k_scales_mins(b[:, 4:16])
    qs = b[:, 16:144].astype(np.int64)
    out = np.empty((b.shape[0], QK_K), dtype=F64)
    for c in range(4):
        q = qs[:, 32 * c : 32 * c + 32]
        for half, nib in ((0, q & 0xF), (1, q >> 4)):
            j = 2 * c + half
            out[:, 64 * c + 32 * half : 64 * c + 32 * half + 32] = (
                d * sc[:, j : j + 1] * nib - dmin * mn[:, j : j + 1]
            )
    return out.reshape(-1)


def dequant_q5_k(raw):
    # Q4_K's layout plus 32 bytes of fifth bits (qh) before the nibbles: bit 2c of qh[l] belongs to value
    # 64c + l, bit 2c+1 to value 64c + 32 + l.
    b = blocks_of(raw, 176)
    d, dmin = half_column(b, 0), half_column(b, 2)
    sc, mn = k_scales_mins(b[:, 4:16])
    qh = b[:, 16:48].astype(np.int64)
    qs = b[:, 48:176].astype(np.int64)
    out = np.empty((b.shape[0], QK_K), dtype=F64)
    for c in range(4):
        q = qs[:, 32 * c : 32 * c + 32]
        for half, nib in ((0, q & 0xF), (1, q >> 4)):
            j = 2 * c + half
            high = ((qh >> j) & 1) * 16
            out[:, 64 * c + 32 * half : 64 * c + 32 * half + 32] = (
                d * sc[:, j : j + 1] * (nib + high) - dmin * mn[:, j : j + 1]
            )
    return out.reshape(-1)


def dequant_q6_k(raw):
    # 128 bytes of low nibbles (ql), 64 bytes of 2-bit high parts (qh), 16 int8 scales, f16 d. Each half
    # of 128 values uses 64 ql bytes, 32 qh bytes and 8 scales; value = d * scale * (q - 32), one scale
    # per 16 values.
    b = blocks_of(raw, 210)
    ql = b[:, 0:128].astype(np.int64)
    qh = b[:, 128:192].astype(np.int64)
    scales = b[:, 192:208].view(np.int8).astype(F64)
    d = half_column(b, 208)
    out = np.empty((b.shape[0], QK_K), dtype=F64)
    for n in range(2):
        lo = ql[:, 64 * n : 64 * n + 64]
        hi = qh[:, 32 * n : 32 * n + 32]
        sc = scales[:, 8 * n : 8 * n + 8]
        parts = [
            (lo[:, 0:32] & 0xF) | (((hi >> 0) & 3) << 4),
            (lo[:, 32:64] & 0xF) | (((hi >> 2) & 3) << 4),
            (lo[:, 0:32] >> 4) | (((hi >> 4) & 3) << 4),
            (lo[:, 32:64] >> 4) | (((hi >> 6) & 3) << 4),
        ]
        for k, q in enumerate(parts):
            # values l = 0..15 use scale 2k, l = 16..31 scale 2k + 1
            scale = np.repeat(sc[:, 2 * k : 2 * k + 2], 16, axis=1)
            out[:, 128 * n + 32 * k : 128 * n + 32 * k + 32] = d * scale * (q - 32)
    return out.reshape(-1)


def dequant_q2_k(raw):
    # 16 bytes of 4-bit scale (low) and min (high) per 16 values, 64 bytes of 2-bit q, f16 d, f16 dmin. Value
    # 128 h + 32 k + l: bits 2k of qs[32 h + l]; value = d * scale * q - dmin * min.
    b = blocks_of(raw, 84)
    sm = b[:, 0:16].astype(np.int64)
    scales = np.repeat(sm & 0xF, 16, axis=1).astype(F64)
    mins = np.repeat(sm >> 4, 16, axis=1).astype(F64)
    qs = b[:, 16:80].astype(np.int64)
    q = np.empty((b.shape[0], QK_K), dtype=np.int64)
    for h in range(2):
        for k in range(4):
            q[:, 128 * h + 32 * k : 128 * h + 32 * k + 32] = (qs[:, 32 * h : 32 * h + 32] >> (2 * k)) & 3
    return (half_column(b, 80) * scales * q - half_column(b, 82) * mins).reshape(-1)


def q3_k_scales(packed):
    """(nb, 12) packed bytes to the 16 signed scales s - 32 of each Q3_K block: the low nibbles of bytes 0-7
    are sub-blocks 0-7's low four bits, their high nibbles sub-blocks 8-15's; bits 2 (j / 4) of byte 8 + j % 4
    are sub-block j's top two."""
    p = packed.astype(np.int64)
    j = np.arange(16)
    low = np.where(j < 8, p[:, j % 8] & 0xF, p[:, j % 8] >> 4)
    high = (p[:, 8 + j % 4] >> (2 * (j // 4))) & 3
    return (low | (high << 4)) - 32


def dequant_q3_k(raw):
    # 32 bytes hmask, 64 bytes qs, 12 bytes scales, f16 d. Value 128 h + 32 k + l: low two bits at bits 2k of
    # qs[32 h + l], third bit at bit 4h + k of hmask[l] (set: no offset); q = low + 4 * bit - 4.
    b = blocks_of(raw, 110)
    hmask = b[:, 0:32].astype(np.int64)
    qs = b[:, 32:96].astype(np.int64)
    scales = np.repeat(q3_k_scales(b[:, 96:108]), 16, axis=1).astype(F64)
    d = half_column(b, 108)
    q = np.empty((b.shape[0], QK_K), dtype=np.int64)
    for h in range(2):
        for k in range(4):
            low = (qs[:, 32 * h : 32 * h + 32] >> (2 * k)) & 3
            bit = (hmask >> (4 * h + k)) & 1
            q[:, 128 * h + 32 * k : 128 * h + 32 * k + 32] = low + 4 * bit - 4
    return (d * scales * q).reshape(-1)


IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int64)


def iq4_values(qs):
    """(nb, 16) nibble bytes to the 32 levels they index (value j low nibble of byte j, j + 16 high)."""
    q = qs.astype(np.int64)
    return IQ4_LEVELS[np.concatenate([q & 0xF, q >> 4], axis=1)].astype(F64)


def dequant_iq4_nl(raw):
    b = blocks_of(raw, 18)
    return (half_column(b, 0) * iq4_values(b[:, 2:18])).reshape(-1)


def dequant_iq4_xs(raw):
    # f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles; block ib of 32 has scale d * (s - 32), s's
    # low nibble at bits 4 (ib % 2) of scales_l[ib / 2] and top two bits at bits 2 ib of scales_h.
    b = blocks_of(raw, 136)
    d = half_column(b, 0)
    scales_h = b[:, 2:4].copy().view("<u2").astype(np.int64)  # (nb, 1)
    ib = np.arange(8)
    low = (b[:, 4 + ib // 2].astype(np.int64) >> (4 * (ib % 2))) & 0xF
    s = low | (((scales_h >> (2 * ib)) & 3) << 4)
    out = np.empty((b.shape[0], QK_K), dtype=F64)
    for i in range(8):
        out[:, 32 * i : 32 * i + 32] = d * (s[:, i : i + 1] - 32) * iq4_values(b[:, 8 + 16 * i : 24 + 16 * i])
    return out.reshape(-1)


# ---- the codebook types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) -------------------------
# Each group of 8 weights is a codebook entry times its block of 32's multiplier, with signs stored beside
# it (IQ2, IQ3) or a shift of +-1/8 (IQ1). The codebooks are ggml's tables, read from the one transcription
# the engine compiles (engine/quant/iq_grids.h, whose hashes the engine's unit test checks against ggml's).

IQ_GRIDS_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine", "quant", "iq_grids.h")
_IQ_GRIDS = {}


def iq_grid(name, entry_bytes, signed=False):
    """Codebook `name` of iq_grids.h as an (entries, entry_bytes) array of its bytes (byte k: weight k)."""
    if name not in _IQ_GRIDS:
        with open(IQ_GRIDS_HEADER, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"\b" + name + r"\[(\d+)\] = \{([^}]*)\}", text)
        if m is None:
            raise ValueError(f"{IQ_GRIDS_HEADER}: no table {name}")
        words = [int(w, 16) for w in re.findall(r"0x[0-9a-fA-F]+", m.group(2))]
        if len(words) != int(m.group(1)):
            raise ValueError(f"{IQ_GRIDS_HEADER}: {name} has {len(words)} entries, not {m.group(1)}")
        raw = np.array(words, dtype="<u8" if entry_bytes == 8 else "<u4")
        _IQ_GRIDS[name] = raw.view(np.int8 if signed else np.uint8).reshape(-1, entry_bytes).astype(np.int64)
    return _IQ_GRIDS[name]


def bits_of(b):
    """(nb, n) bytes to their (nb, n, 8) bits, least significant first."""
    return (b.astype(np.int64)[:, :, None] >> np.arange(8)) & 1


def seven_bit_signs(sign7):
    """(...,) 7-bit sign sets to (..., 8) factors +-1: the eighth bit makes the count of minus signs even."""
    bits = (sign7[..., None] >> np.arange(7)) & 1
    eighth = bits.sum(axis=-1, keepdims=True) & 1
    return 1 - 2 * np.concatenate([bits, eighth], axis=-1)


def u16_columns(b, at, count):
    return b[:, at : at + 2 * count].copy().view("<u2").astype(np.int64)


def u32_columns(b, at, count):
    return b[:, at : at + 4 * count].copy().view("<u4").astype(np.int64)


def dequant_iq2_xxs(raw):
    # f16 d; per block of 32, 4 index bytes then a u32 of four 7-bit sign sets and a 4-bit scale s on top;
    # weight = d (s + 1/2) / 4 * entry * sign.
    b = blocks_of(raw, 66)
    nb = b.shape[0]
    d = half_column(b, 0)
    groups = b[:, 2:66].reshape(nb, 8, 8)
    index = groups[:, :, 0:4].astype(np.int64)  # (nb, 8, 4)
    word = groups[:, :, 4:8].copy().view("<u4").astype(np.int64)[:, :, 0]  # (nb, 8)
    signs = seven_bit_signs((word[:, :, None] >> (7 * np.arange(4))) & 127)  # (nb, 8, 4, 8)
    mult = d * ((word >> 28) + 0.5) / 4  # (nb, 8)
    values = iq_grid("kIq2XxsGrid", 8)[index] * signs * mult[:, :, None, None]
    return values.reshape(-1)


def iq2_scale_pairs(b, d, at):
    """IQ2_XS / IQ2_S: 8 bytes of two 4-bit scales per block of 32 (the low one for groups 0 and 1) to the
    (nb, 32) group multipliers d (s + 1/2) / 4."""
    sc = b[:, at : at + 8].astype(np.int64)
    per_group = np.stack([sc & 0xF, sc & 0xF, sc >> 4, sc >> 4], axis=2).reshape(-1, 32)
    return d * (per_group + 0.5) / 4


def dequant_iq2_xs(raw):
    # f16 d; 32 u16 of a 9-bit index and 7 sign bits; 8 scale bytes.
    b = blocks_of(raw, 74)
    words = u16_columns(b, 2, 32)
    values = iq_grid("kIq2XsGrid", 8)[words & 511] * seven_bit_signs(words >> 9)
    return (values * iq2_scale_pairs(b, half_column(b, 0), 66)[:, :, None]).reshape(-1)


def dequant_iq2_s(raw):
    # f16 d; 32 index low bytes; 32 sign bytes (bit j: weight j negative); 8 bytes of the indices' top two
    # bits (bits 2l, 2l + 1 of byte ib for group l of block ib); 8 scale bytes.
    b = blocks_of(raw, 82)
    high = (b[:, 66:74].astype(np.int64)[:, :, None] >> (2 * np.arange(4))) & 3  # (nb, 8, 4)
    index = b[:, 2:34].astype(np.int64) | (high.reshape(-1, 32) << 8)
    values = iq_grid("kIq2SGrid", 8)[index] * (1 - 2 * bits_of(b[:, 34:66]))
    return (values * iq2_scale_pairs(b, half_column(b, 0), 74)[:, :, None]).reshape(-1)


def dequant_iq3_xxs(raw):
    # f16 d; 64 indices of 4-weight entries; per block of 32 a u32 of four 7-bit sign sets (one per 8
    # weights) and a 4-bit scale on top: weight = d (s + 1/2) / 2 * entry * sign.
    b = blocks_of(raw, 98)
    nb = b.shape[0]
    d = half_column(b, 0)
    magnitudes = iq_grid("kIq3XxsGrid", 4)[b[:, 2:66].astype(np.int64)].reshape(nb, 8, 4, 8)
    word = u32_columns(b, 66, 8)  # (nb, 8)
    signs = seven_bit_signs((word[:, :, None] >> (7 * np.arange(4))) & 127)  # (nb, 8, 4, 8)
    mult = d * ((word >> 28) + 0.5) / 2
    return (magnitudes * signs * mult[:, :, None, None]).reshape(-1)


def dequant_iq3_s(raw):
    # f16 d; 64 index low bytes; 8 bytes of ninth bits (bit i of byte k: index 8k + i); 32 sign bytes (bit j:
    # weight j of the 8 negative); 4 bytes of two 4-bit scales (low: the even block of 32): d (2 s + 1).
    b = blocks_of(raw, 110)
    nb = b.shape[0]
    index = b[:, 2:66].astype(np.int64) | (bits_of(b[:, 66:74]).reshape(nb, 64) << 8)
    magnitudes = iq_grid("kIq3SGrid", 4)[index].reshape(nb, 32, 8)
    signs = 1 - 2 * bits_of(b[:, 74:106])  # (nb, 32, 8)
    sc = b[:, 106:110].astype(np.int64)
    s = np.stack([sc & 0xF, sc >> 4], axis=2).reshape(nb, 8)
    mult = np.repeat(half_column(b, 0) * (2 * s + 1), 4, axis=1)  # (nb, 32 groups)
    return (magnitudes * signs * mult[:, :, None]).reshape(-1)


def dequant_iq1_s(raw):
    # f16 d; 32 index low bytes; per block of 32 a u16: four 3-bit index tops (bits 3l), a 3-bit scale s (bits
    # 12-14), the shift's sign (bit 15): weight = d (2 s + 1) (entry + shift), shift +-1/8.
    b = blocks_of(raw, 50)
    words = u16_columns(b, 34, 8)  # (nb, 8)
    high = (words[:, :, None] >> (3 * np.arange(4))) & 7
    index = b[:, 2:34].astype(np.int64) | (high.reshape(-1, 32) << 8)
    shift = np.where((words >> 15) & 1, -0.125, 0.125)
    mult = half_column(b, 0) * (2 * ((words >> 12) & 7) + 1)
    values = iq_grid("kIq1SGrid", 8, signed=True)[index] + np.repeat(shift, 4, axis=1)[:, :, None]
    return (values * np.repeat(mult, 4, axis=1)[:, :, None]).reshape(-1)


def dequant_iq1_m(raw):
    # 32 index low bytes; 16 bytes with two groups each (low nibble: group 2k, high: 2k + 1), a nibble being
    # a 3-bit index top and the shift's sign (bit 3); 4 u16 scale words: 3-bit scales, one per 16 weights
    # (4 per word, bits 3i), and d's f16 bits in the words' top nibbles (word k: bits 4k).
    b = blocks_of(raw, 56)
    nb = b.shape[0]
    words = u16_columns(b, 48, 4)  # (nb, 4)
    d_bits = ((words >> 12) << (4 * np.arange(4))).sum(axis=1).astype(np.uint16)
    d = d_bits.view("<f2").astype(F64)[:, None]
    qh = b[:, 32:48].astype(np.int64)
    nibbles = np.stack([qh & 0xF, qh >> 4], axis=2).reshape(nb, 32)
    index = b[:, 0:32].astype(np.int64) | ((nibbles & 7) << 8)
    shift = np.where(nibbles & 8, -0.125, 0.125)
    s = (words[:, :, None] >> (3 * np.arange(4))) & 7  # (nb, 4 words, 4 halves of 16)
    mult = np.repeat(d * (2 * s.reshape(nb, 16) + 1), 2, axis=1)  # (nb, 32 groups)
    values = iq_grid("kIq1SGrid", 8, signed=True)[index] + shift[:, :, None]
    return (values * mult[:, :, None]).reshape(-1)


DEQUANT = {
    "F32": f32_values,
    "F16": f16_values,
    "BF16": bf16_values,
    "Q8_0": dequant_q8_0,
    "Q4_0": dequant_q4_0,
    "Q4_1": dequant_q4_1,
    "Q5_0": dequant_q5_0,
    "Q5_1": dequant_q5_1,
    "Q2_K": dequant_q2_k,
    "Q3_K": dequant_q3_k,
    "IQ4_NL": dequant_iq4_nl,
    "IQ4_XS": dequant_iq4_xs,
    "MXFP4": dequant_mxfp4,
    "Q4_K": dequant_q4_k,
    "Q5_K": dequant_q5_k,
    "Q6_K": dequant_q6_k,
    "IQ2_XXS": dequant_iq2_xxs,
    "IQ2_XS": dequant_iq2_xs,
    "IQ2_S": dequant_iq2_s,
    "IQ3_XXS": dequant_iq3_xxs,
    "IQ3_S": dequant_iq3_s,
    "IQ1_S": dequant_iq1_s,
    "IQ1_M": dequant_iq1_m,
}

# ---- safetensors --------------------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"F32": f32_values, "F16": f16_values, "BF16": bf16_values, "F8_E4M3": e4m3_values,
                      "F64": lambda raw: np.frombuffer(raw, dtype="<f8").astype(F64),
                      # gpt-oss's MXFP4 experts: blocks and scales, kept as the bytes they are.
                      "U8": lambda raw: np.frombuffer(raw, dtype=np.uint8)}


class SafetensorsFile:
    def __init__(self, path):
        self.path = path
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        (length,) = struct.unpack("<Q", self.data[:8].tobytes())
        self.header = json.loads(self.data[8 : 8 + length].tobytes().decode("utf-8"))
        self.header.pop("__metadata__", None)
        self.base = 8 + length

    def tensor(self, name, index=None):
        """The tensor; with index, only tensor[index] of its outermost dimension (one expert of a stack), read
        alone."""
        info = self.header[name]
        begin, end = info["data_offsets"]
        shape = info["shape"]
        if index is not None:
            size = (end - begin) // shape[0]
            begin, end, shape = begin + index * size, begin + (index + 1) * size, shape[1:]
        raw = self.data[self.base + begin : self.base + end].tobytes()
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"{self.path}: {name}: dtype {info['dtype']} is not supported")
        return SAFETENSORS_DTYPES[info["dtype"]](raw).reshape(shape)


# ---- GGUF ---------------------------------------------------------------------------------------------

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
              12: "<f8"}


class GgufFile:
    def __init__(self, path):
        self.path = path
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        if self.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = self.unpack("<I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        n_tensors = self.unpack("<Q")
        n_kv = self.unpack("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = self.string()
            self.metadata[key] = self.value(self.unpack("<I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self.string()
            n_dims = self.unpack("<I")
            dims = [self.unpack("<Q") for _ in range(n_dims)]
            type_id = self.unpack("<I")
            offset = self.unpack("<Q")
            self.tensors[name] = (dims, type_id, offset)
        alignment = int(self.metadata.get("general.alignment", 32))
        self.data_start = (self.pos + alignment - 1) // alignment * alignment

    def read(self, n):
        out = self.data[self.pos : self.pos + n].tobytes()
        if len(out) != n:
            raise ValueError(f"{self.path}: truncated at byte {self.pos}")
        self.pos += n
        return out

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.read(size))[0]

    def string(self):
        return self.read(self.unpack("<Q")).decode("utf-8")

    def value(self, type_id):
        if type_id in GGUF_SCALARS:
            return self.unpack(GGUF_SCALARS[type_id])
        if type_id == 8:
            return self.string()
        if type_id == 9:
            element = self.unpack("<I")
            count = self.unpack("<Q")
            if element in GGUF_NUMPY:
                dtype = np.dtype(GGUF_NUMPY[element])
                return np.frombuffer(self.read(count * dtype.itemsize), dtype=dtype).copy()
            return [self.value(element) for _ in range(count)]
        raise ValueError(f"{self.path}: unknown metadata type {type_id}")

    def has(self, name):
        return name in self.tensors

    def tensor(self, name, index=None):
        """The tensor in row-major numpy order (GGUF lists dimensions innermost first); with index, only
        tensor[index] of its outermost dimension (one expert of a stack: whole rows, so whole blocks), read alone."""
        dims, type_id, offset = self.tensors[name]
        if type_id not in GGML_NAMES:
            raise ValueError(f"{self.path}: {name}: ggml type {type_id} is not supported")
        type_name = GGML_NAMES[type_id]
        _, block_elements, block_bytes = GGML_TYPES[type_name]
        count = int(np.prod(dims))
        size = count // block_elements * block_bytes
        start = self.data_start + offset
        shape = list(reversed(dims))
        if index is not None:
            size //= shape[0]
            start, shape = start + index * size, shape[1:]
        raw = self.data[start : start + size].tobytes()
        return DEQUANT[type_name](raw).reshape(shape)


# ---- models -------------------------------------------------------------------------------------------


class Config:
    """The hyper-parameters the forward pass needs."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def llama3_inv_freq(inv_freq, scaling):
    """Llama 3's RoPE frequency scaling: low frequencies slowed by `factor`, high ones kept, a blend between."""
    factor = scaling["factor"]
    low = scaling["low_freq_factor"]
    high = scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    low_wavelen = old_context / low
    high_wavelen = old_context / high
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, blended, scaled)


def yarn_inv_freq(inv_freq, scaling, theta, head_dim):
    """YaRN: frequencies past the ramp divided by `factor`, those before it kept, a linear blend across it."""
    factor = scaling["factor"]
    original = scaling["original_max_position_embeddings"]

    def dimension_turning(rotations):  # the dimension index whose wavelength fits `rotations` times
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = dimension_turning(scaling.get("beta_fast", 32.0))
    high = dimension_turning(scaling.get("beta_slow", 1.0))
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(head_dim // 2, dtype=F64) - low) / (high - low), 0.0, 1.0)
    return inv_freq / factor * ramp + inv_freq * (1.0 - ramp)


def yarn_attention_factor(scaling):
    if scaling.get("attention_factor") is not None:
        return scaling["attention_factor"]
    factor = scaling["factor"]

    def magnitude(m):
        return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

    if scaling.get("mscale") and scaling.get("mscale_all_dim"):
        return magnitude(scaling["mscale"]) / magnitude(scaling["mscale_all_dim"])
    return magnitude(1.0)


def rope_frequencies(c, max_model_len):
    """(inverse frequencies, factor on cos and sin) of the config's rotary embedding and its scaling, over the
    rotated dimensions, for a model serving up to max_model_len positions (LongRoPE's choice of factors)."""
    scaling = c.rope_scaling
    kind = None if scaling is None else scaling["rope_type"]
    theta = c.rope_theta
    dim = c.rotary_dim
    if kind == "dynamic":
        # The NTK base for factor x max_position_embeddings positions, fixed (vLLM's form).
        factor = scaling["factor"]
        theta = theta * (factor * factor - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = theta ** (-np.arange(0, dim, 2, dtype=F64) / dim)
    if c.rope_divisors is not None:
        return inv_freq / c.rope_divisors, 1.0
    if kind == "linear":
        return inv_freq / scaling["factor"], 1.0
    if kind == "llama3":
        return llama3_inv_freq(inv_freq, scaling), 1.0
    if kind == "yarn":
        return yarn_inv_freq(inv_freq, scaling, c.rope_theta, dim), yarn_attention_factor(scaling)
    if kind == "longrope":
        # vLLM's rule: the long factors wherever the model may outgrow its original context.
        long = max_model_len > scaling["original_max_position_embeddings"]
        factors = np.asarray(scaling["long_factor" if long else "short_factor"], dtype=F64)
        return inv_freq / factors, scaling["attention_factor"]
    return inv_freq, 1.0


def local_inv_freq(c):
    """Gemma 3's sliding-window layers: the default rotary embedding with their own base, never scaled."""
    return c.local_theta ** (-np.arange(0, c.head_dim, 2, dtype=F64) / c.head_dim)


def rounded_to_dtype(value, dtype):
    """`value` as a tensor of safetensors dtype `dtype` holds it (bf16: float32 rounded to nearest even)."""
    if dtype == "BF16":
        bits = int(np.array(value, dtype="<f4").view("<u4"))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
        return float(np.array(bits, dtype="<u4").view("<f4"))
    if dtype == "F16":
        return float(np.float16(value))
    return float(np.float32(value)) if dtype == "F32" else value


def every_but_each(count, pattern):
    """Every layer but each pattern-th: Gemma's sliding layers, SmolLM3's rotating ones."""
    return [(i + 1) % pattern != 0 for i in range(count)]


def longrope_attention_factor(factor, original):
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))


def hf_rope_scaling(cfg, path):
    """config.json's rope_scaling (or transformers 5 rope_parameters) as a dict with rope_type, or None."""
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if not scaling:
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return None
    kind = "longrope" if kind == "su" else kind
    if kind not in ("linear", "dynamic", "yarn", "llama3", "longrope"):
        raise ValueError(f"{path}: rope_scaling of type {kind} is not supported")
    out = dict(scaling, rope_type=kind)
    if kind == "longrope":
        # transformers' reading of Phi-3: the factor is max_position_embeddings over the original context.
        original = scaling.get("original_max_position_embeddings") or cfg.get("original_max_position_embeddings")
        out["original_max_position_embeddings"] = original or cfg["max_position_embeddings"]
        factor = cfg["max_position_embeddings"] / original if original else scaling.get("factor", 1.0)
        if out.get("attention_factor") is None:
            out["attention_factor"] = longrope_attention_factor(factor, out["original_max_position_embeddings"])
        return out
    if kind == "llama3":
        out.setdefault("original_max_position_embeddings", 8192)
    else:
        out.setdefault("original_max_position_embeddings", cfg.get("max_position_embeddings", 4096))
    return out


class Model:
    def __init__(self, config, fetch, cache, max_model_len=None):
        self.config = config
        self.fetch = fetch
        self.cache = {} if cache else None
        # vLLM's default max_model_len: the positions the model was made for.
        self.max_model_len = max_model_len or config.max_positions
        self.inv_freq, self.rope_attention_factor = rope_frequencies(config, self.max_model_len)
        self.local_inv_freq = local_inv_freq(config) if getattr(config, "local_theta", None) else None

    def weight(self, name):
        if self.cache is None:
            return self.fetch(name)
        if name not in self.cache:
            self.cache[name] = self.fetch(name)
        return self.cache[name]


GEMMA3_DEFAULTS = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                   "rope_theta": 1e6, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256,
                   "sliding_window": 4096, "sliding_window_pattern": 6, "rms_norm_eps": 1e-6,
                   "tie_word_embeddings": True}


def fp8_scheme(quantization):
    """(scale tensor suffix, [block rows, block cols] or None) of an FP8 checkpoint's quantization_config: quant_method
    fp8 scales blocks by weight_scale_inv (a tensor by weight_scale without weight_block_size); compressed-tensors
    scales by weight_scale per tensor, channel or block. None for an unquantized checkpoint."""
    if not quantization or quantization["quant_method"] == "mxfp4":  # gpt-oss's experts: their own tensors
        return None
    if quantization["quant_method"] == "fp8":
        block = quantization.get("weight_block_size")
        return ("weight_scale_inv", tuple(block)) if block else ("weight_scale", None)
    if quantization["quant_method"] == "compressed-tensors":
        weights = next(iter(quantization["config_groups"].values()))["weights"]
        return "weight_scale", tuple(weights["block_structure"]) if weights["strategy"] == "block" else None
    raise ValueError(f"quantization {quantization['quant_method']} is not supported")


def hf_model(path, cache, max_model_len=None):
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    # Mistral is Llama's graph, with its sliding window (where use_sliding_window does not turn it off) on
    # every layer, or on those transformers 5's layer_types name.
    top_class = cfg["architectures"][0]
    arch = {"Qwen3ForCausalLM": "qwen3", "Qwen2ForCausalLM": "qwen2", "LlamaForCausalLM": "llama",
            "MistralForCausalLM": "llama", "Gemma3ForCausalLM": "gemma3",
            "Gemma3ForConditionalGeneration": "gemma3", "Gemma2ForCausalLM": "gemma2",
            "SmolLM3ForCausalLM": "smollm3", "Phi3ForCausalLM": "phi3", "Qwen3MoeForCausalLM": "qwen3moe",
            "Qwen2MoeForCausalLM": "qwen2moe", "MixtralForCausalLM": "mixtral",
            "GptOssForCausalLM": "gpt_oss"}.get(top_class)
    if arch is None:
        raise ValueError(f"{path}: architecture {top_class} is not supported")
    gemma = arch in ("gemma2", "gemma3")
    if top_class == "Gemma3ForConditionalGeneration":
        cfg = cfg["text_config"]
    if arch == "gemma3":
        cfg = dict(GEMMA3_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None})
    heads = cfg["num_attention_heads"]
    scaling = hf_rope_scaling(cfg, path)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    # Phi-3 rotates the first int(head_dim * partial_rotary_factor) dimensions of each head.
    partial = cfg.get("partial_rotary_factor", (cfg.get("rope_parameters") or {}).get("partial_rotary_factor", 1.0))
    rotary_dim = int(head_dim * partial) if arch == "phi3" else head_dim
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    sliding = None
    if "layer_types" in cfg:
        sliding = [t == "sliding_attention" for t in cfg["layer_types"]]
    elif gemma or arch == "gpt_oss":  # Gemma 2 and gpt-oss alternate, local first
        sliding = every_but_each(cfg["num_hidden_layers"], cfg.get("sliding_window_pattern", 2))
    elif window:
        sliding = [True] * cfg["num_hidden_layers"]
    index_path = os.path.join(path, "model.safetensors.index.json")
    files = {}
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        where = {}
        for name, file in weight_map.items():
            if file not in files:
                files[file] = SafetensorsFile(os.path.join(path, file))
            where[name] = files[file]
    else:
        single = SafetensorsFile(os.path.join(path, "model.safetensors"))
        where = {name: single for name in single.header}
    # A vision-language checkpoint's text model lives under a prefix of its own.
    prefix = next((p for p in ("language_model.model.", "model.language_model.") if p + "embed_tokens.weight" in where),
                  "model.")
    embed_name = prefix + "embed_tokens.weight"
    config = Config(
        arch=arch,
        hidden=cfg["hidden_size"],
        layers=cfg["num_hidden_layers"],
        heads=heads,
        kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        max_positions=cfg.get("max_position_embeddings", 4096),
        eps=cfg.get("rms_norm_eps", 1e-6),
        rope_theta=cfg.get("rope_theta", 10000.0),
        rope_scaling=scaling,
        rope_divisors=None,
        tied=cfg.get("tie_word_embeddings", False),
        bias=arch in ("qwen2", "qwen2moe") or cfg.get("attention_bias", False),
        o_bias=prefix + "layers.0.self_attn.o_proj.bias" in where,  # gpt-oss's attention_bias covers o_proj too
        sinks=arch == "gpt_oss",
        qk_norm=arch in ("qwen3", "gemma3", "qwen3moe"),
        vocab=cfg["vocab_size"],
        moe=hf_moe(arch, cfg),
        gemma=gemma,
        # Gemma2Config's caps where the file leaves them out.
        attn_softcap=cfg.get("attn_logit_softcapping", 50.0 if arch == "gemma2" else None),
        final_softcap=cfg.get("final_logit_softcapping", 30.0 if arch == "gemma2" else None),
        # SmolLM3's no_rope_layers: 1 where the layer rotates; by default every fourth does not.
        rope_layers=[bool(v) for v in cfg.get("no_rope_layers") or every_but_each(cfg["num_hidden_layers"], cfg.get(
            "no_rope_layer_interval", 4))] if arch == "smollm3" else None,
        # transformers' Gemma3RMSNorm multiplies by (1 + w); the embedding scale is rounded to the weights' dtype.
        norm_plus_one=gemma,
        embed_scale=rounded_to_dtype(math.sqrt(cfg["hidden_size"]), where[embed_name].header[embed_name]["dtype"])
        if gemma else None,
        query_scale=cfg["query_pre_attn_scalar"] ** -0.5 if gemma else 1 / math.sqrt(head_dim),
        window=window,
        sliding=sliding if window else None,
        local_theta=cfg.get("rope_local_base_freq") if gemma else None,
    )
    count = sum(int(np.prod(f.header[n]["shape"])) for f in set(where.values()) for n in f.header)
    fp8 = fp8_scheme(cfg.get("quantization_config"))

    def tensor(name, index=None):
        """A stored tensor's values (index: of one expert of a stack); an FP8 matrix's times the scale of each
        element's block."""
        values = where[name].tensor(name, index)
        if where[name].header[name]["dtype"] != "F8_E4M3":
            return values
        scale_name, block = fp8
        scales = where[name[: -len("weight")] + scale_name].tensor(name[: -len("weight")] + scale_name)
        rows, cols = values.shape
        block_rows, block_cols = block or (rows if scales.size == 1 else 1, cols)
        grid = scales.reshape((rows + block_rows - 1) // block_rows, (cols + block_cols - 1) // block_cols)
        return values * np.repeat(np.repeat(grid, block_rows, axis=0), block_cols, axis=1)[:rows, :cols]

    def fetch(name):
        if arch == "phi3" and (fused := phi3_fused_part(name)):
            stacked, index = fused
            return split_rows(tensor(stacked), phi3_row_counts(config, stacked))[index]
        if arch == "mixtral":
            name = mixtral_name(name)
        if arch == "gpt_oss" and ".mlp.experts." in name:
            return gpt_oss_expert(name, prefix, tensor, where)
        if arch == "gpt_oss":
            name = name.replace(".mlp.gate.", ".mlp.router.")
        if name.startswith("model."):
            name = prefix + name[len("model."):]
        elif name == "lm_head.weight" and prefix == "language_model.model.":
            name = "language_model.lm_head.weight"
        return tensor(name)

    return Model(config, fetch, cache=cache or count < 50_000_000, max_model_len=max_model_len)


def hf_moe(arch, cfg):
    """A mixture's shape (None for a dense model): its experts, how many a token takes, whether their weights are
    renormalized, Qwen2-MoE's shared expert, and which layers are sparse (transformers' decoder_sparse_step and
    mlp_only_layers)."""
    if arch == "mixtral":
        return {"experts": cfg["num_local_experts"], "top_k": cfg["num_experts_per_tok"], "norm": True,
                "shared": False, "sparse": [True] * cfg["num_hidden_layers"]}
    if arch == "gpt_oss":  # see mixture(): limit marks gpt-oss's router and experts
        top_k = cfg.get("num_experts_per_tok") or cfg["experts_per_token"]  # the latter in older files
        return {"experts": cfg["num_local_experts"], "top_k": top_k, "norm": True, "shared": False,
                "sparse": [True] * cfg["num_hidden_layers"], "limit": cfg.get("swiglu_limit", 7.0)}
    if arch not in ("qwen3moe", "qwen2moe"):
        return None
    step = cfg.get("decoder_sparse_step", 1)
    dense = set(cfg.get("mlp_only_layers") or [])
    return {"experts": cfg["num_experts"], "top_k": cfg["num_experts_per_tok"],
            "norm": cfg.get("norm_topk_prob", False), "shared": arch == "qwen2moe",
            "sparse": [i not in dense and (i + 1) % step == 0 for i in range(cfg["num_hidden_layers"])]}


def gpt_oss_expert(name, prefix, tensor, where):
    """One expert's matrix (nn.Linear's orientation, [out, in]) or bias, by Qwen's name (model.layers.N.mlp.experts.
    E.gate_proj.weight), from gpt-oss's stacks: gate_up_proj [E, H, 2I] and down_proj [E, I, H], stored for x @ W,
    or as MXFP4 blocks and scales ([E, out, in / 32, 16] and [E, out, in / 32]) in nn.Linear's orientation; the
    biases gate_up_proj_bias [E, 2I] and down_proj_bias [E, H]. gate_up interleaves its outputs: gate the even
    ones, up the odd."""
    _, _, layer, _, _, expert, matrix, kind = name.split(".")
    stack = f"{prefix}layers.{layer}.mlp.experts." + ("down_proj" if matrix == "down_proj" else "gate_up_proj")
    expert = int(expert)
    if kind == "bias":
        values = tensor(stack + "_bias", expert)
    elif stack + "_blocks" in where:
        values = mxfp4_hf_values(tensor(stack + "_blocks", expert), tensor(stack + "_scales", expert))
    else:
        values = tensor(stack, expert).T
    if matrix == "down_proj":
        return values
    return values[0::2] if matrix == "gate_proj" else values[1::2]


# Mixtral's names for a mixture's parts (the forward pass asks for Qwen's).
MIXTRAL_NAMES = {"mlp.gate.weight": "block_sparse_moe.gate.weight", "gate_proj.weight": "w1.weight",
                 "up_proj.weight": "w3.weight", "down_proj.weight": "w2.weight"}


def mixtral_name(name):
    if ".mlp.gate.weight" in name:
        return name.replace("mlp.gate.weight", MIXTRAL_NAMES["mlp.gate.weight"])
    if ".mlp.experts." in name:
        head, matrix = name.rsplit(".", 2)[0], ".".join(name.rsplit(".", 2)[1:])
        return head.replace(".mlp.", ".block_sparse_moe.") + "." + MIXTRAL_NAMES[matrix]
    return name


# GGUF's stacked experts: (tensor, which expert) for a Hugging Face expert name; its router and shared expert.
GGUF_EXPERT_NAMES = {"gate_proj.weight": "ffn_gate_exps.weight", "up_proj.weight": "ffn_up_exps.weight",
                     "down_proj.weight": "ffn_down_exps.weight", "gate_proj.bias": "ffn_gate_exps.bias",
                     "up_proj.bias": "ffn_up_exps.bias", "down_proj.bias": "ffn_down_exps.bias"}
GGUF_MOE_LAYER_NAMES = {
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.gate.bias": "ffn_gate_inp.bias",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
}


# Phi-3's stacked matrices: q, k, v in qkv_proj; gate, up in gate_up_proj (Hugging Face names, and GGUF's).
PHI3_FUSED = {"self_attn.q_proj.weight": ("self_attn.qkv_proj.weight", 0),
              "self_attn.k_proj.weight": ("self_attn.qkv_proj.weight", 1),
              "self_attn.v_proj.weight": ("self_attn.qkv_proj.weight", 2),
              "mlp.gate_proj.weight": ("mlp.gate_up_proj.weight", 0),
              "mlp.up_proj.weight": ("mlp.gate_up_proj.weight", 1)}
PHI3_GGUF_FUSED = {"self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}


def phi3_fused_part(name):
    """(the stacked tensor's full name, which part) for a per-layer q/k/v/gate/up name; None for the rest."""
    if not name.startswith("model.layers."):
        return None
    _, _, layer, rest = name.split(".", 3)
    if rest not in PHI3_FUSED:
        return None
    stacked, index = PHI3_FUSED[rest]
    return f"model.layers.{layer}.{stacked}", index


def phi3_row_counts(c, stacked):
    if stacked.endswith("qkv_proj.weight"):
        return [c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim]
    return None  # gate_up: two halves


def split_rows(w, counts):
    if counts is None:
        return np.split(w, 2, axis=0)
    return np.split(w, np.cumsum(counts)[:-1], axis=0)


# Hugging Face name → GGUF name, per layer and global.
GGUF_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.o_proj.bias": "attn_output.bias",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
# Gemma's norms after the attention and the feed-forward block, and its norm before the latter.
GGUF_GEMMA3_LAYER_NAMES = dict(GGUF_LAYER_NAMES, **{
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
})
# gpt-oss's norm before the mixture, and its attention sinks.
GGUF_GPT_OSS_LAYER_NAMES = dict(GGUF_LAYER_NAMES, **{
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "self_attn.sinks": "attn_sinks.weight",
})
GGUF_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def unpermute(weights, heads):
    """Undoes llama.cpp's converter: within each head, rows 2i and 2i+1 go back to i and i + head_dim/2."""
    rows = weights.shape[0]
    return weights.reshape(heads, rows // heads // 2, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def gguf_model(path, cache, max_model_len=None):
    g = GgufFile(path)
    meta = g.metadata
    arch = meta["general.architecture"]
    if arch not in ("qwen3", "qwen2", "llama", "gemma2", "gemma3", "smollm3", "phi3", "qwen3moe", "qwen2moe",
                    "gpt-oss"):
        raise ValueError(f"{path}: general.architecture {arch} is not supported")
    gemma = arch in ("gemma2", "gemma3")
    p = arch + "."
    layers = int(meta[p + "block_count"])
    hidden = int(meta[p + "embedding_length"])
    heads = int(meta[p + "attention.head_count"])
    kv_heads = int(meta.get(p + "attention.head_count_kv", heads))
    head_dim = int(meta.get(p + "attention.key_length", hidden // heads))
    theta = float(meta.get(p + "rope.freq_base", 10000.0))
    scaling_type = meta.get(p + "rope.scaling.type", "none")
    scaling = None
    if scaling_type in ("linear", "yarn"):
        scaling = {
            "rope_type": scaling_type,
            "factor": float(meta[p + "rope.scaling.factor"]),
            "original_max_position_embeddings": int(
                meta.get(p + "rope.scaling.original_context_length", meta.get(p + "context_length", 4096))),
            "beta_fast": float(meta.get(p + "rope.scaling.yarn_beta_fast", 32.0)),
            "beta_slow": float(meta.get(p + "rope.scaling.yarn_beta_slow", 1.0)),
        }
        if p + "rope.scaling.yarn_attn_factor" in meta:
            scaling["attention_factor"] = float(meta[p + "rope.scaling.yarn_attn_factor"])
    elif g.has("rope_factors_long.weight"):
        # Phi-3's LongRoPE: its factors are tensors, its context and attention factor keys (no type key).
        original = int(meta[p + "rope.scaling.original_context_length"])
        factor = int(meta[p + "context_length"]) / original
        scaling = {"rope_type": "longrope", "original_max_position_embeddings": original,
                   "long_factor": g.tensor("rope_factors_long.weight").astype(F64),
                   "short_factor": g.tensor("rope_factors_short.weight").astype(F64),
                   "attention_factor": float(meta.get(p + "rope.scaling.attn_factor",
                                                      longrope_attention_factor(factor, original)))}
    elif scaling_type != "none":
        raise ValueError(f"{path}: {p}rope.scaling.type {scaling_type!r} is not supported")
    # Llama 3's scaling is the tensor of per-frequency divisors (f32), as llama.cpp's converter writes it.
    divisors = g.tensor("rope_freqs.weight").astype(F64) if g.has("rope_freqs.weight") else None
    embed_dims = g.tensors["token_embd.weight"][0]
    # llama.cpp's converter writes Phi-3's window as 0 where there is none.
    window = int(meta.get(p + "attention.sliding_window", 0)) or None
    config = Config(
        arch=arch,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        rotary_dim=int(meta.get(p + "rope.dimension_count", head_dim)),
        max_positions=int(meta.get(p + "context_length", 4096)),
        eps=float(meta.get(p + "attention.layer_norm_rms_epsilon", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        rope_divisors=divisors,
        tied=not g.has("output.weight"),
        bias=g.has("blk.0.attn_q.bias"),
        o_bias=g.has("blk.0.attn_output.bias"),
        sinks=arch == "gpt-oss",
        qk_norm=g.has("blk.0.attn_q_norm.weight"),
        vocab=int(embed_dims[1]),
        # llama.cpp's mixtures: every layer sparse, the chosen weights renormalized but in qwen2moe files;
        # Mixtral is a llama file with experts. gpt-oss's SwiGLU limit is fixed in llama.cpp (no key).
        moe=dict({"experts": int(meta[p + "expert_count"]), "top_k": int(meta[p + "expert_used_count"]),
                  "norm": arch != "qwen2moe", "shared": arch == "qwen2moe", "sparse": [True] * layers},
                 **({"limit": 7.0} if arch == "gpt-oss" else {}))
        if int(meta.get(p + "expert_count", 0)) > 1 else None,
        gemma=gemma,
        # What llama.cpp's gemma2 and gemma3 loaders fix: norms stored as w + 1 already, the embedding times
        # sqrt(hidden) unrounded, q scaled by head_dim^-0.5 (hidden / heads for the 27B models: 46 layers in
        # Gemma 2, 62 in Gemma 3), Gemma 3's every sixth layer global and the others over the window with RoPE
        # base 10000, Gemma 2's every other layer; Gemma 2's caps as keys. gpt-oss: every other layer over the
        # window, the first among them (llama.cpp's swa pattern 2).
        norm_plus_one=False,
        embed_scale=math.sqrt(hidden) if gemma else None,
        query_scale=(hidden // heads if layers == (62 if arch == "gemma3" else 46) else head_dim) ** -0.5 if gemma
        else 1 / math.sqrt(head_dim),
        window=window,
        sliding=(every_but_each(layers, 6 if arch == "gemma3" else 2) if gemma or arch == "gpt-oss"
                 else [True] * layers) if window else None,
        local_theta=10000.0 if arch == "gemma3" and window else None,
        attn_softcap=meta.get(p + "attn_logit_softcapping"),
        final_softcap=meta.get(p + "final_logit_softcapping"),
        rope_layers=every_but_each(layers, 4) if arch == "smollm3" else None,  # llama.cpp's fixed step
    )
    layer_names = GGUF_GEMMA3_LAYER_NAMES if gemma else GGUF_GPT_OSS_LAYER_NAMES if arch == "gpt-oss" \
        else GGUF_LAYER_NAMES

    def fetch(name):
        if arch == "phi3" and (fused := phi3_fused_part(name)) and g.has(gguf_phi3_name(fused[0])):
            stacked, index = fused
            return split_rows(g.tensor(gguf_phi3_name(stacked)), phi3_row_counts(config, stacked))[index]
        if name.startswith("model.layers.") and ".mlp.experts." in name:
            _, _, layer, rest = name.split(".", 3)
            _, _, expert, matrix = rest.split(".", 3)
            return g.tensor(f"blk.{layer}.{GGUF_EXPERT_NAMES[matrix]}", int(expert))
        if name.startswith("model.layers.") and name.split(".", 3)[3] in GGUF_MOE_LAYER_NAMES:
            _, _, layer, rest = name.split(".", 3)
            w = g.tensor(f"blk.{layer}.{GGUF_MOE_LAYER_NAMES[rest]}")
            return w.reshape(1, -1) if rest == "mlp.shared_expert_gate.weight" else w
        if name.startswith("model.layers."):
            _, _, layer, rest = name.split(".", 3)
            gguf_name = f"blk.{layer}.{layer_names[rest]}"
        else:
            gguf_name = GGUF_GLOBAL_NAMES[name]
        w = g.tensor(gguf_name)
        permuted = arch in ("llama", "smollm3")  # the converter permutes SmolLM3 as a Llama
        if permuted and rest_is(name, "self_attn.q_proj.weight"):
            w = unpermute(w, heads)
        elif permuted and rest_is(name, "self_attn.k_proj.weight"):
            w = unpermute(w, kv_heads)
        return w

    count = sum(int(np.prod(info[0])) for info in g.tensors.values())
    return Model(config, fetch, cache=cache or count < 50_000_000, max_model_len=max_model_len)


def gguf_phi3_name(stacked):
    """blk.N.attn_qkv.weight for model.layers.N.self_attn.qkv_proj.weight (and ffn_up for gate_up_proj)."""
    _, _, layer, rest = stacked.split(".", 3)
    return f"blk.{layer}.{PHI3_GGUF_FUSED[rest]}"


def rest_is(name, suffix):
    return name.startswith("model.layers.") and name.endswith("." + suffix)


def load_model(path, cache=False, max_model_len=None):
    """Small models keep their float64 weights in memory; large ones re-read them per forward pass unless
    `cache` (8 bytes per parameter) is asked for. max_model_len: as a server would be started with (default
    the model's max_position_embeddings)."""
    return hf_model(path, cache, max_model_len) if os.path.isdir(path) else gguf_model(path, cache, max_model_len)


# ---- the forward pass ---------------------------------------------------------------------------------


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x, inv_freq, attention_factor):
    """Rotary embedding, Hugging Face convention: over the first R = 2 len(inv_freq) dimensions of each head
    (all, or Phi-3's partial rotary), dimension i pairs with i + R/2, cos and sin times the scaling's attention
    factor; the others pass unchanged. x: (T, heads, D)."""
    positions = np.arange(x.shape[0], dtype=F64)
    angles = positions[:, None] * inv_freq[None, :]  # (T, R/2)
    cos = np.cos(angles)[:, None, :] * attention_factor
    sin = np.sin(angles)[:, None, :] * attention_factor
    half = inv_freq.size
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    """GELU's tanh approximation (transformers' gelu_pytorch_tanh)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def swiglu_mlp(h, prefix, w):
    """silu(h gateᵀ) * (h upᵀ), through down: one expert, or the shared one (`prefix` its names' start)."""
    gate = h @ w(prefix + "gate_proj.weight").T
    return (silu(gate) * (h @ w(prefix + "up_proj.weight").T)) @ w(prefix + "down_proj.weight").T


def clamped_swiglu_expert(h, prefix, w, limit):
    """gpt-oss's expert: gate and up with biases, gate capped above and up clipped both ways at `limit`, then
    gate * sigmoid(1.702 gate) * (up + 1) through down, plus its bias."""
    gate = np.minimum(h @ w(prefix + "gate_proj.weight").T + w(prefix + "gate_proj.bias"), limit)
    up = np.clip(h @ w(prefix + "up_proj.weight").T + w(prefix + "up_proj.bias"), -limit, limit)
    glu = gate / (1.0 + np.exp(-1.702 * gate))
    return ((up + 1.0) * glu) @ w(prefix + "down_proj.weight").T + w(prefix + "down_proj.bias")


def mixture(h, moe, p, w):
    """A mixture-of-experts block as transformers computes Qwen's and Mixtral's: the softmax of the router's
    scores, each token's top_k experts (ties to the lower index), their weights renormalized where the config
    says, the experts' outputs summed with those weights; Qwen2-MoE's shared expert added times the sigmoid of
    its gate. gpt-oss's (moe["limit"] set): the router has a bias, the top_k are chosen by its logits and only
    those k are softmaxed, the experts are clamped_swiglu_expert."""
    oai = moe.get("limit") is not None
    scores = h @ w(p + "mlp.gate.weight").T
    if oai:
        probs = scores + w(p + "mlp.gate.bias")  # the logits: the softmax comes after the choice
    else:
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        chosen = sorted(range(moe["experts"]), key=lambda e: (-probs[t, e], e))[:moe["top_k"]]
        weights = probs[t, chosen]
        if oai:
            weights = np.exp(weights - weights.max())
            weights /= weights.sum()
        elif moe["norm"]:
            weights = weights / weights.sum()
        for e, weight in zip(chosen, weights):
            prefix = f"{p}mlp.experts.{e}."
            out[t] += weight * (clamped_swiglu_expert(h[t:t + 1], prefix, w, moe["limit"]) if oai
                                else swiglu_mlp(h[t:t + 1], prefix, w))[0]
    if moe["shared"]:
        gate = 1.0 / (1.0 + np.exp(-(h @ w(p + "mlp.shared_expert_gate.weight").T)))
        out += gate * swiglu_mlp(h, p + "mlp.shared_expert.", w)
    return out


def forward(model, tokens, hidden=False):
    """Logits (T, vocab) at every position of one sequence; with hidden, the final hidden states (T, hidden)
    they are computed from, after the last norm."""
    c = model.config
    w = model.weight
    gemma = getattr(c, "gemma", False)

    def norm(x, name):
        weight = w(name)
        return rms_norm(x, 1.0 + weight if c.norm_plus_one else weight, c.eps)

    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.size
    embed = w("model.embed_tokens.weight")
    if tokens.min() < 0 or tokens.max() >= embed.shape[0]:
        raise ValueError(f"token ids must be below {embed.shape[0]}")
    x = embed[tokens].astype(F64)
    if gemma:
        x = x * c.embed_scale
    group = c.heads // c.kv_heads
    positions = np.arange(T)
    distance = positions[:, None] - positions[None, :]  # query position minus key position
    causal = distance < 0
    scale = c.query_scale if gemma else 1 / math.sqrt(c.head_dim)
    for layer in range(c.layers):
        p = f"model.layers.{layer}."
        sliding = c.sliding is not None and c.sliding[layer]
        h = norm(x, p + "input_layernorm.weight")
        q = h @ w(p + "self_attn.q_proj.weight").T
        k = h @ w(p + "self_attn.k_proj.weight").T
        v = h @ w(p + "self_attn.v_proj.weight").T
        if c.bias:
            q = q + w(p + "self_attn.q_proj.bias")
            k = k + w(p + "self_attn.k_proj.bias")
            v = v + w(p + "self_attn.v_proj.bias")
        q = q.reshape(T, c.heads, c.head_dim)
        k = k.reshape(T, c.kv_heads, c.head_dim)
        v = v.reshape(T, c.kv_heads, c.head_dim)
        if c.qk_norm:  # Qwen3, Gemma 3: RMSNorm over each head's vector, before RoPE
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        rotates = not getattr(c, "rope_layers", None) or c.rope_layers[layer]  # SmolLM3 leaves some layers out
        if sliding and model.local_inv_freq is not None:  # Gemma 3's local layers: their own base, no scaling
            q = rope(q, model.local_inv_freq, 1.0)
            k = rope(k, model.local_inv_freq, 1.0)
        elif rotates:
            q = rope(q, model.inv_freq, model.rope_attention_factor)
            k = rope(k, model.inv_freq, model.rope_attention_factor)
        # A sliding-window layer's query sees its own position and the window - 1 before it.
        masked = causal | (distance >= c.window) if sliding else causal
        out = np.empty((T, c.heads, c.head_dim), dtype=F64)
        for head in range(c.heads):
            kv = head // group  # grouped-query attention: consecutive query heads share a KV head
            scores = q[:, head, :] @ k[:, kv, :].T * scale
            if getattr(c, "attn_softcap", None):  # Gemma 2
                scores = c.attn_softcap * np.tanh(scores / c.attn_softcap)
            scores[masked] = -np.inf
            if getattr(c, "sinks", False):
                # gpt-oss's attention sink: one more logit per head in every row's softmax, its value dropped, so
                # it only takes probability away from the keys.
                sink = w(p + "self_attn.sinks")[head]
                top = np.maximum(scores.max(axis=-1, keepdims=True), sink)
                probs = np.exp(scores - top)
                probs /= probs.sum(axis=-1, keepdims=True) + np.exp(sink - top)
            else:
                scores -= scores.max(axis=-1, keepdims=True)
                probs = np.exp(scores)
                probs /= probs.sum(axis=-1, keepdims=True)
            out[:, head, :] = probs @ v[:, kv, :]
        attn = out.reshape(T, c.heads * c.head_dim) @ w(p + "self_attn.o_proj.weight").T
        if getattr(c, "o_bias", False):
            attn = attn + w(p + "self_attn.o_proj.bias")
        if gemma:  # Gemma's norms around each sub-block: its output is normed before the residual add
            x = x + norm(attn, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + attn
            h = norm(x, p + "post_attention_layernorm.weight")
        moe = getattr(c, "moe", None)
        if moe and moe["sparse"][layer]:
            x = x + mixture(h, moe, p, w)
            continue
        gate = h @ w(p + "mlp.gate_proj.weight").T
        up = h @ w(p + "mlp.up_proj.weight").T
        mlp = ((gelu_tanh(gate) if gemma else silu(gate)) * up) @ w(p + "mlp.down_proj.weight").T
        x = x + (norm(mlp, p + "post_feedforward_layernorm.weight") if gemma else mlp)
    x = norm(x, "model.norm.weight")
    if hidden:
        return x
    head = embed if c.tied else w("lm_head.weight")
    logits = x @ head.T
    if getattr(c, "final_softcap", None):  # Gemma 2
        logits = c.final_softcap * np.tanh(logits / c.final_softcap)
    return logits


# ---- commands -----------------------------------------------------------------------------------------


def parse_sequences(text):
    sequences = []
    for part in text.split(";"):
        ids = [int(t) for t in part.split(",") if t.strip() != ""]
        if not ids:
            raise ValueError(f"--tokens {text!r}: a sequence is empty")
        sequences.append(ids)
    return sequences


def write_logits(path, rows):
    vocab = rows[0].shape[1]
    with open(path, "wb") as f:
        f.write(b"RLOGITS1")
        f.write(struct.pack("<II", len(rows), vocab))
        for r in rows:
            f.write(struct.pack("<I", r.shape[0]))
        for r in rows:
            f.write(np.ascontiguousarray(r, dtype="<f8").tobytes())


def command_logits(args):
    model = load_model(args.model, max_model_len=args.max_model_len)
    rows = [forward(model, seq) for seq in parse_sequences(args.tokens)]
    write_logits(args.out, rows)


def command_hidden(args):
    model = load_model(args.model, max_model_len=args.max_model_len)
    write_logits(args.out, [forward(model, seq, hidden=True) for seq in parse_sequences(args.tokens)])


def command_greedy(args):
    model = load_model(args.model, cache=True, max_model_len=args.max_model_len)  # every step reads every weight
    (prompt,) = parse_sequences(args.tokens)
    sequence = list(prompt)
    generated = []
    for _ in range(args.steps):
        logits = forward(model, sequence)[-1]
        token = int(np.argmax(logits))
        generated.append(token)
        sequence.append(token)
    with open(args.out, "wb") as f:
        f.write(b"RGREEDY1")
        f.write(struct.pack("<I", len(generated)))
        f.write(np.asarray(generated, dtype="<i8").tobytes())


def command_dequant(args):
    if args.type not in DEQUANT:
        raise ValueError(f"--type {args.type}: expected one of {', '.join(DEQUANT)}")
    with open(args.input, "rb") as f:
        raw = f.read()
    _, _, block_bytes = GGML_TYPES[args.type]
    if len(raw) % block_bytes != 0:
        raise ValueError(f"{args.input}: {len(raw)} bytes are not whole {args.type} blocks of {block_bytes} bytes")
    values = DEQUANT[args.type](raw)
    with open(args.out, "wb") as f:
        f.write(b"RDEQUAN1")
        f.write(struct.pack("<Q", values.size))
        f.write(np.ascontiguousarray(values, dtype="<f8").tobytes())


def command_quantize(args):
    if args.type not in QUANTIZE:
        raise ValueError(f"--type {args.type}: expected one of {', '.join(QUANTIZE)}")
    values = np.fromfile(args.input, dtype="<f4")
    _, block, _ = GGML_TYPES[args.type]
    if values.size % block != 0:
        raise ValueError(f"{args.input}: {values.size} values are not whole {args.type} blocks of {block}")
    blocks = QUANTIZE[args.type](values.reshape(-1, 32).astype(f32))
    with open(args.out, "wb") as f:
        f.write(b"RQUANT01")
        f.write(struct.pack("<Q", blocks.size))
        f.write(np.ascontiguousarray(blocks, dtype=np.uint8).tobytes())


def main(argv):
    parser = argparse.ArgumentParser(description="float64 reference forward pass (Qwen3, Qwen2, Llama)")
    commands = parser.add_subparsers(dest="command", required=True)
    logits = commands.add_parser("logits", help="logits at every position")
    logits.add_argument("--model", required=True, help="model directory or .gguf file")
    logits.add_argument("--tokens", required=True, help="comma-separated ids; ';' separates sequences")
    logits.add_argument("--out", required=True)
    hidden = commands.add_parser("hidden", help="final hidden states at every position (as logits' file)")
    hidden.add_argument("--model", required=True)
    hidden.add_argument("--tokens", required=True)
    hidden.add_argument("--out", required=True)
    greedy = commands.add_parser("greedy", help="greedy continuation")
    greedy.add_argument("--model", required=True)
    greedy.add_argument("--tokens", required=True)
    greedy.add_argument("--steps", type=int, required=True)
    greedy.add_argument("--out", required=True)
    dequant = commands.add_parser("dequant", help="dequantize raw GGUF blocks")
    dequant.add_argument("--type", required=True)
    dequant.add_argument("--in", dest="input", required=True)
    dequant.add_argument("--out", required=True)
    quantize = commands.add_parser("quantize", help="quantize float32 values as ggml's reference quantizers")
    quantize.add_argument("--type", required=True)
    quantize.add_argument("--in", dest="input", required=True)
    quantize.add_argument("--out", required=True)
    for command in (logits, hidden, greedy):
        command.add_argument("--max-model-len", type=int, help="as the server runs (LongRoPE's factors); default "
                             "max_position_embeddings")
    args = parser.parse_args(argv)
    handlers = {"logits": command_logits, "greedy": command_greedy, "dequant": command_dequant}
    handlers["quantize"] = command_quantize
    handlers["hidden"] = command_hidden
    handlers[args.command](args)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, KeyError, OSError) as error:
        print(f"reference_model.py: {error}", file=sys.stderr)
        sys.exit(1)
