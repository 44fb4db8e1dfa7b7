// skainet::iree_plugin — the imports the exported module calls (docs/iree_plugin.md), and what
// their implementations share.
//
// A call `func.call @name(%base0, %off0, ..., %s0, ...)` of a function declared with
// {llvm.bareptr = true} reaches us as fn(params, context, reserved): params points at a struct of
// the operands in call order, natural alignment (x86-64: 8 bytes each): a binding is its base
// pointer then its offset in elements (our memrefs are i8, so bytes), an `index` is an int64. The
// structs below are those layouts, so each field order is the ABI the exporter follows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "skainet/compute/kernel_imports.hpp"
#include "skainet/compute/kernel_ops.hpp"
#include "skainet/core/tensor.hpp"

namespace skainet::iree_plugin {

// One `memref<i8>` operand: the real address is base + offset.
struct Binding {
  std::byte* base;
  int64_t offset;
  std::byte* get() const noexcept { return base + offset; }
};
static_assert(sizeof(Binding) == 16);

// Return codes (IREE only tests for non-zero; distinct values help whoever reads a trace).
enum ImportResult : int { kOk = 0, kInvalidArgument = 1, kOutOfRange = 2, kInternal = 3 };

struct MatmulPrepareParams {
  Binding x, w, scratch;
  int64_t rows, k, n, type, order, scratch_bytes, row_begin, row_end;
};
struct MatmulRowsParams {
  Binding x, w, scratch, y;
  int64_t rows, k, n, type, order, scratch_bytes, begin, end;
};
struct AttentionCallParams {
  Binding q, k_cache, v_cache, pos, sinks, out;
  int64_t n, heads, kv_heads, head_dim, layer, n_ctx, kv_type, scale_bits, window, softcap_bits, position_delta,
      head_begin, head_end;
};
struct GatherRowsParams {
  Binding table, ids, out;
  int64_t n, rows, cols, type, order, begin, end;
};
struct RepackRowsParams {
  Binding src, dst;
  int64_t rows, k, type, order, group_begin, group_end;
};

// Each struct is its import's call as kernel_imports.hpp lists it: bindings, scalars, [begin, end).
template <class Params>
constexpr bool is_call_of(const kernels::imports::Import& i) {
  return sizeof(Params) == i.bindings.size() * sizeof(Binding) + (i.scalars.size() + 2) * sizeof(int64_t);
}
static_assert(is_call_of<MatmulPrepareParams>(kernels::imports::kMatmulPrepare));
static_assert(is_call_of<MatmulRowsParams>(kernels::imports::kMatmulRows));
static_assert(is_call_of<AttentionCallParams>(kernels::imports::kAttention));
static_assert(is_call_of<GatherRowsParams>(kernels::imports::kGatherRows));
static_assert(is_call_of<RepackRowsParams>(kernels::imports::kRepackRows));

int matmul_prepare(void* params, void* context, void* reserved) noexcept;
int matmul_rows(void* params, void* context, void* reserved) noexcept;
int attention(void* params, void* context, void* reserved) noexcept;
int gather_rows(void* params, void* context, void* reserved) noexcept;
int repack_rows(void* params, void* context, void* reserved) noexcept;

// The kernels every import runs: kernels::best_table(), looked up once at plugin load (on the
// loading thread, which is also where the AMX tile permission is asked for the whole process).
const kernels::KernelTable& table() noexcept;

namespace detail {

// Thrown by the checks below and turned into a return code at the import's edge.
struct Rejected {
  ImportResult code;
  const char* why;
};
[[noreturn]] inline void reject(ImportResult code, const char* why) { throw Rejected{code, why}; }
inline void require(bool ok, const char* why) {
  if (!ok) reject(kInvalidArgument, why);
}

// SKAINET_IREE_PLUGIN_VERBOSE=1: every rejected call says why on stderr (the host only sees "failed").
bool verbose() noexcept;

// Runs an import body; nothing may escape into IREE's C frames.
template <class Fn>
int guarded(const char* name, Fn&& fn) noexcept {
  try {
    fn();
    return kOk;
  } catch (const Rejected& r) {
    if (verbose()) std::fprintf(stderr, "skainet_iree_plugin: %s: %s\n", name, r.why);
    return r.code;
  } catch (const std::exception& e) {
    if (verbose()) std::fprintf(stderr, "skainet_iree_plugin: %s: %s\n", name, e.what());
    return kInternal;
  } catch (...) {
    return kInternal;
  }
}

// A contiguous view of `shape` in `type`/`order` over memory IREE owns (Storage::borrow: the
// storage never frees it; IREE keeps the buffer alive for the whole call).
Tensor borrowed(std::byte* data, const Shape& shape, GgmlType type, BlockOrder order, bool writable,
                const char* origin);
GgmlType type_of(int64_t id);
BlockOrder order_of(int64_t id);

}  // namespace detail
}  // namespace skainet::iree_plugin
