#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

using nlohmann::json;
using namespace placement;

// A number field read as T. nlohmann's own conversion casts a float to an integer field unchecked,
// which is undefined behaviour out of range (1e300 as a size; found by the plan_json fuzz target), and
// wraps integers silently; here an integer field takes only an integer in T's range and a float
// field only a finite number.
template <class T>
T as_number(const json& v, std::string_view key) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v.is_number()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && std::fabs(d) <= std::numeric_limits<T>::max()) return static_cast<T>(d);
    }
    throw InvalidArgument(fmt::format("plan JSON: '{}' must be a finite number, not {}", key, v.dump()));
  } else {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(u);
    } else if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (std::in_range<T>(i)) return static_cast<T>(i);
    }
    throw InvalidArgument(fmt::format("plan JSON: '{}' must be an integer from {} to {}, not {}", key,
                                      std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v.dump()));
  }
}

template <class T>
T number(const json& j, const char* key) {
  return as_number<T>(j.at(key), key);
}
// A key that older plans lack, read as `fallback` there.
template <class T>
T number_or(const json& j, const char* key, T fallback) {
  return j.contains(key) ? number<T>(j, key) : fallback;
}

// Enums travel as their names; reading one back searches the (contiguous, zero-based) values.
template <class E, class NameFn>
E enum_from(const json& j, NameFn name_of, int count, std::string_view what) {
  const std::string s = j.get<std::string>();
  for (int i = 0; i < count; ++i)
    if (name_of(static_cast<E>(i)) == s) return static_cast<E>(i);
  throw InvalidArgument(fmt::format("plan JSON: unknown {} '{}'", what, s));
}

GgmlType type_from(const json& j) {
  auto t = parse_type_name(j.get<std::string>());
  if (!t) throw InvalidArgument(fmt::format("plan JSON: unknown type '{}'", j.get<std::string>()));
  return *t;
}

json buffers_json(const std::vector<ActivationBuffer>& list) {
  json a = json::array();
  for (const auto& b : list) a.push_back({{"name", b.name}, {"bytes", b.bytes}});
  return a;
}

std::vector<ActivationBuffer> buffers_from(const json& a) {
  std::vector<ActivationBuffer> out;
  for (const auto& b : a) out.push_back({b.at("name").get<std::string>(), number<uint64_t>(b, "bytes")});
  return out;
}

// When a model field entered the plan: with the first plans (required), or later (absent from
// older plans, which read as the field's neutral default).
enum class Since : uint8_t { First, Later };

// The model's JSON fields, each named once for writing and reading, in the order plans write them.
template <class Shape, class Visit>
void model_fields(Shape& s, Visit&& visit) {
  visit("architecture", s.architecture, Since::First);
  visit("layers", s.layers, Since::First);
  visit("dim", s.dim, Since::First);
  visit("heads", s.heads, Since::First);
  visit("kv_heads", s.kv_heads, Since::First);
  visit("head_dim", s.head_dim, Since::First);
  visit("ffn", s.ffn, Since::First);
  visit("vocab", s.vocab, Since::First);
  visit("ctx_train", s.ctx_train, Since::First);
  visit("rope_dims", s.rope_dims, Since::First);
  visit("rope_base", s.rope_base, Since::First);
  visit("rms_eps", s.rms_eps, Since::First);
  visit("qkv_bias", s.features.qkv_bias, Since::First);
  visit("neox_rope", s.features.neox_rope, Since::First);
  // The families after Qwen2.
  visit("qk_norm", s.features.qk_norm, Since::Later);
  visit("fused_qkv", s.features.fused_qkv, Since::Later);
  visit("fused_gate_up", s.features.fused_gate_up, Since::Later);
  visit("rope_freqs", s.features.rope_freqs, Since::Later);
  visit("embed_scale", s.features.embed_scale, Since::Later);
  visit("post_norms", s.features.post_norms, Since::Later);
  visit("geglu", s.features.geglu, Since::Later);
  visit("tied_output", s.features.tied_output, Since::Later);
  visit("rope_scale", s.rope_scale, Since::First);
  visit("sliding_window", s.sliding_window, Since::Later);
  visit("swa_pattern", s.swa_pattern, Since::Later);
  visit("rope_base_swa", s.rope_base_swa, Since::Later);
  visit("rope_scale_swa", s.rope_scale_swa, Since::Later);
  visit("rope_scaling", s.rope_scaling, Since::Later);
  visit("yarn_orig_ctx", s.yarn_orig_ctx, Since::Later);
  visit("rope_attn_factor", s.rope_attn_factor, Since::Later);
  visit("attention_scale", s.attention_scale, Since::Later);
  visit("attn_softcap", s.attn_softcap, Since::Later);
  visit("final_softcap", s.final_softcap, Since::Later);
  // A mixture of experts (the per-expert decisions are sized by them).
  visit("moe", s.features.moe, Since::Later);
  visit("experts", s.experts, Since::Later);
  visit("experts_used", s.experts_used, Since::Later);
  visit("expert_ffn", s.expert_ffn, Since::Later);
}

