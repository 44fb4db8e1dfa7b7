#include <fmt/format.h>

#include "skainet/model.hpp"

namespace skainet::model {
namespace {

// Collects every problem before throwing, so one run names all missing tensors.
class Binder {
 public:
  explicit Binder(const load::LoadedModel& m) : m_(m) {}

  Tensor need(const std::string& name, Shape shape) {
    const Tensor* t = m_.find(name);
    if (!t) {
      problems_ += fmt::format("\n  missing tensor '{}' (expected {})", name, shape.to_string());
      return {};
    }
    if (t->shape() != shape) problems_ += fmt::format("\n  tensor '{}' is {}, expected {}", name, t->shape().to_string(), shape.to_string());
    return *t;
  }
  Tensor optional(const std::string& name, Shape shape) { return m_.find(name) ? need(name, shape) : Tensor{}; }
  void finish(const plan::ModelShape& s) const {
    if (!problems_.empty())
      throw Error(fmt::format("{} model (layers {}, dim {}, heads {}/{}, ffn {}, vocab {}) does not match its tensors:{}",
                              s.architecture, s.layers, s.dim, s.heads, s.kv_heads, s.ffn, s.vocab, problems_));
  }

 private:
  const load::LoadedModel& m_;
  std::string problems_;
};

}  // namespace

bool supports_architecture(std::string_view arch) noexcept {
  return arch == "llama" || arch == "mistral" || arch == "qwen2";
}

LlamaWeights LlamaWeights::bind(const load::LoadedModel& loaded, const plan::ModelShape& s) {
  if (!supports_architecture(s.architecture))
    throw Error(fmt::format("architecture '{}' is not supported (supported: llama, mistral, qwen2)", s.architecture));
  const auto d = static_cast<int64_t>(s.dim), f = static_cast<int64_t>(s.ffn), v = static_cast<int64_t>(s.vocab);
  const auto q = static_cast<int64_t>(s.heads) * s.head_dim, kv = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  Binder b(loaded);
  LlamaWeights w;
  w.tok_embd = b.need("token_embd.weight", {v, d});
  w.output_norm = b.need("output_norm.weight", {d});
  w.output = loaded.find("output.weight") ? b.need("output.weight", {v, d}) : w.tok_embd;
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights lw;
    lw.attn_norm = b.need(p + "attn_norm.weight", {d});
    lw.wq = b.need(p + "attn_q.weight", {q, d});
    lw.wk = b.need(p + "attn_k.weight", {kv, d});
    lw.wv = b.need(p + "attn_v.weight", {kv, d});
    lw.wo = b.need(p + "attn_output.weight", {d, q});
    if (s.qkv_bias) {
      lw.bq = b.need(p + "attn_q.bias", {q});
      lw.bk = b.need(p + "attn_k.bias", {kv});
      lw.bv = b.need(p + "attn_v.bias", {kv});
    }
    lw.ffn_norm = b.need(p + "ffn_norm.weight", {d});
    lw.w_gate = b.need(p + "ffn_gate.weight", {f, d});
    lw.w_up = b.need(p + "ffn_up.weight", {f, d});
    lw.w_down = b.need(p + "ffn_down.weight", {d, f});
    w.layers.push_back(std::move(lw));
  }
  b.finish(s);
  return w;
}

}  // namespace skainet::model
