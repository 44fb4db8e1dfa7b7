// The architecture table: every family has a row, names parse back to their roles, and a shape
// written as metadata reads back equal.
#include <gtest/gtest.h>

#include "skainet/io/arch.hpp"
#include "temp_dir.hpp"

using namespace skainet;
using namespace skainet::arch;

TEST(Families, EveryFamilyHasOneRowAndItsOtherNamesFindIt) {
  for (Family f : {Family::Llama, Family::Qwen2, Family::Qwen3, Family::Phi3, Family::Gemma, Family::Gemma2,
                   Family::Gemma3, Family::Qwen3Moe}) {
    const FamilyInfo& info = family_info(f);
    EXPECT_EQ(info.family, f);
    EXPECT_EQ(find_family(info.name), &info);
    for (std::string_view other : info.also) EXPECT_EQ(find_family(other), &info);
  }
  EXPECT_EQ(find_family("mistral")->family, Family::Llama);
  EXPECT_EQ(find_family("gemma4"), nullptr);
  EXPECT_EQ(supported_architectures(), "llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3, qwen3moe, gpt-oss");
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
  EXPECT_FALSE(parse_tensor_name("blk.1.ffn_down_shexp.weight"));  // shared experts: no family here
  EXPECT_EQ(layer_of("blk.1.ffn_down_shexp.weight"), 1u);
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
  EXPECT_THROW(ModelShape::of_family("gemma4"), InvalidArgument);
}

TEST(Shapes, GemmaWindowsFollowLlamaCppsPattern) {
  ModelShape s = ModelShape::of_family("gemma3");
  s.layers = 12;
  std::vector<uint32_t> global;
  for (uint32_t l = 0; l < s.layers; ++l)
    if (!s.is_swa_layer(l)) global.push_back(l);
  EXPECT_EQ(global, (std::vector<uint32_t>{5, 11}));  // every sixth layer, the last of each run
  s = ModelShape::of_family("gemma2");
  EXPECT_TRUE(s.is_swa_layer(0));
  EXPECT_FALSE(s.is_swa_layer(1));
  s.sliding_window = 0;
  EXPECT_FALSE(s.is_swa_layer(0));
}