json slab_json(const SlabPlan& s) {
  return {{"tokens", s.tokens},
          {"sequences", s.sequences},
          {"logit_rows", s.logit_rows},
          {"step_bytes", s.step_bytes},
          {"layer_bytes", s.layer_bytes},
          {"step", buffers_json(s.step)},
          {"layer", buffers_json(s.layer)}};
}

SlabPlan slab_from(const json& j) {
  SlabPlan s;
  s.tokens = number<uint32_t>(j, "tokens");
  s.sequences = number_or<uint32_t>(j, "sequences", 1);    // plans written before batches: one sequence
  s.logit_rows = number_or<uint32_t>(j, "logit_rows", 1);  // and before verification steps: one row
  s.step_bytes = number<uint64_t>(j, "step_bytes");
  s.layer_bytes = number<uint64_t>(j, "layer_bytes");
  s.step = buffers_from(j.at("step"));
  s.layer = buffers_from(j.at("layer"));
  return s;
}

json scratch_json(const ScratchPlan& s) { return {{"tensor", s.tensor}, {"rows", s.rows}, {"bytes", s.bytes}}; }

ScratchPlan scratch_from(const json& s) {
  return {s.at("tensor").get<std::string>(), number<uint32_t>(s, "rows"), number<uint64_t>(s, "bytes")};
}

json form_json(const WeightForm& f) {
  return {{"encoding", encoding_request_name(f.encoding)},
          {"requantize_to", type_name(f.requantize_to)},
          {"order", order_name(f.order)},
          {"residency", residency_name(f.residency)}};
}

WeightForm form_from(const json& j) {
  WeightForm f;
  f.encoding = enum_from<EncodingRequest>(j.at("encoding"), encoding_request_name, 3, "encoding request");
  f.requantize_to = type_from(j.at("requantize_to"));
  f.order = enum_from<WeightOrder>(j.at("order"), order_name, 2, "order");
  f.residency = enum_from<WeightResidency>(j.at("residency"), residency_name, 2, "residency");
  return f;
}

json decision_fields(const Decision& d);

// A stack's per-expert decisions; `routed` is absent without statistics.
json experts_json(const Decision& d) {
  json list = json::array();
  for (const placement::ExpertSlice& e : d.experts) {
    json x = {{"expert", e.expert},
              {"pinned", e.pinned},
              {"reason", placement::expert_reason_name(e.reason)},
              {"bytes", e.bytes},
              {"pinned_bytes", e.pinned_bytes},
              {"plain", placement::expert_words(e)}};
    if (e.routed >= 0) x["routed"] = e.routed;
    list.push_back(std::move(x));
  }
  return list;
}

