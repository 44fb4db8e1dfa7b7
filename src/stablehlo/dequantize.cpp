// How each GGUF weight encoding is carried into IREE and turned back into f32 in StableHLO.
//
// A packed weight travels as its file bytes, tensor<rows x blocks x block_bytes x i8>, and every op
// below works on all rows and blocks at once (no per-block loops: the ops are emitted once per
// weight). Field offsets come from the block structs of skainet/blocks.hpp. All bit work is done on
// i8 with shift_right_logical, so signedness never matters; integers become f32 only at the end.
//
// The values equal the reference dequantizers (src/kernels/ref) bit for bit: every product there is
// exact in f32 (an f16 scale has 11 significant bits, the integers at most 8 + 6), so only the final
// add/subtract of *_1 and K formats rounds, and it is emitted in the same place as in the reference
// (a fused multiply-add in the compiled code would round the same exact product the same way).
//
// | format     | fields used (bytes of the block)        | ops                                                        |
// |------------|-----------------------------------------|------------------------------------------------------------|
// | F32/F16/BF16 | the tensor itself, tensor<R x C x T>  | convert (none for F32)                                     |
// | Q8_0       | d (2), qs (32 × i8)                     | slice, bitcast 2×i8→f16, convert; convert qs; multiply      |
// | Q4_0       | d, qs (16)                              | qs & 15 ‖ qs >> 4 (concatenate, elements j and j+16), − 8, |
// |            |                                         | convert, × d                                               |
// | Q4_1       | d, m, qs                                | as Q4_0 without − 8; then × d + m                          |
// | Q5_0       | d, qh (4), qs                           | as Q4_0; bit 4 of element 8b+i is bit i of qh[b]: qh       |
// |            |                                         | broadcast to [4, 8], >> iota, & 1, << 4, or; − 16, × d     |
// | Q5_1       | d, m, qh, qs                            | as Q5_0 without − 16; then × d + m                         |
// | Q4_K       | d, dmin, scales (12), qs (128)          | 6-bit sc/m of the 8 sub-blocks from scales[0:4], [4:8],    |
// |            |                                         | [8:12] (& 63, & 15, >> 4, >> 6 << 4, or, concatenate);     |
// |            |                                         | qs as [4, 32] → low ‖ high nibbles = [8 sub-blocks, 32];   |
// |            |                                         | (d·sc)·q − dmin·m                                          |
// | Q5_K       | d, dmin, scales, qh (32), qs            | as Q4_K; bit 4 of sub-block s, element l is bit s of qh[l]:|
// |            |                                         | qh broadcast to [8, 32], >> iota, & 1, << 4, or            |
// | Q6_K       | ql (128), qh (64), scales (16 × i8), d  | ql as [2, 2, 32] → low ‖ high = [2, 4, 32]; qh as [2, 32]  |
// |            |                                         | broadcast over the 4 groups, >> {0,2,4,6}, & 3, << 4, or,  |
// |            |                                         | − 32; one scale per 16 elements: (d·sc)·q                  |
//
// bitcast_convert of 2 × i8 to f16 takes the bytes in memory order (little-endian, as the file
// stores them); the IREE conformity test (tests/stablehlo) checks this on the CPU backend.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "skainet/blocks.hpp"
#include "skainet/stablehlo.hpp"

