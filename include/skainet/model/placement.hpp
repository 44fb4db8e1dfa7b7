// skainet::placement — where each weight lives and why, decided before a byte of payload is read.
//
//   placement::MemoryProfile profile = placement::MemoryProfile::preset("low-memory");
//   placement::Platform platform = placement::Platform::detect();
//   placement::FormOverrides overrides;
//   overrides.per_tensor.push_back(placement::TensorOverride::parse("ffn_down=f32,heap"));
//   placement::Decision d = placement::decide(info, FileFacts::of(header), profile, platform, overrides);
//   std::cout << placement::explain(d);     // "blk.0.ffn_down.weight  Q4_0 -> pages 6.2 MiB (...)"
//
// Precedence (the user always wins): per-tensor override (weight_form_for, then --override-tensor
// patterns, first match wins) > uniform form (--weight-form) > WeightFormResolver. The decision is
// data (enum reasons + numbers); explain() only renders it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skainet/core/base.hpp"
#include "skainet/core/format.hpp"
#include "skainet/io/gguf.hpp"
#include "skainet/compute/memory.hpp"
#include "skainet/core/tensor.hpp"

namespace re2 {
class RE2;
}

namespace skainet::placement {

// ---- How a weight should be held -------------------------------------------------------------

enum class EncodingRequest : uint8_t { KeepAsStored, DequantizeToF32, Requantize };
enum class WeightOrder : uint8_t { AsStored, KernelFeed };
enum class WeightResidency : uint8_t { Heap, Mapped };  // Heap: in process memory (heap or pages)

struct WeightForm {
  EncodingRequest encoding = EncodingRequest::KeepAsStored;
  GgmlType requantize_to = GgmlType::Q8_0;  // meaningful for Requantize only
  WeightOrder order = WeightOrder::AsStored;
  WeightResidency residency = WeightResidency::Mapped;

  // "Everything dense, in memory": the supported one-liner.
  static WeightForm dense_in_memory() {
    return {EncodingRequest::DequantizeToF32, GgmlType::F32, WeightOrder::AsStored, WeightResidency::Heap};
  }
  // Comma-separated words in any order: an encoding (keep | f32 | a type name such as q8_0, which
  // requantizes), an order (as-stored | kernel-feed), a residency (mapped | heap).
  // "f32,heap", "keep", "q8_0,heap,kernel-feed". InvalidArgument names the word it did not know.
  static WeightForm parse(std::string_view text);
  std::string to_string() const;
  friend bool operator==(const WeightForm&, const WeightForm&) = default;
};

// What a tensor is for decides which kernels must consume it.
enum class TensorRole : uint8_t { MatmulWeight, Embedding, Vector };
TensorRole role_of(const gguf::TensorInfo& info) noexcept;
std::string_view role_name(TensorRole r) noexcept;

// ---- The user's policy and the machine -------------------------------------------------------

struct MemoryProfile {
  std::string name = "default";
  WeightResidency residency = WeightResidency::Mapped;  // what the resolver asks for
  bool prefer_kernel_feed = false;  // repack to a kernel-feed order where one exists (presets: all but low-memory)
  bool strict = false;              // refuse (instead of dequantizing) an encoding no kernel reads
  uint64_t off_heap_threshold = 256 * 1024;  // copies at least this large go to dedicated pages
  GgmlType kv_type = GgmlType::F16;
  uint32_t prefill_chunk = 64;     // tokens per prefill step
  std::optional<uint64_t> budget;  // resident bytes allowed, if any

