// skainet::load — ResolvedGguf, the loader that carries a MemoryPlan and obeys it. It never decides.
//
//   gguf::Header h = gguf::read_header(path);
//   plan::MemoryPlan p = plan::make_plan(h, profile, platform, overrides, options);
//   memory::ModelScope scope("model");
//   load::ResolvedGguf loader(h, p);              // BudgetError here if the plan does not fit
//   load::LoadedModel m = loader.load(scope);     // map / copy / dequantize exactly as planned
//   const Tensor& wq = m.weight("blk.0.attn_q.weight");
//   load::KvCacheStore kv(scope, *p.kv);          // K and V per layer, in the planned domain
//
// Precedence of decisions is the plan's (per-tensor override > uniform form > resolver): the loader
// receives decisions already made and only checks that they describe this file.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skainet/io/gguf.hpp"
#include "skainet/compute/memory.hpp"
#include "skainet/model/plan.hpp"
#include "skainet/core/tensor.hpp"

namespace skainet::load {

// The plan exceeds its budget: nothing was read. Carries the numbers and the plan's suggestions.
class BudgetError : public Error {
 public:
  BudgetError(std::string message, uint64_t resident, uint64_t budget)
      : Error(std::move(message)), resident(resident), budget(budget) {}
  uint64_t resident, budget;
};

struct LoadStats {
  uint64_t mapped_bytes = 0;         // served from the file mapping
  uint64_t copied_bytes = 0;         // read into process memory as stored
  uint64_t converted_bytes = 0;      // held after dequantize / requantize
  uint64_t repacked_bytes = 0;       // held in a kernel-feed block order
  uint64_t pinned_expert_bytes = 0;  // a mapped expert stack's pinned experts, in anonymous pages
  uint64_t payload_bytes_read = 0;
  uint32_t mapped = 0, copied = 0, converted = 0, repacked = 0;
  double seconds = 0;
};

struct LoadedModel {
  std::vector<std::string> names;                    // in file order
  base::StringMap<Tensor> weights;                   // views in the model scope (looked up without allocating)
  std::shared_ptr<const base::FileMapping> mapping;  // null when nothing is mapped
  LoadStats stats;

  const Tensor& weight(std::string_view name) const;  // Error naming the tensor if absent
  const Tensor* find(std::string_view name) const noexcept;
};

struct LoadOptions {
  bool progress = true;  // a bar on a terminal
  int threads = 1;       // threads for the load-time repacks (a pool of them lives for the load)
};

class ResolvedGguf {
 public:
  // Checks that `plan` was made for this header (names, types, offsets, sizes) and that it fits its
  // budget; throws BudgetError / InvalidArgument before reading any payload.
  ResolvedGguf(gguf::Header header, plan::MemoryPlan plan);
  const plan::MemoryPlan& plan() const noexcept { return plan_; }
  const gguf::Header& header() const noexcept { return header_; }
  LoadedModel load(memory::ModelScope& scope, const LoadOptions& options = {}) const;

 private:
  gguf::Header header_;
  plan::MemoryPlan plan_;
};

// Streams tensor `d`'s bytes in the form the plan holds it (converted row by row when held_type
// differs from the file's, repacked into its kernel-feed order when it has one) to `sink`, in chunks of a few MiB: for
// writers that must not hold a model in memory (skainet export).
void stream_held_bytes(const base::FileReader& file, const placement::Decision& d,
                       const std::function<void(std::span<const std::byte>)>& sink);

// Where a piece of model state lives, as the plan reported it.
struct Placement {
  MemoryDomain domain = MemoryDomain::HostPages;
  memory::ScopeKind scope = memory::ScopeKind::Model;
  uint64_t bytes = 0;
};

// Per-layer K and V: tensors [ctx, kv_heads * head_dim] of the planned types, allocated in the
// ModelScope in the planned domain and zero-filled (so their pages are resident from the start, as
// the plan counts them).
class KvCacheStore {
 public:
  KvCacheStore(memory::ModelScope& scope, const plan::KvCachePlan& kv);
  // The same tensors drawn from `scope` as they come (a recording's symbolic scope: no bytes, so
  // nothing to zero).
  static KvCacheStore recorded(memory::Scope& scope, const plan::KvCachePlan& kv);
  const Tensor& k(uint32_t layer) const { return k_.at(layer); }
  const Tensor& v(uint32_t layer) const { return v_.at(layer); }
  uint32_t n_ctx() const noexcept { return plan_.n_ctx; }
  GgmlType k_type() const noexcept { return plan_.k_type; }
  GgmlType v_type() const noexcept { return plan_.v_type; }
  const Placement& placement() const noexcept { return placement_; }

 private:
  template <class Allocate>
  KvCacheStore(const plan::KvCachePlan& kv, Allocate&& allocate);
  plan::KvCachePlan plan_;
  Placement placement_;
  std::vector<Tensor> k_, v_;
};

}  // namespace skainet::load
