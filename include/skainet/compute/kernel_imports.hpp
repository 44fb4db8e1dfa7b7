// skainet::kernels::imports — the engine's kernels as IREE executable imports. `skainet export
// --kernels engine` turns each matmul, attention and embedding gather into an IREE dispatch whose
// workgroups call one of these functions; the plugin (src/iree_plugin/, libskainet_iree_plugin.so,
// loaded by the IREE runtime with --executable_plugin) resolves them to the kernels. This table is
// the one home of their calling convention: the exporter writes each call from it and the plugin
// declares its params structs in the same order and checks their size against it.
//
// A call passes, in this order: each binding as (base pointer, byte offset) — inputs first, the
// output last — then the scalars (int64), then [begin, end): the workgroup's share of the import's
// range (`range` below). Every import returns 0, or non-zero when its operands are out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace skainet::kernels::imports {

struct Import {
  std::string_view name;                       // the symbol the plugin resolves
  std::span<const std::string_view> bindings;  // inputs, then the one output
  std::span<const std::string_view> scalars;
  std::string_view range;  // what [begin, end) counts
};

// matmul (KernelTable::matmul_prepare / matmul_prepared / matmul): x F32 [rows, k], w [n, k] held as
// GgmlType `type` in BlockOrder `order`, y F32 [rows, n]. The scratch binding has scratch_bytes
// bytes, kScratchSlack more than the kernels ask, so that the plugin can align it.
inline constexpr std::string_view kMatmulPrepareBindings[] = {"x", "w", "scratch"};
inline constexpr std::string_view kMatmulRowsBindings[] = {"x", "w", "scratch", "y"};
inline constexpr std::string_view kMatmulScalars[] = {"rows", "k", "n", "type", "order", "scratch_bytes"};
namespace matmul {
enum Scalar : size_t { Rows, K, N, Type, Order, ScratchBytes };
}
inline constexpr Import kMatmulPrepare{"skainet_matmul_prepare", kMatmulPrepareBindings, kMatmulScalars, "x rows"};
inline constexpr Import kMatmulRows{"skainet_matmul_rows", kMatmulRowsBindings, kMatmulScalars, "weight rows"};
inline constexpr int64_t kScratchSlack = 64;

// ops::attention over layer `layer` of the whole caches [layers, ctx, kv_heads * head_dim] (kv_type
// F16 or F32): query t of q F32 [n, heads * head_dim] is at position pos + position_delta + t (pos:
// one int32 binding, so decode's position stays a runtime value); only the cells a query sees are
// read. scale_bits / softcap_bits: the f32 bit patterns. sinks F32 [heads]: head h's sink score
// (gpt-oss; SoftmaxParams::sink), -inf for none — a model without sinks passes a constant of -inf,
// which the kernels treat as no sink, so one import serves both.
inline constexpr std::string_view kAttentionBindings[] = {"q", "k_cache", "v_cache", "pos", "sinks", "out"};
inline constexpr std::string_view kAttentionScalars[] = {"n",      "heads",        "kv_heads",      "head_dim",
                                                         "layer",  "ctx",          "kv_type",       "scale_bits",
                                                         "window", "softcap_bits", "position_delta"};
namespace attention {
enum Scalar : size_t { N, Heads, KvHeads, HeadDim, Layer, Ctx, KvType, ScaleBits, Window, SoftcapBits, PositionDelta };
}
inline constexpr Import kAttention{"skainet_attention", kAttentionBindings, kAttentionScalars, "query heads"};

// KernelTable::gather_rows: out F32 [n, cols] = rows ids (int32 [n]) of table [rows, cols] (type, order).
inline constexpr std::string_view kGatherBindings[] = {"table", "ids", "out"};
inline constexpr std::string_view kGatherScalars[] = {"n", "rows", "cols", "type", "order"};
namespace gather {
enum Scalar : size_t { N, Rows, Cols, Type, Order };
}
inline constexpr Import kGatherRows{"skainet_gather_rows", kGatherBindings, kGatherScalars, "ids"};

// ref::repack_rows of the row groups [begin, end) of src [rows, k] (file order) into dst (`order`):
// a module can feed file-order parameters to the kernels after repacking them once.
inline constexpr std::string_view kRepackBindings[] = {"src", "dst"};
inline constexpr std::string_view kRepackScalars[] = {"rows", "k", "type", "order"};
inline constexpr Import kRepackRows{"skainet_repack_rows", kRepackBindings, kRepackScalars, "row groups"};

inline constexpr const Import* kAll[] = {&kMatmulPrepare, &kMatmulRows, &kAttention, &kGatherRows, &kRepackRows};

}  // namespace skainet::kernels::imports
