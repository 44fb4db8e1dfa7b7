// A file with tensors of types nothing here reads or decodes is refused before any decision, naming
// every such tensor (not only the first) and the types that are supported.
#include <algorithm>

#include <gtest/gtest.h>

#include "gguf_builder.hpp"
#include "skainet/model/plan.hpp"
#include "temp_dir.hpp"

using namespace skainet;

namespace {

constexpr uint32_t kIQ2_XXS = 16, kTQ1_0 = 34;

TEST(UnsupportedTypes, PlanNamesEveryTensorAndTheSupportedTypes) {
  test::TempDir dir("unsupported");
  test::GgufBuilder b;
  b.header(3, 4, 1).kv_u32("general.alignment", 32);
  b.tensor_info("blk.0.attn_q.weight", {256, 2}, kIQ2_XXS, 0);      // 132 bytes
  b.tensor_info("blk.0.attn_k.weight", {256, 1}, kTQ1_0, 160);      // 54
  b.tensor_info("blk.0.attn_norm.weight", {256}, test::kF32, 224);  // 1024
  b.tensor_info("blk.0.attn_v.weight", {256, 1}, kIQ2_XXS, 1248);   // 66
  b.pad_to(32).zeros(1344);
  const auto path = dir.path() / "iq2.gguf";
  test::write_file(path, b.bytes());

  try {
    plan::make_plan(gguf::read_header(path), placement::MemoryProfile::preset("default"), placement::Platform::detect(),
                    {}, {});
    FAIL() << "planned a file with IQ2_XXS and TQ1_0 tensors";
  } catch (const placement::UnsupportedTypesError& e) {
    const std::vector<placement::UnsupportedTensor> want = {{"blk.0.attn_q.weight", GgmlType::IQ2_XXS},
                                                            {"blk.0.attn_k.weight", GgmlType::TQ1_0},
                                                            {"blk.0.attn_v.weight", GgmlType::IQ2_XXS}};
    EXPECT_EQ(e.tensors(), want);
    const auto& s = e.supported();
    for (GgmlType t :
         {GgmlType::F32, GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS})
      EXPECT_NE(std::find(s.begin(), s.end(), t), s.end()) << type_name(t);
    EXPECT_EQ(std::find(s.begin(), s.end(), GgmlType::IQ2_XXS), s.end());
    EXPECT_NE(e.message().find(path.string()), std::string::npos) << "names the file: " << e.message();
  }
}

}  // namespace