  // default, low-memory, throughput, in-memory, strict. InvalidArgument lists them.
  static MemoryProfile preset(std::string_view name);
  static std::vector<std::string_view> preset_names();
};

// "2G", "512M", "1.5GiB", "4096" -> bytes (K/M/G/T are binary). InvalidArgument otherwise.
uint64_t parse_bytes(std::string_view text);

struct KernelCapability {
  GgmlType type;
  BlockOrder order;
  friend bool operator==(const KernelCapability&, const KernelCapability&) = default;
};

// What this machine can do. detect() reads it; tests build their own.
struct Platform {
  bool can_map = true;
  uint64_t max_map_bytes = UINT64_MAX;  // the largest file this process can map
  uint64_t page_size = 4096;
  bool huge_pages = false;  // transparent huge pages enabled (madvise or always)
  // How far from a touched byte of a mapped file other bytes of it may become resident: a fault maps
  // a whole page-cache folio (up to 2 MiB, x86-64's PMD) and reads around it (the device's readahead).
  uint64_t fault_span = 2u << 20;
  base::CpuFeatures isa;
  std::vector<KernelCapability> matmul;  // (encoding, order) a matmul kernel consumes
  std::vector<KernelCapability> repack;  // kernel-feed orders a load-time repack can produce
  std::vector<GgmlType> dequantize;      // encodings we can dequantize (reference kernels)
  // The run's kernels: bytes one matmul of `rows` x rows of `k` against a weight held as (type,
  // order) prepares its activation into (KernelTable::matmul_scratch_for; null: no kernel does).
  size_t (*matmul_scratch)(GgmlType type, BlockOrder order, int64_t rows, int64_t k) noexcept = nullptr;

  bool matmul_reads(GgmlType t, BlockOrder o) const noexcept;
  std::optional<BlockOrder> kernel_feed_order(GgmlType t) const noexcept;
  bool can_dequantize(GgmlType t) const noexcept;
  static Platform detect();
  std::string isa_summary() const;  // "avx2 avx512f ..."
};

// ---- Decisions -------------------------------------------------------------------------------

enum class FormReason : uint8_t {
  DenseAsStored,        // F32 (or a dense type a kernel reads): nothing to change
  KernelReadsEncoding,  // packed, and a kernel consumes it in file order
  RepackedForKernel,    // packed, repacked to a kernel-feed order (profile prefers speed)
  NoKernelDequantized,  // no kernel reads this encoding: dequantized once at load
  VectorNeedsF32,       // norms and biases are read as F32
  UserForm,             // an override or uniform form said so
};
enum class DecidedBy : uint8_t { Resolver, UniformForm, PerTensorOverride };

enum class PlacementReason : uint8_t {
  MappedFileBytes,  // all hold: form asks mapped, platform maps, bytes are the file's, kernel reads them
  FormAsksHeap,     // the form (profile or override) asks for process memory
  PlatformCannotMap,
  FileTooLargeToMap,
  CopyDequantized,  // bytes held are not the file's: a copy cannot be paged from the file
  CopyRequantized,
  CopyRepacked,
  CopyAmidCopies,  // small, within Platform::fault_span of a copied tensor: touching it mapped
                   // would make the copy's file bytes resident again (copy_small_amid_copies)
};

struct AllocationSpec {
  MemoryDomain domain = MemoryDomain::MappedFile;
  memory::ScopeKind scope = memory::ScopeKind::Model;
  uint64_t bytes = 0;  // bytes actually held (for mapped: the file bytes)
  uint32_t alignment = 64;
  bool mutable_ = false;
  friend bool operator==(const AllocationSpec&, const AllocationSpec&) = default;
};

// ---- Experts: the slices of a mixture of experts' 3-D stacks ------------------------------------
//
// A stack [experts, rows, cols] (ffn_{gate,up,down}_exps) holds one 2-D matrix per expert, each a
// contiguous byte range of the file (file_bytes / experts). The plan decides per expert whether its
// range is pinned (copied into anonymous pages at the same addresses, load::ResolvedGguf) or left as
// evictable file pages; the model still sees one 3-D view. Only whole pages inside a run of pinned
// experts can be made anonymous: the partial pages at a run's edges stay file pages, counted evictable.
enum class ExpertReason : uint8_t {
  NoBudget,     // no --budget: the stack is held as its tensor's decision says (mapped: evictable)
  StackCopied,  // the whole stack is a copy (its form: dequantized, in-memory profile, ...): pinned
  HotFits,      // among the hottest experts (index order without statistics) that fit the budget: pinned
  OverBudget,   // what the budget leaves after hotter experts and everything else was spent: evictable
};
struct ExpertSlice {
  uint32_t expert = 0;
  bool pinned = false;
  ExpertReason reason = ExpertReason::NoBudget;
  double routed = -1;         // share of calibration tokens routed to it (0..1); < 0: no statistics
  uint64_t bytes = 0;         // its slice of the stack as held
  uint64_t pinned_bytes = 0;  // of those, in anonymous pages (whole pages inside a pinned run)
  friend bool operator==(const ExpertSlice&, const ExpertSlice&) = default;
};

struct Decision {
  std::string tensor;
  TensorRole role = TensorRole::MatmulWeight;
  GgmlType file_type = GgmlType::F32;
  std::vector<uint64_t> shape;  // ggml order, as in the file
  uint64_t file_offset = 0;
  uint64_t file_bytes = 0;
  WeightForm form;
  FormReason form_reason = FormReason::DenseAsStored;
  DecidedBy decided_by = DecidedBy::Resolver;
  int override_index = -1;  // which --override-tensor pattern matched (-1: API or none)
  GgmlType held_type = GgmlType::F32;
  BlockOrder held_order = BlockOrder::RowMajor;
  AllocationSpec spec;
  PlacementReason reason = PlacementReason::MappedFileBytes;
  uint64_t off_heap_threshold = 0;  // the number the domain was decided against
  // A 3-D expert stack's slices, one per expert (plan::place_experts); empty for any other tensor.
  std::vector<ExpertSlice> experts;
  friend bool operator==(const Decision&, const Decision&) = default;
};

class PlacementError : public Error {
  using Error::Error;
};

// A tensor whose type no kernel here reads and no dequantizer decodes.
struct UnsupportedTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  friend bool operator==(const UnsupportedTensor&, const UnsupportedTensor&) = default;
};
// Every tensor of `tensors` the platform cannot hold in any form, in file order.
std::vector<UnsupportedTensor> unsupported_tensors(std::span<const gguf::TensorInfo> tensors, const Platform& platform);

