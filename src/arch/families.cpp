// The families the engine runs, one row each. A new family is a row here, its tensors in
// tensors.cpp, any key of its own in shape.cpp and its forward pass in model/.
#include <array>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "skainet/io/arch.hpp"

namespace skainet::arch {
namespace {

constexpr std::array<std::string_view, 1> kLlamaAlso = {"mistral"};

constexpr std::array<FamilyInfo, 9> kFamilies = {{
    {Family::Llama, "llama", kLlamaAlso, {}, "LLaMA 1/2/3, TinyLlama, Mistral, SmolLM; Mixtral (expert_count > 0)"},
    {Family::Qwen2, "qwen2", {}, {.neox_rope = true, .qkv_bias = true}, "Qwen2, Qwen2.5: q/k/v biases, NeoX RoPE"},
    {Family::Qwen3, "qwen3", {}, {.neox_rope = true, .qk_norm = true}, "Qwen3: per-head q/k RMS norm, NeoX RoPE"},
    {Family::Phi3,
     "phi3",
     {},
     {.neox_rope = true, .fused_qkv = true, .fused_gate_up = true},
     "Phi-3, Phi-3.5, Phi-4: fused qkv and gate/up weights, NeoX RoPE (without LongRoPE factors)"},
    {Family::Gemma,
     "gemma",
     {},
     {.neox_rope = true, .embed_scale = true, .geglu = true, .tied_output = true},
     "Gemma (1): GeGLU, embeddings scaled by sqrt(dim), tied output"},
    {Family::Gemma2,
     "gemma2",
     {},
     {.neox_rope = true, .embed_scale = true, .post_norms = true, .geglu = true, .tied_output = true},
     "Gemma 2: GeGLU, pre/post norms, score and logit soft-capping, sliding-window layers, tied output"},
    {Family::Gemma3,
     "gemma3",
     {},
     {.neox_rope = true, .qk_norm = true, .embed_scale = true, .post_norms = true, .geglu = true},
     "Gemma 3 (text): Gemma 2 with q/k norms, no score capping, 5 of 6 layers windowed with their own RoPE base"},
    {Family::Qwen3Moe,
     "qwen3moe",
     {},
     {.neox_rope = true, .qk_norm = true, .moe = true},
     "Qwen3 MoE: Qwen3's attention, a mixture-of-experts FFN in every layer (softmax router, top-k renormalized)"},
    {Family::GptOss,
     "gpt-oss",
     {},
     {.neox_rope = true,
      .qkv_bias = true,
      .moe = true,
      .attn_sinks = true,
      .out_bias = true,
      .expert_bias = true,
      .oai_swiglu = true,
      .ffn_norm_post_attn = true},
     "gpt-oss: attention sinks, every other layer windowed, biases, experts with a clamped SwiGLU"},
}};

constexpr std::array<Variant, 2> kVariants = {{
    {"llama3", "llama", 500000.0f, true, "Llama 3.1+: RoPE base 500000 and rope_freqs (frequency scaling)"},
    {"mixtral", "llama", 1000000.0f, false,
     "Mixtral: llama with a mixture of experts in every layer (llama.expert_count 8, 2 chosen), RoPE base 1e6", 8, 2},
}};

}  // namespace

std::span<const FamilyInfo> families() noexcept { return kFamilies; }

const FamilyInfo* find_family(std::string_view architecture) noexcept {
  for (const FamilyInfo& f : kFamilies) {
    if (f.name == architecture) return &f;
    for (std::string_view other : f.also)
      if (other == architecture) return &f;
  }
  return nullptr;
}

const FamilyInfo& family_info(Family family) noexcept {
  for (const FamilyInfo& f : kFamilies)
    if (f.family == family) return f;
  return kFamilies[0];  // unreachable: every enumerator has a row (tests/arch checks)
}

std::span<const Variant> variants() noexcept { return kVariants; }

std::vector<float> llama3_rope_freqs(uint32_t rope_dims, float rope_base) {
  constexpr double kFactor = 8, kLowFreqFactor = 1, kHighFreqFactor = 4, kOriginalContext = 8192;
  constexpr double kTwoPi = 6.283185307179586;
  const double low_wavelen = kOriginalContext / kLowFreqFactor, high_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> f;
  for (uint32_t i = 0; i < rope_dims; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(rope_base), static_cast<double>(i) / rope_dims);
    const double wavelen = kTwoPi / freq;
    if (wavelen < high_wavelen) {
      f.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      f.push_back(static_cast<float>(kFactor));
    } else {
      const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      f.push_back(static_cast<float>(1.0 / ((1 - smooth) / kFactor + smooth)));
    }
  }
  return f;
}

std::string supported_architectures() {
  std::vector<std::string_view> names;
  for (const FamilyInfo& f : kFamilies) {
    names.push_back(f.name);
    names.insert(names.end(), f.also.begin(), f.also.end());
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace skainet::arch
