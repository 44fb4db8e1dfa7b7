#include <fmt/format.h>

#include "skainet/model/model.hpp"

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
    if (t->shape() != shape)
      problems_ += fmt::format("\n  tensor '{}' is {}, expected {}", name, t->shape().to_string(), shape.to_string());
    return *t;
  }
  Tensor optional(const std::string& name, Shape shape) { return m_.find(name) ? need(name, shape) : Tensor{}; }
  void finish(const arch::ModelShape& s) const {
    if (!problems_.empty())
      throw Error(
          fmt::format("{} model (layers {}, dim {}, heads {}/{}, ffn {}, vocab {}) does not match its tensors:{}",
                      s.architecture, s.layers, s.dim, s.heads, s.kv_heads, s.ffn, s.vocab, problems_));
  }

 private:
  const load::LoadedModel& m_;
  std::string problems_;
};

// The field each per-layer role binds.
struct LayerField {
  arch::Role role;
  Tensor LayerWeights::*field;
};
constexpr LayerField kLayerFields[] = {
    {arch::Role::AttnNorm, &LayerWeights::attn_norm},
    {arch::Role::AttnQ, &LayerWeights::wq},
    {arch::Role::AttnK, &LayerWeights::wk},
    {arch::Role::AttnV, &LayerWeights::wv},
    {arch::Role::AttnOutput, &LayerWeights::wo},
    {arch::Role::AttnQBias, &LayerWeights::bq},
    {arch::Role::AttnKBias, &LayerWeights::bk},
    {arch::Role::AttnVBias, &LayerWeights::bv},
    {arch::Role::AttnQNorm, &LayerWeights::q_norm},
    {arch::Role::AttnKNorm, &LayerWeights::k_norm},
    {arch::Role::FfnNorm, &LayerWeights::ffn_norm},
    {arch::Role::FfnGate, &LayerWeights::w_gate},
    {arch::Role::FfnUp, &LayerWeights::w_up},
    {arch::Role::FfnDown, &LayerWeights::w_down},
    {arch::Role::AttnPostNorm, &LayerWeights::attn_post_norm},
    {arch::Role::FfnPostNorm, &LayerWeights::ffn_post_norm},
    {arch::Role::FfnGateInp, &LayerWeights::router},
    {arch::Role::FfnGateExps, &LayerWeights::gate_exps},
    {arch::Role::FfnUpExps, &LayerWeights::up_exps},
    {arch::Role::FfnDownExps, &LayerWeights::down_exps},
    {arch::Role::AttnSinks, &LayerWeights::sinks},
    {arch::Role::AttnOutputBias, &LayerWeights::bo},
    {arch::Role::FfnGateInpBias, &LayerWeights::router_bias},
    {arch::Role::FfnGateExpsBias, &LayerWeights::gate_exps_bias},
    {arch::Role::FfnUpExpsBias, &LayerWeights::up_exps_bias},
    {arch::Role::FfnDownExpsBias, &LayerWeights::down_exps_bias},
};

Tensor* layer_field(LayerWeights& lw, arch::Role role) {
  for (const LayerField& f : kLayerFields)
    if (f.role == role) return &(lw.*f.field);
  return nullptr;
}

}  // namespace

// Names and shapes come from the architecture's table (arch::model_tensors / layer_tensors), the one
// the plan checks the header against before anything is allocated; this only routes each role to its
// field.
TransformerWeights TransformerWeights::bind(const load::LoadedModel& loaded, const arch::ModelShape& s) {
  if (!s.family)
    throw Error(fmt::format("architecture '{}' is not supported (supported: {})", s.architecture,
                            arch::supported_architectures()));
  Binder b(loaded);
  auto bind = [&](const std::string& name, const arch::TensorSpec& r) {
    const Shape shape = Shape::from_ggml(r.shape);
    return r.optional ? b.optional(name, shape) : b.need(name, shape);
  };
  TransformerWeights w;
  for (const auto& r : arch::model_tensors(s)) {
    const Tensor t = bind(std::string(r.name()), r);
    switch (r.role) {
      case arch::Role::TokenEmbedding: w.tok_embd = t; break;
      case arch::Role::OutputNorm: w.output_norm = t; break;
      case arch::Role::Output: w.output = t; break;
      case arch::Role::RopeFreqs: w.rope_freqs = t; break;
      default: throw Error(fmt::format("internal: the model has no field for '{}'", r.name()));
    }
  }
  if (!w.output.defined()) w.output = w.tok_embd;
  const std::vector<arch::TensorSpec> per_layer = arch::layer_tensors(s);
  w.layers.reserve(s.layers);
  for (uint32_t l = 0; l < s.layers; ++l) {
    LayerWeights lw;
    Tensor qkv, gate_up;  // fused weights (Phi-3), split into views of their row ranges below
    for (const auto& r : per_layer) {
      // gpt-oss stores the FFN's input norm as post_attention_norm.
      Tensor* field = r.role == arch::Role::AttnQkv                                         ? &qkv
                      : r.role == arch::Role::FfnUp && s.features.fused_gate_up             ? &gate_up
                      : r.role == arch::Role::AttnPostNorm && s.features.ffn_norm_post_attn ? &lw.ffn_norm
                                                                                            : layer_field(lw, r.role);
      if (!field) throw Error(fmt::format("internal: the model has no field for '{}'", r.name()));
      *field = bind(arch::layer_tensor_name(l, r.role), r);
    }
    // Rows are output features, so each part of a fused weight is a row range: the same matmuls as
    // separate weights, with no copy.
    if (qkv.defined() && qkv.dim(0) == int64_t{s.q_dim()} + 2 * int64_t{s.kv_dim()}) {
      lw.wq = qkv.rows(0, s.q_dim());
      lw.wk = qkv.rows(s.q_dim(), s.kv_dim());
      lw.wv = qkv.rows(s.q_dim() + s.kv_dim(), s.kv_dim());
    }
    if (gate_up.defined() && gate_up.dim(0) == 2 * int64_t{s.ffn}) {
      lw.w_gate = gate_up.rows(0, s.ffn);
      lw.w_up = gate_up.rows(s.ffn, s.ffn);
    }
    w.layers.push_back(std::move(lw));
  }
  b.finish(s);
  return w;
}

}  // namespace skainet::model