TEST(Shapes, MetadataReadsBackAsTheSameShape) {
  for (const char* name :
       {"llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "llama3", "qwen3moe", "mixtral", "gpt-oss"}) {
    SCOPED_TRACE(name);
    const bool mixtral = std::string_view(name) == "mixtral";
    ModelShape s = ModelShape::of_family(name);
    s.dim = 128, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 64, s.rope_dims = 64, s.ffn = 256;
    s.vocab = 300, s.ctx_train = 64;
    if (mixtral) s.expert_ffn = s.ffn;  // Mixtral's experts are feed_forward_length wide
    if (s.family == Family::Qwen3Moe || s.family == Family::GptOss) s.expert_ffn = 96;  // its own key
    if (s.family == Family::GptOss || s.family == Family::Qwen2) {  // YaRN's keys, written and read back
      s.rope_scaling = RopeScaling::Yarn, s.rope_scale = 32.0f, s.yarn_orig_ctx = 16, s.rope_attn_factor = 0.5f;
      if (s.family == Family::GptOss) s.rope_scale_swa = s.rope_scale;
    }
    const test::TempDir dir("arch-metadata");
    gguf::Writer w(dir / "m.gguf");
    w.set("general.architecture", gguf::Value::string(s.architecture));
    for (gguf::KeyValue& kv : s.metadata()) w.set(std::move(kv.key), std::move(kv.value));
    w.write([](size_t, std::span<std::byte>) {});
    ModelShape back = ModelShape::from_header(gguf::read_header(dir / "m.gguf"));
    back.features.rope_freqs = s.features.rope_freqs;  // read from the tensor, which this header lacks
    if (s.family == Family::Gemma2 || s.family == Family::Gemma3) back.attention_scale = s.attention_scale = 0;
    EXPECT_EQ(back, s);
  }
}

// rope.scaling.* as llama.cpp reads them: no type is linear (a factor alone scales), "none" ignores the
// factor, YaRN's original context defaults to the training context, and any other type is refused
// naming the key and the value.
TEST(Shapes, RopeScalingTypes) {
  struct Case {
    const char* type;  // nullptr: no key
    float factor;      // 0: no key
    RopeScaling want;
    float want_scale;
  };
  for (const Case& c : {Case{nullptr, 0.0f, RopeScaling::Linear, 1.0f}, Case{nullptr, 4.0f, RopeScaling::Linear, 4.0f},
                        Case{"linear", 2.0f, RopeScaling::Linear, 2.0f}, Case{"none", 8.0f, RopeScaling::None, 1.0f},
                        Case{"yarn", 4.0f, RopeScaling::Yarn, 4.0f}, Case{"yarn", 0.0f, RopeScaling::Yarn, 1.0f}}) {
    SCOPED_TRACE(c.type ? c.type : "(none)");
    ModelShape s = ModelShape::of_family("qwen2");
    s.dim = 128, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 32, s.rope_dims = 32, s.ffn = 256;
    s.vocab = 300, s.ctx_train = 640;
    const test::TempDir dir("arch-rope-scaling");
    gguf::Writer w(dir / "m.gguf");
    w.set("general.architecture", gguf::Value::string(s.architecture));
    for (gguf::KeyValue& kv : s.metadata()) w.set(std::move(kv.key), std::move(kv.value));
    if (c.type) w.set(key("qwen2", Key::RopeScalingType), gguf::Value::string(c.type));
    if (c.factor != 0.0f) w.set(key("qwen2", Key::RopeScalingFactor), gguf::Value::f32(c.factor));
    w.write([](size_t, std::span<std::byte>) {});
    const ModelShape back = ModelShape::from_header(gguf::read_header(dir / "m.gguf"));
    EXPECT_EQ(back.rope_scaling, c.want);
    EXPECT_EQ(back.rope_scale, c.want_scale);
    EXPECT_EQ(back.yarn_orig_ctx, c.want == RopeScaling::Yarn ? 640u : 0u);
    EXPECT_EQ(back.rope_attn_factor, 1.0f);
  }
  const test::TempDir dir("arch-rope-scaling");
  gguf::Writer w(dir / "longrope.gguf");
  ModelShape s = ModelShape::of_family("phi3");
  s.dim = 128, s.layers = 2, s.heads = 4, s.kv_heads = 4, s.head_dim = 32, s.rope_dims = 32, s.ffn = 256;
  w.set("general.architecture", gguf::Value::string(s.architecture));
  for (gguf::KeyValue& kv : s.metadata()) w.set(std::move(kv.key), std::move(kv.value));
  w.set(key("phi3", Key::RopeScalingType), gguf::Value::string("longrope"));
  w.write([](size_t, std::span<std::byte>) {});
  try {
    ModelShape::from_header(gguf::read_header(dir / "longrope.gguf"));
    ADD_FAILURE() << "longrope was not refused";
  } catch (const gguf::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("phi3.rope.scaling.type 'longrope'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(key("qwen2", Key::RopeScalingOrigCtx), "qwen2.rope.scaling.original_context_length");
  EXPECT_EQ(key("qwen2", Key::RopeScalingAttnFactor), "qwen2.rope.scaling.attn_factor");
}

// `synth --arch mixtral`: a llama file with llama.expert_count (Mixtral 8x7B's 8 experts, 2 chosen).
TEST(Shapes, MixtralIsLlamaWithExperts) {
  const ModelShape s = ModelShape::of_family("mixtral");
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.family, Family::Llama);
  EXPECT_TRUE(s.features.moe);
  EXPECT_EQ(s.experts, 8u);
  EXPECT_EQ(s.experts_used, 2u);
  EXPECT_EQ(s.rope_base, 1000000.0f);
}

TEST(Shapes, MixtureOfExpertsTensorsAreLlamaCppsStacks) {
  ModelShape s = ModelShape::of_family("qwen3moe");
  s.dim = 64, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.ffn = 256, s.expert_ffn = 32;
  EXPECT_EQ(s.experts, 8u);
  EXPECT_EQ(s.experts_used, 2u);
  std::vector<std::pair<Role, std::vector<uint64_t>>> ffn;
  for (const TensorSpec& t : layer_tensors(s))
    if (role_name(t.role).starts_with("ffn_")) ffn.emplace_back(t.role, t.shape);
  const std::vector<std::pair<Role, std::vector<uint64_t>>> want = {{Role::FfnGateInp, {64, 8}},
                                                                    {Role::FfnGateExps, {64, 32, 8}},
                                                                    {Role::FfnDownExps, {32, 64, 8}},
                                                                    {Role::FfnUpExps, {64, 32, 8}},
                                                                    {Role::FfnNorm, {64}}};
  EXPECT_EQ(ffn, want);
  EXPECT_EQ(parse_tensor_name("blk.3.ffn_down_exps.weight"), (TensorName{3, Role::FfnDownExps}));
  EXPECT_EQ(key("qwen3moe", Key::ExpertFeedForwardLength), "qwen3moe.expert_feed_forward_length");
  EXPECT_EQ(key("llama", Key::ExpertUsedCount), "llama.expert_used_count");
}

// gpt-oss as llama_model_openai_moe loads it: sinks per query head, attn_output's bias, the router's
// and the stacks' biases, the FFN's norm named post_attention_norm; windows on even layers; YaRN read.
TEST(Shapes, GptOssTensorsAndWindows) {
  ModelShape s = ModelShape::of_family("gpt-oss");
  s.dim = 64, s.layers = 4, s.heads = 4, s.kv_heads = 2, s.head_dim = 32, s.ffn = 128, s.expert_ffn = 48;
  EXPECT_TRUE(s.features.attn_sinks && s.features.out_bias && s.features.expert_bias && s.features.oai_swiglu);
  EXPECT_TRUE(s.features.qkv_bias && s.features.neox_rope && s.features.moe);
  std::vector<std::pair<Role, std::vector<uint64_t>>> got;
  for (const TensorSpec& t : layer_tensors(s)) got.emplace_back(t.role, t.shape);
  const std::vector<std::pair<Role, std::vector<uint64_t>>> want = {
      {Role::AttnQ, {64, 128}},         {Role::AttnQBias, {128}},         {Role::AttnK, {64, 64}},
      {Role::AttnKBias, {64}},          {Role::AttnV, {64, 64}},          {Role::AttnVBias, {64}},
      {Role::AttnOutput, {128, 64}},    {Role::AttnOutputBias, {64}},     {Role::AttnSinks, {4}},
      {Role::AttnNorm, {64}},           {Role::FfnGateInp, {64, 8}},      {Role::FfnGateInpBias, {8}},
      {Role::FfnGateExps, {64, 48, 8}}, {Role::FfnDownExps, {48, 64, 8}}, {Role::FfnUpExps, {64, 48, 8}},
      {Role::FfnGateExpsBias, {48, 8}}, {Role::FfnDownExpsBias, {64, 8}}, {Role::FfnUpExpsBias, {48, 8}},
      {Role::AttnPostNorm, {64}}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(parse_tensor_name("blk.2.attn_sinks.weight"), (TensorName{2, Role::AttnSinks}));
  EXPECT_EQ(parse_tensor_name("blk.0.ffn_down_exps.bias"), (TensorName{0, Role::FfnDownExpsBias}));
  EXPECT_EQ(s.swa_pattern, 2u);
  EXPECT_GT(s.sliding_window, 0u);
  for (uint32_t l = 0; l < s.layers; ++l) EXPECT_EQ(s.is_swa_layer(l), l % 2 == 0) << l;

  // Its released files' YaRN, read as llama.cpp reads it; the windowed layers take the same factor.
  const test::TempDir dir("arch-gpt-oss");
  gguf::Writer w(dir / "yarn.gguf");
  w.set("general.architecture", gguf::Value::string(s.architecture));
  s.vocab = 300, s.ctx_train = 64, s.rope_dims = 32;
  for (gguf::KeyValue& kv : s.metadata()) w.set(std::move(kv.key), std::move(kv.value));
  w.set(key("gpt-oss", Key::RopeScalingType), gguf::Value::string("yarn"));
  w.set(key("gpt-oss", Key::RopeScalingFactor), gguf::Value::f32(32.0f));
  w.set(key("gpt-oss", Key::RopeScalingOrigCtx), gguf::Value::u32(4096));
  w.write([](size_t, std::span<std::byte>) {});
  const ModelShape back = ModelShape::from_header(gguf::read_header(dir / "yarn.gguf"));
  EXPECT_EQ(back.rope_scaling, RopeScaling::Yarn);
  EXPECT_EQ(back.rope_scale, 32.0f);
  EXPECT_EQ(back.rope_scale_swa, 32.0f);
  EXPECT_EQ(back.yarn_orig_ctx, 4096u);
}
