// How each GGUF weight encoding is carried into IREE and turned back into f32 in StableHLO.
//
// A packed weight travels as its file bytes, tensor<rows x blocks x block_bytes x i8>, and every op
// below works on all rows and blocks at once (no per-block loops: the ops are emitted once per
// weight). Field offsets come from the block structs of skainet/blocks.hpp.
//
// Each format is first built in its blocked form, [rows, blocks, inner...] f32 (inner dims in the
// order of the elements in a block), from elementwise ops only: slices of the raw bytes laid along
// an inner dim by broadcast_in_dim, a select on iota where different positions read different runs
// of bytes, shifts and masks, convert, and f16 scales joined from their two bytes in i16 and
// bitcast at the same width. That is the form IREE fuses into the one-row product (matvec: multiply
// + one reduce) so the weight stays packed: a reshape, concatenate, gather or a width-changing bitcast
// between the bytes and the product, or more than 16 operands in the fused op (kIreeMaxOperandCount:
// one per distinct slice or dense constant; per-position numbers are therefore iota arithmetic and
// every constant a splat), makes IREE materialize the unpacked weight in a dispatch of its own. Q5_K
// and IQ4_XS read their quant bytes through a reshape of the raw tensor itself ([.., 11, 16],
// [.., 17, 8]), which IREE folds into the parameter's load, so that one strided 2-D slice covers
// several runs. dequantize() is the blocked form and one reshape to [rows, cols] (prefill).
//
// The values equal the reference dequantizers (src/kernels/ref) bit for bit: every product there is
// exact in f32 (an f16 scale has 11 significant bits, the integers at most 8 + 6), so only the final
// add/subtract of *_1 and K formats rounds, and it is emitted in the same place as in the reference
// (a fused multiply-add in the compiled code would round the same exact product the same way).
//
// | format       | inner dims     | how the bytes are read                                            |
// |--------------|----------------|-------------------------------------------------------------------|
// | F32/F16/BF16 | (none)         | convert (none for F32); matvec is dot_general                    |
// | Q8_0         | [32]           | convert qs × d                                                   |
// | Q4_0/Q4_1    | [2, 16]        | qs broadcast over h, >> 4h, & 15; − 8, × d / × d + m             |
// | Q5_0/Q5_1    | [2, 16]        | as Q4_*; bit 16h + j of the i32 word qh is bit 4; − 16, × d / + m |
// | IQ4_NL       | [2, 16]        | nibbles as Q4_0; level by 15 selects between i8 splats; × d      |
// | Q2_K, Q3_K   | [2, 4, 32]     | qs run h, >> 2s & 3; scales[8h + 2s + l/16] as stride-2 bytes    |
// |              |                | laid along s, chosen by (h, l/16); Q3_K: hmask bit 4h + s, − 4   |
// | Q4_K         | [4, 2, 32]     | qs run k (selects), >> 4h & 15; sc/m of sub-block 2k + h from    |
// |              |                | byte pairs laid along h; (d·sc)·q − dmin·m                       |
// | Q5_K         | [4, 2, 2, 16]  | as Q4_K through the [11, 16] view; qh bit 2k + h is bit 4        |
// | Q6_K         | [2, 4, 32]     | ql run 2h + g%2, >> 4(g/2); qh run h, >> 2g & 3; − 32;           |
// |              |                | scales as Q2_K's; (d·sc)·q                                       |
// | IQ4_XS       | [8, 2, 2, 8]   | qs through the [17, 8] view; levels as IQ4_NL; ls from words     |
// | MXFP4        | [2, 16]        | as IQ4_NL with kMxfp4Values; e's f32 bits from shifts, bitcast   |
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "skainet/core/blocks.hpp"
#include "skainet/io/stablehlo.hpp"

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

std::vector<int64_t> iota_list(int64_t from, int64_t count) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(from + i);
  return v;
}

