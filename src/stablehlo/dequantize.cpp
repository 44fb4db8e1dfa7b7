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
#include <cstddef>
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

struct Shape {
  int64_t rows, blocks;
};

// The bytes of one field of every block: [rows, blocks, size] i8.
Value bytes(FunctionBuilder& f, const Value& raw, Field field) {
  const auto& d = raw.type.dims;
  return f.slice(raw, {0, 0, field.offset}, {d[0], d[1], field.offset + field.size});
}

// An f16 field of every block as f32: [rows, blocks].
Value half(FunctionBuilder& f, const Value& raw, Field field) {
  return f.convert(f.bitcast_convert(bytes(f, raw, field), Elem::F16), Elem::F32);
}

Value splat(FunctionBuilder& f, int32_t v, const Value& like) { return f.constant_i32(v, like.type.dims, like.type.elem); }
Value low_nibbles(FunctionBuilder& f, const Value& x) { return f.and_(x, splat(f, 0xf, x)); }
Value high_nibbles(FunctionBuilder& f, const Value& x) { return f.shift_right_logical(x, splat(f, 4, x)); }

// (bits >> shift) & mask << 4: the high bits above a nibble. `bits` and `shift` share a shape.
Value high_bits(FunctionBuilder& f, const Value& bits, const Value& shift, int32_t mask) {
  const Value shifted = f.shift_right_logical(bits, shift);
  const Value b = f.and_(shifted, splat(f, mask, bits));
  return f.shift_left(b, splat(f, 4, b));
}

// A per-block (or per-sub-block) scale [dims of s] spread over the trailing element dims of `like`.
Value spread(FunctionBuilder& f, const Value& s, const Value& like) {
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i < s.type.rank(); ++i) mapping.push_back(i);
  return f.broadcast_in_dim(s, like.type.dims, mapping);
}

Shape check_packed(GgmlType type, const Value& raw) {
  const TypeTraits& t = type_traits(type);
  const auto& d = raw.type.dims;
  if (raw.type.elem != Elem::I8 || d.size() != 3 || d[2] != static_cast<int64_t>(t.block_bytes))
    throw InvalidArgument(fmt::format("stablehlo::dequantize {}: expected tensor<rows x blocks x {} x i8>, got {}",
                                      t.name, t.block_bytes, raw.type.str()));
  return {d[0], d[1]};
}

// Q4_0, Q4_1, Q5_0, Q5_1: x = d * (q - offset) or d * q + m, 32 elements per block.
template <class B>
Value legacy(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasMin = requires(B b) { b.m; };
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  const Shape s = check_packed(B::kType, raw);
  const Value qs = bytes(f, raw, SKAINET_FIELD(B, qs));
  Value q = f.concatenate({low_nibbles(f, qs), high_nibbles(f, qs)}, 2);  // [rows, blocks, 32]
  if constexpr (kHasHigh) {
    const Field qh_field = SKAINET_FIELD(B, qh);
    const Value qh = f.broadcast_in_dim(bytes(f, raw, qh_field), {s.rows, s.blocks, qh_field.size, 8}, {0, 1, 2});
    const Value bit = f.iota(qh.type, 3);
    q = f.or_(q, f.reshape(high_bits(f, qh, bit, 1), {s.rows, s.blocks, B::kElements}));
  }
  if constexpr (!kHasMin) q = f.subtract(q, splat(f, kHasHigh ? 16 : 8, q));
  const Value qf = f.convert(q, Elem::F32);
  Value y = f.multiply(qf, spread(f, half(f, raw, SKAINET_FIELD(B, d)), qf));
  if constexpr (kHasMin) y = f.add(y, spread(f, half(f, raw, SKAINET_FIELD(B, m)), qf));
  return f.reshape(y, {s.rows, s.blocks * B::kElements});
}

Value q8_0(FunctionBuilder& f, const Value& raw) {
  const Shape s = check_packed(GgmlType::Q8_0, raw);
  const Value qf = f.convert(bytes(f, raw, SKAINET_FIELD(BlockQ8_0, qs)), Elem::F32);
  const Value y = f.multiply(qf, spread(f, half(f, raw, SKAINET_FIELD(BlockQ8_0, d)), qf));
  return f.reshape(y, {s.rows, s.blocks * BlockQ8_0::kElements});
}

