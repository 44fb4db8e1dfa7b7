#include <fmt/format.h>

#include "record/lowering.hpp"

namespace skainet::record {
namespace detail {

hlo::Elem elem_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return hlo::Elem::F32;
    case GgmlType::F16: return hlo::Elem::F16;
    case GgmlType::BF16: return hlo::Elem::BF16;
    case GgmlType::I32: return hlo::Elem::I32;
    default: throw Error(fmt::format("record: no StableHLO element type for {} values", type_name(t)));
  }
}

hlo::TensorType carried_type(GgmlType type, const std::vector<int64_t>& dims) {
  if (dims.size() == 2) return hlo::raw_type(type, dims[0], dims[1]);
  if (dims.size() == 3) return hlo::raw_type(type, dims[0] * dims[1], dims[2]);
  return {dims, elem_of(type)};
}

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i]);
  return d;
}

Lowering::Lowering(const ComputeGraph& g, hlo::FunctionBuilder& f, KernelForm form)
    : g_(g), tape_(*g.tape), f_(f), form_(form), values_(g.nodes.size()) {}

std::string Lowering::run() {
  const EntrySpec& e = tape_.entry;
  const plan::KvCachePlan& kv = tape_.kv;
  const hlo::TensorType cache_type{{kv.layers, kv.n_ctx, static_cast<int64_t>(kv.kv_heads) * kv.head_dim},
                                   elem_of(kv.k_type)};  // export_model: K and V share it
  // Arguments in a fixed order: tokens, [position], [K cache, V cache].
  std::string args = fmt::format("tokens: {}", hlo::TensorType{{e.tokens}, hlo::Elem::I32}.str());
  tokens_ = f_.argument({{e.tokens}, hlo::Elem::I32});
  if (e.dynamic_position) {
    position_ = f_.argument({{}, hlo::Elem::I32});
    args += ", pos: tensor<i32>";
  }
  if (e.cache_in) {
    // The caches come back as results 1 and 2 written into the arguments' own storage: IREE then
    // updates the cells in place instead of copying both caches on every call.
    k_ = f_.argument(cache_type, "iree.abi.output = 1 : index");
    v_ = f_.argument(cache_type, "iree.abi.output = 2 : index");
    args += fmt::format(", k_cache: {0}, v_cache: {0}", cache_type.str());
  } else {
    k_ = f_.zeros(cache_type);
    v_ = f_.zeros(cache_type);
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) lower(static_cast<int>(i));

  hlo::Value logits = value(g_.result);
  if (e.logits == model::Logits::Last) logits = f_.reshape(logits, {logits.type.dims.back()});
  f_.ret({logits, k_, v_});
  return fmt::format("{}({}) -> (logits: {}, k_cache: {}, v_cache: {})", e.name, args, logits.type.str(),
                     cache_type.str(), cache_type.str());
}

const hlo::Value& Lowering::value(int node) const {
  const auto& v = values_.at(static_cast<size_t>(node));
  if (!v) throw Error(fmt::format("record {}: node {} is used before it has a value", tape_.entry.name, node));
  return *v;
}

void Lowering::lower(int i) {
  const Node& n = g_.nodes[static_cast<size_t>(i)];
  switch (n.kind) {
    case NodeKind::Parameter: return;  // loaded where it is used, in the form that use needs
    case NodeKind::Tokens: values_[static_cast<size_t>(i)] = *tokens_; return;
    case NodeKind::Position:
      if (!position_)
        throw Error(fmt::format("record {}: a position node in a static-position entry", tape_.entry.name));
      values_[static_cast<size_t>(i)] = *position_;
      return;
    case NodeKind::CacheRead: values_[static_cast<size_t>(i)] = cache_read(n); return;
    case NodeKind::CacheWrite: cache_write(n); return;
    case NodeKind::View:
      if (is_weight(i)) return;  // rows of a weight (Phi-3's fused ones): read where used, like a parameter
      values_[static_cast<size_t>(i)] = view(n);
      return;
    case NodeKind::Op: values_[static_cast<size_t>(i)] = op(n); return;
  }
}

