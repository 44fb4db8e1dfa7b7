// skainet::iree_plugin — skainet_attention: ops::attention (src/ops/attention.cpp) over one layer
// of the whole KV caches, for the heads [head_begin, head_end) a workgroup is given: the heads of each
// KV head among them through the engine's attention_heads kernel over the visible cells only (with
// the per-head sink scores, gpt-oss's, which are -inf for the other models), as the eager op hands
// them out — so the same numbers (a head's do not depend on the heads beside it), and
// a decode step reads the cells up to its position, not the whole context.
#include <algorithm>
#include <bit>
#include <cstring>

#include "iree_plugin/imports.hpp"

namespace skainet::iree_plugin {
namespace {

using detail::borrowed;
using detail::require;

float f32_of_bits(int64_t bits) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(bits & 0xffffffff)); }

// The scores of up to `heads` heads, [heads, n, cells] F32, in a buffer of the calling thread: IREE
// runs imports on its own workers, concurrently, so each keeps one and grows it when a call needs more
// (a decode step's need grows with its position; prefill's is the largest and comes first).
Tensor scores_buffer(int64_t heads, int64_t n, int64_t cells) {
  thread_local Storage::Ref buffer;
  const uint64_t bytes = contiguous_bytes(Shape{heads, n, cells}, GgmlType::F32);
  if (!buffer || buffer->size() < bytes) {
    buffer.reset();
    buffer = Storage::heap(std::max<uint64_t>(bytes, 4096), "iree attention scores");
  }
  return Tensor(buffer, Shape{heads, n, cells}, GgmlType::F32);
}

}  // namespace

int attention(void* params, void*, void*) noexcept {
  return detail::guarded("skainet_attention", [&] {
    const auto& p = *static_cast<const AttentionCallParams*>(params);
    const int64_t hd = p.head_dim;
    require(p.n > 0 && p.heads > 0 && p.kv_heads > 0 && hd > 0 && p.heads % p.kv_heads == 0,
            "heads must be a multiple of kv_heads, all positive");
    require(p.n_ctx > 0 && p.layer >= 0 && p.window >= 0, "bad ctx, layer or window");
    require(0 <= p.head_begin && p.head_begin <= p.head_end && p.head_end <= p.heads, "head range outside [0, heads)");
    const GgmlType kv = detail::type_of(p.kv_type);
    require(kv == GgmlType::F32 || kv == GgmlType::F16, "the KV cache must be F32 or F16");
    const float scale = f32_of_bits(p.scale_bits), softcap = f32_of_bits(p.softcap_bits);
    require(softcap >= 0, "negative soft cap");
    require(p.pos.get() != nullptr, "null position");
    int32_t pos = 0;
    std::memcpy(&pos, p.pos.get(), sizeof pos);  // the binding may be unaligned
    const int64_t offset = int64_t{pos} + p.position_delta;
    if (offset < 0 || offset + p.n > p.n_ctx)
      detail::reject(kOutOfRange, "queries outside the cache: pos out of range");
    if (p.head_begin == p.head_end) return;

    const int64_t kvd = p.kv_heads * hd, group = p.heads / p.kv_heads;
    const Tensor q =
        borrowed(p.q.get(), Shape{p.n, p.heads * hd}, GgmlType::F32, BlockOrder::RowMajor, false, "iree attention q");
    const Tensor out = borrowed(p.out.get(), Shape{p.n, p.heads * hd}, GgmlType::F32, BlockOrder::RowMajor, true,
                                "iree attention out");
    // The caches are [layers, ctx, kvd]; only layer `layer` is viewed (layers themselves unknown:
    // the view starts at the layer and spans its ctx cells).
    const uint64_t layer_bytes = contiguous_bytes(Shape{p.n_ctx, kvd}, kv);
    const auto layer_of = [&](const Binding& b, const char* origin) {
      return borrowed(b.get() + static_cast<uint64_t>(p.layer) * layer_bytes, Shape{p.n_ctx, kvd}, kv,
                      BlockOrder::RowMajor, false, origin);
    };
    const Tensor keys = layer_of(p.k_cache, "iree attention k"), values = layer_of(p.v_cache, "iree attention v");
    // One score per query head, -inf where the model has none (kernel_imports.hpp).
    const Tensor sinks =
        borrowed(p.sinks.get(), Shape{p.heads}, GgmlType::F32, BlockOrder::RowMajor, false, "iree attention sinks");

    // As ops::attention: no query sees a cell after offset + n - 1, nor (with a window) one before
    // the first query's window; the softmax counts positions from the first visible cell.
    const int64_t first = p.window > 0 ? std::max<int64_t>(0, offset - p.window + 1) : 0;
    const int64_t cells = offset + p.n - first;
    const Tensor vk = keys.rows(first, cells), vv = values.rows(first, cells);
    const kernels::SoftmaxParams softmax{
        .scale = scale, .causal = true, .offset = offset - first, .window = p.window, .softcap = softcap};
    const kernels::KernelTable& k = table();
    const Tensor s = scores_buffer(std::min(group, p.head_end - p.head_begin), p.n, cells);
    for (int64_t h0 = p.head_begin; h0 < p.head_end;) {
      const int64_t h1 = std::min(p.head_end, (h0 / group + 1) * group);
      k.attention_heads(
          q, vk, vv,
          {.head_dim = hd, .group = group, .h0 = h0, .h1 = h1, .softmax = softmax, .sinks = sinks.data<float>()},
          s.narrow(0, 0, h1 - h0), out);
      h0 = h1;
    }
  });
}

}  // namespace skainet::iree_plugin
