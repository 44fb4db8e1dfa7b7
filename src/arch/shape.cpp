// The hyper-parameters of a model: the one place their GGUF keys are spelled, read (from_header)
// and written (metadata, for synth) with llama.cpp's defaults for the optional ones.
#include <array>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "skainet/io/arch.hpp"

namespace skainet::arch {
namespace {

constexpr std::array<std::string_view, 24> kKeySuffix = {
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.dimension_count",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "rope.scaling.attn_factor",
    "vocab_size",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "rope.freq_base_swa",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
};
static_assert(kKeySuffix.size() == static_cast<size_t>(Key::ExpertFeedForwardLength) + 1);

// Families whose experts have a width of their own (qwen3moe's expert_feed_forward_length, llama.cpp's
// default feed_forward_length / expert_used_count); Mixtral's experts are feed_forward_length wide.
bool has_expert_ffn_key(Family f) { return f == Family::Qwen3Moe || f == Family::GptOss; }

// The router's and experts' sizes, read as llama.cpp reads them; a llama file is Mixtral when it
// counts experts.
void read_experts(const gguf::Header& h, ModelShape& m) {
  const auto k = [&](Key which) { return key(m.architecture, which); };
  if (m.family == Family::Llama) m.features.moe = h.find_u32(k(Key::ExpertCount)).value_or(0) > 0;
  if (!m.features.moe) return;
  m.experts = h.get_u32(k(Key::ExpertCount));
  m.experts_used = h.get_u32(k(Key::ExpertUsedCount));
  if (m.experts == 0 || m.experts_used == 0 || m.experts_used > m.experts)
    throw gguf::FormatError(gguf::FormatErrorKind::WrongValueType,
                            fmt::format("{}: {} {} is not between 1 and {} {}", h.path.string(),
                                        k(Key::ExpertUsedCount), m.experts_used, k(Key::ExpertCount), m.experts));
  m.expert_ffn = has_expert_ffn_key(*m.family)
                     ? h.find_u32(k(Key::ExpertFeedForwardLength)).value_or(m.ffn / m.experts_used)
                     : m.ffn;
}

// Gemma's hyper-parameters where a file is silent: llama.cpp's defaults (load_arch_hparams of
// gemma2.cpp / gemma3.cpp). Gemma 3 has no window unless the file gives one.
struct GemmaDefaults {
  uint32_t window, pattern;
  float attn_softcap, final_softcap;
};
constexpr GemmaDefaults kGemma2Defaults{4096, 2, 50.0f, 30.0f}, kGemma3Defaults{0, 6, 0.0f, 0.0f};

// Read as llama.cpp reads them, with the defaults above; the query scale of the 27B models
// (1 / sqrt(dim / heads) instead of 1 / sqrt(head_dim)) comes from the layer count, as there.
void read_gemma(const gguf::Header& h, ModelShape& m) {
  const auto k = [&](Key which) { return key(m.architecture, which); };
  const bool gemma2 = m.family == Family::Gemma2;
  const GemmaDefaults& d = gemma2 ? kGemma2Defaults : kGemma3Defaults;
  m.sliding_window = h.find_u32(k(Key::SlidingWindow)).value_or(d.window);
  m.final_softcap = h.find_f32(k(Key::FinalLogitSoftcapping)).value_or(d.final_softcap);
  if (gemma2) {
    m.swa_pattern = h.find_u32(k(Key::SlidingWindowPattern)).value_or(d.pattern);
    m.attn_softcap = h.find_f32(k(Key::AttnLogitSoftcapping)).value_or(d.attn_softcap);
    m.rope_base_swa = h.find_f32(k(Key::RopeFreqBaseSwa)).value_or(m.rope_base);
    m.rope_scale_swa = m.rope_scale;
  } else {
    m.swa_pattern = m.sliding_window > 0 ? h.find_u32(k(Key::SlidingWindowPattern)).value_or(d.pattern) : 0;
    m.rope_base_swa = h.find_f32(k(Key::RopeFreqBaseSwa)).value_or(10000.0f);
    m.rope_scale_swa = 1.0f;
  }
  const bool is_27b = m.layers == (gemma2 ? 46u : 62u);
  m.attention_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? m.dim / m.heads : m.head_dim));
}

