#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "skainet/plan.hpp"

namespace skainet::plan {
namespace {

std::string dims_text(const std::vector<uint64_t>& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

// "blk.<layer>.<suffix>" -> (layer, suffix); nullopt for any other name.
std::optional<std::pair<uint64_t, std::string_view>> split_layer_name(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  uint64_t layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc{} || end == name.data() || end == name.data() + name.size() || *end != '.') return std::nullopt;
  return std::pair{layer, std::string_view(end + 1, name.data() + name.size() - end - 1)};
}

}  // namespace

bool supports_architecture(std::string_view arch) noexcept {
  return arch == "llama" || arch == "mistral" || arch == "qwen2";
}

std::vector<RequiredTensor> model_tensors(const ModelShape& s) {
  const uint64_t d = s.dim, v = s.vocab;
  return {{"token_embd.weight", {d, v}, false}, {"output_norm.weight", {d}, false}, {"output.weight", {d, v}, true}};
}

std::vector<RequiredTensor> layer_tensors(const ModelShape& s) {
  const uint64_t d = s.dim, f = s.ffn;
  const uint64_t q = uint64_t{s.heads} * s.head_dim, kv = uint64_t{s.kv_heads} * s.head_dim;
  std::vector<RequiredTensor> t = {{"attn_norm.weight", {d}, false},   {"attn_q.weight", {d, q}, false},
                                   {"attn_k.weight", {d, kv}, false},  {"attn_v.weight", {d, kv}, false},
                                   {"attn_output.weight", {q, d}, false}, {"ffn_norm.weight", {d}, false},
                                   {"ffn_gate.weight", {d, f}, false}, {"ffn_up.weight", {d, f}, false},
                                   {"ffn_down.weight", {f, d}, false}};
  if (s.qkv_bias) {
    t.push_back({"attn_q.bias", {q}, false});
    t.push_back({"attn_k.bias", {kv}, false});
    t.push_back({"attn_v.bias", {kv}, false});
  }
  return t;
}

std::string layer_tensor_name(uint32_t layer, std::string_view suffix) { return fmt::format("blk.{}.{}", layer, suffix); }

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

  auto expect = [&](const gguf::TensorInfo& info, const RequiredTensor& r) {
    if (!r.optional) ++c.present;
    if (info.shape == r.shape) return;
    ++c.wrong_shape;
    if (c.examples.size() < max_examples)
      c.examples.push_back({TensorProblemKind::WrongShape, info.name, r.shape, info.shape});
  };
  for (const auto& info : h.tensors) {
    if (const auto split = split_layer_name(info.name)) {
      if (split->first >= s.layers) continue;
      for (const auto& r : per_layer)
        if (r.name == split->second) expect(info, r);
      continue;
    }
    for (const auto& r : globals)
      if (r.name == info.name) expect(info, r);
  }
  c.missing = c.required - c.present;

  uint64_t listed = 0;
  auto note_missing = [&](std::string name, const RequiredTensor& r) {
    ++listed;
    if (c.examples.size() < max_examples) c.examples.push_back({TensorProblemKind::Missing, std::move(name), r.shape, {}});
  };
  for (const auto& r : globals)
    if (!r.optional && !h.find_tensor(r.name)) note_missing(r.name, r);
  for (uint32_t l = 0; l < s.layers && listed < c.missing && c.examples.size() < max_examples; ++l)
    for (const auto& r : per_layer) {
      if (r.optional) continue;
      std::string name = layer_tensor_name(l, r.name);
      if (!h.find_tensor(name)) note_missing(std::move(name), r);
    }
  return c;
}

std::string TensorCheck::describe(const ModelShape& s) const {
  std::string out = fmt::format(
      "{} model (layers {}, dim {}, heads {}/{}, ffn {}, vocab {}) does not match its tensors: {} of {} required "
      "tensors missing, {} with the wrong shape",
      s.architecture, s.layers, s.dim, s.heads, s.kv_heads, s.ffn, s.vocab, missing, required, wrong_shape);
  for (const auto& p : examples) {
    if (p.kind == TensorProblemKind::Missing)
      out += fmt::format("\n  missing tensor '{}' (expected {})", p.name, dims_text(p.expected));
    else
      out += fmt::format("\n  tensor '{}' is {}, expected {}", p.name, dims_text(p.found), dims_text(p.expected));
  }
  if (missing + wrong_shape > examples.size())
    out += fmt::format("\n  ... and {} more", missing + wrong_shape - examples.size());
  return out;
}

}  // namespace skainet::plan