std::vector<placement::ExpertSlice> experts_from(const json& list) {
  if (!list.is_array())
    throw InvalidArgument(fmt::format("plan JSON: 'experts' must be an array, not {}", list.dump()));
  std::vector<placement::ExpertSlice> out;
  for (const json& x : list) {
    placement::ExpertSlice e;
    e.expert = number<uint32_t>(x, "expert");
    e.pinned = x.at("pinned").get<bool>();
    e.reason = enum_from<placement::ExpertReason>(x.at("reason"), placement::expert_reason_name, 4, "expert reason");
    e.bytes = number<uint64_t>(x, "bytes");
    e.pinned_bytes = number<uint64_t>(x, "pinned_bytes");
    if (x.contains("routed")) e.routed = x.at("routed").get<double>();
    out.push_back(e);
  }
  return out;
}

json decision_json(const Decision& d) {
  json j = decision_fields(d);
  if (!d.experts.empty()) j["experts"] = experts_json(d);
  return j;
}

json decision_fields(const Decision& d) {
  return {{"name", d.tensor},
          {"role", role_name(d.role)},
          {"file_type", type_name(d.file_type)},
          {"shape", d.shape},
          {"file_offset", d.file_offset},
          {"file_bytes", d.file_bytes},
          {"form", form_json(d.form)},
          {"held_form", form_json(held_form(d))},
          {"form_reason", form_reason_name(d.form_reason)},
          {"decided_by", decided_by_name(d.decided_by)},
          {"override_index", d.override_index},
          {"held_type", type_name(d.held_type)},
          {"held_order", block_order_name(d.held_order)},
          {"domain", domain_name(d.spec.domain)},
          {"bytes", d.spec.bytes},
          {"alignment", d.spec.alignment},
          {"mutable", d.spec.mutable_},
          {"reason", placement_reason_name(d.reason)},
          {"off_heap_threshold", d.off_heap_threshold},
          {"residency", is_pinned(d) ? "pinned" : "evictable"},
          {"plain", plain_words(d)},
          {"explain", explain(d)}};
}

Decision decision_from(const json& j) {
  Decision d;
  d.tensor = j.at("name");
  d.role = enum_from<TensorRole>(j.at("role"), role_name, 3, "role");
  d.file_type = type_from(j.at("file_type"));
  const json& shape = j.at("shape");
  if (!shape.is_array())
    throw InvalidArgument(fmt::format("plan JSON: 'shape' must be an array, not {}", shape.dump()));
  for (const json& e : shape) d.shape.push_back(as_number<uint64_t>(e, "shape"));
  d.file_offset = number<uint64_t>(j, "file_offset");
  d.file_bytes = number<uint64_t>(j, "file_bytes");
  d.form = form_from(j.at("form"));
  d.form_reason = enum_from<FormReason>(j.at("form_reason"), form_reason_name, 6, "form reason");
  d.decided_by = enum_from<DecidedBy>(j.at("decided_by"), decided_by_name, 3, "decided_by");
  d.override_index = number<int>(j, "override_index");
  d.held_type = type_from(j.at("held_type"));
  const json& order = j.at("held_order");
  const auto held_order = order.is_string() ? parse_block_order(order.get<std::string>()) : std::nullopt;
  if (!held_order) throw InvalidArgument(fmt::format("plan JSON: unknown held_order {}", order.dump()));
  d.held_order = *held_order;
  d.spec.domain = enum_from<MemoryDomain>(j.at("domain"), domain_name, 4, "domain");
  d.spec.bytes = number<uint64_t>(j, "bytes");
  d.spec.alignment = number<uint32_t>(j, "alignment");
  d.spec.mutable_ = j.at("mutable");
  d.reason = enum_from<PlacementReason>(j.at("reason"), placement_reason_name, 8, "placement reason");
  d.off_heap_threshold = number<uint64_t>(j, "off_heap_threshold");
  if (j.contains("experts")) d.experts = experts_from(j.at("experts"));
  return d;
}

}  // namespace

std::string to_json(const placement::Decision& d) { return decision_json(d).dump(2); }