namespace skainet::stablehlo {
namespace {

// Builder calls are sequenced statement by statement (never two as arguments of one call, whose
// order C++ leaves open) so that the emitted text is the same whatever the compiler.

struct Field {
  int64_t offset, size;
};
// One place for a field's bytes: the block struct itself.
#define SKAINET_FIELD(B, member) \
  Field { static_cast<int64_t>(offsetof(B, member)), static_cast<int64_t>(sizeof(B::member)) }

// The raw tensor's rows and blocks, and the inner dims of the blocked form being built.
struct Shape {
  int64_t rows, blocks;
  std::vector<int64_t> inner;
  std::vector<int64_t> full() const {
    std::vector<int64_t> d{rows, blocks};
    d.insert(d.end(), inner.begin(), inner.end());
    return d;
  }
};

std::vector<int64_t> iota_list(int64_t from, int64_t count) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(from + i);
  return v;
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Every position of `dims`, row-major, as its multi-index.
std::vector<std::vector<int64_t>> positions(const std::vector<int64_t>& dims) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> at(dims.size(), 0);
  for (int64_t n = numel(dims); n > 0; --n) {
    out.push_back(at);
    for (size_t i = dims.size(); i-- > 0;) {
      if (++at[i] < dims[i]) break;
      at[i] = 0;
    }
  }
  return out;
}

Value splat(FunctionBuilder& f, int32_t v, const Value& like) { return f.constant_i32(v, like.type.dims, like.type.elem); }

// `values` (one per position of `dims`, a prefix of the inner dims) broadcast to `like`'s shape.
Value per_position(FunctionBuilder& f, const std::vector<int64_t>& values, const std::vector<int64_t>& dims,
                   const Value& like) {
  const Value c = f.constant_ints(values, dims, like.type.elem);
  return f.broadcast_in_dim(c, like.type.dims, iota_list(2, static_cast<int64_t>(dims.size())));
}
// `values` along inner dim `dim` only, broadcast to `like`'s shape.
Value along(FunctionBuilder& f, const std::vector<int64_t>& values, int64_t dim, const Value& like) {
  const Value c = f.constant_ints(values, {static_cast<int64_t>(values.size())}, like.type.elem);
  return f.broadcast_in_dim(c, like.type.dims, {2 + dim});
}
// A mask over a prefix `dims` of the inner dims, broadcast to `full`: true where values[p] == k.
Value mask(FunctionBuilder& f, const std::vector<int64_t>& values, const std::vector<int64_t>& dims, int64_t k,
           const std::vector<int64_t>& full) {
  const Value c = f.constant_ints(values, dims, Elem::I32);
  const Value key = f.constant_i32(static_cast<int32_t>(k), dims);
  const Value m = f.compare(c, key, "EQ");
  return f.broadcast_in_dim(m, full, iota_list(2, static_cast<int64_t>(dims.size())));
}

// (x >> shift) & m, with the shift given per position of x's shape.
Value bits(FunctionBuilder& f, const Value& x, const Value& shift, int32_t m) {
  const Value shifted = f.shift_right_logical(x, shift);
  return f.and_(shifted, splat(f, m, x));
}
Value shl(FunctionBuilder& f, const Value& x, int32_t n) { return f.shift_left(x, splat(f, n, x)); }

// Bytes [offset, offset + n) of every block: [rows, blocks, n] i8.
Value bytes(FunctionBuilder& f, const Value& raw, int64_t offset, int64_t n) {
  const auto& d = raw.type.dims;
  return f.slice(raw, {0, 0, offset}, {d[0], d[1], offset + n});
}

// The n (1 to 4) little-endian bytes at `offset` of every block as one i32: [rows, blocks, 1].
Value word(FunctionBuilder& f, const Value& raw, int64_t offset, int64_t n) {
  Value w;
  for (int64_t k = 0; k < n; ++k) {
    const Value b8 = bytes(f, raw, offset + k, 1);
    const Value b32 = f.convert(b8, Elem::I32);
    Value b = f.and_(b32, splat(f, 0xff, b32));
    if (k > 0) b = shl(f, b, static_cast<int32_t>(8 * k));
    w = k == 0 ? b : f.or_(w, b);
  }
  return w;
}

// The f16 at `offset` of every block as f32, [rows, blocks, 1]: its two bytes joined in i16 and
// reinterpreted at the same width (a 2 x i8 -> f16 bitcast would lower to a reduction).
Value half(FunctionBuilder& f, const Value& raw, int64_t offset) {
  const Value lo8 = bytes(f, raw, offset, 1);
  const Value lo16 = f.convert(lo8, Elem::I16);
  const Value lo = f.and_(lo16, splat(f, 0xff, lo16));
  const Value hi8 = bytes(f, raw, offset + 1, 1);
  const Value hi = shl(f, f.convert(hi8, Elem::I16), 8);  // the sign extension is shifted out
  const Value h = f.or_(lo, hi);
  return f.convert(f.bitcast_convert(h, Elem::F16), Elem::F32);
}

// A [rows, blocks, 1] (or [rows, blocks, prefix of inner]) value spread over `full`.
Value spread(FunctionBuilder& f, const Value& v, const std::vector<int64_t>& full) {
  return f.broadcast_in_dim(v, full, iota_list(0, v.type.rank()));
}

// A field of every block as little-endian 32-bit words (the last one shorter), each [rows, blocks, 1].
std::vector<Value> words(FunctionBuilder& f, const Value& raw, Field field) {
  std::vector<Value> w;
  for (int64_t at = 0; at < field.size; at += 4) w.push_back(word(f, raw, field.offset + at, std::min<int64_t>(4, field.size - at)));
  return w;
}

// Bytes of a field (given as its words()) picked per position p of `dims` (a prefix of the inner
// dims, or all of them): byte index[p] of the field, as i32 0..255, [rows, blocks, dims...]. One
// select per further word, the byte by a per-position shift: no gather.
Value field_bytes(FunctionBuilder& f, const std::vector<Value>& field, const Shape& s,
                  const std::vector<int64_t>& dims, const std::vector<int64_t>& index) {
  std::vector<int64_t> full{s.rows, s.blocks};
  full.insert(full.end(), dims.begin(), dims.end());
  std::vector<int64_t> word_of, shift;
  for (int64_t i : index) {
    word_of.push_back(i / 4);
    shift.push_back(8 * (i % 4));
  }
  Value sel;
  bool first = true;
  for (int64_t w = 0; w < static_cast<int64_t>(field.size()); ++w) {
    if (std::find(word_of.begin(), word_of.end(), w) == word_of.end()) continue;
    const Value spread_v = spread(f, field[static_cast<size_t>(w)], full);
    if (first) {
      sel = spread_v;
      first = false;
      continue;
    }
    const Value m = mask(f, word_of, dims, w, full);
    sel = f.select(m, spread_v, sel);
  }
  const Value sh = f.constant_ints(shift, dims, Elem::I32);
  const Value shb = f.broadcast_in_dim(sh, full, iota_list(2, static_cast<int64_t>(dims.size())));
  return bits(f, sel, shb, 0xff);
}

// [rows, blocks, inner...] i8: at inner position (p..., l) the byte at offset(p...) + stride * l,
// l running over the last inner dim. Each distinct offset is one slice broadcast over the inner dims;
// further ones are chosen by select on a constant mask (this stands for the reshape that would split
// a field into sub-blocks, which IREE cannot fuse into the product).
Value pick(FunctionBuilder& f, const Value& raw, const Shape& s,
           const std::function<int64_t(const std::vector<int64_t>&)>& offset, int64_t stride = 1) {
  const std::vector<int64_t> lead(s.inner.begin(), s.inner.end() - 1);
  const int64_t n = s.inner.back();
  const std::vector<int64_t> full = s.full();
  std::vector<int64_t> starts, which;
  for (const auto& p : positions(lead)) {
    const int64_t o = offset(p);
    auto it = std::find(starts.begin(), starts.end(), o);
    if (it == starts.end()) {
      starts.push_back(o);
      it = starts.end() - 1;
    }
    which.push_back(it - starts.begin());
  }
  Value y;
  for (size_t k = 0; k < starts.size(); ++k) {
    const auto& d = raw.type.dims;
    const Value sl = f.slice(raw, {0, 0, starts[k]}, {d[0], d[1], starts[k] + stride * (n - 1) + 1}, {1, 1, stride});
    const Value b = f.broadcast_in_dim(sl, full, {0, 1, 2 + static_cast<int64_t>(lead.size())});
    if (k == 0) {
      y = b;
      continue;
    }
    const Value m = mask(f, which, lead, static_cast<int64_t>(k), full);
    y = f.select(m, b, y);
  }
  return y;
}

Shape check_packed(GgmlType type, const Value& raw, std::vector<int64_t> inner) {
  const TypeTraits& t = type_traits(type);
  const auto& d = raw.type.dims;
  if (raw.type.elem != Elem::I8 || d.size() != 3 || d[2] != static_cast<int64_t>(t.block_bytes))
    throw InvalidArgument(fmt::format("stablehlo::dequantize {}: expected tensor<rows x blocks x {} x i8>, got {}",
                                      t.name, t.block_bytes, raw.type.str()));
  return {d[0], d[1], std::move(inner)};
}

// kIq4nlValues[q] for 4-bit q (i8), as f32: a binary tree of selects on the bits of q (15 selects
// between constants, elementwise; a gather from a table would not fuse).
Value iq4_levels(FunctionBuilder& f, const Value& q) {
  std::vector<Value> level;
  for (int8_t v : kIq4nlValues) level.push_back(f.constant_f32(static_cast<float>(v), q.type.dims));
  for (int32_t bit = 0; level.size() > 1; ++bit) {
    const Value b = bits(f, q, splat(f, bit, q), 1);
    const Value set = f.compare(b, splat(f, 0, b), "NE");
    std::vector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) next.push_back(f.select(set, level[i + 1], level[i]));
    level = std::move(next);
  }
  return level[0];
}

// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: 32 elements as [2, 16], element 16h + j the low (h = 0) or high
// nibble of qs[j]; x = d * (q - offset), d * q + m or d * level(q).
template <class B>
Value legacy(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasMin = requires(B b) { b.m; };
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  constexpr bool kLevels = B::kType == GgmlType::IQ4_NL;
  const Shape s = check_packed(B::kType, raw, {2, 16});
  const std::vector<int64_t> full = s.full();
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
  const Value qs = pick(f, raw, s, [&](const std::vector<int64_t>&) { return qs_at; });
  Value q = bits(f, qs, along(f, {0, 4}, 0, qs), 0xf);
  if constexpr (kHasHigh) {
    // Bit 4 of element e is bit e of the 32-bit little-endian qh.
    const Field qh_field = SKAINET_FIELD(B, qh);
    const Value qh = spread(f, word(f, raw, qh_field.offset, qh_field.size), full);
    const Value high = bits(f, qh, per_position(f, iota_list(0, 32), s.inner, qh), 1);
    q = f.or_(q, f.convert(shl(f, high, 4), Elem::I8));
  }
  const Value d = spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), full);
  if constexpr (kLevels) {
    const Value lv = iq4_levels(f, q);
    return f.multiply(d, lv);
  } else {
    if constexpr (!kHasMin) q = f.subtract(q, splat(f, kHasHigh ? 16 : 8, q));
    const Value qf = f.convert(q, Elem::F32);
    Value y = f.multiply(qf, d);
    if constexpr (kHasMin) {
      const Value m = spread(f, half(f, raw, SKAINET_FIELD(B, m).offset), full);
      y = f.add(y, m);
    }
    return y;
  }
}

