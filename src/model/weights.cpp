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

bool supports_architecture(std::string_view arch) noexcept { return plan::supports_architecture(arch); }

// Names and shapes come from the plan's table (plan::model_tensors / layer_tensors), the one the plan
// checks the header against before anything is allocated; this only routes each entry to its field.
LlamaWeights LlamaWeights::bind(const load::LoadedModel& loaded, const plan::ModelShape& s) {
  if (!supports_architecture(s.architecture))
    throw Error(fmt::format("architecture '{}' is not supported (supported: llama, mistral, qwen2)", s.architecture));
  Binder b(loaded);
  auto bind = [&](const std::string& name, const plan::RequiredTensor& r) {
    const Shape shape = Shape::from_ggml(r.shape);
    return r.optional ? b.optional(name, shape) : b.need(name, shape);
  };
  LlamaWeights w;
  for (const auto& r : plan::model_tensors(s)) {
    const Tensor t = bind(r.name, r);
    if (r.name == "token_embd.weight") w.tok_embd = t;
    else if (r.name == "output_norm.weight") w.output_norm = t;
    else if (r.name == "output.weight") w.output = t;
  }
  if (!w.output.defined()) w.output = w.tok_embd;
  const std::vector<plan::RequiredTensor> per_layer = plan::layer_tensors(s);
  w.layers.reserve(s.layers);
  for (uint32_t l = 0; l < s.layers; ++l) {
    LayerWeights lw;
    for (const auto& r : per_layer) {
      Tensor* field = r.name == "attn_norm.weight"     ? &lw.attn_norm
                      : r.name == "attn_q.weight"      ? &lw.wq
                      : r.name == "attn_k.weight"      ? &lw.wk
                      : r.name == "attn_v.weight"      ? &lw.wv
                      : r.name == "attn_output.weight" ? &lw.wo
                      : r.name == "attn_q.bias"        ? &lw.bq
                      : r.name == "attn_k.bias"        ? &lw.bk
                      : r.name == "attn_v.bias"        ? &lw.bv
                      : r.name == "ffn_norm.weight"    ? &lw.ffn_norm
                      : r.name == "ffn_gate.weight"    ? &lw.w_gate
                      : r.name == "ffn_up.weight"      ? &lw.w_up
                      : r.name == "ffn_down.weight"    ? &lw.w_down
                                                       : nullptr;
      if (!field) throw Error(fmt::format("internal: the tensor table names '{}', which the model has no field for", r.name));
      *field = bind(plan::layer_tensor_name(l, r.name), r);
    }
    w.layers.push_back(std::move(lw));
  }
  b.finish(s);
  return w;
}

}  // namespace skainet::model
