#include <gtest/gtest.h>

#include "skainet/core/tensor.hpp"

using namespace skainet;

namespace {

Tensor iota(const Shape& s) {
  auto st = Storage::heap(contiguous_bytes(s, GgmlType::F32), "iota");
  Tensor t(st, s, GgmlType::F32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < s.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

float at2(const Tensor& t, int64_t i, int64_t j) {
  return *reinterpret_cast<const float*>(t.bytes() + i * t.stride(0) + j * t.stride(1));
}

}  // namespace

TEST(Shape, FromGgmlReversesAndChecks) {
  const uint64_t ne[] = {64, 512};
  EXPECT_EQ(Shape::from_ggml(ne), (Shape{512, 64}));
  EXPECT_EQ((Shape{2, 3, 5}).numel(), 30);
  EXPECT_EQ((Shape{}).numel(), 1);
  EXPECT_EQ((Shape{2, 3}).to_string(), "[2, 3]");
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), InvalidArgument);
  EXPECT_THROW((Shape{2, -1}), InvalidArgument);
}

TEST(Tensor, ContiguousStridesAreBytes) {
  Tensor t = iota(Shape{3, 5, 7});
  EXPECT_EQ(t.stride(0), 140);
  EXPECT_EQ(t.stride(1), 28);
  EXPECT_EQ(t.stride(2), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 420u);
  EXPECT_EQ(t.format(), (Format{DType::F32, Encoding::Dense}));
}

TEST(Tensor, NarrowSelectTransposeAreZeroCopy) {
  Tensor t = iota(Shape{6, 10});
  Tensor n = t.narrow(1, 3, 5).narrow(0, 2, 3);
  EXPECT_EQ(n.shape(), (Shape{3, 5}));
  EXPECT_EQ(n.offset(), (2 * 10 + 3) * 4u);
  EXPECT_EQ(n.storage_ref(), t.storage_ref());
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(at2(n, 1, 4), 37.0f);
  Tensor tr = n.transpose(0, 1);
  EXPECT_EQ(tr.shape(), (Shape{5, 3}));
  EXPECT_EQ(at2(tr, 4, 1), 37.0f);
  Tensor r = t.row(4);
  EXPECT_EQ(r.shape(), (Shape{10}));
  EXPECT_EQ(r.data<float>()[9], 49.0f);
  Tensor c = t.select(1, 2);
  EXPECT_EQ(c.shape(), (Shape{6}));
  EXPECT_EQ(c.stride(0), 40);
  EXPECT_THROW(t.narrow(0, 4, 3), InvalidArgument);
  EXPECT_THROW(t.select(0, 6), InvalidArgument);
}

TEST(Tensor, ReshapeOnlyWhenContiguous) {
  Tensor t = iota(Shape{4, 6});
  Tensor r = t.reshape(Shape{2, 3, 4});
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(r.storage_ref(), t.storage_ref());
  EXPECT_THROW(t.reshape(Shape{5, 5}), InvalidArgument);
  EXPECT_THROW(t.transpose(0, 1).reshape(Shape{24}), InvalidArgument);
  // Narrowing whole rows keeps contiguity.
  Tensor rows = t.rows(1, 2).reshape(Shape{12});
  EXPECT_EQ(rows.data<float>()[0], 6.0f);
}

TEST(Tensor, PackedRowViewsAreBlockAligned) {
  // Q8_0: 34 bytes per 32 elements; a [5, 96] weight has 102-byte rows.
  const Shape s{5, 96};
  auto st = Storage::heap(contiguous_bytes(s, GgmlType::Q8_0), "w");
  Tensor w(st, s, GgmlType::Q8_0);
  EXPECT_TRUE(w.packed());
  EXPECT_EQ(w.row_bytes(), 102u);
  EXPECT_EQ(w.stride(0), 102);
  EXPECT_EQ(w.format(), (Format{DType::F32, Encoding::Q8_0}));
  Tensor r = w.row(3);
  EXPECT_EQ(r.offset(), 306u);
  EXPECT_EQ(r.shape(), (Shape{96}));
  Tensor blocks = w.narrow(1, 32, 64);
  EXPECT_EQ(blocks.offset(), 34u);
  EXPECT_EQ(blocks.row_bytes(), 68u);
  EXPECT_THROW(w.narrow(1, 16, 32), InvalidArgument);  // mid-block
  EXPECT_THROW(w.transpose(0, 1), InvalidArgument);
  EXPECT_THROW(w.select(1, 0), InvalidArgument);
  EXPECT_THROW(Tensor(st, Shape{5, 40}, GgmlType::Q8_0), InvalidArgument);  // not whole blocks
  EXPECT_THROW(w.data<float>(), InvalidArgument);                           // typed access to packed bytes
  EXPECT_NO_THROW(w.bytes());
}

TEST(Tensor, ViewsMustFitAndAlign) {
  auto st = Storage::heap(64, "small");
  EXPECT_THROW(Tensor(st, Shape{17}, GgmlType::F32), InvalidArgument);
  EXPECT_THROW(Tensor(st, Shape{4}, GgmlType::F32, 2), InvalidArgument);  // misaligned float
  EXPECT_NO_THROW(Tensor(st, Shape{2}, GgmlType::F16, 2));
  EXPECT_NO_THROW(Tensor(st, Shape{0}, GgmlType::F32, 64));
  Strides strides{32, 4, 0, 0};
  EXPECT_NO_THROW(Tensor(st, Shape{2, 8}, strides, GgmlType::F32, 0));
  EXPECT_THROW(Tensor(st, Shape{3, 8}, strides, GgmlType::F32, 0), InvalidArgument);
}

TEST(Tensor, DescribeNamesStorageAndOrigin) {
  auto st = Storage::heap(64, "blk.3.ffn_up");
  Tensor t(st, Shape{4, 4}, GgmlType::F32);
  const std::string d = t.narrow(0, 1, 2).describe();
  EXPECT_NE(d.find("blk.3.ffn_up"), std::string::npos);
  EXPECT_NE(d.find("+16"), std::string::npos);
}
