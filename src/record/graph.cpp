#include <fmt/format.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/model/record.hpp"

namespace skainet::record {
namespace {

bool whole(const TensorRef& r, const Source& s) {
  return r.offset == 0 && r.shape == s.shape && r.strides == contiguous_strides(s.shape, s.type);
}

// Whole rows of a 2-D weight, as the model binds the parts of a fused weight (Phi-3's q, k and v of
// attn_qkv): the emitter slices them out of the weight's dense form.
bool row_range(const TensorRef& r, const Source& s) {
  if (r.shape.rank() != 2 || s.shape.rank() != 2 || r.shape[1] != s.shape[1]) return false;
  return r.offset % row_bytes(s.type, static_cast<uint64_t>(s.shape[1])) == 0 &&
         r.strides == contiguous_strides(s.shape, s.type);
}

class GraphBuilder {
 public:
  explicit GraphBuilder(const Tape& tape) : tape_(tape) { g_.tape = &tape; }

  ComputeGraph build() {
    for (const TapeOp& op : tape_.ops) add_op(op);
    g_.result = resolve(tape_.result, "the result");
    return std::move(g_);
  }

 private:
  int push(Node n) {
    g_.nodes.push_back(std::move(n));
    return static_cast<int>(g_.nodes.size()) - 1;
  }

  const Source& source(const TensorRef& r, std::string_view what) const {
    auto it = tape_.sources.find(r.storage);
    if (it == tape_.sources.end())
      throw Error(fmt::format("record {}: {} reads storage #{} that no op of the recording produced", tape_.entry.name,
                              what, r.storage));
    return it->second;
  }

  // The node holding a whole storage as it stands now.
  int base(const TensorRef& r, const Source& s) {
    switch (s.kind) {
      case SourceKind::Weight: {
        auto [it, fresh] = parameters_.try_emplace(s.name, -1);
        if (fresh)
          it->second = push(
              Node{.kind = NodeKind::Parameter, .shape = s.shape, .type = s.type, .name = s.name, .order = s.order});
        return it->second;
      }
      case SourceKind::KCache:
      case SourceKind::VCache:
        // Each read sees the cache as written so far: the emitter resolves it in program order.
        return push(
            Node{.kind = NodeKind::CacheRead, .shape = s.shape, .type = s.type, .cache = s.kind, .layer = s.layer});
      case SourceKind::Intermediate: {
        auto it = values_.find(r.storage);
        if (it == values_.end())
          throw Error(
              fmt::format("record {}: storage #{} is read before any op wrote it", tape_.entry.name, r.storage));
        return it->second;
      }
    }
    return -1;
  }

  int resolve(const TensorRef& r, std::string_view what) {
    const Source& s = source(r, what);
    const int b = base(r, s);
    if (whole(r, s)) return b;
    if (s.kind == SourceKind::Weight && row_range(r, s))
      return push(Node{
          .kind = NodeKind::View, .inputs = {b}, .shape = r.shape, .type = r.type, .ref = r, .source_shape = s.shape});
    if (s.kind == SourceKind::Weight || type_traits(r.type).quantized)
      throw Error(
          fmt::format("record {}: {} is a partial view of packed or weight storage '{}'; only whole weights "
                      "and row ranges of them are recorded",
                      tape_.entry.name, what, s.name));
    return push(Node{
        .kind = NodeKind::View, .inputs = {b}, .shape = r.shape, .type = r.type, .ref = r, .source_shape = s.shape});
  }

  void add_op(const TapeOp& op) {
    const std::string what = fmt::format("op {} ({})", g_.nodes.size(), ops::op_kind_name(op.kind));
    std::vector<int> inputs;
    if (op.kind == ops::OpKind::GatherRows && op.ids_are_tokens) inputs.push_back(tokens());
    for (size_t i = 0; i < op.inputs.size(); ++i) inputs.push_back(resolve(op.inputs[i], what));
    if (tape_.entry.dynamic_position) position();  // declared once, in a fixed place

    const Source& out = source(op.output, what);
    if (op.kind == ops::OpKind::WriteRows) {
      if (out.kind != SourceKind::KCache && out.kind != SourceKind::VCache)
        throw Error(fmt::format("record {}: {} writes rows of storage #{}, which is not a KV cache", tape_.entry.name,
                                what, op.output.storage));
      push(Node{.kind = NodeKind::CacheWrite,
                .inputs = inputs,
                .shape = out.shape,
                .type = out.type,
                .op = &op,
                .cache = out.kind,
                .layer = out.layer});
      return;
    }
    if (out.kind != SourceKind::Intermediate || !whole(op.output, out) || values_.count(op.output.storage))
      throw Error(
          fmt::format("record {}: {} writes into a view of existing storage #{}; recorded ops must produce "
                      "fresh values",
                      tape_.entry.name, what, op.output.storage));
    values_[op.output.storage] =
        push(Node{.kind = NodeKind::Op, .inputs = inputs, .shape = op.output.shape, .type = op.output.type, .op = &op});
  }

  int tokens() {
    if (tokens_ < 0)
      tokens_ = push(Node{.kind = NodeKind::Tokens, .shape = Shape{tape_.entry.tokens}, .type = GgmlType::I32});
    return tokens_;
  }
  int position() {
    if (position_ < 0) position_ = push(Node{.kind = NodeKind::Position, .type = GgmlType::I32});
    return position_;
  }

  const Tape& tape_;
  ComputeGraph g_;
  std::map<std::string, int> parameters_;
  std::map<uint64_t, int> values_;
  int tokens_ = -1, position_ = -1;
};

}  // namespace

ComputeGraph ComputeGraph::from_tape(const Tape& tape) { return GraphBuilder(tape).build(); }

void LayoutAssignmentPass::run(ComputeGraph& g) const {
  for (const Node& n : g.nodes) {
    if (n.kind != NodeKind::Parameter) continue;
    const TypeTraits& t = type_traits(n.type);
    // StableHLO reads blocks in file order only (a kernel-feed order would need its own
    // dequantization expression); the engine's kernels read the feeds they were repacked for. An
    // order nothing reads is refused here rather than mis-read downstream.
    const BlockOrder order = n.order;
    if (order != BlockOrder::RowMajor && form != KernelForm::Engine)
      throw Error(
          fmt::format("layout: '{}' is held in a kernel-feed block order, which the StableHLO emitter does not "
                      "read; export it with --weight-form keep (as stored)",
                      n.name));
    if (order != BlockOrder::RowMajor && !kernels::ref::can_repack(n.type, order))
      throw Error(fmt::format("layout: '{}' ({}) is held in the {} block order, which no kernel reads", n.name,
                              type_name(n.type), block_order_name(order)));
    std::vector<int64_t> shape;
    for (int i = 0; i < n.shape.rank(); ++i) shape.push_back(n.shape[i]);
    g.layouts[n.name] = TensorLayout{.name = n.name,
                                     .format = n.type,
                                     .block_elements = t.block_elements,
                                     .block_bytes = t.block_bytes,
                                     .order = order,
                                     .shape = shape,
                                     .target = target};
  }
}

}  // namespace skainet::record
