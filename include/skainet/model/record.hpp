// skainet::record — the recorded path (DESIGN.md §4): the unchanged model code runs under a recording
// context on symbolic tensors; its ops land on a Tape, the tape becomes a ComputeGraph, passes
// annotate it, and the emitter prints StableHLO whose weights are external parameters. `export_model`
// (export.cpp) drives the whole path and writes model.mlir, the parameters and a report.
//
//   record::Tape tape = record::record_entry(llama, weights, kv, {.name = "decode", .tokens = 1,
//                                            .dynamic_position = true, .cache_in = true});
//   record::ComputeGraph g = record::ComputeGraph::from_tape(tape);
//   record::LayoutAssignmentPass{"llvm-cpu"}.run(g);
//   std::string mlir = record::emit_module({&g}).text;
//
// What is carried, never re-decided: each weight's identity (its GGUF name), the encoding the plan
// decided to hold it in, and its block order. The compiler (IREE) does buffer planning, liveness and
// scheduling; nothing here plans memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "skainet/compute/memory.hpp"
#include "skainet/model/model.hpp"
#include "skainet/compute/opset.hpp"
#include "skainet/model/plan.hpp"

namespace skainet::record {

// How the ops that read packed weights reach the compiled module.
enum class KernelForm : uint8_t {
  // Every op in StableHLO, each packed weight dequantized where it is used: any IREE target. A
  // one-row product is a multiply + reduce over the blocked dequantization, which IREE fuses into one
  // dispatch reading the packed bytes.
  StableHlo,
  // The same, but every product, one row or many, on the flat dequantization (dequantize, reshape,
  // dot_general): IREE writes the weight in f32 per call. For IREE 3.13's SPIR-V (Vulkan) backend,
  // which cannot compile the fused form's reduction over several dims.
  StableHloFlat,
  // Matmuls, attention and embedding gathers call the engine's own kernels through IREE executable
  // imports (kernel_imports.hpp), the weights in the encoding and block order of the eager plan:
  // llvm-cpu only, with libskainet_iree_plugin.so loaded by the runtime.
  Engine,
};
std::string_view kernel_form_name(KernelForm f) noexcept;  // "engine", "stablehlo", "stablehlo-flat"
std::optional<KernelForm> parse_kernel_form(std::string_view name) noexcept;

// ---- Tape ----

// A tensor as an op saw it: which storage, and the view of it (offset, shape, strides, type, order).
struct TensorRef {
  uint64_t storage = 0;
  uint64_t offset = 0;
  Shape shape;
  Strides strides{};
  GgmlType type = GgmlType::F32;
  BlockOrder order = BlockOrder::RowMajor;
  static TensorRef of(const Tensor& t);
};

// What a storage of the recording is.
enum class SourceKind : uint8_t {
  Intermediate,  // an op's output
  Weight,        // a model parameter, named by its GGUF tensor name
  KCache,        // layer `layer` of the K cache
  VCache,
};
struct Source {
  SourceKind kind = SourceKind::Intermediate;
  std::string name;    // Weight: the GGUF tensor name
  uint32_t layer = 0;  // caches
  Shape shape;         // the whole storage as allocated
  GgmlType type = GgmlType::F32;
  BlockOrder order = BlockOrder::RowMajor;
};

// An op call as recorded: its tensors as views, its attributes as the op passed them.
struct TapeOp {
  ops::OpKind kind;
  std::vector<TensorRef> inputs{};
  TensorRef output;
  ops::OpAttributes attrs{};
  bool ids_are_tokens = false;  // GatherRows: the ids are the entry's token argument
  std::vector<int32_t> ids{};   // GatherRows with constant ids
};

// One entry function to record.
struct EntrySpec {
  std::string name;               // "prefill", "decode"
  int64_t tokens = 1;             // static token count of the function
  bool dynamic_position = false;  // the first position is an argument (else 0)
  bool cache_in = false;          // K/V caches are arguments (else they start zeroed)
  model::Logits logits = model::Logits::Last;
};

struct Tape {
  EntrySpec entry;
  std::vector<TapeOp> ops;
  std::map<uint64_t, Source> sources;  // by storage id
  TensorRef result;                    // the logits
  plan::KvCachePlan kv;
};

// Hands out symbolic storage (no bytes): every value of a recording comes from here.
class SymbolicScope final : public memory::Scope {
 public:
  memory::ScopeKind kind() const noexcept override { return memory::ScopeKind::Ambient; }
  Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) override;
};

// Model weights as symbolic tensors of the types and orders the plan decided (held_type,
// held_order), for a recording: nothing is read from the file.
load::LoadedModel symbolic_weights(const plan::MemoryPlan& plan);

// Runs llama.forward under a recording context for `entry` and returns what it recorded. `weights`
// and `kv` must be symbolic (symbolic_weights, KvCacheStore::recorded) from `scope`.
Tape record_entry(model::Transformer& llama, const load::LoadedModel& weights, const load::KvCacheStore& kv,
                  SymbolicScope& scope, const EntrySpec& entry);

// ---- Graph ----

enum class NodeKind : uint8_t {
  Parameter,   // a weight, loaded from its global (raw encoding)
  Tokens,      // argument: token ids, i32 [n]
  Position,    // argument: first position, i32 scalar (dynamic-position entries only)
  CacheRead,   // layer `layer` of the K or V cache, as it stands at this point
  CacheWrite,  // rows [position, position + n) of a cache layer ← inputs[0]
  View,        // a view of inputs[0]: `ref` relative to its source
  Op,          // an op of the tape on earlier nodes
};

