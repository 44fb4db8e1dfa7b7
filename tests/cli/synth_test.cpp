// synth: names, shapes, types and metadata of the written model, determinism, vocabularies.
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "cli/cli_support.hpp"
#include "skainet/model/convert.hpp"

namespace skainet::cli_test {
namespace {

using convert::find_scheme;

convert::SynthOptions tiny(std::string_view type, uint64_t seed = 1) {
  convert::SynthOptions o;
  o.shape = *convert::find_preset("tiny");
  o.scheme = convert::parse_scheme(type);
  o.seed = seed;
  o.threads = 2;
  return o;
}

std::vector<std::string> expected_names(uint32_t layers) {
  std::vector<std::string> names{"token_embd.weight", "output_norm.weight", "output.weight"};
  for (uint32_t l = 0; l < layers; ++l)
    for (const char* t :
         {"attn_q", "attn_k", "attn_v", "attn_output", "attn_norm", "ffn_gate", "ffn_down", "ffn_up", "ffn_norm"})
      names.push_back(fmt::format("blk.{}.{}.weight", l, t));
  return names;
}

class Synth : public ScratchTest {};

TEST_F(Synth, WritesLlamaTensorsAndMetadataInEveryFormat) {
  struct Case {
    std::string type;
    uint32_t file_type;
    GgmlType matmul;
  };
  const std::vector<Case> cases = {
      {"F32", 0, GgmlType::F32},      {"F16", 1, GgmlType::F16},        {"BF16", 32, GgmlType::BF16},
      {"Q8_0", 7, GgmlType::Q8_0},    {"Q4_0", 2, GgmlType::Q4_0},      {"Q5_1", 9, GgmlType::Q5_1},
      {"Q6_K", 18, GgmlType::Q6_K},   {"Q4_K_S", 14, GgmlType::Q4_K},   {"Q2_K", 10, GgmlType::Q2_K},
      {"Q3_K_S", 11, GgmlType::Q3_K}, {"IQ4_NL", 25, GgmlType::IQ4_NL}, {"IQ4_XS", 30, GgmlType::IQ4_XS}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    const auto file = path("tiny-" + c.type + ".gguf");
    const convert::Report report = convert::synth(file, tiny(c.type));
    const gguf::Header h = gguf::read_header(file);
    EXPECT_EQ(report.bytes_written, h.file_size);
    EXPECT_EQ(report.fallback_count(), 0u);

    ASSERT_EQ(h.tensors.size(), 21u);
    const auto names = expected_names(2);
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(h.tensors[i].name, names[i]);
    using Shape = std::vector<uint64_t>;
    EXPECT_EQ(h.find_tensor("token_embd.weight")->shape, (Shape{256, 512}));
    EXPECT_EQ(h.find_tensor("output.weight")->shape, (Shape{256, 512}));
    EXPECT_EQ(h.find_tensor("output_norm.weight")->shape, (Shape{256}));
    EXPECT_EQ(h.find_tensor("blk.1.attn_q.weight")->shape, (Shape{256, 256}));
    EXPECT_EQ(h.find_tensor("blk.1.attn_k.weight")->shape, (Shape{256, 128}));  // 2 kv heads of 64
    EXPECT_EQ(h.find_tensor("blk.1.attn_v.weight")->shape, (Shape{256, 128}));
    EXPECT_EQ(h.find_tensor("blk.1.ffn_gate.weight")->shape, (Shape{256, 512}));
    EXPECT_EQ(h.find_tensor("blk.1.ffn_down.weight")->shape, (Shape{512, 256}));
    EXPECT_EQ(h.find_tensor("blk.1.ffn_up.weight")->shape, (Shape{256, 512}));

    for (const auto& t : h.tensors) {
      if (t.name.find("norm") != std::string::npos) {
        EXPECT_EQ(t.type, GgmlType::F32) << t.name;
      } else if (t.name == "output.weight" && find_scheme(c.type)->mixed) {
        EXPECT_EQ(t.type, GgmlType::Q6_K);
      } else if (c.type == "Q4_K_S" && t.name == "blk.0.ffn_down.weight") {
        EXPECT_EQ(t.type, GgmlType::Q4_K);  // n_layers / 8 == 0: no layer is raised
      } else if (c.type == "Q4_K_S" && t.name.find("attn_v") != std::string::npos) {
        EXPECT_EQ(t.type, GgmlType::Q5_K) << t.name;  // the first 4 layers' attn_v get Q5_K
      } else if (c.type == "Q2_K" &&
                 (t.name.find("attn_v") != std::string::npos || t.name.find("ffn_down") != std::string::npos ||
                  t.name.find("attn_output") != std::string::npos)) {
        EXPECT_EQ(t.type, GgmlType::Q3_K) << t.name;  // n_gqa 2: attn_v Q3_K, as ffn_down and attn_output
      } else {
        EXPECT_EQ(t.type, c.matmul) << t.name;
      }
    }

    EXPECT_EQ(h.get_string("general.architecture"), "llama");
    EXPECT_EQ(h.get_string("general.name"), "skainet-synth");
    EXPECT_EQ(h.get_u32("general.file_type"), c.file_type);
    EXPECT_EQ(h.get_u32("general.quantization_version"), 2u);
    EXPECT_EQ(h.get_u32("llama.context_length"), 256u);
    EXPECT_EQ(h.get_u32("llama.embedding_length"), 256u);
    EXPECT_EQ(h.get_u32("llama.block_count"), 2u);
    EXPECT_EQ(h.get_u32("llama.feed_forward_length"), 512u);
    EXPECT_EQ(h.get_u32("llama.attention.head_count"), 4u);
    EXPECT_EQ(h.get_u32("llama.attention.head_count_kv"), 2u);
    EXPECT_EQ(h.get_u32("llama.rope.dimension_count"), 64u);
    EXPECT_EQ(h.get_u32("llama.vocab_size"), 512u);
    EXPECT_FLOAT_EQ(h.get_f32("llama.rope.freq_base"), 10000.0f);
    EXPECT_FLOAT_EQ(h.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
    EXPECT_EQ(h.get_string("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(h.find("tokenizer.ggml.tokens")->items.size(), 512u);
  }
}

// --arch qwen2: the llama blocks plus F32 q/k/v biases after their weights, keys under "qwen2."; an
// architecture synth does not write is refused by name.
TEST_F(Synth, Qwen2AddsQkvBiasesAndItsOwnKeys) {
  convert::SynthOptions o = tiny("Q8_0");
  o.arch = "qwen2";
  convert::synth(path("qwen2.gguf"), o);
  const gguf::Header h = gguf::read_header(path("qwen2.gguf"));
  EXPECT_EQ(h.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(h.get_u32("qwen2.block_count"), 2u);
  EXPECT_EQ(h.get_u32("qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(h.find("llama.block_count"), nullptr);
  ASSERT_EQ(h.tensors.size(), 27u);
  EXPECT_EQ(h.tensors[4].name, "blk.0.attn_q.bias");
  using Shape = std::vector<uint64_t>;
  for (const auto& [name, width] : {std::pair{"attn_q", 256u}, std::pair{"attn_k", 128u}, std::pair{"attn_v", 128u}}) {
    const auto* t = h.find_tensor(fmt::format("blk.1.{}.bias", name));
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, GgmlType::F32);
    EXPECT_EQ(t->shape, (Shape{width}));
  }
  EXPECT_EQ(h.find_tensor("blk.0.attn_output.bias"), nullptr);
  o.arch = "gemma4";
  EXPECT_THROW(convert::synth(path("gemma4.gguf"), o), InvalidArgument);
}

// Mixtures of experts: qwen3moe's keys and llama.cpp's 3-D stacks; a llama file given experts is
// Mixtral (no width key of its own); options a family cannot take are refused.
TEST_F(Synth, MixturesOfExpertsWriteTheRouterAndTheExpertStacks) {
  convert::SynthOptions o = tiny("Q8_0");
  o.arch = "qwen3moe";
  o.shape.expert_ffn = 64;
  const RunResult r = run_skainet({"synth", path("cli.gguf").string(), "--type", "Q8_0", "--seed", "1", "--threads",
                                   "2", "--arch", "qwen3moe", "--expert-ffn", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  convert::synth(path("q3moe.gguf"), o);
  EXPECT_TRUE(read_bytes(path("cli.gguf")) == read_bytes(path("q3moe.gguf")));
  const gguf::Header h = gguf::read_header(path("q3moe.gguf"));
  EXPECT_EQ(h.get_u32("qwen3moe.expert_count"), 8u);
  EXPECT_EQ(h.get_u32("qwen3moe.expert_used_count"), 2u);
  EXPECT_EQ(h.get_u32("qwen3moe.expert_feed_forward_length"), 64u);
  using Shape = std::vector<uint64_t>;
  EXPECT_EQ(h.find_tensor("blk.1.ffn_gate_inp.weight")->shape, (Shape{256, 8}));
  EXPECT_EQ(h.find_tensor("blk.1.ffn_gate_inp.weight")->type, GgmlType::F32);  // as llama-quantize keeps it
  EXPECT_EQ(h.find_tensor("blk.1.ffn_up_exps.weight")->shape, (Shape{256, 64, 8}));
  EXPECT_EQ(h.find_tensor("blk.1.ffn_down_exps.weight")->shape, (Shape{64, 256, 8}));
  EXPECT_EQ(h.find_tensor("blk.1.ffn_down_exps.weight")->type, GgmlType::Q8_0);
  EXPECT_EQ(h.find_tensor("blk.0.ffn_gate.weight"), nullptr);

  o = tiny("F32");
  o.shape.experts = 4, o.shape.experts_used = 3;
  convert::synth(path("mixtral.gguf"), o);
  const gguf::Header m = gguf::read_header(path("mixtral.gguf"));
  EXPECT_EQ(m.get_u32("llama.expert_count"), 4u);
  EXPECT_EQ(m.get_u32("llama.expert_used_count"), 3u);
  EXPECT_EQ(m.find("llama.expert_feed_forward_length"), nullptr);
  EXPECT_EQ(m.find_tensor("blk.0.ffn_gate_exps.weight")->shape, (Shape{256, 512, 4}));

  o.shape.experts_used = 5;
  EXPECT_THROW(convert::synth(path("x.gguf"), o), InvalidArgument);  // more used than there are
  o.shape.experts_used = 2, o.shape.expert_ffn = 64;
  EXPECT_THROW(convert::synth(path("x.gguf"), o), InvalidArgument);  // Mixtral's experts are ffn wide
  o.shape.expert_ffn = 0, o.arch = "qwen3";
  EXPECT_THROW(convert::synth(path("x.gguf"), o), InvalidArgument);  // qwen3 has no experts
}

// --rope-scaling yarn: the type, factor and original context written as llama.cpp reads them, the
// command line and the library writing the same bytes, the file reading back as the shape asked for
// (the windowed layers of gpt-oss on the same factor); an original context without YaRN is refused.
TEST_F(Synth, YarnKeysRoundTrip) {
  convert::SynthOptions o = tiny("F32");
  o.arch = "gpt-oss";
  o.shape.rope_scaling = arch::RopeScaling::Yarn, o.shape.rope_scale = 32.0f, o.shape.yarn_orig_ctx = 64;
  const RunResult r =
      run_skainet({"synth", path("cli.gguf").string(), "--type", "F32", "--seed", "1", "--threads", "2", "--arch",
                   "gpt-oss", "--rope-scaling", "yarn", "--rope-scale", "32", "--yarn-orig-ctx", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  convert::synth(path("yarn.gguf"), o);
  EXPECT_TRUE(read_bytes(path("cli.gguf")) == read_bytes(path("yarn.gguf")));
  const gguf::Header h = gguf::read_header(path("yarn.gguf"));
  EXPECT_EQ(h.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(h.get_f32("gpt-oss.rope.scaling.factor"), 32.0f);
  EXPECT_EQ(h.get_u32("gpt-oss.rope.scaling.original_context_length"), 64u);
  const arch::ModelShape s = arch::ModelShape::from_header(h);
  EXPECT_EQ(s.rope_scaling, arch::RopeScaling::Yarn);
  EXPECT_EQ(s.rope_scale, 32.0f);
  EXPECT_EQ(s.rope_scale_swa, 32.0f);
  EXPECT_EQ(s.yarn_orig_ctx, 64u);

  o.arch = "llama", o.shape.yarn_orig_ctx = 0;  // the training context when not given
  convert::synth(path("llama.gguf"), o);
  EXPECT_EQ(arch::ModelShape::from_header(gguf::read_header(path("llama.gguf"))).yarn_orig_ctx, o.shape.ctx_train);
  o.shape.rope_scaling = arch::RopeScaling::Linear, o.shape.yarn_orig_ctx = 64;
  EXPECT_THROW(convert::synth(path("x.gguf"), o), InvalidArgument);
  const RunResult bad = run_skainet({"synth", path("x.gguf").string(), "--rope-scaling", "longrope"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("longrope"), std::string::npos) << bad.err;
}

TEST_F(Synth, Q4KMRaisesAttnVAndFfnDownLikeLlamaCpp) {
  // TinyLlama's shape with 22 layers: llama.cpp's Q4_K_M gives 45 F32, 135 Q4_K and 21 Q6_K tensors
  // (10 attn_v + 10 ffn_down by use_more_bits, + output). Only the decisions are checked here.
  const convert::Scheme s = *find_scheme("Q4_K_M");
  std::vector<uint32_t> raised;
  size_t q6 = 0;
  for (uint32_t l = 0; l < 22; ++l) {
    const std::vector<uint64_t> v{2048, 256}, down{5632, 2048};
    const auto cv = convert::choose_type(s, fmt::format("blk.{}.attn_v.weight", l), v, GgmlType::F32, 22);
    const auto cd = convert::choose_type(s, fmt::format("blk.{}.ffn_down.weight", l), down, GgmlType::F32, 22);
    EXPECT_EQ(cv.type, cd.type) << l;
    if (cv.type == GgmlType::Q6_K) {
      raised.push_back(l);
      EXPECT_EQ(cv.rule, convert::TypeRule::MoreBits);
    }
    q6 += (cv.type == GgmlType::Q6_K) + (cd.type == GgmlType::Q6_K);
  }
  EXPECT_EQ(raised, (std::vector<uint32_t>{0, 1, 4, 7, 10, 13, 16, 19, 20, 21}));
  EXPECT_EQ(q6, 20u);
  const std::vector<uint64_t> out{2048, 32000};
  // llama.cpp's 8-expert model: attn_v and attn_k to Q8_0, attn_output to Q5_K (the MoE peer tests
  // check the whole mix against llama-quantize's).
  const std::vector<uint64_t> attn{2048, 2048};
  EXPECT_EQ(convert::choose_type(s, "blk.5.attn_v.weight", attn, GgmlType::F32, 22, 4, false, 8).type, GgmlType::Q8_0);
  EXPECT_EQ(convert::choose_type(s, "blk.5.attn_k.weight", attn, GgmlType::F32, 22, 4, false, 8).type, GgmlType::Q8_0);
  EXPECT_EQ(convert::choose_type(s, "blk.5.attn_output.weight", attn, GgmlType::F32, 22, 4, false, 8).type,
            GgmlType::Q5_K);
  EXPECT_EQ(convert::choose_type(s, "blk.5.attn_k.weight", attn, GgmlType::F32, 22, 4, false, 4).type, GgmlType::Q4_K);
  EXPECT_EQ(convert::choose_type(s, "output.weight", out, GgmlType::F32, 22).type, GgmlType::Q6_K);
  EXPECT_EQ(convert::choose_type(s, "token_embd.weight", out, GgmlType::F32, 22).type, GgmlType::Q4_K);
  // A model without output.weight (tied, e.g. Gemma): its token_embd is the output, and gets its type;
  // Phi-3's fused attn_qkv follows attn_v's rule (llama.cpp's category_is_attn_v; checked against
  // llama-quantize on Phi-3 synths).
  EXPECT_EQ(convert::choose_type(s, "token_embd.weight", out, GgmlType::F32, 22, 1, true).type, GgmlType::Q6_K);
  const std::vector<uint64_t> qkv{2048, 6144};
  EXPECT_EQ(convert::choose_type(s, "blk.3.attn_qkv.weight", qkv, GgmlType::F32, 22).type, GgmlType::Q4_K);
  EXPECT_EQ(convert::choose_type(s, "blk.4.attn_qkv.weight", qkv, GgmlType::F32, 22).type, GgmlType::Q6_K);
  EXPECT_EQ(convert::choose_type(*find_scheme("Q3_K_M"), "blk.1.attn_qkv.weight", qkv, GgmlType::F32, 22).type,
            GgmlType::Q5_K);
}

TEST_F(Synth, LowBitMixesFollowLlamaCpp) {
  // TinyLlama's shape (22 layers, 32 query heads over 4 KV heads: n_gqa 8), llama-quant.cpp's rules.
  const std::vector<uint64_t> sq{2048, 2048}, v{2048, 256}, down{5632, 2048}, out{2048, 32000};
  auto type = [&](std::string_view scheme, const std::string& name, const std::vector<uint64_t>& shape, uint32_t gqa) {
    return convert::choose_type(*find_scheme(scheme), name, shape, GgmlType::F32, 22, gqa).type;
  };
  for (uint32_t l : {0u, 1u, 2u, 21u}) {
    const std::string b = fmt::format("blk.{}.", l);
    EXPECT_EQ(type("Q3_K_M", b + "attn_v.weight", v, 8), l < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(type("Q3_K_M", b + "ffn_down.weight", down, 8), l < 1 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
    EXPECT_EQ(type("Q3_K_M", b + "attn_output.weight", sq, 8), GgmlType::Q4_K);
    EXPECT_EQ(type("Q3_K_M", b + "attn_q.weight", sq, 8), GgmlType::Q3_K);
    EXPECT_EQ(type("Q3_K_S", b + "attn_v.weight", v, 8), GgmlType::Q3_K);
    EXPECT_EQ(type("Q3_K_L", b + "ffn_down.weight", down, 8), GgmlType::Q5_K);
    EXPECT_EQ(type("Q2_K", b + "attn_v.weight", v, 8), GgmlType::Q4_K);
    EXPECT_EQ(type("Q2_K", b + "attn_v.weight", v, 1), GgmlType::Q3_K);
    EXPECT_EQ(type("Q2_K", b + "ffn_down.weight", down, 8), GgmlType::Q3_K);
    EXPECT_EQ(type("Q2_K", b + "attn_output.weight", sq, 8), GgmlType::Q3_K);
    EXPECT_EQ(type("Q2_K", b + "ffn_up.weight", down, 8), GgmlType::Q2_K);
    for (const char* iq : {"IQ4_NL", "IQ4_XS"}) {
      const GgmlType base = *parse_type_name(iq);
      EXPECT_EQ(type(iq, b + "attn_v.weight", v, 8), GgmlType::Q5_K) << iq;
      EXPECT_EQ(type(iq, b + "attn_v.weight", v, 1), base) << iq;
      EXPECT_EQ(type(iq, b + "ffn_down.weight", down, 1), l < 2 ? GgmlType::Q5_K : base) << iq << " " << l;
      EXPECT_EQ(type(iq, b + "attn_q.weight", sq, 8), base) << iq;
    }
  }
  EXPECT_EQ(find_scheme("q3_k")->name, "Q3_K_M");
  for (const char* s : {"Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL", "IQ4_XS"})
    EXPECT_EQ(type(s, "output.weight", out, 8), GgmlType::Q6_K) << s;
  // Rows that do not fill 256-element blocks: llama.cpp's table (Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL).
  const std::vector<uint64_t> odd{96, 64};
  EXPECT_EQ(type("Q2_K", "blk.3.ffn_up.weight", odd, 1), GgmlType::Q4_0);
  EXPECT_EQ(type("Q3_K_S", "blk.3.ffn_up.weight", odd, 1), GgmlType::Q4_0);
  EXPECT_EQ(type("IQ4_XS", "blk.3.ffn_up.weight", odd, 1), GgmlType::IQ4_NL);
  EXPECT_EQ(type("IQ4_NL", "blk.3.ffn_up.weight", odd, 1), GgmlType::IQ4_NL);
  // MXFP4_MOE (llama.cpp's ftype 38): expert stacks MXFP4, every other weight Q8_0, the output too;
  // norms and the router stay F32 as in every scheme.
  const std::vector<uint64_t> stack{256, 96, 4}, one_expert{256, 96, 1};
  EXPECT_EQ(find_scheme("mxfp4_moe")->file_type, convert::FileType::MostlyMXFP4_MOE);
  EXPECT_EQ(static_cast<uint32_t>(convert::FileType::MostlyMXFP4_MOE), 38u);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.ffn_up_exps.weight", stack, 1), GgmlType::MXFP4);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.ffn_down_exps.weight", stack, 1), GgmlType::MXFP4);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.ffn_up_exps.weight", one_expert, 1), GgmlType::Q8_0);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.attn_q.weight", sq, 8), GgmlType::Q8_0);
  EXPECT_EQ(type("MXFP4_MOE", "output.weight", out, 8), GgmlType::Q8_0);
  EXPECT_EQ(type("MXFP4_MOE", "token_embd.weight", out, 8), GgmlType::Q8_0);
  EXPECT_EQ(type("MXFP4_MOE", "blk.0.ffn_gate_inp.weight", sq, 8), GgmlType::F32);
  EXPECT_EQ(convert::choose_type(*find_scheme("MXFP4_MOE"), "blk.0.attn_q.weight", sq, GgmlType::F32, 22).rule,
            convert::TypeRule::NonExpert);
}

TEST_F(Synth, SameSeedSameBytesWhateverTheThreadsOtherSeedOtherBytes) {
  for (const char* type : {"F32", "Q4_0", "Q4_K_M"}) {
    SCOPED_TRACE(type);
    auto one = tiny(type, 42), two = tiny(type, 42), other = tiny(type, 43);
    one.threads = 1;
    two.threads = 3;
    convert::synth(path("a.gguf"), one);
    convert::synth(path("b.gguf"), two);
    convert::synth(path("c.gguf"), other);
    const std::string a = read_bytes(path("a.gguf")), b = read_bytes(path("b.gguf")), c = read_bytes(path("c.gguf"));
    EXPECT_EQ(a.size(), c.size());
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a == c);
    // Different seeds differ in the data, not in the header.
    const uint64_t data = gguf::read_header(path("a.gguf")).data_offset;
    EXPECT_EQ(a.substr(0, data), c.substr(0, data));
  }
}

TEST_F(Synth, WeightsAreScaledLikeATrainedModel) {
  convert::synth(path("f32.gguf"), tiny("F32", 5));
  const gguf::Header h = gguf::read_header(path("f32.gguf"));
  auto stats = [](const std::vector<float>& v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    double var = 0;
    for (float x : v) var += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(var / v.size())};
  };
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output.weight"}) {
    const auto [mean, sd] = stats(read_tensor(h, name));
    EXPECT_NEAR(mean, 0.0, 0.001) << name;
    EXPECT_NEAR(sd, 0.02, 0.001) << name;
  }
  for (const char* name : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.1.ffn_norm.weight"}) {
    const auto [mean, sd] = stats(read_tensor(h, name));
    EXPECT_NEAR(mean, 1.0, 0.02) << name;
    EXPECT_NEAR(sd, 0.05, 0.01) << name;
  }
  // Rows are independent streams: two rows of one tensor do not repeat each other.
  const auto q = read_tensor(h, "blk.0.attn_q.weight");
  EXPECT_FALSE(std::equal(q.begin(), q.begin() + 256, q.begin() + 256));
}

TEST_F(Synth, BuiltinVocabularyIsAValidSentencePieceVocabulary) {
  for (uint32_t n : {259u, 512u, 32000u}) {
    const auto kv = convert::builtin_vocabulary(n);
    ASSERT_EQ(kv[1].key, "tokenizer.ggml.tokens");
    const auto& tokens = kv[1].value.items;
    const auto& scores = kv[2].value.items;
    const auto& types = kv[3].value.items;
    ASSERT_EQ(tokens.size(), n);
    ASSERT_EQ(scores.size(), n);
    ASSERT_EQ(types.size(), n);
    std::set<std::string> unique;
    for (const auto& t : tokens) unique.insert(std::get<std::string>(t));
    EXPECT_EQ(unique.size(), n);
    EXPECT_EQ(std::get<std::string>(tokens[0]), "<unk>");
    EXPECT_EQ(std::get<std::string>(tokens[1]), "<s>");
    EXPECT_EQ(std::get<std::string>(tokens[2]), "</s>");
    EXPECT_EQ(std::get<std::string>(tokens[3 + 0x0A]), "<0x0A>");
    EXPECT_EQ(std::get<std::string>(tokens[258]), "<0xFF>");
    EXPECT_EQ(std::get<int32_t>(types[0]), 2);    // UNKNOWN
    EXPECT_EQ(std::get<int32_t>(types[1]), 3);    // CONTROL
    EXPECT_EQ(std::get<int32_t>(types[100]), 6);  // BYTE
    if (n > 259) {
      EXPECT_EQ(std::get<std::string>(tokens[259]), "\xE2\x96\x81");
      EXPECT_EQ(std::get<int32_t>(types[259]), 1);  // NORMAL
      EXPECT_GT(std::get<float>(scores[259]), std::get<float>(scores[n - 1]));
    }
  }
  EXPECT_THROW(convert::builtin_vocabulary(258), InvalidArgument);
}

TEST_F(Synth, VocabFromCopiesStoriesTokenizer) {
  auto o = tiny("Q8_0");
  o.shape.vocab = 999;  // ignored: the vocabulary size follows the source
  o.vocab_from = kStories;
  convert::synth(path("v.gguf"), o);
  const gguf::Header h = gguf::read_header(path("v.gguf"));
  const gguf::Header stories = gguf::read_header(kStories);
  size_t copied = 0;
  for (const auto& kv : stories.metadata) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    ++copied;
    const gguf::Value* v = h.find(kv.key);
    ASSERT_NE(v, nullptr) << kv.key;
    EXPECT_TRUE(*v == kv.value) << kv.key;
  }
  EXPECT_EQ(copied, 9u);
  EXPECT_EQ(h.get_u32("llama.vocab_size"), 512u);
  EXPECT_EQ(h.find_tensor("token_embd.weight")->shape, (std::vector<uint64_t>{256, 512}));
  EXPECT_EQ(h.find_tensor("output.weight")->shape, (std::vector<uint64_t>{256, 512}));

  // Through the command line as well.
  const RunResult r = run_skainet(
      {"synth", path("w.gguf").string(), "--type", "q8_0", "--vocab-from", kStories.string(), "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(gguf::read_header(path("w.gguf")).find("tokenizer.ggml.tokens")->items,
            stories.find("tokenizer.ggml.tokens")->items);
}

TEST_F(Synth, CommandLineWritesWhatTheLibraryWrites) {
  const RunResult r = run_skainet({"synth", path("cli.gguf").string(), "--preset", "tiny", "--type", "Q4_0", "--seed",
                                   "9", "--layers", "3", "--ffn", "384"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto o = tiny("Q4_0", 9);
  o.shape.layers = 3;
  o.shape.ffn = 384;
  convert::synth(path("lib.gguf"), o);
  EXPECT_TRUE(read_bytes(path("cli.gguf")) == read_bytes(path("lib.gguf")));
  EXPECT_EQ(gguf::read_header(path("cli.gguf")).tensors.size(), 3u + 27u);
}

TEST_F(Synth, KQuantOfRowsThatDoNotFitFallsBack) {
  // stories15M's dim 288 is not a multiple of 256: Q4_K -> Q5_0 as llama.cpp does.
  auto o = tiny("Q4_K_M");
  o.shape.dim = 288;
  o.shape.heads = 6;
  o.shape.kv_heads = 6;
  o.shape.ffn = 768;
  const convert::Report r = convert::synth(path("f.gguf"), o);
  const gguf::Header h = gguf::read_header(path("f.gguf"));
  for (const auto& t : r.tensors) {
    EXPECT_EQ(h.find_tensor(t.name)->type, t.type) << t.name;
    if (t.name == "blk.0.attn_q.weight") {
      ASSERT_TRUE(t.fallback);
      EXPECT_EQ(t.fallback->wanted, GgmlType::Q4_K);
      EXPECT_EQ(t.fallback->chosen, GgmlType::Q5_0);
      EXPECT_EQ(t.fallback->reason, convert::FallbackReason::RowNotMultipleOfBlock);
      EXPECT_EQ(t.fallback->row_elements, 288u);
      EXPECT_EQ(t.fallback->wanted_block, 256u);
    }
    if (t.name == "blk.0.ffn_down.weight") {
      EXPECT_FALSE(t.fallback);  // rows of 768 fit
    }
    if (t.name == "output.weight") {
      EXPECT_EQ(t.type, GgmlType::Q8_0);  // llama.cpp's output rule, not a fallback
      EXPECT_EQ(t.rule, convert::TypeRule::OutputTensor);
      EXPECT_FALSE(t.fallback);
    }
  }
}

TEST_F(Synth, BadRequestsAreExitCodeOneWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"--type", "IQ2_XXS"}, "IQ2_XXS"},
      {{"--preset", "huge"}, "huge"},
      {{"--vocab", "100"}, "259"},
      {{"--heads", "3"}, "heads"},
      {{"--vocab-from", path("missing.gguf").string()}, "missing.gguf"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"synth", path("x.gguf").string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const RunResult r = run_skainet(args);
    EXPECT_EQ(r.exit_code, 1) << c.expect;
    EXPECT_EQ(r.err.rfind("skainet: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("x.gguf")));
  }
}

}  // namespace
}  // namespace skainet::cli_test