// Every per-position number (shift amounts, which chunk a position reads) is arithmetic on iota, and
// every constant a splat: a dense constant tensor would be one more operand of the fused op, and IREE
// stops fusing elementwise ops into one another past 16 operands (kIreeMaxOperandCount).
Value splat(FunctionBuilder& f, int32_t v, const Value& like) {
  return f.constant_i32(v, like.type.dims, like.type.elem);
}
Value with(FunctionBuilder& f, std::string_view op, const Value& x, int32_t v) {
  return f.binary(op, x, splat(f, v, x));
}
Value shl(FunctionBuilder& f, const Value& x, int32_t n) { return with(f, "shift_left", x, n); }
Value shr(FunctionBuilder& f, const Value& x, int32_t n) { return with(f, "shift_right_logical", x, n); }
Value mask(FunctionBuilder& f, const Value& x, int32_t m) { return with(f, "and", x, m); }
// (x >> shift) & m, the shift given per position (a tensor of x's shape).
Value bits(FunctionBuilder& f, const Value& x, const Value& shift, int32_t m) {
  const Value shifted = f.shift_right_logical(x, shift);
  return mask(f, shifted, m);
}
// The index along inner dim `dim` at every position of `shape` ([rows, blocks, inner...]).
Value at(FunctionBuilder& f, const std::vector<int64_t>& shape, int64_t dim, Elem e = Elem::I32) {
  return f.iota(TensorType::of(shape, e), 2 + dim);
}
// options[idx] at every position: a chain of selects (idx is i32 of the options' shape).
Value by_index(FunctionBuilder& f, const Value& idx, const std::vector<Value>& options) {
  Value y = options[0];
  for (size_t k = 1; k < options.size(); ++k) {
    const Value is_k = f.compare(idx, splat(f, static_cast<int32_t>(k), idx), "EQ");
    y = f.select(is_k, options[k], y);
  }
  return y;
}

// Bytes offset, offset + stride, … (n of them) of every block: [rows, blocks, n] i8.
Value bytes(FunctionBuilder& f, const Value& raw, int64_t offset, int64_t n, int64_t stride = 1) {
  const auto& d = raw.type.dims;
  return f.slice(raw, {0, 0, offset}, {d[0], d[1], offset + stride * (n - 1) + 1}, {1, 1, stride});
}
// A [rows, blocks, n] value laid along inner dim `dim` of `shape`.
Value along(FunctionBuilder& f, const Value& v, const std::vector<int64_t>& shape, int64_t dim) {
  return f.broadcast_in_dim(v, shape, {0, 1, 2 + dim});
}
// A [rows, blocks, 1] (or [rows, blocks, leading inner dims…]) value spread over `shape`.
Value spread(FunctionBuilder& f, const Value& v, const std::vector<int64_t>& shape) {
  return f.broadcast_in_dim(v, shape, iota_list(0, v.type.rank()));
}
// i8 bytes as i32 0..255.
Value unsigned32(FunctionBuilder& f, const Value& b) { return mask(f, f.convert(b, Elem::I32), 0xff); }

// The n (1 to 4) little-endian bytes at `offset` of every block as one i32: [rows, blocks, 1].
Value word(FunctionBuilder& f, const Value& raw, int64_t offset, int64_t n) {
  Value w;
  for (int64_t k = 0; k < n; ++k) {
    Value b = unsigned32(f, bytes(f, raw, offset + k, 1));
    if (k > 0) b = shl(f, b, static_cast<int32_t>(8 * k));
    w = k == 0 ? b : f.or_(w, b);
  }
  return w;
}

// The f16 at `offset` of every block as f32, [rows, blocks, 1]: its two bytes joined in i16 and
// reinterpreted at the same width (a 2 x i8 -> f16 bitcast would lower to a reduction).
Value half(FunctionBuilder& f, const Value& raw, int64_t offset) {
  const Value lo = mask(f, f.convert(bytes(f, raw, offset, 1), Elem::I16), 0xff);
  const Value hi = shl(f, f.convert(bytes(f, raw, offset + 1, 1), Elem::I16), 8);  // the sign extension is shifted out
  const Value h = f.or_(lo, hi);
  return f.convert(f.bitcast_convert(h, Elem::F16), Elem::F32);
}

struct Shape {
  int64_t rows, blocks;
  std::vector<int64_t> full;  // [rows, blocks, inner...]
};