// The plan's refusal of a file with such tensors: all of them at once, and the types that would do.
class UnsupportedTypesError : public PlacementError {
 public:
  UnsupportedTypesError(std::vector<UnsupportedTensor> tensors, std::vector<GgmlType> supported);
  const std::vector<UnsupportedTensor>& tensors() const noexcept { return tensors_; }
  const std::vector<GgmlType>& supported() const noexcept { return supported_; }

 private:
  std::vector<UnsupportedTensor> tensors_;
  std::vector<GgmlType> supported_;
};

struct TensorOverride {
  std::string pattern;  // RE2 regex (the ECMAScript subset without backreferences), searched in the name
  WeightForm form;
  // RE2, not std::regex: std::regex recurses once per character matched and per nesting level, so a
  // long tensor name or a deeply nested pattern would overflow the stack. RE2 runs
  // in linear time with bounded stack and refuses patterns past its program-size limit.
  std::shared_ptr<const re2::RE2> regex;
  // "REGEX=FORM" as --override-tensor takes it. InvalidArgument on a bad regex or form.
  static TensorOverride parse(std::string_view text);
  bool matches(std::string_view name) const;
};

struct FormOverrides {
  std::function<std::optional<WeightForm>(std::string_view name)> weight_form_for;  // C++ API
  std::vector<TensorOverride> per_tensor;                                           // first match wins
  std::optional<WeightForm> uniform;
};

// WeightFormResolver: the form a weight gets when nobody overrides it. Throws PlacementError under a
// strict profile for an encoding no kernel reads (naming the encoding and the byte blow-up).
std::pair<WeightForm, FormReason> resolve_form(const gguf::TensorInfo& info, const MemoryProfile& profile,
                                               const Platform& platform);

// What the allocation resolver needs to know of the file itself.
struct FileFacts {
  uint64_t size = 0;
  uint32_t alignment = gguf::kDefaultAlignment;
  static FileFacts of(const gguf::Header& h) { return {h.file_size, h.alignment}; }
};

