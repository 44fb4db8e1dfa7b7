#include <fmt/format.h>

#include "skainet/model/record.hpp"

namespace skainet::record {
namespace {

// Appends every op call to the tape; the model's tensors are symbolic, so nothing is computed.
class TapeRecorder final : public ops::Recorder {
 public:
  TapeRecorder(Tape& tape, std::span<const int32_t> tokens) : tape_(tape), tokens_(tokens) {}

  void record(const ops::OpCall& call) override {
    TapeOp op{.kind = call.kind, .output = TensorRef::of(call.output), .attrs = call.attrs};
    for (const Tensor* t : call.inputs) op.inputs.push_back(TensorRef::of(*t));
    if (call.kind == ops::OpKind::GatherRows) {
      // Identity, not value: the entry's token argument is this exact buffer.
      op.ids_are_tokens = call.ids.data() == tokens_.data() && call.ids.size() == tokens_.size();
      if (!op.ids_are_tokens) op.ids.assign(call.ids.begin(), call.ids.end());
    }
    note_source(call.output);
    tape_.ops.push_back(std::move(op));
  }

 private:
  void note_source(const Tensor& t) {
    const uint64_t id = t.storage().id();
    if (tape_.sources.count(id)) return;
    tape_.sources[id] =
        Source{.kind = SourceKind::Intermediate, .shape = t.shape(), .type = t.type(), .order = t.block_order()};
  }

  Tape& tape_;
  std::span<const int32_t> tokens_;
};

}  // namespace

TensorRef TensorRef::of(const Tensor& t) {
  if (!t.defined() || !t.storage().symbolic())
    throw InvalidArgument(
        fmt::format("recording: {} is not a recorded value (a tensor with data reached a "
                    "recording; only symbolic tensors may)",
                    t.describe()));
  return {t.storage().id(), t.offset(), t.shape(), t.strides(), t.type(), t.block_order()};
}

Tensor SymbolicScope::allocate(const Shape& shape, GgmlType type, std::string_view origin) {
  return Tensor(Storage::symbolic(contiguous_bytes(shape, type), origin), shape, type);
}

load::LoadedModel symbolic_weights(const plan::MemoryPlan& plan) {
  load::LoadedModel m;
  for (const placement::Decision& d : plan.tensors) {
    const Shape shape = Shape::from_ggml(d.shape);
    Tensor t(Storage::symbolic(contiguous_bytes(shape, d.held_type), d.tensor), shape, d.held_type, 0, d.held_order);
    m.names.push_back(d.tensor);
    m.weights.emplace(d.tensor, std::move(t));
  }
  return m;
}

Tape record_entry(model::Transformer& llama, const load::LoadedModel& weights, const load::KvCacheStore& kv,
                  SymbolicScope& scope, const EntrySpec& entry) {
  if (entry.tokens <= 0 || static_cast<uint64_t>(entry.tokens) > kv.n_ctx())
    throw InvalidArgument(
        fmt::format("record {}: {} tokens do not fit a context of {}", entry.name, entry.tokens, kv.n_ctx()));
  Tape tape;
  tape.entry = entry;
  tape.kv = plan::KvCachePlan{.k_type = kv.k_type(),
                              .v_type = kv.v_type(),
                              .layers = llama.shape().layers,
                              .n_ctx = kv.n_ctx(),
                              .kv_heads = llama.shape().kv_heads,
                              .head_dim = llama.shape().head_dim};
  for (const auto& [name, t] : weights.weights)
    tape.sources[t.storage().id()] = Source{
        .kind = SourceKind::Weight, .name = name, .shape = t.shape(), .type = t.type(), .order = t.block_order()};
  for (uint32_t l = 0; l < llama.shape().layers; ++l) {
    tape.sources[kv.k(l).storage().id()] =
        Source{.kind = SourceKind::KCache, .layer = l, .shape = kv.k(l).shape(), .type = kv.k_type()};
    tape.sources[kv.v(l).storage().id()] =
        Source{.kind = SourceKind::VCache, .layer = l, .shape = kv.v(l).shape(), .type = kv.v_type()};
  }
  // Token ids are only shapes here (a valid id, 0, fills them); positions start at 0 and, for a
  // dynamic-position entry, every op position is taken relative to the position argument.
  const std::vector<int32_t> tokens(static_cast<size_t>(entry.tokens), 0);
  memory::ExecutionContext ctx(1);
  TapeRecorder recorder(tape, tokens);
  {
    auto recording = ctx.record_with(recorder, scope);
    const Tensor logits = llama.forward(ctx, tokens, 0, entry.logits);
    tape.result = TensorRef::of(logits);
  }
  return tape;
}

}  // namespace skainet::record