Shape check_packed(GgmlType type, const Value& raw, const std::vector<int64_t>& inner) {
  const TypeTraits& t = type_traits(type);
  const auto& d = raw.type.dims;
  if (raw.type.elem != Elem::I8 || d.size() != 3 || d[2] != static_cast<int64_t>(t.block_bytes))
    throw InvalidArgument(fmt::format("stablehlo::dequantize {}: expected tensor<rows x blocks x {} x i8>, got {}",
                                      t.name, t.block_bytes, raw.type.str()));
  std::vector<int64_t> full{d[0], d[1]};
  full.insert(full.end(), inner.begin(), inner.end());
  return {d[0], d[1], std::move(full)};
}

// table[q] for 4-bit q (i8), as f32 (kIq4nlValues, kMxfp4Values): a binary tree of selects on the
// bits of q (15 selects between i8 splats, elementwise, then one convert; a gather from a table
// would not fuse).
Value levels(FunctionBuilder& f, const Value& q, const int8_t (&table)[16]) {
  std::vector<Value> level;
  for (int8_t v : table) level.push_back(splat(f, v, q));
  for (int32_t bit = 0; level.size() > 1; ++bit) {
    const Value b = mask(f, shr(f, q, bit), 1);
    const Value set = f.compare(b, splat(f, 0, b), "NE");
    std::vector<Value> next;
    for (size_t i = 0; i < level.size(); i += 2) next.push_back(f.select(set, level[i + 1], level[i]));
    level = std::move(next);
  }
  return f.convert(level[0], Elem::F32);
}

// MXFP4's E8M0 byte at `offset` of every block as its halved f32 scale, [rows, blocks, 1]: the
// float's bits as blocks.hpp's mxfp4_scale_bits builds them (subnormal 0x00200000 << e below 2,
// exponent e - 1 above), joined in i32 and reinterpreted at the same width.
Value e8m0_half(FunctionBuilder& f, const Value& raw, int64_t offset) {
  const Value e = unsigned32(f, bytes(f, raw, offset, 1));
  const Value subnormal = f.binary("shift_left", splat(f, 0x00200000, e), e);
  const Value normal = shl(f, f.subtract(e, splat(f, 1, e)), 23);
  const Value small = f.compare(e, splat(f, 2, e), "LT");
  return f.bitcast_convert(f.select(small, subnormal, normal), Elem::F32);
}

// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: 32 elements as [2, 16], element 16h + j the low (h = 0) or
// high nibble of qs[j]; x = d * (q - offset), d * q + m or d * level(q).
template <class B>
Value legacy(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasMin = requires(B b) { b.m; };
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  constexpr bool kMx = B::kType == GgmlType::MXFP4;
  constexpr bool kLevels = B::kType == GgmlType::IQ4_NL || kMx;
  const Shape s = check_packed(B::kType, raw, block_inner_dims(B::kType));
  const Field qs_field = SKAINET_FIELD(B, qs);
  const Value qs = along(f, bytes(f, raw, qs_field.offset, qs_field.size), s.full, 1);
  Value q = bits(f, qs, shl(f, at(f, s.full, 0, Elem::I8), 2), 0xf);
  if constexpr (kHasHigh) {
    // Bit 4 of element e = 16h + j is bit e of the 32-bit little-endian qh.
    const Field qh_field = SKAINET_FIELD(B, qh);
    const Value qh = spread(f, word(f, raw, qh_field.offset, qh_field.size), s.full);
    const Value e16 = shl(f, at(f, s.full, 0), 4);
    const Value e = f.add(e16, at(f, s.full, 1));
    const Value high = bits(f, qh, e, 1);
    q = f.or_(q, f.convert(shl(f, high, 4), Elem::I8));
  }
  if constexpr (kMx) {
    const Value d = spread(f, e8m0_half(f, raw, SKAINET_FIELD(B, e).offset), s.full);
    const Value lv = levels(f, q, kMxfp4Values);
    return f.multiply(d, lv);
  } else if constexpr (kLevels) {
    const Value d = spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), s.full);
    const Value lv = levels(f, q, kIq4nlValues);
    return f.multiply(d, lv);
  } else {
    const Value d = spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), s.full);
    if constexpr (!kHasMin) q = f.subtract(q, splat(f, kHasHigh ? 16 : 8, q));
    const Value qf = f.convert(q, Elem::F32);
    Value y = f.multiply(qf, d);
    if constexpr (kHasMin) {
      const Value m = spread(f, half(f, raw, SKAINET_FIELD(B, m).offset), s.full);
      y = f.add(y, m);
    }
    return y;
  }
}

