// The text FunctionBuilder prints, its shape checks, and the raw types of packed weights.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "skainet/core/base.hpp"
#include "skainet/io/stablehlo.hpp"

namespace skainet::stablehlo {
namespace {

TensorType f32(std::vector<int64_t> dims) { return TensorType::of(std::move(dims), Elem::F32); }

TEST(StablehloBuilder, TypesPrintAsMlir) {
  EXPECT_EQ(f32({2, 64}).str(), "tensor<2x64xf32>");
  EXPECT_EQ(f32({}).str(), "tensor<f32>");
  EXPECT_EQ(TensorType::of({3, 2, 18}, Elem::I8).str(), "tensor<3x2x18xi8>");
  EXPECT_EQ(TensorType::of({4}, Elem::UI32).numel(), 4);
}

TEST(StablehloBuilder, WholeFunctionText) {
  FunctionBuilder f("main");
  const Value x = f.argument(f32({2, 4}));
  const Value w = f.global_load("blk.0.w", f32({4}));
  const Value y = f.multiply(x, f.broadcast_in_dim(w, {2, 4}, {1}));
  f.ret({y});
  EXPECT_EQ(f.text(),
            "  func.func @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>) {\n"
            "    %v0 = util.global.load @\"blk.0.w\" : tensor<4xf32>\n"
            "    %v1 = \"stablehlo.broadcast_in_dim\"(%v0) {broadcast_dimensions = array<i64: 1>} : "
            "(tensor<4xf32>) -> tensor<2x4xf32>\n"
            "    %v2 = \"stablehlo.multiply\"(%arg0, %v1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>\n"
            "    func.return %v2 : tensor<2x4xf32>\n"
            "  }\n");
}

TEST(StablehloBuilder, ReduceCarriesItsRegion) {
  FunctionBuilder f("r");
  const Value x = f.argument(f32({3, 5}));
  const Value s = f.reduce_sum(x, {1});
  EXPECT_EQ(s.type, f32({3}));
  f.ret({s});
  const std::string text = f.text();
  const std::string expected =
      "    %v0 = \"stablehlo.constant\"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>\n"
      "    %v1 = \"stablehlo.reduce\"(%arg0, %v0) ({\n"
      "      ^bb0(%v2: tensor<f32>, %v3: tensor<f32>):\n"
      "        %v4 = \"stablehlo.add\"(%v2, %v3) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "        \"stablehlo.return\"(%v4) : (tensor<f32>) -> ()\n"
      "    }) {dimensions = array<i64: 1>} : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>\n"
      "    func.return %v1 : tensor<3xf32>\n";
  EXPECT_NE(text.find(expected), std::string::npos) << text;
}

// The literal printed for a float constant, parsed back.
float literal_value(const Value& c, const std::string& text) {
  const std::string key = c.name + " = \"stablehlo.constant\"() {value = dense<";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << text;
  const std::string lit = text.substr(at + key.size(), text.find('>', at + key.size()) - at - key.size());
  if (lit.rfind("0x", 0) == 0) return std::bit_cast<float>(static_cast<uint32_t>(std::stoul(lit, nullptr, 16)));
  return std::strtof(lit.c_str(), nullptr);
}

TEST(StablehloBuilder, FloatConstantsAreExact) {
  FunctionBuilder f("c");
  const float values[] = {0.1f, 1.0f / 3.0f, 3.4028235e38f, 1.17549435e-38f, 1e-45f, -2.5f, 65504.0f};
  std::vector<Value> cs;
  for (float v : values) cs.push_back(f.constant_f32(v));
  const Value inf = f.constant_f32(-std::numeric_limits<float>::infinity(), {2});
  EXPECT_EQ(inf.type, f32({2}));
  f.ret({cs[0]});
  const std::string text = f.text();
  for (size_t i = 0; i < cs.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(literal_value(cs[i], text)), std::bit_cast<uint32_t>(values[i])) << values[i];
  EXPECT_EQ(literal_value(inf, text), -std::numeric_limits<float>::infinity());
}

TEST(StablehloBuilder, IntegerConstants) {
  FunctionBuilder f("k");
  const Value s = f.constant_i32(15, {2, 3}, Elem::I8);
  const Value n = f.constant_ints({0, 2, 4, 6, 8, 10}, {2, 3}, Elem::I8);
  EXPECT_EQ(s.type, TensorType::of({2, 3}, Elem::I8));
  EXPECT_THROW(f.constant_ints({1, 2, 3}, {2, 3}, Elem::I32), InvalidArgument);
  f.ret({f.and_(s, n)});
  const std::string text = f.text();
  EXPECT_NE(text.find("{value = dense<15> : tensor<2x3xi8>}"), std::string::npos) << text;
  EXPECT_NE(text.find("{value = dense<[[0, 2, 4], [6, 8, 10]]> : tensor<2x3xi8>}"), std::string::npos) << text;
}

TEST(StablehloBuilder, ShapeChecksThrow) {
  FunctionBuilder f("bad");
  const Value a = f.argument(f32({2, 3}));
  const Value b = f.argument(f32({3, 2}));
  const Value bytes = f.argument(TensorType::of({4, 3}, Elem::I8));
  EXPECT_THROW(f.add(a, b), InvalidArgument);
  EXPECT_THROW(f.reshape(a, {5}), InvalidArgument);
  EXPECT_THROW(f.broadcast_in_dim(a, {2, 4}, {0, 1}), InvalidArgument);
  EXPECT_THROW(f.broadcast_in_dim(a, {2, 3}, {0}), InvalidArgument);
  EXPECT_THROW(f.slice(a, {0, 0}, {3, 3}), InvalidArgument);
  EXPECT_THROW(f.slice(a, {0}, {2}), InvalidArgument);
  EXPECT_THROW(f.bitcast_convert(bytes, Elem::F16), InvalidArgument);  // last dim 3, not 2
  EXPECT_THROW(f.concatenate({}, 0), InvalidArgument);
  EXPECT_THROW(f.text(), InvalidArgument);  // no return yet
  f.add(a, a);
  EXPECT_THROW(f.argument(f32({1})), InvalidArgument) << "arguments after ops";
}

TEST(StablehloBuilder, ShapesOfShapeOps) {
  FunctionBuilder f("s");
  const Value bytes = f.argument(TensorType::of({5, 3, 4}, Elem::I8));
  EXPECT_EQ(f.bitcast_convert(bytes, Elem::UI32).type, TensorType::of({5, 3}, Elem::UI32));
  EXPECT_EQ(f.bitcast_convert(f.slice(bytes, {0, 0, 0}, {5, 3, 2}), Elem::F16).type, TensorType::of({5, 3}, Elem::F16));
  EXPECT_EQ(f.slice(bytes, {0, 1, 0}, {5, 3, 4}, {2, 1, 3}).type, TensorType::of({3, 2, 2}, Elem::I8));
  EXPECT_EQ(f.concatenate({bytes, bytes}, 2).type, TensorType::of({5, 3, 8}, Elem::I8));
  EXPECT_EQ(f.slice(bytes, {0, 0, 0}, {5, 3, 4}).name, bytes.name) << "a whole slice is the value itself";
  const Value ids = f.constant_ints({2, 0}, {2}, Elem::I32);
  EXPECT_EQ(f.gather_rows(bytes, ids).type, TensorType::of({2, 3, 4}, Elem::I8));
}

TEST(StablehloRaw, TypesOfCarriedWeights) {
  EXPECT_EQ(raw_type(GgmlType::F16, 3, 37), TensorType::of({3, 37}, Elem::F16));
  EXPECT_EQ(raw_type(GgmlType::BF16, 3, 37), TensorType::of({3, 37}, Elem::BF16));
  EXPECT_EQ(raw_type(GgmlType::F32, 1, 5), TensorType::of({1, 5}, Elem::F32));
  EXPECT_EQ(raw_type(GgmlType::Q4_0, 3, 96), TensorType::of({3, 3, 18}, Elem::I8));
  EXPECT_EQ(raw_type(GgmlType::Q8_0, 7, 64), TensorType::of({7, 2, 34}, Elem::I8));
  EXPECT_EQ(raw_type(GgmlType::Q4_K, 2, 512), TensorType::of({2, 2, 144}, Elem::I8));
  EXPECT_EQ(raw_type(GgmlType::Q6_K, 2, 256), TensorType::of({2, 1, 210}, Elem::I8));
  EXPECT_EQ(raw_type(GgmlType::Q2_K, 1, 256), TensorType::of({1, 1, 84}, Elem::I8));
  EXPECT_THROW(raw_type(GgmlType::Q4_0, 3, 48), InvalidArgument);
  EXPECT_THROW(raw_type(GgmlType::Q4_K, 3, 32), InvalidArgument);
  EXPECT_THROW(raw_type(GgmlType::I32, 3, 32), InvalidArgument);
}

TEST(StablehloRaw, WhichFormatsDequantize) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                     GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4})
    EXPECT_TRUE(can_dequantize(t)) << type_name(t);
  for (GgmlType t : {GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::I8}) EXPECT_FALSE(can_dequantize(t)) << type_name(t);
}