Value q8_0(FunctionBuilder& f, const Value& raw) {
  const Shape s = check_packed(GgmlType::Q8_0, raw, {32});
  const Field qs = SKAINET_FIELD(BlockQ8_0, qs);
  const Value qf = f.convert(bytes(f, raw, qs.offset, qs.size), Elem::F32);
  const Value d = spread(f, half(f, raw, SKAINET_FIELD(BlockQ8_0, d).offset), s.full());
  return f.multiply(qf, d);
}

// Q4_K / Q5_K: [4, 2, 32], sub-block j = 2k + h: d * sc[j] * q - dmin * m[j].
template <class B>
Value k4(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  const Shape s = check_packed(B::kType, raw, {4, 2, 32});
  const std::vector<int64_t> full = s.full();
  // qs[32k + l] holds element 64k + l (low nibble, sub-block 2k) and 64k + 32 + l (high, 2k + 1).
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
  const Value qs = pick(f, raw, s, [&](const std::vector<int64_t>& p) { return qs_at + 32 * p[0]; });
  Value q = bits(f, qs, along(f, {0, 4}, 1, qs), 0xf);
  if constexpr (kHasHigh) {
    // Bit j of qh[l] is bit 4 of element l of sub-block j.
    const int64_t qh_at = SKAINET_FIELD(B, qh).offset;
    const Value qh = pick(f, raw, s, [&](const std::vector<int64_t>&) { return qh_at; });
    const Value high = bits(f, qh, per_position(f, iota_list(0, 8), {4, 2}, qh), 1);
    q = f.or_(q, shl(f, high, 4));
  }
  // The 12 scale bytes: sub-blocks 0-3 keep sc and m in the low 6 bits of bytes j and j + 4;
  // sub-blocks 4-7 have their low 4 bits in the nibbles of byte j + 4 and their top 2 bits in bits
  // 6-7 of bytes j - 4 (sc) and j (m).
  const std::vector<int64_t> sub{4, 2};
  std::vector<int64_t> low_sc, low_m, top_sc, top_m, low_mask, shift_m, top_mask;
  for (int64_t j = 0; j < 8; ++j) {
    const bool lo = j < 4;
    low_sc.push_back(lo ? j : j + 4);
    low_m.push_back(j + 4);
    top_sc.push_back(lo ? 0 : j - 4);
    top_m.push_back(lo ? 0 : j);
    low_mask.push_back(lo ? 63 : 15);
    shift_m.push_back(lo ? 0 : 4);
    top_mask.push_back(lo ? 0 : 3);
  }
  const std::vector<Value> scales = words(f, raw, SKAINET_FIELD(B, scales));
  auto six_bits = [&](const std::vector<int64_t>& low_at, const std::vector<int64_t>& low_shift,
                      const std::vector<int64_t>& top_at) {
    const Value lb = field_bytes(f, scales, s, sub, low_at);
    const Value low_shifted = f.shift_right_logical(lb, per_position(f, low_shift, sub, lb));
    const Value low = f.and_(low_shifted, per_position(f, low_mask, sub, lb));
    const Value tb = field_bytes(f, scales, s, sub, top_at);
    const Value top_shifted = f.shift_right_logical(tb, splat(f, 6, tb));
    const Value top = f.and_(top_shifted, per_position(f, top_mask, sub, tb));
    return f.convert(f.or_(low, shl(f, top, 4)), Elem::F32);  // [rows, blocks, 4, 2]
  };
  const Value scf = six_bits(low_sc, std::vector<int64_t>(8, 0), top_sc);
  const Value mf = six_bits(low_m, shift_m, top_m);
  const Value d1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), scf.type.dims), scf);
  const Value m1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, dmin).offset), mf.type.dims), mf);
  const Value qf = f.convert(q, Elem::F32);
  const Value dq = f.multiply(spread(f, d1, full), qf);
  return f.subtract(dq, spread(f, m1, full));
}