Value q8_0(FunctionBuilder& f, const Value& raw) {
  const Shape s = check_packed(GgmlType::Q8_0, raw, block_inner_dims(GgmlType::Q8_0));
  const Field qs = SKAINET_FIELD(BlockQ8_0, qs);
  const Value qf = f.convert(bytes(f, raw, qs.offset, qs.size), Elem::F32);
  const Value d = spread(f, half(f, raw, SKAINET_FIELD(BlockQ8_0, d).offset), s.full);
  return f.multiply(qf, d);
}

// (d * sc[j]) * q - dmin * m[j] for the nibbles (or 5-bit values) q of a Q4_K / Q5_K blocked form
// whose first two inner dims are (k, h), sub-block j = 2k + h.
template <class B>
Value k4_scaled(FunctionBuilder& f, const Value& raw, const Shape& s, const Value& q) {
  // The 12 scale bytes: sub-blocks j = 0-3 keep sc and m in the low 6 bits of bytes j and j + 4;
  // j = 4-7 have their low 4 bits in the nibbles of byte j + 4 and their top 2 bits in bits 6-7 of
  // bytes j - 4 (sc) and j (m). Over [4, 2] = (k, h) the byte j + c is the pair at 2k + c laid along h.
  const std::vector<int64_t> sub{s.rows, s.blocks, 4, 2};
  const int64_t sc_at = SKAINET_FIELD(B, scales).offset;
  auto pair = [&](int64_t c) { return unsigned32(f, along(f, bytes(f, raw, sc_at + c, 2), sub, 1)); };
  const Value p0 = pair(0), p2 = pair(2), p4 = pair(4), p6 = pair(6), p8 = pair(8), p10 = pair(10);
  const Value k = at(f, sub, 0), k_odd = mask(f, k, 1);
  const Value upper = f.compare(k, splat(f, 2, k), "GE");  // sub-blocks 4-7
  const Value sc_low = by_index(f, k, {p0, p2, p8, p10});
  const Value sc_top = by_index(f, k_odd, {p0, p2});
  const Value m_low = by_index(f, k, {p4, p6, p8, p10});
  const Value m_top = by_index(f, k_odd, {p4, p6});
  const Value sc_top4 = shl(f, shr(f, sc_top, 6), 4);
  const Value sc_hi = f.or_(mask(f, sc_low, 0xf), sc_top4);
  const Value sc = f.select(upper, sc_hi, mask(f, sc_low, 63));
  const Value m_top4 = shl(f, shr(f, m_top, 6), 4);
  const Value m_hi = f.or_(shr(f, m_low, 4), m_top4);
  const Value m = f.select(upper, m_hi, mask(f, m_low, 63));
  const Value scf = f.convert(sc, Elem::F32), mf = f.convert(m, Elem::F32);  // [rows, blocks, 4, 2]
  const Value d1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), sub), scf);
  const Value m1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, dmin).offset), sub), mf);
  const Value qf = f.convert(q, Elem::F32);
  const Value dq = f.multiply(spread(f, d1, s.full), qf);
  return f.subtract(dq, spread(f, m1, s.full));
}