// Q4_K / Q5_K: d * sc[j] * q - dmin * m[j] over 8 sub-blocks of 32.
template <class B>
Value k4(FunctionBuilder& f, const Value& raw) {
  constexpr bool kHasHigh = requires(B b) { b.qh; };
  constexpr int64_t kSub = 8, kSubElements = 32;
  const Shape s = check_packed(B::kType, raw);
  // The 12 scale bytes as three groups of 4: sub-blocks 0-3 keep sc and m in the low 6 bits of the
  // first two groups; sub-blocks 4-7 have their low 4 bits in the third group's nibbles and their
  // top 2 bits in the first two groups' bits 6-7.
  const Field scales = SKAINET_FIELD(B, scales);
  const Value lo_sc = bytes(f, raw, {scales.offset, 4});
  const Value lo_m = bytes(f, raw, {scales.offset + 4, 4});
  const Value packed = bytes(f, raw, {scales.offset + 8, 4});
  const Value six = splat(f, 6, lo_sc), four = splat(f, 4, lo_sc);
  const Value top_sc = f.shift_left(f.shift_right_logical(lo_sc, six), four);
  const Value top_m = f.shift_left(f.shift_right_logical(lo_m, six), four);
  const Value sc = f.concatenate({f.and_(lo_sc, splat(f, 63, lo_sc)), f.or_(low_nibbles(f, packed), top_sc)}, 2);
  const Value m = f.concatenate({f.and_(lo_m, splat(f, 63, lo_m)), f.or_(high_nibbles(f, packed), top_m)}, 2);
  const Value scf = f.convert(sc, Elem::F32), mf = f.convert(m, Elem::F32);  // [rows, blocks, 8]
  const Value d1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d)), scf), scf);
  const Value m1 = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, dmin)), mf), mf);

  // qs[32k + l] holds element 64k + l (low nibble, sub-block 2k) and 64k + 32 + l (high, 2k + 1).
  const Value qs = f.reshape(bytes(f, raw, SKAINET_FIELD(B, qs)), {s.rows, s.blocks, kSub / 2, kSubElements});
  Value q = f.reshape(f.concatenate({low_nibbles(f, qs), high_nibbles(f, qs)}, 3),
                      {s.rows, s.blocks, kSub, kSubElements});
  if constexpr (kHasHigh) {
    // Bit j of qh[l] is bit 4 of element l of sub-block j.
    const Value qh = f.broadcast_in_dim(bytes(f, raw, SKAINET_FIELD(B, qh)), q.type.dims, {0, 1, 3});
    q = f.or_(q, high_bits(f, qh, f.iota(qh.type, 2), 1));
  }
  const Value qf = f.convert(q, Elem::F32);
  const Value dq = f.multiply(spread(f, d1, qf), qf);
  const Value y = f.subtract(dq, spread(f, m1, qf));
  return f.reshape(y, {s.rows, s.blocks * B::kElements});
}

// Q6_K: d * scales[e / 16] * (q - 32), q of 6 bits from ql (low 4) and qh (high 2).
Value q6_k(FunctionBuilder& f, const Value& raw) {
  using B = BlockQ6_K;
  const Shape s = check_packed(B::kType, raw);
  // Element 128h + 32g + l: g = 0, 1 take the low nibbles of ql[64h + 32g + l], g = 2, 3 the high
  // nibbles of ql[64h + 32(g-2) + l]; its top two bits are bits 2g, 2g+1 of qh[32h + l].
  const Value ql = f.reshape(bytes(f, raw, SKAINET_FIELD(B, ql)), {s.rows, s.blocks, 2, 2, 32});
  Value q = f.concatenate({low_nibbles(f, ql), high_nibbles(f, ql)}, 3);  // [rows, blocks, 2, 4, 32]
  const Value qh = f.broadcast_in_dim(f.reshape(bytes(f, raw, SKAINET_FIELD(B, qh)), {s.rows, s.blocks, 2, 32}),
                                      q.type.dims, {0, 1, 2, 4});
  const Value shift = f.broadcast_in_dim(f.constant_ints({0, 2, 4, 6}, {4}, Elem::I8), q.type.dims, {3});
  q = f.or_(q, high_bits(f, qh, shift, 3));
  q = f.subtract(q, splat(f, 32, q));
  const Value qf = f.convert(f.reshape(q, {s.rows, s.blocks, B::kElements / 16, 16}), Elem::F32);
  const Value scf = f.convert(bytes(f, raw, SKAINET_FIELD(B, scales)), Elem::F32);  // [rows, blocks, 16]
  const Value ds = f.multiply(spread(f, half(f, raw, SKAINET_FIELD(B, d)), scf), scf);
  return f.reshape(f.multiply(spread(f, ds, qf), qf), {s.rows, s.blocks * B::kElements});
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
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

Value dequantize(FunctionBuilder& f, GgmlType type, const Value& raw) {
  if (const auto e = dense_elem(type)) {
    if (raw.type.elem != *e || raw.type.rank() != 2)
      throw InvalidArgument(fmt::format("stablehlo::dequantize {}: expected tensor<rows x cols x {}>, got {}",
                                        type_name(type), elem_name(*e), raw.type.str()));
    return f.convert(raw, Elem::F32);
  }
  switch (type) {
    case GgmlType::Q8_0: return q8_0(f, raw);
    case GgmlType::Q4_0: return legacy<BlockQ4_0>(f, raw);
    case GgmlType::Q4_1: return legacy<BlockQ4_1>(f, raw);
    case GgmlType::Q5_0: return legacy<BlockQ5_0>(f, raw);
    case GgmlType::Q5_1: return legacy<BlockQ5_1>(f, raw);
    case GgmlType::Q4_K: return k4<BlockQ4_K>(f, raw);
    case GgmlType::Q5_K: return k4<BlockQ5_K>(f, raw);
    case GgmlType::Q6_K: return q6_k(f, raw);
    default:
      throw InvalidArgument(fmt::format("stablehlo::dequantize: {} has no StableHLO form", type_name(type)));
  }
}

}  // namespace skainet::stablehlo
