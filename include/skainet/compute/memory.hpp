// skainet::memory — scopes (where new storage comes from and how long it lives) and the
// ExecutionContext that model code runs in.
//
//   memory::ExecutionContext ctx(/*threads=*/4);
//   memory::ModelScope model("stories260K");                      // weights, KV cache: until close()
//   Tensor w = model.allocate(Shape{64, 64}, GgmlType::F32, "blk.0.attn_q.weight");
//   memory::ForwardScope step({.slab_bytes = 1 << 20});             // one slab, allocated once
//   for (int t = 0; t < n; ++t)
//     ctx.step(step, [&] {                                           // active scope, then reset()
//       Tensor h = ops::matmul(ctx, x, w);                           // output bumped from the slab
//       kept = memory::retain(h, model);                             // the only way out of a step
//     });
//   // using `h` after its step throws StorageClosedException naming storage, origin and step.
//
// Three lifetimes: Model (until the scope closes), Forward (one step; reset() ends it), Ambient (plain
// RAII: the storage lives while a tensor refers to it — exactly as if there were no scope).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "skainet/compute/kernel_ops.hpp"
#include "skainet/core/tensor.hpp"
#include "skainet/core/thread_pool.hpp"

namespace skainet::ops {
class Recorder;  // the ops' recording seam (opset.hpp), a module above this one
}

namespace skainet::memory {

enum class ScopeKind : uint8_t { Model, Forward, Ambient };
std::string_view scope_kind_name(ScopeKind k) noexcept;

// Allocation from a scope that has been closed.
class ScopeClosedError : public Error {
 public:
  ScopeClosedError(ScopeKind kind, std::string scope_name, std::string origin);
  ScopeKind kind;
  std::string scope_name;
  std::string origin;  // what asked for the storage
};

class Scope {
 public:
  virtual ~Scope() = default;
  virtual ScopeKind kind() const noexcept = 0;
  // Fresh contiguous storage for `shape` in `type` (64-byte aligned; contents unspecified).
  virtual Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) = 0;
};

// Plain allocation: one owned heap Storage per tensor, freed when the last view goes.
class AmbientScope final : public Scope {
 public:
  ScopeKind kind() const noexcept override { return ScopeKind::Ambient; }
  Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) override;
};
AmbientScope& ambient();  // a process-wide instance (the scope is stateless)

struct ModelScopeOptions {
  uint64_t off_heap_threshold = 256 * 1024;  // allocations of at least this many bytes go to pages
};

struct ModelScopeStats {
  uint64_t storages = 0;  // held (allocated or adopted)
  uint64_t heap_bytes = 0;
  uint64_t page_bytes = 0;
  uint64_t adopted_bytes = 0;
  uint64_t closed_storages = 0;  // storages this scope closed (each exactly once)
  bool closed = false;
};

// Owns weights and KV cache. close() (or the destructor) frees everything once; tensors that still
// refer to it throw StorageClosedException, and allocating afterwards throws ScopeClosedError.
class ModelScope final : public Scope {
 public:
  explicit ModelScope(std::string name = "model", ModelScopeOptions options = {});
  ~ModelScope() override;
  ModelScope(const ModelScope&) = delete;
  ModelScope& operator=(const ModelScope&) = delete;

  ScopeKind kind() const noexcept override { return ScopeKind::Model; }
  Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) override;
  // In a domain a plan chose (HostHeap or HostPages).
  Tensor allocate_in(MemoryDomain domain, const Shape& shape, GgmlType type, std::string_view origin);
  // Takes a storage made elsewhere (e.g. a mapped window of the model file) into this lifetime.
  void adopt(const Storage::Ref& storage);
  void close() noexcept;
  bool closed() const noexcept { return life_->closed; }
  const std::string& name() const noexcept { return name_; }
  ModelScopeStats stats() const noexcept;

 private:
  void check_open(std::string_view origin) const;
  std::string name_;
  ModelScopeOptions options_;
  std::shared_ptr<Lifetime> life_;
  std::vector<Storage::Ref> storages_;
  ModelScopeStats stats_;
};

struct ForwardScopeOptions {
  uint64_t slab_bytes = 0;
  bool grow_to_high_water = false;  // at reset(), grow the slab to the highest demand seen so far
};

struct ForwardStats {
  uint64_t step = 1;                // current step (the generation handed out now)
  uint64_t slab_bytes = 0;          // current slab size
  uint64_t used = 0;                // slab bytes bumped this step
  uint64_t demand = 0;              // bytes this step would need in a slab large enough (aligned)
  uint64_t peak = 0;                // highest demand of any step: the slab size that never overflows
  uint64_t overflow_bytes = 0;      // this step
  uint64_t overflow_count = 0;      // this step
  uint64_t max_overflow_bytes = 0;  // highest overflow_bytes of any step
  uint64_t total_overflow_count = 0;
  uint64_t resets = 0;
  uint64_t slab_allocations = 0;  // times a slab was allocated (1 unless it grew)
  uint64_t slices = 0;            // slice records held for reuse
};

// One generation step's activations: bump allocation from one slab, 64-byte aligned, any type.
class ForwardScope final : public Scope {
 public:
  explicit ForwardScope(ForwardScopeOptions options = {});
  ~ForwardScope() override;
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

  ScopeKind kind() const noexcept override { return ScopeKind::Forward; }
  Tensor allocate(const Shape& shape, GgmlType type, std::string_view origin) override;
  // End of step: everything handed out in it dies (its memory is reused from the next allocation).
  void reset();
  const ForwardStats& stats() const noexcept { return stats_; }
  uint64_t step() const noexcept { return life_->generation; }