// Q6_K: [2, 4, 32] = element 128h + 32g + l: d * scales[e / 16] * (q - 32), q of 6 bits from ql
// (low 4: g = 0, 1 the low nibbles of ql[64h + 32g + l], g = 2, 3 the high nibbles of
// ql[64h + 32(g-2) + l]) and qh (bits 2g, 2g+1 of qh[32h + l]).
Value q6_k(FunctionBuilder& f, const Value& raw) {
  using B = BlockQ6_K;
  const Shape s = check_packed(B::kType, raw, {2, 4, 32});
  const std::vector<int64_t> full = s.full();
  const int64_t ql_at = SKAINET_FIELD(B, ql).offset, qh_at = SKAINET_FIELD(B, qh).offset;
  const Value ql = pick(f, raw, s, [&](const std::vector<int64_t>& p) { return ql_at + 64 * p[0] + 32 * (p[1] % 2); });
  Value q = bits(f, ql, along(f, {0, 0, 4, 4}, 1, ql), 0xf);
  const Value qh = pick(f, raw, s, [&](const std::vector<int64_t>& p) { return qh_at + 32 * p[0]; });
  const Value high = bits(f, qh, along(f, {0, 2, 4, 6}, 1, qh), 3);
  q = f.or_(q, shl(f, high, 4));
  q = f.subtract(q, splat(f, 32, q));
  std::vector<int64_t> index;
  for (const auto& p : positions(s.inner)) index.push_back(8 * p[0] + 2 * p[1] + p[2] / 16);
  const Value sc = field_bytes(f, words(f, raw, SKAINET_FIELD(B, scales)), s, s.inner, index);
  const Value scf = f.convert(f.convert(sc, Elem::I8), Elem::F32);  // int8_t scales
  const Value ds = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), full), scf);
  const Value qf = f.convert(q, Elem::F32);
  return f.multiply(ds, qf);
}