hlo::Value Lowering::raw_weight(int node) {
  auto it = raw_.find(node);
  if (it != raw_.end()) return it->second;
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  hlo::Value v = f_.global_load(n.name, carried_type(n.type, dims_of(n.shape)));
  raw_.emplace(node, v);
  return v;
}

hlo::Value Lowering::dense_weight(int node) {
  auto it = dense_.find(node);
  if (it != dense_.end()) return it->second;
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  const hlo::Value raw = raw_weight(node);
  hlo::Value v = n.shape.rank() == 2 ? hlo::dequantize(f_, n.type, raw) : f_.convert(raw, hlo::Elem::F32);
  dense_.emplace(node, v);
  return v;
}

std::pair<int64_t, int64_t> weight_rows(const Node& view) {
  const auto row = row_bytes(view.ref.type, static_cast<uint64_t>(view.source_shape[1]));
  return {static_cast<int64_t>(view.ref.offset / row), view.ref.shape[0]};
}

BlockOrder held_order(const ComputeGraph& g, int node) {
  const Node& n = g.nodes[static_cast<size_t>(node)];
  return n.kind == NodeKind::Parameter ? n.order : g.nodes[static_cast<size_t>(n.inputs.at(0))].order;
}

bool Lowering::is_weight(int node) const {
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  return n.kind == NodeKind::Parameter ||
         (n.kind == NodeKind::View && g_.nodes[static_cast<size_t>(n.inputs.at(0))].kind == NodeKind::Parameter);
}

hlo::Value Lowering::operand(int node) {
  const Node& n = g_.nodes[static_cast<size_t>(node)];
  if (n.kind == NodeKind::Parameter) return dense_weight(node);
  if (!is_weight(node)) return value(node);
  const auto [first, count] = weight_rows(n);
  const int64_t cols = n.source_shape[1];
  return f_.slice(dense_weight(n.inputs[0]), {first, 0}, {first + count, cols});
}

hlo::Value Lowering::splat(float v, const hlo::TensorType& like) {
  const hlo::Value s = f_.constant_f32(v);
  return f_.broadcast_in_dim(s, like.dims, {});
}

hlo::Value Lowering::position(int64_t relative) {
  if (!position_) return f_.constant_i32(static_cast<int32_t>(relative));
  if (relative == 0) return *position_;
  const hlo::Value delta = f_.constant_i32(static_cast<int32_t>(relative));
  return f_.add(*position_, delta);
}

hlo::Value Lowering::cache_read(const Node& n) {
  const hlo::Value& c = cache(n.cache);
  const int64_t n_ctx = c.type.dims[1], width = c.type.dims[2];
  const hlo::Value layer = f_.slice(c, {n.layer, 0, 0}, {n.layer + 1, n_ctx, width});
  return f_.reshape(layer, {n_ctx, width});
}

void Lowering::cache_write(const Node& n) {
  hlo::Value& c = cache(n.cache);
  const hlo::Value src = value(n.inputs.at(0));
  const hlo::Value converted = f_.convert(src, c.type.elem);
  const hlo::Value update = f_.reshape(converted, {1, src.type.dims[0], src.type.dims[1]});
  const hlo::Value layer = f_.constant_i32(static_cast<int32_t>(n.layer));
  const hlo::Value row = position(n.op->attrs.position);
  const hlo::Value zero = f_.constant_i32(0);
  c = f_.dynamic_update_slice(c, update, {layer, row, zero});
}