 private:
  Storage::Ref next_record();
  ForwardScopeOptions options_;
  std::shared_ptr<Lifetime> life_;
  Storage::Ref slab_;
  std::vector<Storage::Ref> records_;  // slice records, reused when no tensor holds them
  size_t cursor_ = 0;
  std::vector<Storage::Ref> overflow_;  // this step's overflow storage
  ForwardStats stats_;
};

// Copies `t` (any format, any view) into fresh contiguous storage of `to`: the sanctioned way to
// keep a value past its step. Throws StorageClosedException for a dead tensor. A recorded (symbolic)
// value has no step to outlive and is returned as it is.
Tensor retain(const Tensor& t, Scope& to);

class ExecutionContext {
 public:
  explicit ExecutionContext(int threads = 1, const kernels::KernelTable& table = kernels::best_table());
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  Scope& scope() const noexcept { return *active_; }
  AmbientScope& ambient() noexcept { return ambient_; }
  base::ThreadPool& pool() noexcept { return pool_; }
  const kernels::KernelTable& kernels() const noexcept { return *table_; }
  // Non-null while recording (ops::Recorder): ops record instead of running kernels.
  ops::Recorder* recorder() const noexcept { return recorder_; }
  // Working memory for kernels within one op (e.g. the activation quantized once per matmul), 64-byte
  // aligned and valid until the next call; it stays out of the scopes' slab accounting. A request
  // beyond what is held grows it (counted as a growth, like a slab's overflow), so reserve the plan's
  // price first (plan::ScratchPlan) and no step allocates.
  std::span<std::byte> scratch(size_t bytes);
  void reserve_scratch(size_t bytes);
  struct ScratchStats {
    size_t held = 0;       // bytes allocated now
    size_t reserved = 0;   // bytes reserve_scratch asked for
    size_t peak = 0;       // the largest request so far
    uint64_t growths = 0;  // requests beyond what was held (allocations after the reservation)
  };
  const ScratchStats& scratch_stats() const noexcept { return scratch_stats_; }

  // Makes a scope active until the guard dies (then the previous one is active again).
  class ActiveScope {
   public:
    ActiveScope(ExecutionContext& ctx, Scope& s) noexcept : ctx_(ctx), previous_(ctx.active_) { ctx.active_ = &s; }
    ~ActiveScope() { ctx_.active_ = previous_; }
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;

   private:
    ExecutionContext& ctx_;
    Scope* previous_;
  };
  [[nodiscard]] ActiveScope use(Scope& s) noexcept { return ActiveScope(*this, s); }

  // Installs `r` until the guard dies: ops record instead of running, and `symbolic` (where the
  // recorded values come from) is the active scope throughout, step and forward scopes included.
  class Recording {
   public:
    Recording(ExecutionContext& ctx, ops::Recorder& r, Scope& symbolic) noexcept : ctx_(ctx), scope_(ctx, symbolic) {
      ctx.recorder_ = &r;
      ctx.recording_scope_ = &symbolic;
    }
    ~Recording() {
      ctx_.recorder_ = nullptr;
      ctx_.recording_scope_ = nullptr;
    }
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    ExecutionContext& ctx_;
    ActiveScope scope_;
  };
  [[nodiscard]] Recording record_with(ops::Recorder& r, Scope& symbolic) noexcept {
    return Recording(*this, r, symbolic);
  }

  // Runs fn() (or fn(scope)) with a fresh ForwardScope of slab_bytes active; the scope closes after.
  // A tensor returned from fn is dead: retain() what must outlive it.
  template <class F>
  decltype(auto) forward_scope(uint64_t slab_bytes, F&& fn) {
    if (recorder_) slab_bytes = 0;  // a recorded program has no step slabs: its compiler plans buffers
    ForwardScope fs(ForwardScopeOptions{slab_bytes, false});
    ActiveScope guard(*this, recording_scope_ ? *recording_scope_ : static_cast<Scope&>(fs));
    if constexpr (std::is_invocable_v<F, ForwardScope&>)
      return fn(fs);
    else
      return fn();
  }

  // One step on a persistent ForwardScope: fn() runs with it active, then it is reset (also on throw).
  template <class F>
  auto step(ForwardScope& fs, F&& fn) {
    // While recording, values stay in the recording's symbolic scope: the recorded program has no step
    // boundaries (its compiler does liveness and buffer planning itself).
    ActiveScope guard(*this, recording_scope_ ? *recording_scope_ : static_cast<Scope&>(fs));
    try {
      if constexpr (std::is_void_v<decltype(fn())>) {
        fn();
        fs.reset();
      } else {
        auto result = fn();
        fs.reset();
        return result;
      }
    } catch (...) {
      fs.reset();
      throw;
    }
  }

  // Creation ops: storage from the active scope.
  Tensor empty(const Shape& shape, GgmlType type = GgmlType::F32, std::string_view origin = "empty");
  Tensor zeros(const Shape& shape, GgmlType type = GgmlType::F32);
  Tensor ones(const Shape& shape, GgmlType type = GgmlType::F32);
  Tensor full(const Shape& shape, float value, GgmlType type = GgmlType::F32);  // dense float types
  // values.size() must equal shape.numel(); a packed type quantizes row by row.
  Tensor from_floats(std::span<const float> values, const Shape& shape, GgmlType type = GgmlType::F32);

 private:
  AmbientScope ambient_;
  Scope* active_ = &ambient_;
  ops::Recorder* recorder_ = nullptr;
  Scope* recording_scope_ = nullptr;  // set exactly while recorder_ is
  base::ThreadPool pool_;
  const kernels::KernelTable* table_;
  struct AlignedFree {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte[], AlignedFree> scratch_;
  ScratchStats scratch_stats_;
  void grow_scratch(size_t bytes);
};

}  // namespace skainet::memory