// Q2_K / Q3_K: [2, 4, 32] = element 128h + 32s + l, sub-block (of 16) j = 8h + 2s + l / 16; the
// 2-bit value is bits 2s, 2s+1 of qs[32h + l].
template <class B>
Value k_low(FunctionBuilder& f, const Value& raw) {
  constexpr bool kQ3 = B::kType == GgmlType::Q3_K;
  const Shape s = check_packed(B::kType, raw, {2, 4, 32});
  const std::vector<int64_t> full = s.full();
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
  const Value qs = pick(f, raw, s, [&](const std::vector<int64_t>& p) { return qs_at + 32 * p[0]; });
  Value q = bits(f, qs, along(f, {0, 2, 4, 6}, 1, qs), 3);
  std::vector<int64_t> sub;
  for (const auto& p : positions(s.inner)) sub.push_back(8 * p[0] + 2 * p[1] + p[2] / 16);
  const Value d = spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), full);
  const std::vector<Value> scales = words(f, raw, SKAINET_FIELD(B, scales));
  if constexpr (kQ3) {
    // Bit 4h + s of hmask[l] set: q; clear: q - 4.
    const int64_t hm_at = SKAINET_FIELD(B, hmask).offset;
    const Value hm = pick(f, raw, s, [&](const std::vector<int64_t>&) { return hm_at; });
    const Value high = bits(f, hm, per_position(f, iota_list(0, 8), {2, 4}, hm), 1);
    q = f.or_(q, shl(f, high, 2));
    q = f.subtract(q, splat(f, 4, q));
    // Scale code of sub-block j: low 4 bits the low (j < 8) or high nibble of scales[j % 8], top 2
    // bits bits 2(j / 4), 2(j / 4) + 1 of scales[8 + j % 4]; the scale is code - 32.
    std::vector<int64_t> low_at, low_shift, top_at, top_shift;
    for (int64_t j : sub) {
      low_at.push_back(j % 8);
      low_shift.push_back(j < 8 ? 0 : 4);
      top_at.push_back(8 + j % 4);
      top_shift.push_back(2 * (j / 4));
    }
    const Value lb = field_bytes(f, scales, s, s.inner, low_at);
    const Value low = bits(f, lb, per_position(f, low_shift, s.inner, lb), 0xf);
    const Value tb = field_bytes(f, scales, s, s.inner, top_at);
    const Value top = bits(f, tb, per_position(f, top_shift, s.inner, tb), 3);
    const Value code = f.or_(low, shl(f, top, 4));
    const Value scf = f.convert(f.subtract(code, splat(f, 32, code)), Elem::F32);
    const Value dl = f.multiply(d, scf);
    const Value qf = f.convert(q, Elem::F32);
    return f.multiply(dl, qf);
  } else {
    // scales[j]: scale in the low nibble, min in the high one.
    const Value sb = field_bytes(f, scales, s, s.inner, sub);
    const Value scf = f.convert(f.and_(sb, splat(f, 0xf, sb)), Elem::F32);
    const Value mf = f.convert(f.shift_right_logical(sb, splat(f, 4, sb)), Elem::F32);
    const Value dl = f.multiply(d, scf);
    const Value dmin = spread(f, half(f, raw, SKAINET_FIELD(B, dmin).offset), full);
    const Value ml = f.multiply(dmin, mf);
    const Value qf = f.convert(q, Elem::F32);
    const Value dq = f.multiply(dl, qf);
    return f.subtract(dq, ml);
  }
}

