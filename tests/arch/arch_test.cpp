// The architecture table: every family has a row, names parse back to their roles, and a shape
// written as metadata reads back equal.
#include <gtest/gtest.h>

#include "skainet/arch.hpp"

using namespace skainet;
using namespace skainet::arch;

TEST(Families, EveryFamilyHasOneRowAndItsOtherNamesFindIt) {
  for (Family f : {Family::Llama, Family::Qwen2, Family::Qwen3}) {
    const FamilyInfo& info = family_info(f);
    EXPECT_EQ(info.family, f);
    EXPECT_EQ(find_family(info.name), &info);
    for (std::string_view other : info.also) EXPECT_EQ(find_family(other), &info);
  }
  EXPECT_EQ(find_family("mistral")->family, Family::Llama);
  EXPECT_EQ(find_family("gemma"), nullptr);
  EXPECT_EQ(supported_architectures(), "llama, mistral, qwen2, qwen3");
}

TEST(Keys, AreTheArchitecturesOwn) {
  EXPECT_EQ(key("qwen2", Key::BlockCount), "qwen2.block_count");
  EXPECT_EQ(key("llama", Key::RmsEpsilon), "llama.attention.layer_norm_rms_epsilon");
  EXPECT_EQ(key("llama", Key::VocabSize), "llama.vocab_size");
}

TEST(TensorNames, ParseBackToTheirRoles) {
  EXPECT_EQ(parse_tensor_name("token_embd.weight"), (TensorName{std::nullopt, Role::TokenEmbedding}));
  EXPECT_EQ(parse_tensor_name("blk.12.ffn_down.weight"), (TensorName{12, Role::FfnDown}));
  EXPECT_EQ(parse_tensor_name(layer_tensor_name(7, Role::AttnKNorm)), (TensorName{7, Role::AttnKNorm}));
  EXPECT_FALSE(parse_tensor_name("blk.3.token_embd.weight"));  // a model tensor under a layer
  EXPECT_FALSE(parse_tensor_name("attn_q.weight"));            // a layer tensor without one
  EXPECT_FALSE(parse_tensor_name("blk.x.attn_q.weight"));
  EXPECT_FALSE(parse_tensor_name("blk.99999999999.attn_q.weight"));
  EXPECT_FALSE(parse_tensor_name("blk.1.ffn_down_exps.weight"));
  EXPECT_EQ(layer_of("blk.1.ffn_down_exps.weight"), 1u);
  EXPECT_FALSE(layer_of("output.weight"));
}

TEST(LayerTensors, FollowTheFamilysFeatures) {
  ModelShape s = ModelShape::of_family("qwen3");
  s.dim = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 32, s.ffn = 96, s.layers = 1;
  std::vector<Role> roles;
  for (const TensorSpec& t : layer_tensors(s)) roles.push_back(t.role);
  EXPECT_EQ(roles, (std::vector<Role>{Role::AttnQ, Role::AttnK, Role::AttnV, Role::AttnQNorm, Role::AttnKNorm,
                                      Role::AttnOutput, Role::AttnNorm, Role::FfnGate, Role::FfnDown, Role::FfnUp,
                                      Role::FfnNorm}));
  EXPECT_EQ(layer_tensors(s)[0].shape, (std::vector<uint64_t>{64, 128}));  // q: heads * head_dim, not dim
  EXPECT_EQ(layer_tensors(s)[3].shape, (std::vector<uint64_t>{32}));
  s.family.reset();
  EXPECT_TRUE(layer_tensors(s).empty());
  EXPECT_THROW(ModelShape::of_family("gemma"), InvalidArgument);
}