// Q4_K: [4, 2, 32] = element 64k + 32h + l; Q5_K: [4, 2, 2, 16] = element 64k + 32h + 16lh + ll;
// sub-block j = 2k + h: d * sc[j] * q - dmin * m[j]. qs[32k + l] holds element 64k + l (low nibble,
// sub-block 2k) and 64k + 32 + l (high, 2k + 1). Q4_K reads qs as its four 32-byte runs (one select
// operand each); Q5_K, whose qh would take the fused op past the 16 operands IREE fuses, views its
// raw bytes as [rows, blocks, 11, 16] (a reshape of the parameter itself, folded into the load) and
// reads qs as two stride-2 2-D slices, one per lh (measured: the runs are faster where they fit).
template <class B>
Value k4(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  const Shape s = check_packed(B::kType, raw, block_inner_dims(B::kType));
  std::vector<Value> chunks;
  if constexpr (kHasHigh) {
    static_assert(sizeof(B) % 16 == 0 && offsetof(B, qs) % 16 == 0 && offsetof(B, qh) % 16 == 0);
    const Value view = f.reshape(raw, {s.rows, s.blocks, static_cast<int64_t>(sizeof(B)) / 16, 16});
    const int64_t qs_row = static_cast<int64_t>(offsetof(B, qs)) / 16;
    for (int64_t lh = 0; lh < 2; ++lh) {
      const Value sl =
          f.slice(view, {0, 0, qs_row + lh, 0}, {s.rows, s.blocks, qs_row + lh + 2 * 3 + 1, 16}, {1, 1, 2, 1});
      chunks.push_back(f.broadcast_in_dim(sl, s.full, {0, 1, 2, 5}));
    }
    const Value qs = by_index(f, at(f, s.full, 2), chunks);
    Value q = bits(f, qs, shl(f, at(f, s.full, 1, Elem::I8), 2), 0xf);
    // Bit j of qh[l] is bit 4 of element l of sub-block j.
    const int64_t qh_row = static_cast<int64_t>(offsetof(B, qh)) / 16;
    const Value qh_rows = f.slice(view, {0, 0, qh_row, 0}, {s.rows, s.blocks, qh_row + 2, 16});
    const Value qh = f.broadcast_in_dim(qh_rows, s.full, {0, 1, 4, 5});
    const Value k2 = shl(f, at(f, s.full, 0, Elem::I8), 1);
    const Value j = f.add(k2, at(f, s.full, 1, Elem::I8));
    return k4_scaled<B>(f, raw, s, f.or_(q, shl(f, bits(f, qh, j, 1), 4)));
  } else {
    const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
    for (int64_t k = 0; k < 4; ++k) chunks.push_back(along(f, bytes(f, raw, qs_at + 32 * k, 32), s.full, 2));
    const Value qs = by_index(f, at(f, s.full, 0), chunks);
    return k4_scaled<B>(f, raw, s, bits(f, qs, shl(f, at(f, s.full, 1, Elem::I8), 2), 0xf));
  }
}

// Q6_K: [2, 4, 32] = element 128h + 32g + l: d * scales[e / 16] * (q - 32), q of 6 bits from ql
// (low 4: g = 0, 1 the low nibbles of ql[64h + 32g + l], g = 2, 3 the high nibbles of
// ql[64h + 32(g-2) + l]) and qh (bits 2g, 2g+1 of qh[32h + l]).
Value q6_k(FunctionBuilder& f, const Value& raw) {
  using B = BlockQ6_K;
  const Shape s = check_packed(B::kType, raw, block_inner_dims(B::kType));
  const int64_t ql_at = SKAINET_FIELD(B, ql).offset, qh_at = SKAINET_FIELD(B, qh).offset;
  const Value h = at(f, s.full, 0), g = at(f, s.full, 1), g8 = at(f, s.full, 1, Elem::I8);
  std::vector<Value> ql_chunks, qh_chunks;
  for (int64_t c = 0; c < 4; ++c) ql_chunks.push_back(along(f, bytes(f, raw, ql_at + 32 * c, 32), s.full, 2));
  for (int64_t c = 0; c < 2; ++c) qh_chunks.push_back(along(f, bytes(f, raw, qh_at + 32 * c, 32), s.full, 2));
  const Value h2 = shl(f, h, 1);
  const Value ql_idx = f.add(h2, mask(f, g, 1));  // ql chunk 2h + g % 2
  const Value ql = by_index(f, ql_idx, ql_chunks);
  Value q = bits(f, ql, shl(f, shr(f, g8, 1), 2), 0xf);
  const Value qh = by_index(f, h, qh_chunks);
  q = f.or_(q, shl(f, bits(f, qh, shl(f, g8, 1), 3), 4));
  q = f.subtract(q, splat(f, 32, q));
  // scales[8h + 2g + l / 16]: for each (h, l / 16) the bytes at stride 2 laid along g.
  const int64_t sc_at = SKAINET_FIELD(B, scales).offset;
  std::vector<Value> sc_chunks;
  for (int64_t c = 0; c < 4; ++c)
    sc_chunks.push_back(along(f, bytes(f, raw, sc_at + 8 * (c / 2) + c % 2, 4, 2), s.full, 1));
  const Value sc_idx = f.add(h2, shr(f, at(f, s.full, 2), 4));
  const Value scf = f.convert(by_index(f, sc_idx, sc_chunks), Elem::F32);  // int8_t scales
  const Value ds = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), s.full), scf);
  const Value qf = f.convert(q, Elem::F32);
  return f.multiply(ds, qf);
}

