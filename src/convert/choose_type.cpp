// Which type each tensor is written in. The mix rules are a faithful, simplified subset of
// llama.cpp's llama_tensor_get_type (llama-quant.cpp) for the schemes we can encode: the output
// tensor (and a tied model's token_embd), attn_v (and a fused attn_qkv), ffn_down and attn_output rules for
// Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, IQ4_NL and IQ4_XS, with the 8-expert model's bumps
// (attn_v and attn_k to Q8_0, attn_output to Q5_K), and MXFP4_MOE's split (expert stacks MXFP4, the
// rest Q8_0); the Falcon, 70B and imatrix special cases are left out because no model we run has them.
#include <algorithm>
#include <array>
#include <cctype>
#include <tuple>

#include <fmt/format.h>

#include "skainet/io/arch.hpp"
#include "skainet/model/convert.hpp"

namespace skainet::convert {
namespace {

constexpr std::array kSchemes = {
    Scheme{"F32", FileType::AllF32, GgmlType::F32, false},
    Scheme{"F16", FileType::MostlyF16, GgmlType::F16, false},
    Scheme{"BF16", FileType::MostlyBF16, GgmlType::BF16, false},
    Scheme{"Q8_0", FileType::MostlyQ8_0, GgmlType::Q8_0, false},
    Scheme{"Q5_1", FileType::MostlyQ5_1, GgmlType::Q5_1, false},
    Scheme{"Q5_0", FileType::MostlyQ5_0, GgmlType::Q5_0, false},
    Scheme{"Q4_1", FileType::MostlyQ4_1, GgmlType::Q4_1, false},
    Scheme{"Q4_0", FileType::MostlyQ4_0, GgmlType::Q4_0, false},
    Scheme{"Q6_K", FileType::MostlyQ6_K, GgmlType::Q6_K, true},
    Scheme{"Q5_K_M", FileType::MostlyQ5_K_M, GgmlType::Q5_K, true},
    Scheme{"Q5_K_S", FileType::MostlyQ5_K_S, GgmlType::Q5_K, true},
    Scheme{"Q4_K_M", FileType::MostlyQ4_K_M, GgmlType::Q4_K, true},
    Scheme{"Q4_K_S", FileType::MostlyQ4_K_S, GgmlType::Q4_K, true},
    Scheme{"Q3_K_L", FileType::MostlyQ3_K_L, GgmlType::Q3_K, true},
    Scheme{"Q3_K_M", FileType::MostlyQ3_K_M, GgmlType::Q3_K, true},
    Scheme{"Q3_K_S", FileType::MostlyQ3_K_S, GgmlType::Q3_K, true},
    Scheme{"Q2_K", FileType::MostlyQ2_K, GgmlType::Q2_K, true},
    Scheme{"IQ4_NL", FileType::MostlyIQ4_NL, GgmlType::IQ4_NL, true},
    Scheme{"IQ4_XS", FileType::MostlyIQ4_XS, GgmlType::IQ4_XS, true},
    Scheme{"MXFP4_MOE", FileType::MostlyMXFP4_MOE, GgmlType::MXFP4, true},
};

std::string upper(std::string_view s) {
  std::string u(s);
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third in between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

bool is_float(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || type_traits(t).quantized;
}

// The rule-based type before any fallback, for a quantizable weight under a mix. Layer indices stand
// for llama.cpp's per-tensor counters (i_attention_wv, i_ffn_down), which equal them in a llama model.
std::pair<GgmlType, TypeRule> mix_type(const Scheme& s, std::string_view name, uint64_t row, uint32_t n_layers,
                                       uint32_t n_gqa, bool tied_embeddings, uint32_t n_experts) {
  using enum FileType;
  using arch::Role;
  const FileType ft = s.file_type;
  const std::optional<arch::TensorName> parsed = arch::parse_tensor_name(name);
  const auto is = [&](Role r) { return parsed && parsed->role == r; };
  if (is(Role::Output) || (tied_embeddings && is(Role::TokenEmbedding))) {
    // llama.cpp tests the row against the base type's block, before its own fallback.
    if (row % type_traits(s.base).block_elements != 0) return {GgmlType::Q8_0, TypeRule::OutputTensor};
    return {GgmlType::Q6_K, TypeRule::OutputTensor};
  }
  const int layer = parsed && parsed->layer ? static_cast<int>(*parsed->layer) : -1;
  const int n = static_cast<int>(n_layers);
  const bool iq4 = ft == MostlyIQ4_NL || ft == MostlyIQ4_XS;
  auto more = [](GgmlType t) { return std::pair{t, TypeRule::MoreBits}; };
  // llama.cpp: "for the 8-expert model, bumping this to Q8_0 trades just ~128MB" (attn_v, attn_k).
  const bool eight_experts = n_experts == 8;
  if (eight_experts && (is(Role::AttnV) || is(Role::AttnQkv) || is(Role::AttnK))) return more(GgmlType::Q8_0);
  if (eight_experts && is(Role::AttnOutput)) {
    if (ft == MostlyQ2_K || ft == MostlyQ3_K_S || ft == MostlyQ3_K_M || ft == MostlyQ4_K_S || ft == MostlyQ4_K_M || iq4)
      return more(GgmlType::Q5_K);
    return {s.base, TypeRule::Base};
  }
  if (is(Role::AttnV) || is(Role::AttnQkv)) {  // llama.cpp's category_is_attn_v: a fused qkv too
    if (ft == MostlyQ2_K) return more(n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K);
    if (ft == MostlyQ3_K_M) return more(layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K);
    if (ft == MostlyQ3_K_L) return more(GgmlType::Q5_K);
    if (iq4 && n_gqa >= 4) return more(GgmlType::Q5_K);
    if ((ft == MostlyQ4_K_M || ft == MostlyQ5_K_M) && use_more_bits(layer, n)) return more(GgmlType::Q6_K);
    if (ft == MostlyQ4_K_S && layer < 4) return more(GgmlType::Q5_K);
  } else if (is(Role::FfnDown) || is(Role::FfnDownExps)) {  // llama.cpp: any name with "ffn_down"
    if (ft == MostlyQ2_K) return more(GgmlType::Q3_K);
    if (ft == MostlyQ3_K_M) return more(layer < n / 16 ? GgmlType::Q5_K : GgmlType::Q4_K);
    if (ft == MostlyQ3_K_L) return more(GgmlType::Q5_K);
    if ((ft == MostlyQ4_K_M || ft == MostlyQ5_K_M) && use_more_bits(layer, n)) return more(GgmlType::Q6_K);
    if (iq4 && layer < n / 8) return more(GgmlType::Q5_K);
    if (ft == MostlyQ4_K_S && layer < n / 8) return more(GgmlType::Q5_K);
  } else if (is(Role::AttnOutput)) {
    if (ft == MostlyQ2_K) return more(GgmlType::Q3_K);
    if (ft == MostlyQ3_K_M) return more(GgmlType::Q4_K);
    if (ft == MostlyQ3_K_L) return more(GgmlType::Q5_K);
  }
  return {s.base, TypeRule::Base};
}

// llama.cpp's MXFP4_MOE: a stack of experts (a third dimension above 1) in MXFP4, everything else,
// the output (and a tied token_embd) included, Q8_0.
std::pair<GgmlType, TypeRule> mxfp4_moe_type(std::string_view name, std::span<const uint64_t> shape,
                                             bool tied_embeddings) {
  const std::optional<arch::TensorName> parsed = arch::parse_tensor_name(name);
  const bool output =
      parsed && (parsed->role == arch::Role::Output || (tied_embeddings && parsed->role == arch::Role::TokenEmbedding));
  if (output) return {GgmlType::Q8_0, TypeRule::OutputTensor};
  if (shape.size() >= 3 && shape[2] > 1) return {GgmlType::MXFP4, TypeRule::Base};
  return {GgmlType::Q8_0, TypeRule::NonExpert};
}

// llama.cpp's fallback for rows that do not divide into the wanted type's blocks (the type's row in
// tensor/format.cpp), then F16 where the fallback's blocks do not divide the row either.
GgmlType fallback_for(GgmlType wanted, uint64_t row) {
  const GgmlType next = type_traits(wanted).fallback;
  return row % type_traits(next).block_elements == 0 ? next : GgmlType::F16;
}

}  // namespace

std::span<const Scheme> schemes() noexcept { return kSchemes; }

std::optional<Scheme> find_scheme(std::string_view name) noexcept {
  std::string u = upper(name);
  if (u == "Q3_K") u = "Q3_K_M";
  if (u == "Q4_K") u = "Q4_K_M";
  if (u == "Q5_K") u = "Q5_K_M";
  for (const Scheme& s : kSchemes)
    if (s.name == u) return s;
  return std::nullopt;
}

std::string scheme_names() {
  std::string known;
  for (const Scheme& s : kSchemes) known += fmt::format("{}{}", known.empty() ? "" : ", ", s.name);
  return known;
}

Scheme parse_scheme(std::string_view name) {
  if (auto s = find_scheme(name)) return *s;
  throw InvalidArgument(fmt::format("unknown type '{}' (known: {})", name, scheme_names()));
}

std::string_view rule_name(TypeRule r) noexcept {
  switch (r) {
    case TypeRule::Base: return "base";
    case TypeRule::KeptF32: return "kept-f32";
    case TypeRule::Copied: return "copied";
    case TypeRule::OutputTensor: return "output-tensor";
    case TypeRule::MoreBits: return "more-bits";
    case TypeRule::NonExpert: return "non-expert";
  }
  return "?";
}

std::string_view fallback_reason_name(FallbackReason r) noexcept {
  switch (r) {
    case FallbackReason::RowNotMultipleOfBlock: return "row-not-multiple-of-block";
  }
  return "?";
}

bool is_quantizable(std::string_view name, std::span<const uint64_t> shape) noexcept {
  const auto parsed = arch::parse_tensor_name(name);
  return ends_with(name, "weight") && shape.size() >= 2 && !contains(name, "_norm.weight") &&
         !(parsed && parsed->role == arch::Role::FfnGateInp);
}

TensorChoice choose_type(const Scheme& scheme, std::string_view name, std::span<const uint64_t> shape, GgmlType source,
                         uint32_t n_layers, uint32_t n_gqa, bool tied_embeddings, uint32_t n_experts) {
  TensorChoice c;
  c.name = std::string(name);
  c.shape.assign(shape.begin(), shape.end());
  c.source = source;
  if (!is_float(source)) {
    c.type = source;
    c.rule = TypeRule::Copied;
    return c;
  }
  if (!is_quantizable(name, shape)) {
    c.type = GgmlType::F32;
    c.rule = TypeRule::KeptF32;
    return c;
  }
  const uint64_t row = shape.empty() ? 1 : shape[0];
  GgmlType wanted = scheme.base;
  c.rule = TypeRule::Base;
  if (scheme.file_type == FileType::MostlyMXFP4_MOE)
    std::tie(wanted, c.rule) = mxfp4_moe_type(name, shape, tied_embeddings);
  else if (scheme.mixed)
    std::tie(wanted, c.rule) = mix_type(scheme, name, row, n_layers, n_gqa, tied_embeddings, n_experts);
  const uint32_t block = type_traits(wanted).block_elements;
  c.type = wanted;
  if (row % block != 0) {
    c.type = fallback_for(wanted, row);
    c.fallback = Fallback{wanted, c.type, FallbackReason::RowNotMultipleOfBlock, row, block};
  }
  return c;
}

size_t Report::fallback_count() const noexcept {
  return static_cast<size_t>(
      std::count_if(tensors.begin(), tensors.end(), [](const TensorChoice& t) { return t.fallback.has_value(); }));
}

}  // namespace skainet::convert
