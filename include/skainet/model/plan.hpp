// skainet::plan — the memory plan, built from a GGUF header alone: every tensor's placement with its
// reason, the KV cache, the per-step activation slabs, totals, and whether it fits a budget.
//
//   gguf::Header h = gguf::read_header("model.gguf");                 // header bytes only
//   plan::PlanOptions opts; opts.n_ctx = 2048;
//   plan::MemoryPlan p = plan::make_plan(h, placement::MemoryProfile::preset("default"),
//                                        placement::Platform::detect(), {}, opts);
//   std::cout << plan::render_text(p);        // five-line summary, then one line per layer
//   plan::ResidentSplit s = plan::split(p);   // pinned / evictable / KV cache / slabs / scratch
//   if (!p.fits) return 1;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/io/arch.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/model/placement.hpp"

namespace skainet::plan {

// The types a KV cache can hold, K and V each: llama.cpp's -ctk/-ctv list (f32, f16, bf16, q8_0, q4_0,
// q4_1, iq4_nl, q5_0, q5_1). A packed type needs head_dim to be whole blocks, so that a KV head's
// part of a cell starts a block (make_plan refuses the others, naming the head size).
bool is_kv_cache_type(GgmlType type) noexcept;
std::string kv_cache_type_list();  // "F32, F16, BF16, Q8_0, ..." for an error message

struct KvCachePlan {
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  uint32_t layers = 0, n_ctx = 0, kv_heads = 0, head_dim = 0;
  // K and V, all layers: layers * ctx * (row_bytes(k_type, kv_width) + row_bytes(v_type, kv_width)),
  // kv_width = kv_heads * head_dim.
  uint64_t bytes = 0;
  MemoryDomain domain = MemoryDomain::HostPages;
  uint32_t packed_caches() const noexcept;  // how many of K and V are quantized (StepRows::packed_caches)
  friend bool operator==(const KvCachePlan&, const KvCachePlan&) = default;
};

// One activation the model draws from a forward slab in a step, for `tokens` tokens.
struct ActivationBuffer {
  std::string name;
  uint64_t bytes = 0;  // already rounded up to the 64-byte slab alignment
  friend bool operator==(const ActivationBuffer&, const ActivationBuffer&) = default;
};

// The two slabs of one forward step: the step slab (reset at the step boundary) holds what lives
// across layers (the residual stream, logits); the layer slab is reset after every layer, the
// residual having been retained into the step slab. This is the contract the model code keeps.
struct SlabPlan {
  uint32_t tokens = 0;
  // The sequences those tokens belong to: a batched step runs RoPE and attention per sequence (their
  // buffers each rounded to the slab alignment) and keeps one row of logits for each.
  uint32_t sequences = 1;
  uint32_t logit_rows = 1;  // rows whose logits the step keeps: one per sequence, or every token
  std::vector<ActivationBuffer> step;
  std::vector<ActivationBuffer> layer;
  uint64_t step_bytes = 0, layer_bytes = 0;
  uint64_t total() const noexcept { return step_bytes + layer_bytes; }
  friend bool operator==(const SlabPlan&, const SlabPlan&) = default;
};
// What a step's tokens are beyond their count: the sequences they belong to, and whether the step
// keeps every row's logits (model::Logits::All: a speculative draft is verified by sampling each row)
// or one row per sequence (generation samples each sequence's last token).
struct StepRows {
  uint32_t sequences = 1;
  bool every_logit = false;
  // Over a quantized K or V cache (KvCachePlan::packed_caches: 0, 1 or 2 of them) a sequence with more
  // than one row (a prefill chunk, a verification) reads its visible cells converted to F32, at most
  // [ctx, kv_heads * head_dim] for each quantized one (a decode row reads them in their form).
  uint32_t packed_caches = 0;
  // A batch whose decode rows may carry drafts (speculative decoding in a generate::Batch): up to
  // every row's logits are kept, gathered per sequence.
  bool drafts = false;
};
SlabPlan estimate_slabs(const arch::ModelShape& m, uint32_t tokens, uint32_t n_ctx, StepRows rows = {});

// The matmul scratch of one slot: the activation a matmul prepares once per call (quantized to 8
// bits, or split for the BF16 tiles) before its weight rows read it. Sized for the largest call the
// run makes, the widest weight's at the prefill chunk; the context reserves it at load, so no step
// allocates it (a call asking more grows it and is counted: ExecutionContext::ScratchStats).
struct ScratchPlan {
  std::string tensor;  // the weight whose call needs it (empty: no kernel prepares its activation)
  uint32_t rows = 0;   // x rows of that call
  uint64_t bytes = 0;
  friend bool operator==(const ScratchPlan&, const ScratchPlan&) = default;
};
ScratchPlan estimate_scratch(const std::vector<placement::Decision>& tensors, const placement::Platform& platform,
                             uint32_t rows);

// What one sequence reserves, each size final: decode, prefill and a speculative draft's verification
// run through the same two slabs, so each slab is the largest of them. A
// generate::Sequence is built from this alone; nobody compares decode and prefill again.
struct SequencePlan {
  KvCachePlan kv;
  uint64_t step_bytes = 0;     // the step slab
  uint64_t layer_bytes = 0;    // the layer slab
  uint64_t scratch_bytes = 0;  // the matmul scratch, reserved at load
  uint32_t prefill_chunk = 0;  // tokens per prefill step
  uint32_t verify_rows = 0;    // tokens one verification step may run (a draft and the token before it); 0: none
  uint64_t slab_bytes() const noexcept { return step_bytes + layer_bytes; }
  static SequencePlan of(const KvCachePlan& kv, const SlabPlan& decode, const SlabPlan& prefill,
                         const ScratchPlan& scratch, const SlabPlan* verify = nullptr);
  friend bool operator==(const SequencePlan&, const SequencePlan&) = default;
};

// What one batched forward pass shares among the sequences it advances (generate::Batch): up to
// `rows` tokens of up to `sequences` sequences per step, the slabs and the matmul scratch sized for
// them. Each sequence keeps its own KV cache (SequencePlan::kv).
struct BatchPlan {
  uint32_t rows = 0, sequences = 0;
  uint32_t logit_rows = 0;  // rows whose logits a step may keep: `sequences`, or `rows` when drafts were priced
  uint64_t step_bytes = 0, layer_bytes = 0, scratch_bytes = 0;
  uint64_t slab_bytes() const noexcept { return step_bytes + layer_bytes; }
  friend bool operator==(const BatchPlan&, const BatchPlan&) = default;
};

struct Totals {
  uint64_t file = 0;                                                        // all tensor bytes in the file
  uint64_t mapped = 0, heap = 0, pages = 0, kv = 0, slab = 0, scratch = 0;  // kv, slab, scratch: all slots'
  uint64_t prompt_cache = 0;  // PlanOptions::prompt_cache: the bound, all of which it may fill
  uint64_t resident() const noexcept { return mapped + heap + pages + kv + slab + scratch + prompt_cache; }
  friend bool operator==(const Totals&, const Totals&) = default;
};

enum class SuggestionKind : uint8_t { SmallerContext, SmallerKvType, SmallerPrefillChunk, KeepPacked };
struct Suggestion {
  SuggestionKind kind;
  std::string action;  // "--ctx 1024"
  uint64_t saves = 0;  // bytes
  friend bool operator==(const Suggestion&, const Suggestion&) = default;
};

// A decision the plan does not refuse but the user should see, as data (rendered by render_text).
enum class PlanWarningKind : uint8_t {
  ContextBeyondTraining,   // value: the planned ctx; limit: <arch>.context_length
  ExceedsAvailableMemory,  // value: resident bytes; limit: PlanOptions::available_memory
};
struct PlanWarning {
  PlanWarningKind kind;
  uint64_t value = 0, limit = 0;
  friend bool operator==(const PlanWarning&, const PlanWarning&) = default;
};
std::string_view plan_warning_kind_name(PlanWarningKind k) noexcept;
std::string describe(const PlanWarning& w);

// How often each expert of each layer was routed over a calibration text: what `skainet run
// --record-expert-stats FILE` writes and `--expert-stats FILE` reads (docs/placement.md, "Experts").
// JSON, versioned: {"format": "skainet-expert-stats", "version": 1, "model", "architecture", "layers",
// "experts", "experts_used", "tokens", "routed": [[count per expert] per layer]}.
struct ExpertStats {
  static constexpr int kVersion = 1;
  std::string model;         // the file it was recorded on (a name, for the reader)
  std::string architecture;  // general.architecture
  uint32_t layers = 0, experts = 0, experts_used = 0;
  uint64_t tokens = 0;           // rows routed through each layer
  std::vector<uint64_t> routed;  // [layer * experts + expert]: the rows routed to it
  // Empty counts for a model of this shape (what the run's counter fills).
  static ExpertStats for_model(const arch::ModelShape& m, std::string model);
  // The share of tokens routed to one expert of one layer (0 when no token was counted).
  double share(uint32_t layer, uint32_t expert) const noexcept;
  std::string to_json() const;
  // InvalidArgument naming `origin` for malformed JSON, another format or version, counts that do not
  // add up (each layer's counts must sum to tokens * experts_used).
  static ExpertStats from_json(std::string_view text, std::string_view origin);
  static ExpertStats read(const std::string& path);
  // InvalidArgument naming both files when the statistics were recorded on a model of another shape
  // (layers, experts, experts used).
  void check_fits(const arch::ModelShape& m, std::string_view model_file) const;
};

struct PlanOptions {
  uint32_t n_ctx = 0;                      // 0: the model's training context, at most 4096
  std::optional<GgmlType> k_type, v_type;  // override the profile's kv_type
  std::optional<uint32_t> prefill_chunk;
  // Speculative decoding's longest draft (--draft-max): a verification step runs draft_max + 1 tokens
  // and keeps every row's logits, priced like a prefill chunk. 0: no speculation.
  uint32_t draft_max = 0;
  std::optional<uint64_t> budget;  // overrides the profile's
  // The memory this machine can give now (base::available_memory(), MemAvailable); when set, a plan
  // whose resident total exceeds it carries an ExceedsAvailableMemory warning. Unset: no check.
  std::optional<uint64_t> available_memory;
  // Sequences held at once (`skainet serve --slots N`), each with its own KV cache. batch_slots: they
  // run as one generate::Batch (serve), whose slabs and scratch they share (MemoryPlan::serves_batched);
  // otherwise each runs its own passes (`run`, `chat`, a draft model's sequences) with its own slabs
  // and scratch.
  uint32_t slots = 1;
  bool batch_slots = false;
  // Rows of a batched step (`--batch`), at least `slots` (a decode row for each); unset: one
  // sequence's prefill chunk joining a decode row of every other slot, prefill chunk + slots - 1.
  std::optional<uint32_t> batch;
  // serve's prompt cache (--cache-ram): slots' prefixes kept beyond the slots, up to these bytes
  // (serve::PromptCache). 0: none.
  uint64_t prompt_cache = 0;
  // Routing statistics for a mixture of experts: with a budget, the hottest experts that fit are pinned
  // (place_experts). Without them every expert counts the same, and index order decides.
  std::optional<ExpertStats> expert_stats;
};

struct MemoryPlan {
  std::string file;
  uint64_t file_size = 0;
  uint64_t header_bytes_read = 0;
  std::string profile;
  std::optional<arch::ModelShape> model;  // absent for files that are not a llama-family model
  std::vector<placement::Decision> tensors;
  std::optional<KvCachePlan> kv;            // one slot's KV cache
  std::optional<SlabPlan> decode, prefill;  // one slot's slabs
  std::optional<SlabPlan> verify;           // one slot's speculative verification step (PlanOptions::draft_max)
  ScratchPlan scratch;                      // one slot's matmul scratch
  uint32_t slots = 1;                       // totals.kv holds this many KV caches
  bool batch_slots = false;                 // PlanOptions::batch_slots
  // A batched step over the slots (rows = PlanOptions::batch, sequences = slots) and its scratch.
  std::optional<SlabPlan> batch;
  ScratchPlan batch_scratch;
  // The slots run as one generate::Batch (serve): totals.slab and .scratch are the batch's, once, and
  // each slot adds only its KV cache. Otherwise each slot is priced as a sequence of its own.
  bool serves_batched() const noexcept { return batch_slots && batch.has_value(); }
  Totals totals;
  std::optional<uint64_t> budget;
  bool fits = true;
  std::vector<Suggestion> suggestions;
  std::vector<PlanWarning> warnings;
  bool has_warning(PlanWarningKind k) const noexcept;
  // One sequence's final sizes, from kv, decode, prefill and scratch (absent without a model).
  std::optional<SequencePlan> sequence() const;
  // The batch's final sizes, from batch and batch_scratch (absent without a model).
  std::optional<BatchPlan> batched() const;
  friend bool operator==(const MemoryPlan&, const MemoryPlan&) = default;
};

// The per-expert decisions of every 3-D expert stack (placement::ExpertSlice), made by make_plan after
// the per-tensor ones. Under a budget, experts of mapped stacks are pinned as (layer, expert) pairs,
// hottest first (stats' shares; without stats all equal, expert index then layer), while the resident
// total without the evictable experts stays within the budget; the rest stay evictable file pages.
void place_experts(MemoryPlan& plan, const ExpertStats* stats, uint64_t page_size);
// The bytes of experts the budget left evictable (ExpertReason::OverBudget): the pages a budgeted plan
// means the kernel to drop, so `fits` does not count them.
uint64_t evictable_by_budget(const MemoryPlan& plan) noexcept;

MemoryPlan make_plan(const gguf::Header& header, const placement::MemoryProfile& profile,
                     const placement::Platform& platform, const placement::FormOverrides& overrides,
                     const PlanOptions& options);

// ---- The plan summed up: what `skainet plan` prints and draws -----------------------------------

// The resident total split by what can leave memory: pinned bytes (weights copied into process
// memory: only swap moves them out) against evictable ones (weights mapped from the file: pages the
// kernel may drop and read back), then the KV cache, the activation slabs and the matmul scratch. From
// the placement decisions (their domains), never estimated; total() equals totals.resident().
struct ResidentSplit {
  uint64_t pinned = 0, evictable = 0, kv = 0, slabs = 0, scratch = 0, prompt_cache = 0;
  uint32_t pinned_tensors = 0, evictable_tensors = 0;
  uint64_t total() const noexcept { return pinned + evictable + kv + slabs + scratch + prompt_cache; }
  friend bool operator==(const ResidentSplit&, const ResidentSplit&) = default;
};
ResidentSplit split(const MemoryPlan& plan);

// Operations one token costs in the weights' products, a multiply-add counted as 2 ("2 × parameters",
// as the matrix peak is counted): every matmul weight, an expert stack at experts_used / experts of
// its elements (the experts a token reads), and the token embedding where it is also the output (no
// matmul weight has the vocabulary's rows). Attention's scores and values are not counted.
uint64_t matmul_ops_per_token(const MemoryPlan& plan);

// The tensors of one layer ("blk.N."), or of everything outside the layers (layer unset), with how
// their bytes are held: held_how (placement::held_how) -> tensor count, in first-seen order.
struct LayerGroup {
  std::optional<uint32_t> layer;
  std::vector<size_t> tensors;  // indexes into MemoryPlan::tensors, in file order
  uint64_t bytes = 0, pinned = 0, evictable = 0;
  std::vector<std::pair<std::string, uint32_t>> forms;  // "repacked copy Q4_0" -> 7
  std::string name() const;                             // "layer 3" or "outside the layers"
};
// Layers in order, then the tensors outside them (when any).
std::vector<LayerGroup> group_by_layer(const MemoryPlan& plan);

// A tensor kind across the layers ("ffn_gate.weight" x 22), a tensor outside them, or the KV cache.
struct Consumer {
  std::string name;
  uint32_t tensors = 0;  // 0 for the KV cache
  uint64_t bytes = 0;
  friend bool operator==(const Consumer&, const Consumer&) = default;
};
// The `n` largest consumers of resident memory, largest first (ties: first seen).
std::vector<Consumer> biggest_consumers(const MemoryPlan& plan, size_t n);

// The summary's five lines, each ending in '\n': the verdict (fits the budget or not, and by how
// much, or the resident total when there is no budget; and whether it exceeds the memory available
// now, when the plan carries that warning), the resident split, the weights' split in plain words,
// the biggest consumers, and the model with its profile.
std::vector<std::string> summary_lines(const MemoryPlan& plan);

// The resident total the same plan would have at other contexts and slot counts: make_plan again
// with only n_ctx and slots changed (a --batch below the slots is dropped).
struct ResidentPoint {
  uint32_t n_ctx = 0, slots = 1;
  uint64_t resident = 0, kv = 0;
  friend bool operator==(const ResidentPoint&, const ResidentPoint&) = default;
};
std::vector<ResidentPoint> resident_by_context(const gguf::Header& header, const placement::MemoryProfile& profile,
                                               const placement::Platform& platform,
                                               const placement::FormOverrides& overrides, const PlanOptions& options,
                                               const std::vector<uint32_t>& contexts,
                                               const std::vector<uint32_t>& slots);
// Powers of two from 128 up to the larger of the planned and the trained context (and the planned
// one itself); empty without a model.
std::vector<uint32_t> context_steps(const MemoryPlan& plan);

// `plan --svg`: a standalone SVG (no scripts, no external references) of the split as a stacked bar,
// a strip of the layers' bytes (pinned / evictable), and resident memory against the context for
// each slot count in `curve`, with the budget when there is one.
std::string render_svg(const MemoryPlan& plan, const std::vector<ResidentPoint>& curve);

// Without `tensors`, one line per layer; with it, every tensor's line under its layer.
std::string render_text(const MemoryPlan& plan, bool tensors = false);
std::string to_json(const MemoryPlan& plan);        // everything, decisions as enum names + numbers
std::string to_json(const placement::Decision& d);  // one tensor's decision, as in the plan's "tensors"
MemoryPlan from_json(std::string_view json);        // InvalidArgument on malformed JSON

std::string_view suggestion_kind_name(SuggestionKind k) noexcept;

}  // namespace skainet::plan
