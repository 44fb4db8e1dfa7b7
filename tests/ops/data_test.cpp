#include <gtest/gtest.h>

#include "ops_test_util.hpp"

using namespace skainet;
using namespace skainet::test;
using memory::ExecutionContext;

TEST(Gather, RowsOfDenseAndPackedTables) {
  ExecutionContext ctx;
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  const Tensor dense = random_view(Shape{11, 19}, Layout::Offset, 1);
  const Tensor strided = random_view(Shape{11, 19}, Layout::Transposed, 2);
  const Tensor half = ops::convert(ctx, dense, GgmlType::F16);
  for (const Tensor& table : {dense, strided, half}) {
    const Tensor y = ops::gather_rows(ctx, table, ids);
    ASSERT_EQ(y.shape(), (Shape{5, 19}));
    for_each_index(y.shape(), [&](const Index& i) {
      ASSERT_EQ(get(y, i), get(table, {ids[static_cast<size_t>(i[0])], i[1]}));
    });
  }
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K}) {
    const Tensor table = random_packed(ctx, t, 11, type_traits(t).block_elements * 2, 3);
    const Tensor y = ops::gather_rows(ctx, table, ids);
    for (size_t r = 0; r < ids.size(); ++r) {
      const std::vector<float> ref = decode_row(table, ids[r]);
      for (int64_t j = 0; j < table.dim(1); ++j)
        ASSERT_EQ(get(y, {static_cast<int64_t>(r), j}), ref[static_cast<size_t>(j)]);
    }
  }
  const std::vector<int32_t> bad = {1, 11};
  EXPECT_THROW(ops::gather_rows(ctx, dense, bad), InvalidArgument);
}

TEST(Copy, ConvertsBetweenFormatsOnViews) {
  ExecutionContext ctx;
  const Tensor x = random_view(Shape{3, 5, 64}, Layout::Offset, 1);
  // F32 -> F16 -> F32 matches a per-element round trip.
  const Tensor h = ops::convert(ctx, x, GgmlType::F16);
  const Tensor back = ops::convert(ctx, h, GgmlType::F32);
  for_each_index(x.shape(), [&](const Index& i) {
    ASSERT_EQ(get(back, i), kernels::ref::fp16_to_fp32(kernels::ref::fp32_to_fp16(static_cast<float>(get(x, i)))));
  });
  // F32 -> Q8_0 -> F32 matches quantize_row/dequantize_row of each row.
  const Tensor q = ops::convert(ctx, x, GgmlType::Q8_0);
  const Tensor dq = ops::convert(ctx, q, GgmlType::F32);
  std::vector<std::byte> block(row_bytes(GgmlType::Q8_0, 64));
  std::vector<float> row(64), ref(64);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 5; ++b) {
      for (int64_t j = 0; j < 64; ++j) row[static_cast<size_t>(j)] = static_cast<float>(get(x, {a, b, j}));
      kernels::ref::quantize_row(GgmlType::Q8_0, row.data(), block.data(), 64);
      kernels::ref::dequantize_row(GgmlType::Q8_0, block.data(), ref.data(), 64);
      for (int64_t j = 0; j < 64; ++j) ASSERT_EQ(get(dq, {a, b, j}), ref[static_cast<size_t>(j)]);
    }
  // Copy into a strided destination (a KV cache slot, say).
  const Tensor src = random_view(Shape{4, 9}, Layout::Transposed, 2);
  const Tensor dst = random_view(Shape{6, 9}, Layout::Offset, 3).rows(1, 4);
  ops::copy(ctx, src, dst);
  EXPECT_EQ(max_abs_diff(src, dst), 0.0);
  EXPECT_THROW(ops::convert(ctx, q, GgmlType::F16), InvalidArgument);
  EXPECT_THROW(ops::convert(ctx, q, GgmlType::Q4_0), InvalidArgument);
}

TEST(Ops, RefuseDeadInputsAndReadOnlyOutputs) {
  ExecutionContext ctx;
  memory::ForwardScope fs({.slab_bytes = 1 << 12});
  Tensor dead;
  ctx.step(fs, [&] { dead = ctx.ones(Shape{4, 8}); });
  const Tensor w = random_view(Shape{3, 8}, Layout::Contiguous, 1);
  try {
    (void)ops::matmul(ctx, dead, w);
    FAIL();
  } catch (const StorageClosedException& e) {
    EXPECT_EQ(e.origin, "full");
    EXPECT_EQ(e.died_in_step, 1u);
    EXPECT_EQ(e.action, "ops::matmul");
  }
  EXPECT_THROW(ops::add(ctx, w, dead.rows(0, 3)), StorageClosedException);
  float buf[8] = {};
  const Tensor ro(Storage::borrow(buf, sizeof buf, false, "ro"), Shape{8}, GgmlType::F32);
  EXPECT_THROW(ops::copy(ctx, w.row(0), ro), InvalidArgument);
}