std::string to_json(const MemoryPlan& p) {
  json j;
  j["file"] = p.file;
  j["file_size"] = p.file_size;
  j["header_bytes_read"] = p.header_bytes_read;
  j["profile"] = p.profile;
  if (p.model) {
    json& m = j["model"];
    model_fields(*p.model, [&](const char* key, const auto& field, Since) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, arch::RopeScaling>)
        m[key] = arch::rope_scaling_name(field);
      else
        m[key] = field;
    });
  }
  j["tensors"] = json::array();
  for (const auto& d : p.tensors) j["tensors"].push_back(decision_json(d));
  if (p.kv)
    j["kv_cache"] = {{"type_k", type_name(p.kv->k_type)},
                     {"type_v", type_name(p.kv->v_type)},
                     {"layers", p.kv->layers},
                     {"ctx", p.kv->n_ctx},
                     {"kv_heads", p.kv->kv_heads},
                     {"head_dim", p.kv->head_dim},
                     {"bytes", p.kv->bytes},
                     {"domain", domain_name(p.kv->domain)}};
  if (p.decode) j["decode_slab"] = slab_json(*p.decode);
  j["slots"] = p.slots;
  j["batch_slots"] = p.batch_slots;
  if (p.prefill) j["prefill_slab"] = slab_json(*p.prefill);
  if (p.verify) j["verify_slab"] = slab_json(*p.verify);
  j["scratch"] = scratch_json(p.scratch);
  if (p.batch) j["batch_slab"] = slab_json(*p.batch);
  j["batch_scratch"] = scratch_json(p.batch_scratch);
  const Totals& t = p.totals;
  j["totals"] = {{"file", t.file},
                 {"mapped", t.mapped},
                 {"heap", t.heap},
                 {"pages", t.pages},
                 {"kv", t.kv},
                 {"slab", t.slab},
                 {"scratch", t.scratch},
                 {"prompt_cache", t.prompt_cache},
                 {"resident", t.resident()}};
  const ResidentSplit split_ = split(p);
  j["resident_split"] = {{"pinned", split_.pinned},
                         {"evictable", split_.evictable},
                         {"kv", split_.kv},
                         {"slabs", split_.slabs},
                         {"scratch", split_.scratch},
                         {"prompt_cache", split_.prompt_cache},
                         {"total", split_.total()},
                         {"pinned_tensors", split_.pinned_tensors},
                         {"evictable_tensors", split_.evictable_tensors}};
  j["layers"] = json::array();
  for (const LayerGroup& g : group_by_layer(p)) {
    json forms = json::object();
    for (const auto& [form, count] : g.forms) forms[form] = count;
    j["layers"].push_back({{"name", g.name()},
                           {"layer", g.layer ? json(*g.layer) : json(nullptr)},
                           {"tensors", g.tensors.size()},
                           {"bytes", g.bytes},
                           {"pinned", g.pinned},
                           {"evictable", g.evictable},
                           {"forms", forms}});
  }
  j["biggest"] = json::array();
  for (const Consumer& c : biggest_consumers(p, 3))
    j["biggest"].push_back({{"name", c.name}, {"tensors", c.tensors}, {"bytes", c.bytes}});
  j["budget"] = p.budget ? json(*p.budget) : json(nullptr);
  j["fits"] = p.fits;
  j["suggestions"] = json::array();
  for (const auto& s : p.suggestions)
    j["suggestions"].push_back({{"kind", suggestion_kind_name(s.kind)}, {"action", s.action}, {"saves", s.saves}});
  j["warnings"] = json::array();
  for (const auto& w : p.warnings)
    j["warnings"].push_back(
        {{"kind", plan_warning_kind_name(w.kind)}, {"value", w.value}, {"limit", w.limit}, {"message", describe(w)}});
  return j.dump(2);
}

