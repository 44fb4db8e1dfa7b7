// Hostile tensor tables: types, dimensions, sizes, offsets, alignment, overlaps.
#include <functional>
#include <limits>

#include "malformed/malformed_support.hpp"

namespace skainet::test {
namespace {

using gguf::FormatErrorKind;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// A v3 file with the tensor infos written by `infos`, default alignment, and `data` bytes of data.
std::vector<uint8_t> tensors(uint64_t count, const std::function<void(GgufBuilder&)>& infos, size_t data = 64,
                             uint64_t n_kv = 0, const std::function<void(GgufBuilder&)>& kvs = {}) {
  GgufBuilder b;
  b.header(3, count, n_kv);
  if (kvs) kvs(b);
  infos(b);
  b.pad_to(32).zeros(data);
  return b.bytes();
}

std::vector<uint8_t> one_tensor(std::initializer_list<uint64_t> dims, uint32_t type, uint64_t offset = 0,
                                size_t data = 64) {
  return tensors(
      1, [&](GgufBuilder& b) { b.tensor_info("blk.0.w", dims, type, offset); }, data);
}

// general.alignment written by `value` (type id and payload), one tensor at offset 0.
std::vector<uint8_t> with_alignment(const std::function<void(GgufBuilder&)>& value) {
  return tensors(
      1, [](GgufBuilder& b) { b.tensor_info("w", {8}, kF32, 0); }, 256, 1,
      [&](GgufBuilder& b) {
        b.str("general.alignment");
        value(b);
      });
}

class TensorCases : public MalformedTest {};

TEST_F(TensorCases, UnknownAndRetiredTypeIds) {
  for (uint32_t t : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu})
    expect_kind("type_" + std::to_string(t), one_tensor({32}, t), FormatErrorKind::UnknownTensorType, {"blk.0.w"});
}

TEST_F(TensorCases, BadDimensionCounts) {
  auto dims = [](uint32_t n) {
    return tensors(1, [=](GgufBuilder& b) {
      b.str("blk.0.w").u32(n);
      for (uint32_t i = 0; i < std::min(n, 8u); ++i) b.u64(1);
      b.u32(kF32).u64(0);
    });
  };
  expect_kind("ndims_0", dims(0), FormatErrorKind::BadDimensions, {"blk.0.w"});
  expect_kind("ndims_5", dims(5), FormatErrorKind::BadDimensions, {"blk.0.w"});
  expect_kind("ndims_max", dims(0xffffffffu), FormatErrorKind::BadDimensions, {"blk.0.w"});
}

TEST_F(TensorCases, ZeroSizedDimension) {
  expect_kind("dim0_zero", one_tensor({0, 4}, kF32), FormatErrorKind::BadDimensions, {"blk.0.w"});
  expect_kind("dim1_zero", one_tensor({4, 0}, kF32), FormatErrorKind::BadDimensions, {"blk.0.w"});
}

TEST_F(TensorCases, DimensionOverflow) {
  constexpr uint64_t k32 = uint64_t{1} << 32, k31 = uint64_t{1} << 31;
  expect_kind("elements_2e65", one_tensor({k32, k32, 2}, kF32), FormatErrorKind::DimensionOverflow, {"blk.0.w"});
  expect_kind("bytes_2e64", one_tensor({k31, k31}, kF32), FormatErrorKind::DimensionOverflow, {"blk.0.w"});
  expect_kind("row_bytes_overflow", one_tensor({kMax}, kF16), FormatErrorKind::DimensionOverflow, {"blk.0.w"});
  expect_kind("four_dims", one_tensor({1u << 16, 1u << 16, 1u << 16, 1u << 16}, kF32),
              FormatErrorKind::DimensionOverflow, {"blk.0.w"});
}

TEST_F(TensorCases, InnermostDimensionNotAMultipleOfTheBlock) {
  expect_kind("q4_0_33", one_tensor({33, 2}, kQ4_0), FormatErrorKind::BlockMismatch, {"blk.0.w"});
  expect_kind("q8_0_16", one_tensor({16}, kQ8_0), FormatErrorKind::BlockMismatch, {"blk.0.w"});
  expect_kind("q4_k_128", one_tensor({128, 4}, kQ4_K), FormatErrorKind::BlockMismatch, {"blk.0.w"});
}

TEST_F(TensorCases, OffsetsPastTheEnd) {
  expect_kind("offset_1mib", one_tensor({8}, kF32, 1u << 20), FormatErrorKind::DataOutOfBounds, {"blk.0.w"});
  // data_offset + offset wraps around 2^64 if added unchecked
  expect_kind("offset_wraps", one_tensor({8}, kF32, kMax - 31), FormatErrorKind::DataOutOfBounds, {"blk.0.w"});
  expect_kind("second_past_end",
              tensors(2,
                      [](GgufBuilder& b) {
                        b.tensor_info("first.weight", {8}, kF32, 0).tensor_info("second.weight", {8}, kF32, 4096);
                      }),
              FormatErrorKind::DataOutOfBounds, {"second.weight"});
}

TEST_F(TensorCases, MisalignedOffsets) {
  expect_kind("offset_4",
              tensors(2,
                      [](GgufBuilder& b) {
                        b.tensor_info("first.weight", {1}, kF32, 0).tensor_info("second.weight", {1}, kF32, 4);
                      }),
              FormatErrorKind::MisalignedOffset, {"second.weight"});
  expect_kind("offset_32_of_64",
              tensors(
                  2,
                  [](GgufBuilder& b) {
                    b.tensor_info("first.weight", {8}, kF32, 0).tensor_info("second.weight", {8}, kF32, 32);
                  },
                  256, 1, [](GgufBuilder& b) { b.kv_u32("general.alignment", 64); }),
              FormatErrorKind::MisalignedOffset, {"second.weight"});
}

TEST_F(TensorCases, BadAlignmentValues) {
  expect_kind("align_0", with_alignment([](GgufBuilder& b) { b.u32(kTypeU32).u32(0); }), FormatErrorKind::BadAlignment,
              {"general.alignment"});
  expect_kind("align_3", with_alignment([](GgufBuilder& b) { b.u32(kTypeU32).u32(3); }), FormatErrorKind::BadAlignment,
              {"general.alignment"});
  expect_kind("align_48", with_alignment([](GgufBuilder& b) { b.u32(kTypeU32).u32(48); }),
              FormatErrorKind::BadAlignment, {"general.alignment"});
  expect_kind("align_u64", with_alignment([](GgufBuilder& b) { b.u32(kTypeU64).u64(32); }),
              FormatErrorKind::BadAlignment, {"general.alignment"});
  expect_kind("align_i32", with_alignment([](GgufBuilder& b) { b.u32(kTypeI32).i32(32); }),
              FormatErrorKind::BadAlignment, {"general.alignment"});
  expect_kind("align_string", with_alignment([](GgufBuilder& b) { b.u32(kTypeString).str("32"); }),
              FormatErrorKind::BadAlignment, {"general.alignment"});
  expect_kind("align_array", with_alignment([](GgufBuilder& b) { b.u32(kTypeArray).u32(kTypeU32).u64(1).u32(32); }),
              FormatErrorKind::BadAlignment, {"general.alignment"});
}

TEST_F(TensorCases, CustomAlignmentIsHonoured) {
  GgufBuilder b;
  b.header(3, 2, 1).kv_u32("general.alignment", 64);
  b.tensor_info("a", {8}, kF32, 0).tensor_info("b", {8}, kF32, 64).pad_to(64);
  const uint64_t data_offset = b.size();
  b.zeros(96);
  const gguf::Header h = gguf::read_header(write("align_64.gguf", b.bytes()));
  EXPECT_EQ(h.alignment, 64u);
  EXPECT_EQ(h.data_offset, data_offset);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[1].file_offset, data_offset + 64);
}