// Q2_K / Q3_K: [2, 4, 32] = element 128h + 32s + l, sub-block (of 16) j = 8h + 2s + l / 16; the
// 2-bit value is bits 2s, 2s+1 of qs[32h + l].
template <class B>
Value k_low(FunctionBuilder& f, const Value& raw) {
  constexpr bool kQ3 = B::kType == GgmlType::Q3_K;
  const Shape s = check_packed(B::kType, raw, block_inner_dims(B::kType));
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset, sc_at = SKAINET_FIELD(B, scales).offset;
  const Value h = at(f, s.full, 0), sub = at(f, s.full, 1), half16 = shr(f, at(f, s.full, 2), 4);
  const Value s8 = at(f, s.full, 1, Elem::I8);
  std::vector<Value> qs_chunks;
  for (int64_t c = 0; c < 2; ++c) qs_chunks.push_back(along(f, bytes(f, raw, qs_at + 32 * c, 32), s.full, 2));
  const Value qs = by_index(f, h, qs_chunks);
  Value q = bits(f, qs, shl(f, s8, 1), 3);
  const Value d = spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), s.full);
  if constexpr (kQ3) {
    // Bit 4h + s of hmask[l] set: q; clear: q - 4.
    const Value hm = along(f, bytes(f, raw, SKAINET_FIELD(B, hmask).offset, 32), s.full, 2);
    const Value hs = f.add(shl(f, at(f, s.full, 0, Elem::I8), 2), s8);
    q = f.or_(q, shl(f, bits(f, hm, hs, 1), 2));
    q = f.subtract(q, splat(f, 4, q));
    // Scale code of sub-block j: low 4 bits nibble h of scales[j % 8] = scales[2s + l / 16] (bytes
    // at stride 2 laid along s), top 2 bits bits 2(j / 4) of scales[8 + j % 4].
    std::vector<Value> low_chunks, top_bytes;
    for (int64_t c = 0; c < 2; ++c)
      low_chunks.push_back(unsigned32(f, along(f, bytes(f, raw, sc_at + c, 4, 2), s.full, 1)));
    for (int64_t c = 0; c < 4; ++c)
      top_bytes.push_back(spread(f, unsigned32(f, bytes(f, raw, sc_at + 8 + c, 1)), s.full));
    const Value low_byte = by_index(f, half16, low_chunks);
    const Value low = bits(f, low_byte, shl(f, h, 2), 0xf);
    const Value top_idx = f.add(shl(f, mask(f, sub, 1), 1), half16);  // j % 4
    const Value h2 = shl(f, h, 1);
    const Value top_shift = shl(f, f.add(h2, shr(f, sub, 1)), 1);  // 2 (j / 4)
    const Value top = bits(f, by_index(f, top_idx, top_bytes), top_shift, 3);
    const Value code = f.or_(low, shl(f, top, 4));
    const Value scf = f.convert(f.subtract(code, splat(f, 32, code)), Elem::F32);
    const Value dl = f.multiply(d, scf);
    const Value qf = f.convert(q, Elem::F32);
    return f.multiply(dl, qf);
  } else {
    // scales[j] = scales[8h + l / 16 + 2s]: scale in the low nibble, min in the high one.
    std::vector<Value> sc_chunks;
    for (int64_t c = 0; c < 4; ++c)
      sc_chunks.push_back(along(f, bytes(f, raw, sc_at + 8 * (c / 2) + c % 2, 4, 2), s.full, 1));
    const Value h2 = shl(f, h, 1);
    const Value sb = unsigned32(f, by_index(f, f.add(h2, half16), sc_chunks));
    const Value scf = f.convert(mask(f, sb, 0xf), Elem::F32);
    const Value mf = f.convert(shr(f, sb, 4), Elem::F32);
    const Value dl = f.multiply(d, scf);
    const Value dmin = spread(f, half(f, raw, SKAINET_FIELD(B, dmin).offset), s.full);
    const Value ml = f.multiply(dmin, mf);
    const Value qf = f.convert(q, Elem::F32);
    const Value dq = f.multiply(dl, qf);
    return f.subtract(dq, ml);
  }
}