namespace {

arch::ModelShape model_from(const json& m) {
  arch::ModelShape s;
  model_fields(s, [&](const char* key, auto& field, Since since) {
    using T = std::decay_t<decltype(field)>;
    if (since == Since::Later && !m.contains(key)) return;  // an older plan: the field's neutral default
    if constexpr (std::is_same_v<T, arch::RopeScaling>) {
      const std::string name = m.at(key).get<std::string>();
      const std::optional<arch::RopeScaling> r = arch::parse_rope_scaling(name);
      if (!r) throw InvalidArgument(fmt::format("plan JSON: unknown rope_scaling '{}'", name));
      field = *r;
    } else if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>)
      field = m.at(key).get<T>();
    else
      field = number<T>(m, key);
  });
  if (const arch::FamilyInfo* f = arch::find_family(s.architecture)) s.family = f->family;
  return s;
}

KvCachePlan kv_from(const json& k) {
  KvCachePlan kv;
  kv.k_type = type_from(k.at("type_k"));
  kv.v_type = type_from(k.at("type_v"));
  kv.layers = number<uint32_t>(k, "layers");
  kv.n_ctx = number<uint32_t>(k, "ctx");
  kv.kv_heads = number<uint32_t>(k, "kv_heads");
  kv.head_dim = number<uint32_t>(k, "head_dim");
  kv.bytes = number<uint64_t>(k, "bytes");
  kv.domain = enum_from<MemoryDomain>(k.at("domain"), domain_name, 4, "domain");
  return kv;
}

}  // namespace

MemoryPlan from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    MemoryPlan p;
    p.file = j.at("file");
    p.file_size = number<uint64_t>(j, "file_size");
    p.header_bytes_read = number<uint64_t>(j, "header_bytes_read");
    p.profile = j.at("profile");
    if (j.contains("model")) p.model = model_from(j["model"]);
    for (const auto& d : j.at("tensors")) p.tensors.push_back(decision_from(d));
    if (j.contains("kv_cache")) p.kv = kv_from(j["kv_cache"]);
    if (j.contains("decode_slab")) p.decode = slab_from(j["decode_slab"]);
    // Plans written before serving had slots are plans for one sequence.
    if (j.contains("slots")) p.slots = number<uint32_t>(j, "slots");
    if (p.slots == 0) throw InvalidArgument("plan JSON: \"slots\" must be at least 1");
    // Plans written before serve batched its slots priced each slot's own passes.
    if (j.contains("batch_slots")) p.batch_slots = j.at("batch_slots").get<bool>();
    if (j.contains("prefill_slab")) p.prefill = slab_from(j["prefill_slab"]);
    if (j.contains("verify_slab")) p.verify = slab_from(j["verify_slab"]);
    // Plans written before the scratch was priced had none.
    if (j.contains("scratch")) p.scratch = scratch_from(j["scratch"]);
    // Plans written before batches were priced have neither.
    if (j.contains("batch_slab")) p.batch = slab_from(j["batch_slab"]);
    if (j.contains("batch_scratch")) p.batch_scratch = scratch_from(j["batch_scratch"]);
    const json& t = j.at("totals");
    p.totals = {number<uint64_t>(t, "file"),
                number<uint64_t>(t, "mapped"),
                number<uint64_t>(t, "heap"),
                number<uint64_t>(t, "pages"),
                number<uint64_t>(t, "kv"),
                number<uint64_t>(t, "slab"),
                number_or<uint64_t>(t, "scratch", 0),
                number_or<uint64_t>(t, "prompt_cache", 0)};
    if (!j.at("budget").is_null()) p.budget = number<uint64_t>(j, "budget");
    p.fits = j.at("fits");
    for (const auto& s : j.at("suggestions"))
      p.suggestions.push_back({enum_from<SuggestionKind>(s.at("kind"), suggestion_kind_name, 4, "suggestion"),
                               s.at("action"), number<uint64_t>(s, "saves")});
    if (j.contains("warnings"))
      for (const auto& w : j.at("warnings"))
        p.warnings.push_back({enum_from<PlanWarningKind>(w.at("kind"), plan_warning_kind_name, 2, "warning"),
                              number<uint64_t>(w, "value"), number<uint64_t>(w, "limit")});
    return p;
  } catch (const json::exception& e) {
    throw InvalidArgument(fmt::format("plan JSON: {}", e.what()));
  }
}

}  // namespace skainet::plan