// gpt-oss as llama_model_openai_moe reads it: a window on every other layer (the first of each pair,
// pattern 2 unless the file says otherwise), windowed layers on their own RoPE base when given and
// the global layers' scaling (its released files' YaRN).
constexpr uint32_t kGptOssPattern = 2, kGptOssWindow = 128;
void read_gpt_oss(const gguf::Header& h, ModelShape& m) {
  const auto k = [&](Key which) { return key(m.architecture, which); };
  m.sliding_window = h.get_u32(k(Key::SlidingWindow));
  m.swa_pattern = h.find_u32(k(Key::SlidingWindowPattern)).value_or(kGptOssPattern);
  m.rope_base_swa = h.find_f32(k(Key::RopeFreqBaseSwa)).value_or(m.rope_base);
  m.rope_scale_swa = m.rope_scale;
}

constexpr std::array<std::string_view, 3> kRopeScalingName = {"none", "linear", "yarn"};
static_assert(kRopeScalingName.size() == static_cast<size_t>(RopeScaling::Yarn) + 1);

// rope.scaling.* as llama.cpp's load_hparams and context read them: the type (absent: linear), the
// factor whatever the type (0 or absent: 1), ignored for "none"; YaRN's original context (absent or
// 0: the training context); the magnitude factor.
void read_rope_scaling(const gguf::Header& h, ModelShape& m) {
  const auto k = [&](Key which) { return key(m.architecture, which); };
  if (h.find(k(Key::RopeScalingType))) {
    const std::string name = h.get_string(k(Key::RopeScalingType));
    const std::optional<RopeScaling> r = parse_rope_scaling(name);
    if (!r)
      throw gguf::FormatError(gguf::FormatErrorKind::WrongValueType,
                              fmt::format("{}: {} '{}' is not supported by this engine (supported: {})",
                                          h.path.string(), k(Key::RopeScalingType), name, rope_scaling_names()));
    m.rope_scaling = *r;
  }
  const float factor = h.find_f32(k(Key::RopeScalingFactor)).value_or(0.0f);
  m.rope_scale = m.rope_scaling == RopeScaling::None || factor == 0.0f ? 1.0f : factor;
  if (m.rope_scaling == RopeScaling::Yarn) {
    const uint32_t orig = h.find_u32(k(Key::RopeScalingOrigCtx)).value_or(0);
    m.yarn_orig_ctx = orig != 0 ? orig : m.ctx_train;
  }
  m.rope_attn_factor = h.find_f32(k(Key::RopeScalingAttnFactor)).value_or(1.0f);
}

std::string variant_names() {
  std::string names;
  for (const Variant& v : variants()) names += fmt::format("{}{}", names.empty() ? "" : ", ", v.name);
  return names;
}

}  // namespace

std::string key(std::string_view architecture, Key k) {
  return fmt::format("{}.{}", architecture, kKeySuffix[static_cast<size_t>(k)]);
}

std::string_view rope_scaling_name(RopeScaling r) noexcept { return kRopeScalingName[static_cast<size_t>(r)]; }

std::string rope_scaling_names() { return fmt::format("{}", fmt::join(kRopeScalingName, ", ")); }

std::optional<RopeScaling> parse_rope_scaling(std::string_view name) noexcept {
  for (size_t i = 0; i < kRopeScalingName.size(); ++i)
    if (kRopeScalingName[i] == name) return static_cast<RopeScaling>(i);
  return std::nullopt;
}

