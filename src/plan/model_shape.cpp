#include <fmt/format.h>

#include "skainet/plan.hpp"

namespace skainet::plan {

ModelShape ModelShape::from_header(const gguf::Header& h) {
  ModelShape m;
  m.architecture = h.get_string("general.architecture");
  const std::string a = m.architecture + ".";
  m.layers = h.get_u32(a + "block_count");
  m.dim = h.get_u32(a + "embedding_length");
  m.heads = h.get_u32(a + "attention.head_count");
  m.kv_heads = h.find_u32(a + "attention.head_count_kv").value_or(m.heads);
  m.ffn = h.get_u32(a + "feed_forward_length");
  m.ctx_train = h.get_u32(a + "context_length");
  if (m.heads == 0 || m.kv_heads == 0 || m.heads % m.kv_heads != 0)
    throw gguf::FormatError(gguf::FormatErrorKind::WrongValueType,
                            fmt::format("{}: {}attention.head_count {} is not a positive multiple of head_count_kv {}",
                                        h.path.string(), a, m.heads, m.kv_heads));
  m.head_dim = h.find_u32(a + "attention.key_length").value_or(m.dim / m.heads);
  m.rope_dims = h.find_u32(a + "rope.dimension_count").value_or(m.head_dim);
  m.rope_base = h.find_f32(a + "rope.freq_base").value_or(10000.0f);
  m.rms_eps = h.find_f32(a + "attention.layer_norm_rms_epsilon").value_or(1e-5f);
  m.qkv_bias = h.find_tensor("blk.0.attn_q.bias") != nullptr;
  m.neox_rope = m.architecture == "qwen2";
  if (const auto* type = h.find(a + "rope.scaling.type");
      type && type->type == gguf::ValueType::String && std::get<std::string>(type->scalar) == "linear")
    m.rope_scale = h.find_f32(a + "rope.scaling.factor").value_or(1.0f);
  if (auto v = h.find_u32(a + "vocab_size")) {
    m.vocab = *v;
  } else if (const auto* t = h.find_tensor("token_embd.weight"); t && t->shape.size() == 2) {
    m.vocab = static_cast<uint32_t>(t->shape[1]);
  } else if (const auto* tokens = h.find("tokenizer.ggml.tokens"); tokens && tokens->is_array()) {
    m.vocab = static_cast<uint32_t>(tokens->items.size());
  }
  return m;
}

}  // namespace skainet::plan