TEST(StablehloRaw, DequantizeChecksTheRawType) {
  FunctionBuilder f("d");
  const Value q4 = f.argument(raw_type(GgmlType::Q4_0, 3, 64));
  const Value h = f.argument(raw_type(GgmlType::F16, 3, 64));
  const Value q8k = f.argument(raw_type(GgmlType::Q8_K, 1, 256));
  const Value x32 = f.argument(TensorType::of({32}, Elem::F32));
  const Value x64 = f.argument(TensorType::of({64}, Elem::F32));
  EXPECT_THROW(dequantize(f, GgmlType::Q8_0, q4), InvalidArgument);  // 18-byte blocks are not Q8_0's 34
  EXPECT_THROW(dequantize(f, GgmlType::BF16, h), InvalidArgument);
  EXPECT_THROW(dequantize(f, GgmlType::Q8_K, q8k), InvalidArgument);
  EXPECT_THROW(dequantize_blocks(f, GgmlType::F16, h), InvalidArgument);  // dense types have no blocks
  EXPECT_THROW(matvec(f, GgmlType::Q4_0, q4, x32), InvalidArgument);
  EXPECT_EQ(dequantize_blocks(f, GgmlType::Q4_0, q4).type, f32({3, 2, 2, 16}));
  EXPECT_EQ(matvec(f, GgmlType::Q4_0, q4, x64).type, f32({3}));
  EXPECT_EQ(matvec(f, GgmlType::F16, h, x64).type, f32({3}));
  EXPECT_EQ(dequantize(f, GgmlType::Q4_0, q4).type, f32({3, 64}));
  EXPECT_EQ(dequantize(f, GgmlType::F16, h).type, f32({3, 64}));
}