ModelShape ModelShape::from_header(const gguf::Header& h) {
  ModelShape m;
  m.architecture = h.get_string("general.architecture");
  if (const FamilyInfo* f = find_family(m.architecture)) {
    m.family = f->family;
    m.features = f->features;
  }
  const auto k = [&](Key which) { return key(m.architecture, which); };
  m.layers = h.get_u32(k(Key::BlockCount));
  m.dim = h.get_u32(k(Key::EmbeddingLength));
  m.heads = h.get_u32(k(Key::HeadCount));
  m.kv_heads = h.find_u32(k(Key::HeadCountKv)).value_or(m.heads);
  m.ffn = h.get_u32(k(Key::FeedForwardLength));
  m.ctx_train = h.get_u32(k(Key::ContextLength));
  if (m.heads == 0 || m.kv_heads == 0 || m.heads % m.kv_heads != 0)
    throw gguf::FormatError(gguf::FormatErrorKind::WrongValueType,
                            fmt::format("{}: {} {} is not a positive multiple of {} {}", h.path.string(),
                                        k(Key::HeadCount), m.heads, k(Key::HeadCountKv), m.kv_heads));
  m.head_dim = h.find_u32(k(Key::KeyLength)).value_or(m.dim / m.heads);
  if (const auto v = h.find_u32(k(Key::ValueLength)); v && *v != m.head_dim)
    throw gguf::FormatError(gguf::FormatErrorKind::WrongValueType,
                            fmt::format("{}: {} {} differs from {} {}; the KV cache needs them equal", h.path.string(),
                                        k(Key::ValueLength), *v, k(Key::KeyLength), m.head_dim));
  // llama.cpp's llama graph takes q/k/v biases when a file has them (Qwen2's always has).
  if (h.find_tensor(layer_tensor_name(0, Role::AttnQBias))) m.features.qkv_bias = true;
  if (m.family == Family::Llama && h.find_tensor(role_name(Role::RopeFreqs))) m.features.rope_freqs = true;
  m.rope_dims = h.find_u32(k(Key::RopeDimensionCount)).value_or(m.head_dim);
  m.rope_base = h.find_f32(k(Key::RopeFreqBase)).value_or(10000.0f);
  m.rms_eps = h.find_f32(k(Key::RmsEpsilon)).value_or(1e-5f);
  read_rope_scaling(h, m);
  if (m.family == Family::Gemma2 || m.family == Family::Gemma3) read_gemma(h, m);
  if (m.family == Family::GptOss) read_gpt_oss(h, m);
  if (m.family) read_experts(h, m);
  if (auto v = h.find_u32(k(Key::VocabSize))) {
    m.vocab = *v;
  } else if (const auto* t = h.find_tensor(role_name(Role::TokenEmbedding)); t && t->shape.size() == 2) {
    m.vocab = static_cast<uint32_t>(t->shape[1]);
  } else if (const auto* tokens = h.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    m.vocab = static_cast<uint32_t>(tokens->items.size());
  }
  return m;
}

ModelShape ModelShape::of_family(std::string_view name) {
  const Variant* variant = nullptr;
  for (const Variant& v : variants())
    if (v.name == name) variant = &v;
  const std::string_view architecture = variant ? variant->architecture : name;
  const FamilyInfo* f = find_family(architecture);
  if (!f)
    throw InvalidArgument(fmt::format("architecture '{}' has no forward pass here (supported: {}; variants: {})", name,
                                      supported_architectures(), variant_names()));
  ModelShape m;
  m.architecture = std::string(architecture);
  m.family = f->family;
  m.features = f->features;
  if (variant) {
    m.rope_base = variant->rope_base;
    m.features.rope_freqs = variant->llama3_rope_freqs;
    if (variant->experts) m.features.moe = true, m.experts = variant->experts, m.experts_used = variant->experts_used;
  }
  if (m.family == Family::Gemma2) {  // llama.cpp's defaults (Gemma 2 2B's values)
    const GemmaDefaults& d = kGemma2Defaults;
    m.sliding_window = d.window, m.swa_pattern = d.pattern, m.attn_softcap = d.attn_softcap;
    m.final_softcap = d.final_softcap;
  } else if (m.family == Family::Gemma3) {  // Gemma 3 1B's: a 512 window, global RoPE base 1e6
    m.sliding_window = 512, m.swa_pattern = kGemma3Defaults.pattern, m.rope_base = 1000000.0f, m.rms_eps = 1e-6f;
  } else if (m.features.moe && !m.experts) {  // Qwen3-30B-A3B routes 8 of 128; a small synth 2 of 8
    m.experts = 8, m.experts_used = 2;
  }
  if (m.family == Family::GptOss)  // gpt-oss-20b's window, pattern and router (4 of 32; a synth 2 of 8)
    m.sliding_window = kGptOssWindow, m.swa_pattern = kGptOssPattern;
  return m;
}