TEST_F(TensorCases, DuplicateTensorNames) {
  expect_kind(
      "dup_tensor",
      tensors(2,
              [](GgufBuilder& b) {
                b.tensor_info("blk.0.attn_q.weight", {8}, kF32, 0).tensor_info("blk.0.attn_q.weight", {8}, kF32, 32);
              }),
      FormatErrorKind::DuplicateTensor, {"blk.0.attn_q.weight"});
}

TEST_F(TensorCases, OverlappingTensors) {
  expect_kind("same_offset",
              tensors(2, [](GgufBuilder& b) { b.tensor_info("a", {8}, kF32, 0).tensor_info("b", {8}, kF32, 0); }),
              FormatErrorKind::OverlappingTensors);
  expect_kind("partial",
              tensors(2, [](GgufBuilder& b) { b.tensor_info("a", {16}, kF32, 0).tensor_info("b", {8}, kF32, 32); }),
              FormatErrorKind::OverlappingTensors);
  // Listed in the opposite order of their data: the check must not rely on file order.
  expect_kind("reversed",
              tensors(
                  3,
                  [](GgufBuilder& b) {
                    b.tensor_info("c", {8}, kF32, 96).tensor_info("b", {16}, kF32, 32).tensor_info("a", {16}, kF32, 0);
                  },
                  128),
              FormatErrorKind::OverlappingTensors);
}

TEST_F(TensorCases, OutOfOrderTensorsThatDoNotOverlapAreValid) {
  const auto path = write("out_of_order.gguf", tensors(2, [](GgufBuilder& b) {
                            b.tensor_info("late", {8}, kF32, 32).tensor_info("early", {8}, kF32, 0);
                          }));
  const gguf::Header h = gguf::read_header(path);
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "late");
  EXPECT_EQ(h.tensors[0].offset, 32u);
}

TEST_F(TensorCases, DataBoundsCheckCanBeTurnedOff) {
  const auto path = write("past_end.gguf", one_tensor({8}, kF32, 1u << 20));
  gguf::ReadOptions lax;
  lax.check_data_bounds = false;
  const gguf::Header h = gguf::read_header(path, lax);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].offset, uint64_t{1} << 20);
}

}  // namespace
}  // namespace skainet::test
