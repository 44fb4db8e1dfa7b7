// The tensors each family binds: the one place their GGUF names are spelled, their shapes from the
// hyper-parameters, and the check of a header against them (bounded by the header, not by the
// block_count it claims).
#include <array>
#include <charconv>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "skainet/io/arch.hpp"

namespace skainet::arch {
namespace {

constexpr std::string_view kLayerPrefix = "blk.";

struct RoleRow {
  Role role;
  std::string_view name;
  bool per_layer;
  std::string_view unsupported = {};  // the feature a file carrying it needs, which the engine lacks
};
constexpr std::array<RoleRow, 33> kRoles = {{
    {Role::TokenEmbedding, "token_embd.weight", false},
    {Role::OutputNorm, "output_norm.weight", false},
    {Role::Output, "output.weight", false},
    {Role::AttnNorm, "attn_norm.weight", true},
    {Role::AttnQ, "attn_q.weight", true},
    {Role::AttnK, "attn_k.weight", true},
    {Role::AttnV, "attn_v.weight", true},
    {Role::AttnOutput, "attn_output.weight", true},
    {Role::AttnQBias, "attn_q.bias", true},
    {Role::AttnKBias, "attn_k.bias", true},
    {Role::AttnVBias, "attn_v.bias", true},
    {Role::AttnQNorm, "attn_q_norm.weight", true},
    {Role::AttnKNorm, "attn_k_norm.weight", true},
    {Role::FfnNorm, "ffn_norm.weight", true},
    {Role::FfnGate, "ffn_gate.weight", true},
    {Role::FfnUp, "ffn_up.weight", true},
    {Role::FfnDown, "ffn_down.weight", true},
    {Role::FfnGateInp, "ffn_gate_inp.weight", true},
    {Role::AttnQkv, "attn_qkv.weight", true},
    {Role::RopeFreqs, "rope_freqs.weight", false},
    {Role::RopeFactorsLong, "rope_factors_long.weight", false, "LongRoPE scaling (Phi-3 128k)"},
    {Role::RopeFactorsShort, "rope_factors_short.weight", false, "LongRoPE scaling (Phi-3 128k)"},
    {Role::AttnPostNorm, "post_attention_norm.weight", true},
    {Role::FfnPostNorm, "post_ffw_norm.weight", true},
    {Role::FfnGateExps, "ffn_gate_exps.weight", true},
    {Role::FfnUpExps, "ffn_up_exps.weight", true},
    {Role::FfnDownExps, "ffn_down_exps.weight", true},
    {Role::AttnSinks, "attn_sinks.weight", true},
    {Role::AttnOutputBias, "attn_output.bias", true},
    {Role::FfnGateInpBias, "ffn_gate_inp.bias", true},
    {Role::FfnGateExpsBias, "ffn_gate_exps.bias", true},
    {Role::FfnUpExpsBias, "ffn_up_exps.bias", true},
    {Role::FfnDownExpsBias, "ffn_down_exps.bias", true},
}};

constexpr bool rows_follow_the_enum() {
  for (size_t i = 0; i < kRoles.size(); ++i)
    if (static_cast<size_t>(kRoles[i].role) != i) return false;
  return true;
}
static_assert(rows_follow_the_enum(), "kRoles is indexed by Role");

const RoleRow& row_of(Role r) noexcept { return kRoles[static_cast<size_t>(r)]; }

std::string dims_text(const std::vector<uint64_t>& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

}  // namespace

std::string_view role_name(Role r) noexcept { return row_of(r).name; }
std::string_view unsupported_feature(Role r) noexcept { return row_of(r).unsupported; }
bool is_layer_role(Role r) noexcept { return row_of(r).per_layer; }
std::string layer_tensor_name(uint32_t layer, Role r) {
  return fmt::format("{}{}.{}", kLayerPrefix, layer, role_name(r));
}

// "blk.N.rest" -> (N, rest); nullopt for any other name.
std::optional<std::pair<uint32_t, std::string_view>> split_layer(std::string_view name) noexcept {
  if (!name.starts_with(kLayerPrefix)) return std::nullopt;
  name.remove_prefix(kLayerPrefix.size());
  uint32_t layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc{} || end == name.data() || end == name.data() + name.size() || *end != '.') return std::nullopt;
  return std::pair{layer, name.substr(static_cast<size_t>(end + 1 - name.data()))};
}

std::optional<uint32_t> layer_of(std::string_view name) noexcept {
  const auto split = split_layer(name);
  return split ? std::optional(split->first) : std::nullopt;
}

std::optional<TensorName> parse_tensor_name(std::string_view name) noexcept {
  std::optional<uint32_t> layer;
  if (const auto split = split_layer(name)) {
    layer = split->first;
    name = split->second;
  }
  for (const RoleRow& r : kRoles)
    if (r.name == name && r.per_layer == layer.has_value()) return TensorName{layer, r.role};
  return std::nullopt;
}

std::vector<TensorSpec> model_tensors(const ModelShape& s) {
  if (!s.family) return {};
  const uint64_t d = s.dim, v = s.vocab;
  std::vector<TensorSpec> t = {{Role::TokenEmbedding, {d, v}}, {Role::OutputNorm, {d}}};
  if (!s.features.tied_output) t.push_back({Role::Output, {d, v}, true});
  if (s.features.rope_freqs) t.push_back({Role::RopeFreqs, {s.rope_dims / 2}});
  return t;
}

// The order llama.cpp's converter writes a llama checkpoint in (as in stories260K.gguf): each
// projection followed by its bias, then the norms of the block.
std::vector<TensorSpec> layer_tensors(const ModelShape& s) {
  if (!s.family) return {};
  const Features& f = s.features;
  const uint64_t d = s.dim, ff = s.ffn, q = s.q_dim(), kv = s.kv_dim(), hd = s.head_dim;
  std::vector<TensorSpec> t;
  if (f.fused_qkv) {
    t.push_back({Role::AttnQkv, {d, q + 2 * kv}});
  } else {
    for (const auto& [weight, bias, width] : {std::tuple{Role::AttnQ, Role::AttnQBias, q},
                                              {Role::AttnK, Role::AttnKBias, kv},
                                              {Role::AttnV, Role::AttnVBias, kv}}) {
      t.push_back({weight, {d, width}});
      if (f.qkv_bias) t.push_back({bias, {width}});
    }
  }
  if (f.qk_norm) {
    t.push_back({Role::AttnQNorm, {hd}});
    t.push_back({Role::AttnKNorm, {hd}});
  }
  t.push_back({Role::AttnOutput, {q, d}});
  if (f.out_bias) t.push_back({Role::AttnOutputBias, {d}});
  if (f.attn_sinks) t.push_back({Role::AttnSinks, {s.heads}});
  t.push_back({Role::AttnNorm, {d}});
  if (f.post_norms) t.push_back({Role::AttnPostNorm, {d}});
  if (f.moe) {  // llama.cpp's order: the router, then each expert stack (3-D: one matrix per expert)
    const uint64_t e = s.experts, fe = s.expert_ffn;
    t.push_back({Role::FfnGateInp, {d, e}});
    if (f.expert_bias) t.push_back({Role::FfnGateInpBias, {e}});
    t.insert(t.end(),
             {{Role::FfnGateExps, {d, fe, e}}, {Role::FfnDownExps, {fe, d, e}}, {Role::FfnUpExps, {d, fe, e}}});
    if (f.expert_bias)
      t.insert(t.end(),
               {{Role::FfnGateExpsBias, {fe, e}}, {Role::FfnDownExpsBias, {d, e}}, {Role::FfnUpExpsBias, {fe, e}}});
    t.push_back({f.ffn_norm_post_attn ? Role::AttnPostNorm : Role::FfnNorm, {d}});
  } else {
    if (!f.fused_gate_up) t.push_back({Role::FfnGate, {d, ff}});
    t.insert(t.end(),
             {{Role::FfnDown, {ff, d}}, {Role::FfnUp, {d, f.fused_gate_up ? 2 * ff : ff}}, {Role::FfnNorm, {d}}});
  }
  if (f.post_norms) t.push_back({Role::FfnPostNorm, {d}});
  return t;
}

// Work bounded by the header, never by block_count: the present tensors are counted in one pass over
// the header, so a block_count of 4 billion costs no more than one of 5; names are generated only
// until max_examples missing ones are found (at most tensors + max_examples layers are visited).
TensorCheck check_tensors(const gguf::Header& h, const ModelShape& s, size_t max_examples) {
  TensorCheck c;
  const auto globals = model_tensors(s);
  const auto per_layer = layer_tensors(s);
  uint64_t required_per_layer = 0;
  for (const auto& r : per_layer) required_per_layer += r.optional ? 0 : 1;
  c.required = uint64_t{s.layers} * required_per_layer;
  for (const auto& r : globals) c.required += r.optional ? 0 : 1;

  auto expect = [&](const gguf::TensorInfo& info, const TensorSpec& r) {
    if (!r.optional) ++c.present;
    if (info.shape == r.shape) return;
    ++c.wrong_shape;
    if (c.examples.size() < max_examples)
      c.examples.push_back({TensorProblemKind::WrongShape, info.name, r.shape, info.shape});
  };
  for (const auto& info : h.tensors) {
    const auto parsed = parse_tensor_name(info.name);
    if (!parsed || (parsed->layer && *parsed->layer >= s.layers)) continue;
    if (!unsupported_feature(parsed->role).empty()) {
      ++c.unsupported;
      if (c.examples.size() < max_examples)
        c.examples.push_back({TensorProblemKind::Unsupported, info.name, {}, info.shape});
      continue;
    }
    for (const auto& r : parsed->layer ? per_layer : globals)
      if (r.role == parsed->role) expect(info, r);
  }
  c.missing = c.required - c.present;

  uint64_t listed = 0;
  auto note_missing = [&](std::string name, const TensorSpec& r) {
    ++listed;
    if (c.examples.size() < max_examples)
      c.examples.push_back({TensorProblemKind::Missing, std::move(name), r.shape, {}});
  };
  for (const auto& r : globals)
    if (!r.optional && !h.find_tensor(r.name())) note_missing(std::string(r.name()), r);
  for (uint32_t l = 0; l < s.layers && listed < c.missing && c.examples.size() < max_examples; ++l)
    for (const auto& r : per_layer) {
      if (r.optional) continue;
      std::string name = layer_tensor_name(l, r.role);
      if (!h.find_tensor(name)) note_missing(std::move(name), r);
    }
  return c;
}

std::string TensorCheck::describe(const ModelShape& s) const {
  std::string out = fmt::format(
      "{} model (layers {}, dim {}, heads {}/{}, ffn {}, vocab {}) does not match its tensors: {} of {} required "
      "tensors missing, {} with the wrong shape",
      s.architecture, s.layers, s.dim, s.heads, s.kv_heads, s.ffn, s.vocab, missing, required, wrong_shape);
  if (unsupported > 0) out += fmt::format(", {} for a feature this engine lacks", unsupported);
  for (const auto& p : examples) {
    switch (p.kind) {
      case TensorProblemKind::Missing:
        out += fmt::format("\n  missing tensor '{}' (expected {})", p.name, dims_text(p.expected));
        break;
      case TensorProblemKind::WrongShape:
        out += fmt::format("\n  tensor '{}' is {}, expected {}", p.name, dims_text(p.found), dims_text(p.expected));
        break;
      case TensorProblemKind::Unsupported:
        out += fmt::format("\n  tensor '{}' needs {}, which is not supported", p.name,
                           unsupported_feature(parse_tensor_name(p.name)->role));
        break;
    }
  }
  if (missing + wrong_shape + unsupported > examples.size())
    out += fmt::format("\n  ... and {} more", missing + wrong_shape + unsupported - examples.size());
  return out;
}

}  // namespace skainet::arch