std::vector<gguf::KeyValue> ModelShape::metadata() const {
  const auto k = [&](Key which) { return key(architecture, which); };
  std::vector<gguf::KeyValue> kv = {
      {k(Key::ContextLength), gguf::Value::u32(ctx_train)},
      {k(Key::EmbeddingLength), gguf::Value::u32(dim)},
      {k(Key::BlockCount), gguf::Value::u32(layers)},
      {k(Key::FeedForwardLength), gguf::Value::u32(ffn)},
      {k(Key::RopeDimensionCount), gguf::Value::u32(rope_dims)},
      {k(Key::HeadCount), gguf::Value::u32(heads)},
      {k(Key::HeadCountKv), gguf::Value::u32(kv_heads)},
      {k(Key::RmsEpsilon), gguf::Value::f32(rms_eps)},
      {k(Key::RopeFreqBase), gguf::Value::f32(rope_base)},
      {k(Key::VocabSize), gguf::Value::u32(vocab)},
  };
  // Written only where it differs from what dim / heads implies (Qwen3's 128 at any width).
  if (heads == 0 || head_dim != dim / heads) {
    kv.push_back({k(Key::KeyLength), gguf::Value::u32(head_dim)});
    kv.push_back({k(Key::ValueLength), gguf::Value::u32(head_dim)});
  }
  if (family == Family::Gemma2 || family == Family::Gemma3) {  // llama.cpp's defaults, written out
    kv.push_back({k(Key::SlidingWindow), gguf::Value::u32(sliding_window)});
    kv.push_back({k(Key::SlidingWindowPattern), gguf::Value::u32(swa_pattern)});
    kv.push_back({k(Key::RopeFreqBaseSwa), gguf::Value::f32(rope_base_swa)});
    if (family == Family::Gemma2) kv.push_back({k(Key::AttnLogitSoftcapping), gguf::Value::f32(attn_softcap)});
    kv.push_back({k(Key::FinalLogitSoftcapping), gguf::Value::f32(final_softcap)});
  }
  if (family == Family::GptOss) kv.push_back({k(Key::SlidingWindow), gguf::Value::u32(sliding_window)});
  if (features.moe) {
    kv.push_back({k(Key::ExpertCount), gguf::Value::u32(experts)});
    kv.push_back({k(Key::ExpertUsedCount), gguf::Value::u32(experts_used)});
    if (family && has_expert_ffn_key(*family))
      kv.push_back({k(Key::ExpertFeedForwardLength), gguf::Value::u32(expert_ffn)});
  }
  if (rope_scaling != RopeScaling::Linear || rope_scale != 1.0f)
    kv.push_back({k(Key::RopeScalingType), gguf::Value::string(std::string(rope_scaling_name(rope_scaling)))});
  if (rope_scale != 1.0f) kv.push_back({k(Key::RopeScalingFactor), gguf::Value::f32(rope_scale)});
  if (rope_scaling == RopeScaling::Yarn) kv.push_back({k(Key::RopeScalingOrigCtx), gguf::Value::u32(yarn_orig_ctx)});
  if (rope_attn_factor != 1.0f) kv.push_back({k(Key::RopeScalingAttnFactor), gguf::Value::f32(rope_attn_factor)});
  return kv;
}

}  // namespace skainet::arch