// IQ4_XS: [8, 2, 2, 8] = element 32ib + 16h + 8jh + jl: d * (ls[ib] - 32) * level(nibble h of
// qs[16ib + 8jh + jl]); ls[ib] the 4 bits of nibble ib % 2 of scales_l[ib / 2] and bits 2ib, 2ib+1 of
// scales_h on top. qs spans 8 runs of 16 bytes: sliced per run it would take 8 operands (IREE fuses no
// more than 16), so the raw bytes are viewed as [rows, blocks, 17, 8] (a reshape of the parameter
// itself, which IREE folds into the load) and qs read as two strided 2-D slices, one per jh.
Value iq4_xs(FunctionBuilder& f, const Value& raw) {
  using B = BlockIQ4_XS;
  const Shape s = check_packed(B::kType, raw, block_inner_dims(B::kType));
  const int64_t qs_at = SKAINET_FIELD(B, qs).offset;
  static_assert(offsetof(B, qs) % 8 == 0 && sizeof(B) % 8 == 0);
  const Value view = f.reshape(raw, {s.rows, s.blocks, static_cast<int64_t>(sizeof(B)) / 8, 8});
  std::vector<Value> chunks;
  for (int64_t jh = 0; jh < 2; ++jh) {
    const int64_t first = qs_at / 8 + jh;  // row 1 + 2ib + jh of the view
    const Value sl = f.slice(view, {0, 0, first, 0}, {s.rows, s.blocks, first + 2 * 7 + 1, 8}, {1, 1, 2, 1});
    chunks.push_back(f.broadcast_in_dim(sl, s.full, {0, 1, 2, 5}));
  }
  const Value qs = by_index(f, at(f, s.full, 2), chunks);
  const Value q = bits(f, qs, shl(f, at(f, s.full, 1, Elem::I8), 2), 0xf);
  const Value lv = levels(f, q, kIq4nlValues);
  const std::vector<int64_t> sub{s.rows, s.blocks, 8};
  const Value sib = at(f, sub, 0);
  const Value wl = spread(f, word(f, raw, SKAINET_FIELD(B, scales_l).offset, 4), sub);
  const Value wh = spread(f, word(f, raw, SKAINET_FIELD(B, scales_h).offset, 2), sub);
  const Value low = bits(f, wl, shl(f, sib, 2), 0xf);
  const Value high = bits(f, wh, shl(f, sib, 1), 3);
  const Value ls = f.or_(low, shl(f, high, 4));
  const Value lsf = f.convert(f.subtract(ls, splat(f, 32, ls)), Elem::F32);  // [rows, blocks, 8]
  const Value dl = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d).offset), sub), lsf);
  return f.multiply(spread(f, dl, s.full), lv);
}

#undef SKAINET_FIELD

// One row per packed format with a StableHLO form: the element order inside a block (the inner dims
// of the blocked form) and the function that builds it. A format without a row is not exported.
struct BlockRule {
  GgmlType type;
  std::vector<int64_t> inner;
  Value (*build)(FunctionBuilder& f, const Value& raw);
};

