#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "skainet/model/plan.hpp"

namespace skainet::plan {
namespace {

constexpr uint32_t kDefaultMaxContext = 4096;

// A llama-family model: an architecture with hyper-parameters and tensors (vocabulary-only files
// carry the hyper-parameters but no weights, and need no KV cache).
bool looks_like_model(const gguf::Header& h) {
  if (h.tensors.empty()) return false;
  const auto* arch = h.find("general.architecture");
  if (!arch || arch->type != gguf::ValueType::String) return false;
  return h.find(arch::key(std::get<std::string>(arch->scalar), arch::Key::BlockCount)) != nullptr;
}

constexpr GgmlType kKvCacheTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                      GgmlType::Q4_1, GgmlType::IQ4_NL, GgmlType::Q5_0, GgmlType::Q5_1};

KvCachePlan plan_kv(const arch::ModelShape& m, uint32_t n_ctx, GgmlType k_type, GgmlType v_type,
                    const placement::MemoryProfile& profile) {
  KvCachePlan kv;
  kv.k_type = k_type;
  kv.v_type = v_type;
  kv.layers = m.layers;
  kv.n_ctx = n_ctx;
  kv.kv_heads = m.kv_heads;
  kv.head_dim = m.head_dim;
  const uint64_t width = uint64_t{m.kv_heads} * m.head_dim;
  const uint64_t row = checked_add(row_bytes(k_type, width), row_bytes(v_type, width), "kv row bytes");
  kv.bytes = checked_mul(checked_mul<uint64_t>(m.layers, n_ctx, "kv cells"), row, "kv cache bytes");
  kv.domain = kv.bytes >= profile.off_heap_threshold ? MemoryDomain::HostPages : MemoryDomain::HostHeap;
  return kv;
}
KvCachePlan plan_kv(const arch::ModelShape& m, uint32_t n_ctx, const KvCachePlan& types,
                    const placement::MemoryProfile& profile) {
  return plan_kv(m, n_ctx, types.k_type, types.v_type, profile);
}

// The next smaller cache type llama.cpp users reach for: f16 from f32, q8_0 (about half of f16) from
// f16 or bf16 where the head size is whole q8_0 blocks; the others stay.
GgmlType smaller_kv_type(GgmlType t, uint32_t head_dim) {
  if (t == GgmlType::F32) return GgmlType::F16;
  const bool halves = t == GgmlType::F16 || t == GgmlType::BF16;
  return halves && head_dim % type_traits(GgmlType::Q8_0).block_elements == 0 ? GgmlType::Q8_0 : t;
}

// The command-line flags that ask for kv's types: --kv-type for one, -ctk/-ctv for two.
std::string kv_type_flags(const KvCachePlan& kv) {
  const auto lower = [](GgmlType t) {
    std::string s(type_name(t));
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  if (kv.k_type == kv.v_type) return fmt::format("--kv-type {}", lower(kv.k_type));
  return fmt::format("-ctk {} -ctv {}", lower(kv.k_type), lower(kv.v_type));
}

// A cache type the engine holds, and for a packed one a head size of whole blocks: attention reads a
// KV head's part of a cell, which must start a block.
GgmlType checked_kv_type(const std::string& file, const arch::ModelShape& m, GgmlType type, std::string_view flag) {
  if (!is_kv_cache_type(type))
    throw InvalidArgument(
        fmt::format("{}: {} {}: a KV cache holds {}", file, flag, type_name(type), kv_cache_type_list()));
  const TypeTraits& t = type_traits(type);
  if (m.head_dim % t.block_elements != 0)
    throw InvalidArgument(
        fmt::format("{}: {} {}: the head size {} is not a whole number of {}'s {}-element blocks, "
                    "so a KV head's part of a cell would not start a block",
                    file, flag, type_name(type), m.head_dim, type_name(type), t.block_elements));
  return type;
}

// prompt_cache: PlanOptions::prompt_cache, resident as a whole.
void add_totals(MemoryPlan& p, uint64_t prompt_cache) {
  Totals t{.prompt_cache = prompt_cache};
  for (const auto& d : p.tensors) {
    t.file += d.file_bytes;
    switch (d.spec.domain) {
      case MemoryDomain::MappedFile:
        // A mapped expert stack's pinned experts are anonymous pages at the mapping's addresses.
        t.pages += placement::pinned_bytes(d);
        t.mapped += d.spec.bytes - placement::pinned_bytes(d);
        break;
      case MemoryDomain::HostPages: t.pages += d.spec.bytes; break;
      default: t.heap += d.spec.bytes; break;
    }
  }
  // Each slot is one sequence with its own KV cache; several share one batch's slabs and scratch.
  if (const std::optional<SequencePlan> s = p.sequence()) {
    t.kv = checked_mul<uint64_t>(s->kv.bytes, p.slots, "kv cache bytes of all slots");
    t.slab = p.serves_batched() ? p.batch->total() : checked_mul<uint64_t>(s->slab_bytes(), p.slots, "slab bytes");
  }
  t.scratch = p.serves_batched() ? p.batch_scratch.bytes : checked_mul<uint64_t>(p.scratch.bytes, p.slots, "scratch");
  p.totals = t;
}

// The slab and scratch totals of the plan made with another context or prefill chunk (the rest
// unchanged): what the suggestions below weigh. A batch left at its default rows follows the chunk.
uint64_t passes_at(const MemoryPlan& p, const placement::Platform& platform, uint32_t n_ctx, uint32_t chunk) {
  const arch::ModelShape& m = *p.model;
  const uint32_t packed = p.kv->packed_caches();
  if (p.serves_batched()) {
    const bool default_rows = p.batch->tokens == p.prefill->tokens + p.slots - 1;
    const uint32_t rows = default_rows ? chunk + p.slots - 1 : p.batch->tokens;
    const ScratchPlan scratch = rows == p.batch->tokens ? p.batch_scratch : estimate_scratch(p.tensors, platform, rows);
    const bool drafts = p.batch->logit_rows == p.batch->tokens;
    return estimate_slabs(m, rows, n_ctx, {.sequences = p.slots, .packed_caches = packed, .drafts = drafts}).total() +
           scratch.bytes;
  }
  std::optional<SlabPlan> verify;
  if (p.verify) verify = estimate_slabs(m, p.verify->tokens, n_ctx, {.every_logit = true, .packed_caches = packed});
  const uint32_t rows = std::max(chunk, p.verify ? p.verify->tokens : 0u);
  const ScratchPlan scratch = chunk == p.prefill->tokens ? p.scratch : estimate_scratch(p.tensors, platform, rows);
  const SequencePlan s =
      SequencePlan::of(*p.kv, estimate_slabs(m, 1, n_ctx), estimate_slabs(m, chunk, n_ctx, {.packed_caches = packed}),
                       scratch, verify ? &*verify : nullptr);
  return (s.slab_bytes() + s.scratch_bytes) * p.slots;
}

void suggest(MemoryPlan& p, const placement::MemoryProfile& profile, const placement::Platform& platform) {
  if (!p.budget || p.fits) return;
  const uint64_t over = p.totals.resident() - *p.budget;
  if (p.kv && p.prefill && p.model) {
    const uint64_t passes = p.totals.slab + p.totals.scratch;
    // The largest power-of-two context (at least 256) whose savings cover the excess.
    for (uint32_t n_ctx = p.kv->n_ctx / 2; n_ctx >= 256; n_ctx /= 2) {
      const uint64_t kv_saves = (p.kv->bytes - plan_kv(*p.model, n_ctx, *p.kv, profile).bytes) * p.slots;
      const uint64_t saves = kv_saves + (passes - std::min(passes, passes_at(p, platform, n_ctx, p.prefill->tokens)));
      if (saves >= over || n_ctx / 2 < 256) {
        p.suggestions.push_back({SuggestionKind::SmallerContext, fmt::format("--ctx {}", n_ctx), saves});
        break;
      }
    }
    const KvCachePlan smaller = plan_kv(*p.model, p.kv->n_ctx, smaller_kv_type(p.kv->k_type, p.model->head_dim),
                                        smaller_kv_type(p.kv->v_type, p.model->head_dim), profile);
    if (smaller.bytes < p.kv->bytes)
      p.suggestions.push_back(
          {SuggestionKind::SmallerKvType, kv_type_flags(smaller), (p.kv->bytes - smaller.bytes) * p.slots});
    const uint64_t then = passes_at(p, platform, p.kv->n_ctx, 16);
    if (p.prefill->tokens > 16 && passes > then)
      p.suggestions.push_back({SuggestionKind::SmallerPrefillChunk, "--prefill-chunk 16", passes - then});
  }
  uint64_t blow_up = 0;
  for (const auto& d : p.tensors)
    if (d.reason == placement::PlacementReason::CopyDequantized && d.spec.bytes > d.file_bytes)
      blow_up += d.spec.bytes - d.file_bytes;
  if (blow_up > 0)
    p.suggestions.push_back({SuggestionKind::KeepPacked, "keep weights packed (drop forms that dequantize)", blow_up});
  std::sort(p.suggestions.begin(), p.suggestions.end(), [](const auto& a, const auto& b) { return a.saves > b.saves; });
}

}  // namespace

bool is_kv_cache_type(GgmlType type) noexcept {
  return std::find(std::begin(kKvCacheTypes), std::end(kKvCacheTypes), type) != std::end(kKvCacheTypes);
}
std::string kv_cache_type_list() {
  std::string list;
  for (GgmlType t : kKvCacheTypes) list += fmt::format("{}{}", list.empty() ? "" : ", ", type_name(t));
  return list;
}
uint32_t KvCachePlan::packed_caches() const noexcept {
  return uint32_t{type_traits(k_type).quantized} + uint32_t{type_traits(v_type).quantized};
}

MemoryPlan make_plan(const gguf::Header& header, const placement::MemoryProfile& profile,
                     const placement::Platform& platform, const placement::FormOverrides& overrides,
                     const PlanOptions& options) {
  MemoryPlan p;
  p.file = header.path.string();
  p.file_size = header.file_size;
  p.header_bytes_read = header.header_bytes_read;
  p.profile = profile.name;
  p.budget = options.budget ? options.budget : profile.budget;
  if (options.slots == 0) throw InvalidArgument(fmt::format("{}: --slots must be at least 1", p.file));
  p.slots = options.slots;
  p.batch_slots = options.batch_slots;

  const placement::FileFacts facts = placement::FileFacts::of(header);
  if (auto bad = placement::unsupported_tensors(header.tensors, platform); !bad.empty()) {
    placement::UnsupportedTypesError e(std::move(bad), platform.dequantize);
    e.add_context(p.file);
    throw e;
  }
  p.tensors.reserve(header.tensors.size());
  for (const auto& info : header.tensors)
    p.tensors.push_back(placement::decide(info, facts, profile, platform, overrides));
  placement::copy_small_amid_copies(p.tensors, profile, platform);

  if (looks_like_model(header)) {
    p.model = arch::ModelShape::from_header(header);
    // Before anything sized by the hyper-parameters (KV cache, per-layer slab lists) is built: a
    // header claiming 20000 layers over 5 layers of tensors is refused here, before it sizes anything.
    if (p.model->family) {
      const arch::TensorCheck check = arch::check_tensors(header, *p.model);
      if (!check.ok()) throw arch::TensorMismatchError(fmt::format("{}: {}", p.file, check.describe(*p.model)));
    }
    const uint32_t n_ctx = options.n_ctx ? options.n_ctx : std::min(p.model->ctx_train, kDefaultMaxContext);
    if (n_ctx == 0)
      throw InvalidArgument(fmt::format("{}: the model's {} is 0; give --ctx", p.file,
                                        arch::key(p.model->architecture, arch::Key::ContextLength)));
    p.kv = plan_kv(*p.model, n_ctx,
                   checked_kv_type(p.file, *p.model, options.k_type.value_or(profile.kv_type), "the K cache type"),
                   checked_kv_type(p.file, *p.model, options.v_type.value_or(profile.kv_type), "the V cache type"),
                   profile);
    const uint32_t packed = p.kv->packed_caches();
    p.decode = estimate_slabs(*p.model, 1, n_ctx);
    const uint32_t chunk = std::min(options.prefill_chunk.value_or(profile.prefill_chunk), n_ctx);
    p.prefill = estimate_slabs(*p.model, chunk, n_ctx, {.packed_caches = packed});
    if (options.draft_max > 0) {
      const uint32_t rows = std::min(checked_add<uint32_t>(options.draft_max, 1, "--draft-max"), n_ctx);
      p.verify = estimate_slabs(*p.model, rows, n_ctx, {.every_logit = true, .packed_caches = packed});
    }
    p.scratch = estimate_scratch(p.tensors, platform, std::max(chunk, p.verify ? p.verify->tokens : 0));
    // By default a prefill chunk beside a decode row of every other slot, or, when drafts are priced,
    // every slot's draft and the token before it if that is more.
    const uint32_t draft_rows = options.draft_max > 0 ? p.slots * (options.draft_max + 1) : 0;
    const uint32_t batch_rows = options.batch.value_or(std::min(std::max(chunk + p.slots - 1, draft_rows), n_ctx));
    if (batch_rows < p.slots)
      throw InvalidArgument(
          fmt::format("{}: --batch {} is fewer rows than --slots {}: each slot decodes a row per step", p.file,
                      batch_rows, p.slots));
    p.batch = estimate_slabs(*p.model, batch_rows, n_ctx,
                             {.sequences = p.slots, .packed_caches = packed, .drafts = options.draft_max > 0});
    p.batch_scratch = estimate_scratch(p.tensors, platform, batch_rows);
  }
  add_totals(p, options.prompt_cache);
  if (p.model && p.model->experts > 0) {
    if (options.expert_stats) options.expert_stats->check_fits(*p.model, p.file);
    place_experts(p, options.expert_stats ? &*options.expert_stats : nullptr, platform.page_size);
    add_totals(p, options.prompt_cache);
  } else if (options.expert_stats) {
    options.expert_stats->check_fits(p.model.value_or(arch::ModelShape{}), p.file);
  }
  // Experts a budget leaves evictable are the pages it means the kernel to drop: not counted against it.
  p.fits = !p.budget || p.totals.resident() - evictable_by_budget(p) <= *p.budget;
  suggest(p, profile, platform);
  if (p.kv && p.model && p.model->ctx_train > 0 && p.kv->n_ctx > p.model->ctx_train)
    p.warnings.push_back({PlanWarningKind::ContextBeyondTraining, p.kv->n_ctx, p.model->ctx_train});
  if (options.available_memory && p.totals.resident() > *options.available_memory)
    p.warnings.push_back({PlanWarningKind::ExceedsAvailableMemory, p.totals.resident(), *options.available_memory});
  return p;
}

SequencePlan SequencePlan::of(const KvCachePlan& kv, const SlabPlan& decode, const SlabPlan& prefill,
                              const ScratchPlan& scratch, const SlabPlan* verify) {
  return {
      .kv = kv,
      .step_bytes = std::max({decode.step_bytes, prefill.step_bytes, verify ? verify->step_bytes : uint64_t{0}}),
      .layer_bytes = std::max({decode.layer_bytes, prefill.layer_bytes, verify ? verify->layer_bytes : uint64_t{0}}),
      .scratch_bytes = scratch.bytes,
      .prefill_chunk = prefill.tokens,
      .verify_rows = verify ? verify->tokens : 0};
}

std::optional<SequencePlan> MemoryPlan::sequence() const {
  if (!kv || !decode || !prefill) return std::nullopt;
  return SequencePlan::of(*kv, *decode, *prefill, scratch, verify ? &*verify : nullptr);
}

std::optional<BatchPlan> MemoryPlan::batched() const {
  if (!batch) return std::nullopt;
  return BatchPlan{.rows = batch->tokens,
                   .sequences = batch->sequences,
                   .logit_rows = batch->logit_rows,
                   .step_bytes = batch->step_bytes,
                   .layer_bytes = batch->layer_bytes,
                   .scratch_bytes = batch_scratch.bytes};
}

bool MemoryPlan::has_warning(PlanWarningKind k) const noexcept {
  for (const auto& w : warnings)
    if (w.kind == k) return true;
  return false;
}

std::string_view plan_warning_kind_name(PlanWarningKind k) noexcept {
  switch (k) {
    case PlanWarningKind::ContextBeyondTraining: return "context-beyond-training";
    case PlanWarningKind::ExceedsAvailableMemory: return "exceeds-available-memory";
  }
  return "?";
}

std::string describe(const PlanWarning& w) {
  switch (w.kind) {
    case PlanWarningKind::ContextBeyondTraining:
      return fmt::format(
          "context {} is beyond the {} tokens the model was trained on: positions past "
          "it are untrained, output degrades",
          w.value, w.limit);
    case PlanWarningKind::ExceedsAvailableMemory:
      return fmt::format(
          "resident {} ({} bytes) exceeds the memory available now, {} ({} bytes, MemAvailable): "
          "`run` refuses it without --force",
          base::format_bytes(w.value), w.value, base::format_bytes(w.limit), w.limit);
  }
  return "?";
}

std::string_view suggestion_kind_name(SuggestionKind k) noexcept {
  switch (k) {
    case SuggestionKind::SmallerContext: return "smaller-context";
    case SuggestionKind::SmallerKvType: return "smaller-kv-type";
    case SuggestionKind::SmallerPrefillChunk: return "smaller-prefill-chunk";
    case SuggestionKind::KeepPacked: return "keep-packed";
  }
  return "?";
}

}  // namespace skainet::plan