// AllocationResolver: where the bytes of `form` live. PlacementError if the form cannot be served
// (no kernel reads the held encoding, a requantize target that does not divide the rows, ...).
Decision resolve_allocation(const gguf::TensorInfo& info, const WeightForm& form, FormReason form_reason,
                            const FileFacts& file, const MemoryProfile& profile, const Platform& platform);

// Both, with precedence applied. A uniform form applies to matmul weights and embeddings; norms and
// biases keep the resolver's encoding (they are read as F32) and take only its residency. A uniform
// kernel-feed order falls back to file order where no repacking exists; a per-tensor one is an error.
Decision decide(const gguf::TensorInfo& info, const FileFacts& file, const MemoryProfile& profile,
                const Platform& platform, const FormOverrides& overrides);

// A plan-wide pass after decide(): a mapped tensor smaller than platform.fault_span that lies within
// fault_span of a tensor the plan copies (repacked, dequantized, ...) is copied too. Mapped, the first
// touch of its few KiB would map the folio around it and read ahead into the copied neighbour's file
// bytes, which the loader dropped: that weight resident twice. A per-tensor override keeps its say.
void copy_small_amid_copies(std::vector<Decision>& decisions, const MemoryProfile& profile, const Platform& platform);

std::string explain(const Decision& d);  // one line: name, format -> where, size, (why)
// --explain: every field of the decision. Its "form" line is the form as held (held_form), the one
// the placement line describes; the form asked for follows it when they differ.
std::string explain_long(const Decision& d, const MemoryProfile& profile, const Platform& platform);

// The form the bytes are held in, which can differ from the form asked for (Decision::form): a repacked
// or dequantized copy asked "mapped" is held in memory, and a kernel-feed order with no repack stays
// in file order. Its residency is mapped exactly when the placement serves the file's bytes.
WeightForm held_form(const Decision& d);

// The decision in plain words, the same wherever `plan` prints it (its per-layer and per-tensor lines,
// --explain's "in short" line). Pinned: a copy in process memory, only swap can move it out;
// evictable: file pages the kernel can drop under pressure and read back from the file.
bool is_pinned(const Decision& d) noexcept;  // every domain but MappedFile
// The bytes of `d` held pinned: all of spec.bytes when is_pinned, else its pinned experts' pages.
uint64_t pinned_bytes(const Decision& d) noexcept;

// The file ranges [begin, end) of a mapped stack's pinned experts that the loader makes anonymous:
// consecutive pinned experts merged into one run, each run shrunk to the whole pages inside it.
struct FileRange {
  uint64_t begin = 0, end = 0;
  friend bool operator==(const FileRange&, const FileRange&) = default;
};
std::vector<FileRange> pinned_file_ranges(const Decision& d, uint64_t page_size);
// Fills each slice's pinned_bytes from pinned_file_ranges (a copied stack: every byte).
void account_pinned_pages(Decision& d, uint64_t page_size);
// "blk.3.ffn_up_exps.weight[7]" -> ("blk.3.ffn_up_exps.weight", 7); nullopt without a "[N]" suffix.
std::optional<std::pair<std::string_view, uint32_t>> parse_expert_ref(std::string_view text) noexcept;
// --explain of one expert: the stack's file and form, the slice's bytes, and why it is pinned or not.
std::string explain_expert(const Decision& stack, uint32_t expert);
// "routed 8.2% of tokens in calibration; pinned: among the hottest that fit the budget"
std::string expert_words(const ExpertSlice& e);
std::string_view expert_reason_name(ExpertReason r) noexcept;
// A short name for how the bytes are held: "mapped", "repacked copy", "dequantized copy", ...
std::string_view held_how(const Decision& d) noexcept;
// "copied into memory (pinned): repacked to 16-row interleave for the kernel"
std::string plain_words(const Decision& d);

std::string_view form_reason_name(FormReason r) noexcept;
std::string_view decided_by_name(DecidedBy d) noexcept;
std::string_view placement_reason_name(PlacementReason r) noexcept;
std::string_view encoding_request_name(EncodingRequest e) noexcept;
std::string_view order_name(WeightOrder o) noexcept;
std::string_view residency_name(WeightResidency r) noexcept;

}  // namespace skainet::placement