const BlockRule* find_rule(GgmlType type) noexcept {
  static const BlockRule kRules[] = {
      {.type = GgmlType::Q8_0, .inner = {32}, .build = &q8_0},
      {.type = GgmlType::Q4_0, .inner = {2, 16}, .build = &legacy<BlockQ4_0>},
      {.type = GgmlType::Q4_1, .inner = {2, 16}, .build = &legacy<BlockQ4_1>},
      {.type = GgmlType::Q5_0, .inner = {2, 16}, .build = &legacy<BlockQ5_0>},
      {.type = GgmlType::Q5_1, .inner = {2, 16}, .build = &legacy<BlockQ5_1>},
      {.type = GgmlType::IQ4_NL, .inner = {2, 16}, .build = &legacy<BlockIQ4_NL>},
      {.type = GgmlType::Q2_K, .inner = {2, 4, 32}, .build = &k_low<BlockQ2_K>},
      {.type = GgmlType::Q3_K, .inner = {2, 4, 32}, .build = &k_low<BlockQ3_K>},
      {.type = GgmlType::Q4_K, .inner = {4, 2, 32}, .build = &k4<BlockQ4_K>},
      {.type = GgmlType::Q5_K, .inner = {4, 2, 2, 16}, .build = &k4<BlockQ5_K>},
      {.type = GgmlType::Q6_K, .inner = {2, 4, 32}, .build = &q6_k},
      {.type = GgmlType::IQ4_XS, .inner = {8, 2, 2, 8}, .build = &iq4_xs},
      {.type = GgmlType::MXFP4, .inner = {2, 16}, .build = &legacy<BlockMXFP4>},
  };
  for (const BlockRule& r : kRules)
    if (r.type == type) return &r;
  return nullptr;
}

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
  if (!t.quantized)
    throw InvalidArgument(fmt::format("stablehlo::raw_type: {} is neither a float nor a packed type", t.name));
  const int64_t n = t.block_elements;
  if (cols % n != 0)
    throw InvalidArgument(
        fmt::format("stablehlo::raw_type: {} columns of {} are not whole blocks of {}", cols, t.name, n));
  return TensorType::of({rows, cols / n, static_cast<int64_t>(t.block_bytes)}, Elem::I8);
}

bool can_dequantize(GgmlType type) noexcept { return dense_elem(type) || find_rule(type); }

std::vector<int64_t> block_inner_dims(GgmlType type) {
  if (const BlockRule* r = find_rule(type)) return r->inner;
  throw InvalidArgument(fmt::format("stablehlo::block_inner_dims: {} has no blocked StableHLO form", type_name(type)));
}

Value dequantize_blocks(FunctionBuilder& f, GgmlType type, const Value& raw) {
  if (const BlockRule* r = find_rule(type)) return r->build(f, raw);
  throw InvalidArgument(fmt::format("stablehlo::dequantize_blocks: {} has no blocked StableHLO form", type_name(type)));
}

Value dequantize(FunctionBuilder& f, GgmlType type, const Value& raw) {
  if (dense_elem(type)) return f.convert(check_dense(type, raw), Elem::F32);
  const Value y = dequantize_blocks(f, type, raw);
  return f.reshape(y, {y.type.dims[0], y.type.numel() / y.type.dims[0]});
}

Value matvec(FunctionBuilder& f, GgmlType type, const Value& raw, const Value& x) {
  const bool dense = dense_elem(type).has_value();
  const int64_t cols =
      dense ? check_dense(type, raw).type.dims[1]
            : check_packed(type, raw, {}).blocks * static_cast<int64_t>(type_traits(type).block_elements);
  if (x.type.elem != Elem::F32 || x.type.dims != std::vector<int64_t>{cols})
    throw InvalidArgument(
        fmt::format("stablehlo::matvec {}: x must be tensor<{}xf32>, got {}", type_name(type), cols, x.type.str()));
  if (dense) {
    // Measured equal to convert + multiply + reduce (both one matvec dispatch reading the weight once);
    // the named contraction is what every IREE backend has a matvec strategy for.
    const Value w = f.convert(raw, Elem::F32);
    return f.dot_general(w, x, {}, {}, {1}, {0}, TensorType::of({w.type.dims[0]}, Elem::F32));
  }
  const Value w = dequantize_blocks(f, type, raw);
  const std::vector<int64_t> per_row(w.type.dims.begin() + 1, w.type.dims.end());
  const Value xr = f.reshape(x, per_row);
  const Value xb = f.broadcast_in_dim(xr, w.type.dims, iota_list(1, static_cast<int64_t>(per_row.size())));
  const Value p = f.multiply(w, xb);
  return f.reduce_sum(p, iota_list(1, static_cast<int64_t>(per_row.size())));
}

}  // namespace skainet::stablehlo