hlo::Value Lowering::view(const Node& n) {
  const TensorRef& r = n.ref;
  const hlo::Value& base = value(n.inputs.at(0));
  const uint64_t es = type_traits(r.type).block_bytes;
  if (r.strides == contiguous_strides(r.shape, r.type)) {
    const int64_t first = static_cast<int64_t>(r.offset / es), count = r.shape.numel();
    if (first == 0 && count == n.source_shape.numel()) return f_.reshape(base, dims_of(r.shape));
    const hlo::Value flat = f_.reshape(base, {n.source_shape.numel()});
    const hlo::Value part = f_.slice(flat, {first}, {first + count});
    return f_.reshape(part, dims_of(r.shape));
  }
  const Strides base_strides = contiguous_strides(n.source_shape, r.type);
  if (r.shape.rank() == n.source_shape.rank() && r.strides == base_strides) {
    std::vector<int64_t> start, limit;
    uint64_t rest = r.offset;
    for (int i = 0; i < r.shape.rank(); ++i) {
      const auto stride = static_cast<uint64_t>(base_strides[static_cast<size_t>(i)]);
      start.push_back(static_cast<int64_t>(rest / stride));
      rest %= stride;
      limit.push_back(start.back() + r.shape[i]);
    }
    return f_.slice(base, start, limit);
  }
  // A pitched view (each stride a multiple of the next, the innermost 1: a row range's columns, a
  // mixture of experts' choice j of every row): the base reshaped to the pitches, then one slice.
  const int rank = r.shape.rank();
  const int64_t total = n.source_shape.numel();
  std::vector<int64_t> el(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i)
    el[static_cast<size_t>(i)] = r.strides[static_cast<size_t>(i)] / static_cast<int64_t>(es);
  bool pitched = rank >= 1 && el.back() == 1 && el[0] > 0 && total % el[0] == 0;
  for (int i = 1; pitched && i < rank; ++i)
    pitched = el[static_cast<size_t>(i)] > 0 && el[static_cast<size_t>(i - 1)] % el[static_cast<size_t>(i)] == 0;
  if (pitched) {
    std::vector<int64_t> dims, start, limit;
    int64_t rest = static_cast<int64_t>(r.offset / es);
    for (int i = 0; i < rank; ++i) {
      const int64_t stride = el[static_cast<size_t>(i)];
      dims.push_back(i == 0 ? total / stride : el[static_cast<size_t>(i - 1)] / stride);
      start.push_back(rest / stride);
      rest %= stride;
      limit.push_back(start.back() + r.shape[i]);
      pitched = pitched && limit.back() <= dims.back();
    }
    if (pitched) {
      const hlo::Value shaped = f_.reshape(base, dims);
      return f_.slice(shaped, start, limit);
    }
  }
  throw Error(fmt::format("record {}: a strided view {} of {} has no StableHLO form here", tape_.entry.name,
                          r.shape.to_string(), n.source_shape.to_string()));
}

}  // namespace detail

namespace {

std::string layouts_attribute(const std::map<std::string, TensorLayout>& layouts) {
  std::string s;
  for (const auto& [name, l] : layouts) {
    std::string shape;
    for (size_t i = 0; i < l.shape.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", l.shape[i]);
    s += fmt::format(
        "{}\n    \"{}\" = {{format = \"{}\", block_elements = {} : i64, block_bytes = {} : i64, "
        "block_order = \"{}\", shape = [{}], target = \"{}\"}}",
        s.empty() ? "" : ",", stablehlo::escape(name), type_name(l.format), l.block_elements, l.block_bytes,
        l.order == BlockOrder::RowMajor ? "row_major" : "interleaved16", shape, l.target);
  }
  return s;
}

}  // namespace

EmittedModule emit_module(const std::vector<const ComputeGraph*>& functions, KernelForm form,
                          std::string_view parameter_scope) {
  EmittedModule out;
  std::map<std::string, TensorLayout> layouts;
  std::set<std::string_view> imports;
  std::string bodies;
  for (const ComputeGraph* g : functions) {
    stablehlo::FunctionBuilder f(g->tape->entry.name);
    detail::Lowering lowering(*g, f, form);
    out.signatures.push_back(lowering.run());
    imports.insert(lowering.used_imports().begin(), lowering.used_imports().end());
    bodies += f.text();
    for (const auto& [name, l] : g->layouts) layouts.emplace(name, l);
  }
  bodies = detail::engine_executables(imports) + bodies;
  std::string globals;
  for (const auto& [name, l] : layouts) {
    const stablehlo::TensorType t = detail::carried_type(l.format, l.shape);
    globals += "  " + stablehlo::global_declaration(name, parameter_scope, name, t) + "\n";
  }
  out.text = fmt::format("module @skainet attributes {{skainet.tensor_layouts = {{{}\n  }}}} {{\n{}{}}}\n",
                         layouts_attribute(layouts), globals, bodies);
  return out;
}

}  // namespace skainet::record