// IQ4_XS: [8, 2, 16] = element 32ib + 16h + j: d * (ls[ib] - 32) * level(nibble h of qs[16ib + j]);
// ls[ib] the 4 bits of nibble ib % 2 of scales_l[ib / 2] and bits 2ib, 2ib+1 of scales_h on top.
Value iq4_xs(FunctionBuilder& f, const Value& raw) {
  using B = BlockIQ4_XS;
  const Shape s = check_packed(B::kType, raw, {8, 2, 16});
  const std::vector<int64_t> full = s.full();
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
  const Value qs = pick(f, raw, s, [&](const std::vector<int64_t>& p) { return qs_at + 16 * p[0]; });
  const Value q = bits(f, qs, along(f, {0, 4}, 1, qs), 0xf);
  const Value lv = iq4_levels(f, q);
  std::vector<int64_t> low_at, low_shift, high_at, high_shift;
  for (int64_t ib = 0; ib < 8; ++ib) {
    low_at.push_back(ib / 2);
    low_shift.push_back(4 * (ib % 2));
    high_at.push_back(ib / 4);
    high_shift.push_back(2 * (ib % 4));
  }
  const std::vector<int64_t> sub{8};
  const Value lb = field_bytes(f, words(f, raw, SKAINET_FIELD(B, scales_l)), s, sub, low_at);
  const Value low = bits(f, lb, per_position(f, low_shift, sub, lb), 0xf);
  const Value hb = field_bytes(f, words(f, raw, SKAINET_FIELD(B, scales_h)), s, sub, high_at);
  const Value high = bits(f, hb, per_position(f, high_shift, sub, hb), 3);
  const Value ls = f.or_(low, shl(f, high, 4));
  const Value lsf = f.convert(f.subtract(ls, splat(f, 32, ls)), Elem::F32);  // [rows, blocks, 8]
  const Value dl = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), lsf.type.dims), lsf);
  return f.multiply(spread(f, dl, full), lv);
}

#undef SKAINET_FIELD

std::optional<Elem> dense_elem(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::F32: return Elem::F32;
    case GgmlType::F16: return Elem::F16;
    case GgmlType::BF16: return Elem::BF16;
    default: return std::nullopt;
  }
}

Value check_dense(GgmlType type, const Value& raw) {
  const auto e = dense_elem(type);
  if (raw.type.elem != *e || raw.type.rank() != 2)
    throw InvalidArgument(fmt::format("stablehlo::dequantize {}: expected tensor<rows x cols x {}>, got {}",
                                      type_name(type), elem_name(*e), raw.type.str()));
  return raw;
}

}  // namespace