// The op count per weight stays small: it is emitted once per weight, many weights per module.
const std::vector<GgmlType> kPacked = {
    GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::IQ4_NL, GgmlType::Q2_K,
    GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::MXFP4};

TEST(StablehloRaw, DequantizationIsVectorised) {
  for (GgmlType t : kPacked) {
    FunctionBuilder small("a"), large("b");
    const int64_t cols = type_traits(t).block_elements * 4;
    const Value ys = dequantize(small, t, small.argument(raw_type(t, 2, cols)));
    const Value yl = dequantize(large, t, large.argument(raw_type(t, 4096, cols * 64)));
    small.ret({ys});
    large.ret({yl});
    const auto ops = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
    EXPECT_EQ(ops(small.text()), ops(large.text())) << type_name(t);
    EXPECT_LT(ops(small.text()), 250) << type_name(t);
  }
}

// The blocked form is what IREE fuses into the product's dispatch: it must hold only ops that lower
// to elementwise linalg on the raw bytes (a reshape, concatenate, gather, transpose or a bitcast that
// changes the element width between the bytes and the product keeps IREE from fusing, and makes it
// hoist a dequantized f32 copy of the weight into an initializer).
TEST(StablehloRaw, BlockedFormIsElementwise) {
  const std::vector<std::string> allowed = {
      "slice",      "broadcast_in_dim",    "constant", "convert",  "bitcast_convert", "and",     "or",
      "shift_left", "shift_right_logical", "add",      "subtract", "multiply",        "compare", "select",
      "iota"};
  for (GgmlType t : kPacked) {
    FunctionBuilder f("blocks");
    const int64_t cols = type_traits(t).block_elements * 3;
    const Value raw = f.argument(raw_type(t, 5, cols));
    const Value y = dequantize_blocks(f, t, raw);
    std::vector<int64_t> want{5, 3};
    for (int64_t d : block_inner_dims(t)) want.push_back(d);
    EXPECT_EQ(y.type, f32(want)) << type_name(t);
    f.ret({y});
    const std::string text = f.text();
    size_t at = 0, ops = 0;
    while ((at = text.find("\"stablehlo.", at)) != std::string::npos) {
      at += 11;
      const std::string name = text.substr(at, text.find('"', at) - at);
      ++ops;
      // A reshape of the raw bytes themselves (a view of the parameter, IQ4_XS) is folded into the
      // load; a reshape of anything computed is not.
      if (name == "reshape" && text.compare(text.find('(', at), 7, "(%arg0)") == 0) continue;
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), name), allowed.end())
          << type_name(t) << ": stablehlo." << name << " in the blocked form";
      if (name != "bitcast_convert") continue;
      // Same width only: (tensor<...xi16>) -> tensor<...xf16>, or MXFP4's E8M0 scale built as the bits
      // of an f32, (tensor<...xi32>) -> tensor<...xf32>.
      const size_t line_end = text.find('\n', at);
      const std::string line = text.substr(at, line_end - at);
      const bool halves =
          line.find("xi16>) -> tensor<") != std::string::npos && line.find("xf16>") != std::string::npos;
      const bool words = line.find("xi32>) -> tensor<") != std::string::npos && line.find("xf32>") != std::string::npos;
      EXPECT_TRUE(halves || (t == GgmlType::MXFP4 && words)) << type_name(t) << ": " << line;
    }
    EXPECT_GT(ops, 0u) << type_name(t);
    // The flat form adds exactly one reshape, the matvec one reduce and no dot_general.
    FunctionBuilder g("matvec");
    const Value w = g.argument(raw_type(t, 5, cols));
    const Value x = g.argument(TensorType::of({cols}, Elem::F32));
    g.ret({matvec(g, t, w, x)});
    const std::string mv = g.text();
    EXPECT_EQ(mv.find("dot_general"), std::string::npos) << type_name(t);
    size_t reduces = 0;
    for (size_t p = mv.find("stablehlo.reduce\""); p != std::string::npos; p = mv.find("stablehlo.reduce\"", p + 1))
      ++reduces;
    EXPECT_EQ(reduces, 1u) << type_name(t);
    EXPECT_NE(mv.find("stablehlo.reduce"), std::string::npos) << type_name(t);
    FunctionBuilder h("flat");
    h.ret({dequantize(h, t, h.argument(raw_type(t, 5, cols)))});
    const std::string flat = h.text();
    size_t reshapes = 0;
    for (size_t p = flat.find("stablehlo.reshape\"(%v"); p != std::string::npos;
         p = flat.find("stablehlo.reshape\"(%v", p + 1))
      ++reshapes;
    EXPECT_EQ(reshapes, 1u) << type_name(t);
  }
}

}  // namespace
}  // namespace skainet::stablehlo
