// Value helpers and the Header's typed getters.
#include <gtest/gtest.h>

#include "skainet/io/gguf.hpp"

namespace skainet::gguf {
namespace {

Header sample() {
  Header h;
  h.path = "sample.gguf";
  h.metadata = {
      {"u8", Value::of(ValueType::UInt8, uint8_t{7})},   {"i64", Value::of(ValueType::Int64, int64_t{1} << 40)},
      {"neg", Value::of(ValueType::Int32, int32_t{-1})}, {"u64_small", Value::of(ValueType::UInt64, uint64_t{12})},
      {"f64", Value::of(ValueType::Float64, 0.5)},       {"name", Value::string("llama")},
      {"flag", Value::of(ValueType::Bool, true)},        {"list", Value::array(ValueType::UInt32, {1u})},
  };
  for (size_t i = 0; i < h.metadata.size(); ++i) h.key_index.emplace(h.metadata[i].key, i);
  return h;
}

FormatErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no FormatError";
  return FormatErrorKind::Truncated;
}

TEST(GgufValue, TypedGetters) {
  const Header h = sample();
  EXPECT_EQ(h.get_u32("u8"), 7u);
  EXPECT_EQ(h.get_u32("u64_small"), 12u);
  EXPECT_EQ(h.get_f32("f64"), 0.5f);
  EXPECT_EQ(h.get_f32("u8"), 7.0f);
  EXPECT_EQ(h.get_string("name"), "llama");
  EXPECT_EQ(h.find_u32("missing"), std::nullopt);
  EXPECT_EQ(h.find_f32("missing"), std::nullopt);
  EXPECT_EQ(h.find_u32("u8"), 7u);
  EXPECT_EQ(kind_of([&] { h.get_u32("missing"); }), FormatErrorKind::MissingKey);
  EXPECT_EQ(kind_of([&] { h.get_u32("i64"); }), FormatErrorKind::WrongValueType);  // out of range
  EXPECT_EQ(kind_of([&] { h.get_u32("neg"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.get_u32("f64"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.get_u32("flag"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.get_u32("list"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.get_f32("name"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.get_string("u8"); }), FormatErrorKind::WrongValueType);
  EXPECT_EQ(kind_of([&] { h.find_u32("name"); }), FormatErrorKind::WrongValueType);
  try {
    h.get_u32("neg");
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("sample.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("'neg'"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
  }
}

TEST(GgufValue, FindWithoutIndexFallsBack) {
  Header h = sample();
  h.key_index.clear();
  EXPECT_EQ(h.get_u32("u8"), 7u);
  EXPECT_EQ(h.find("nothing"), nullptr);
}

TEST(GgufValue, ScalarHelpers) {
  EXPECT_EQ(as_int(Scalar{uint8_t{200}}), 200);
  EXPECT_EQ(as_int(Scalar{int8_t{-5}}), -5);
  EXPECT_EQ(as_int(Scalar{uint64_t{1} << 63}), std::nullopt);
  EXPECT_EQ(as_int(Scalar{int64_t{-1} << 62}), int64_t{-1} << 62);
  EXPECT_EQ(as_int(Scalar{1.0f}), std::nullopt);
  EXPECT_EQ(as_int(Scalar{true}), std::nullopt);
  EXPECT_EQ(as_int(Scalar{std::string("1")}), std::nullopt);
  EXPECT_EQ(as_double(Scalar{uint32_t{3}}), 3.0);
  EXPECT_EQ(as_double(Scalar{0.25f}), 0.25);
  EXPECT_EQ(as_double(Scalar{std::string("x")}), std::nullopt);
  EXPECT_EQ(to_string(Scalar{uint8_t{65}}), "65");
  EXPECT_EQ(to_string(Scalar{int8_t{-3}}), "-3");
  EXPECT_EQ(to_string(Scalar{false}), "false");
  EXPECT_EQ(to_string(Scalar{1e-5f}), "1e-05");
  EXPECT_EQ(to_string(Scalar{std::string("hi")}), "hi");
  EXPECT_EQ(value_type_name(ValueType::Float64), "float64");
  EXPECT_EQ(value_type_name(ValueType::Array), "array");
  EXPECT_EQ(error_kind_name(FormatErrorKind::BigEndian), "BigEndian");
  EXPECT_EQ(error_kind_name(FormatErrorKind::WrongValueType), "WrongValueType");
}

}  // namespace
}  // namespace skainet::gguf