TensorType raw_type(GgmlType type, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0)
    throw InvalidArgument(fmt::format("stablehlo::raw_type: negative shape {} x {}", rows, cols));
  if (const auto e = dense_elem(type)) return TensorType::of({rows, cols}, *e);
  const TypeTraits& t = type_traits(type);
  if (!t.quantized) throw InvalidArgument(fmt::format("stablehlo::raw_type: {} is neither a float nor a packed type", t.name));
  const int64_t n = t.block_elements;
  if (cols % n != 0)
    throw InvalidArgument(fmt::format("stablehlo::raw_type: {} columns of {} are not whole blocks of {}", cols, t.name, n));
  return TensorType::of({rows, cols / n, static_cast<int64_t>(t.block_bytes)}, Elem::I8);
}

bool can_dequantize(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
    case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> block_inner_dims(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return {32};
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::IQ4_NL:
      return {2, 16};
    case GgmlType::Q4_K: case GgmlType::Q5_K: return {4, 2, 32};
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q6_K: return {2, 4, 32};
    case GgmlType::IQ4_XS: return {8, 2, 16};
    default:
      throw InvalidArgument(fmt::format("stablehlo::block_inner_dims: {} has no blocked StableHLO form", type_name(type)));
  }
}

Value dequantize_blocks(FunctionBuilder& f, GgmlType type, const Value& raw) {
  switch (type) {
    case GgmlType::Q8_0: return q8_0(f, raw);
    case GgmlType::Q4_0: return legacy<BlockQ4_0>(f, raw);
    case GgmlType::Q4_1: return legacy<BlockQ4_1>(f, raw);
    case GgmlType::Q5_0: return legacy<BlockQ5_0>(f, raw);
    case GgmlType::Q5_1: return legacy<BlockQ5_1>(f, raw);
    case GgmlType::IQ4_NL: return legacy<BlockIQ4_NL>(f, raw);
    case GgmlType::Q2_K: return k_low<BlockQ2_K>(f, raw);
    case GgmlType::Q3_K: return k_low<BlockQ3_K>(f, raw);
    case GgmlType::Q4_K: return k4<BlockQ4_K>(f, raw);
    case GgmlType::Q5_K: return k4<BlockQ5_K>(f, raw);
    case GgmlType::Q6_K: return q6_k(f, raw);
    case GgmlType::IQ4_XS: return iq4_xs(f, raw);
    default:
      throw InvalidArgument(fmt::format("stablehlo::dequantize_blocks: {} has no blocked StableHLO form", type_name(type)));
  }
}

Value dequantize(FunctionBuilder& f, GgmlType type, const Value& raw) {
  if (dense_elem(type)) return f.convert(check_dense(type, raw), Elem::F32);
  const Value y = dequantize_blocks(f, type, raw);
  return f.reshape(y, {y.type.dims[0], y.type.numel() / y.type.dims[0]});
}

Value matvec(FunctionBuilder& f, GgmlType type, const Value& raw, const Value& x) {
  const bool dense = dense_elem(type).has_value();
  const int64_t cols = dense ? check_dense(type, raw).type.dims[1]
                             : check_packed(type, raw, {}).blocks * static_cast<int64_t>(type_traits(type).block_elements);
  if (x.type.elem != Elem::F32 || x.type.dims != std::vector<int64_t>{cols})
    throw InvalidArgument(fmt::format("stablehlo::matvec {}: x must be tensor<{}xf32>, got {}", type_name(type), cols,
                                      x.type.str()));
  const Value w = dense ? f.convert(raw, Elem::F32) : dequantize_blocks(f, type, raw);
  const std::vector<int64_t> per_row(w.type.dims.begin() + 1, w.type.dims.end());
  const Value xr = f.reshape(x, per_row);
  const Value xb = f.broadcast_in_dim(xr, w.type.dims, iota_list(1, static_cast<int64_t>(per_row.size())));
  const Value p = f.multiply(w, xb);
  return f.reduce_sum(p, iota_list(1, static_cast<int64_t>(per_row.size())));
}

}  // namespace skainet::stablehlo