struct Node {
  NodeKind kind = NodeKind::Op;
  std::vector<int> inputs;  // earlier nodes
  Shape shape;              // of the value (logical shape for parameters)
  GgmlType type = GgmlType::F32;
  const TapeOp* op = nullptr;               // Op / CacheWrite: the tape op (attributes)
  std::string name;                         // Parameter: the GGUF name
  BlockOrder order = BlockOrder::RowMajor;  // Parameter: the block order the plan holds it in
  SourceKind cache = SourceKind::KCache;
  uint32_t layer = 0;
  TensorRef ref;  // View
  Shape source_shape;
};

// How a packed weight's blocks are laid out for a target; the module attribute
// skainet.tensor_layouts lists these.
struct TensorLayout {
  std::string name;
  GgmlType format = GgmlType::F32;
  uint32_t block_elements = 1, block_bytes = 4;
  BlockOrder order = BlockOrder::RowMajor;
  std::vector<int64_t> shape;  // logical [rows, cols]
  std::string target;          // the target the order was assigned for
};

class ComputeGraph {
 public:
  // Resolves every input view into explicit nodes; Error naming the op and the view when one cannot
  // be expressed.
  static ComputeGraph from_tape(const Tape& tape);

  const Tape* tape = nullptr;
  std::vector<Node> nodes;
  int result = -1;
  std::map<std::string, TensorLayout> layouts;  // filled by LayoutAssignmentPass
};

// Records, for each weight parameter, the block order it is fed in for `target`. The order is the
// one the plan decided (held_order); this pass never permutes bytes, and refuses an order the
// emitter cannot express (StableHLO reads file order only; the engine's kernels read their feeds).
struct LayoutAssignmentPass {
  std::string target = "llvm-cpu";
  KernelForm form = KernelForm::StableHlo;
  void run(ComputeGraph& g) const;
};

// ---- Emitter ----

// The whole module: one util.global per parameter used by any function, the functions, and the
// skainet.tensor_layouts attribute. Byte-identical for identical graphs.
struct EmittedModule {
  std::string text;
  std::vector<std::string> signatures;  // "decode(tokens: tensor<1xi32>, pos: tensor<i32>, …) -> (logits: …)"
};
EmittedModule emit_module(const std::vector<const ComputeGraph*>& functions, KernelForm form = KernelForm::StableHlo,
                          std::string_view parameter_scope = "model");

// ---- What the compiled module holds (module_memory.cpp) ----

struct FunctionMemory {
  std::string name;
  uint64_t transient = 0;  // its largest set of live values, plus what its ops need beside them
};
// The run-time memory of the compiled module, as `skainet plan` states the eager engine's.
struct ModuleMemory {
  uint64_t parameters = 0;  // mapped from the parameter file, read in place
  uint64_t caches = 0;      // K and V: prefill returns them, decode updates them in place
  std::vector<FunctionMemory> functions;
  uint64_t total() const;  // parameters + caches + the largest transient
  std::string text() const;
};
ModuleMemory module_memory(const std::vector<const ComputeGraph*>& functions, uint64_t parameter_bytes,
                           KernelForm form);

// ---- Export ----

enum class ParamsMode : uint8_t { Irpa, Gguf };

struct ExportOptions {
  std::filesystem::path out_dir;
  std::string profile = "default";
  plan::PlanOptions plan;  // ctx: the cache cells of the exported functions
  placement::FormOverrides overrides;
  int64_t seq_len = 0;  // prefill tokens (0: min(ctx, 64))
  bool prefill = true, decode = true;
  ParamsMode params = ParamsMode::Irpa;
  KernelForm kernels = KernelForm::Engine;
  bool progress = true;
};

// A weight whose plan encoding the emitter cannot express was held dense instead.
struct ExportFallback {
  std::string tensor;
  GgmlType file_type;
  GgmlType carried_type;
  std::string reason;
};

struct ExportReport {
  std::filesystem::path mlir, params;
  std::vector<std::string> signatures;
  uint64_t parameter_bytes = 0, gguf_bytes = 0;
  uint32_t parameters = 0, as_stored = 0;  // as_stored: carried in the file's own encoding
  uint32_t reordered = 0;                  // held in a kernel-feed block order (the engine form)
  KernelForm kernels = KernelForm::Engine;
  std::vector<ExportFallback> fallbacks;
  std::vector<std::string> warnings;  // the plan's (plan::describe), as `run` would print them
  ModuleMemory memory;
  std::string text() const;        // what report.txt holds
  std::string next_steps() const;  // the iree-compile and iree-run-module lines for this export
};

// The platform the export decides against. StableHlo: the IREE target's "kernels" are the encodings
// the StableHLO emitter can dequantize, nothing repacked. Engine: this machine's, as for an eager run
// (the same plan, kernel-feed repacks included).
placement::Platform export_platform(KernelForm form = KernelForm::StableHlo);

// The iree-compile flags a module of this form needs: on every target (export writes them to
// DIR/compile.flags, one a line; the engine form names its target, this CPU), and in addition when
// compiling for llvm-cpu (DIR/compile.llvm-cpu.flags); and the runtime's (DIR/run.flags: the plugin
// resolving the engine-kernel imports).
std::vector<std::string> compile_flags(KernelForm form);
std::vector<std::string> llvm_cpu_compile_flags(KernelForm form);
std::vector<std::string> run_flags(KernelForm form);

// header → plan (against export_platform) → record prefill/decode → graph → passes → emit; writes
// model.mlir, model.irpa (unless params = gguf) and report.txt into out_dir. Refuses an unsupported
// architecture or op before writing anything.
ExportReport export_model(const std::filesystem::path& gguf, const ExportOptions& options);

}  // namespace skainet::record
