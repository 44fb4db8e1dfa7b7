// The x86 KernelTables: the Tensor-to-pointer plumbing of the matmul and row kernels (this unit is
// compiled for the baseline CPU) over a level's kernels by type (level.hpp), and the choice of the
// best level at run time. Whatever a level does not accelerate goes to the reference kernels.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/ref/ops_common.hpp"
#include "kernels/x86/level.hpp"
#include "skainet/core/base.hpp"

namespace skainet::kernels {
namespace {

using namespace ref::detail;
using x86::Act;
using x86::ActLayout;
using x86::Gemv;
using x86::GemvFn;
using x86::Level;
using x86::Route;

// The plain matmul entry quantizes x rows into a stack buffer when no scratch comes with the call;
// longer rows than this go to the reference kernel.
constexpr int64_t kStackK = 16384;
constexpr int64_t kStackBytes =
    std::max(x86::act_layout(Act::Q8x32, kStackK).row_bytes, x86::act_layout(Act::Q8x256, kStackK).row_bytes);

// The level of a table's entries, looked up once (level() builds it on first use).
template <IsaLevel L>
const Level& level_of() noexcept {
  static const Level* const l = x86::level(L);
  return *l;
}

// Rank-2 row-major weights with a contiguous inner dim (dense: elements; packed: the op already
// checked), x rows contiguous. Transposed or batched weights stay on the reference path.
Route route(const Level& K, const Tensor& x, const Tensor& w, bool prepared) noexcept {
  if (w.rank() != 2 || inner_stride(x) != 4) return {};
  if (!w.packed() && inner_stride(w) != static_cast<int64_t>(w.element_size())) return {};
  return route_of(K, w.type(), w.block_order(), row_count(x.shape()), x.shape().back(), prepared);
}

// A dense F32/F16 weight viewed transposed (output dimension contiguous, e.g. attention's Vᵀ), x and
// out with contiguous rows: the GemmT kernel, which reads each weight row once for several x rows.
x86::GemmTFn route_transposed(const Level& K, const Tensor& x, const Tensor& w, const Tensor& out) noexcept {
  if (w.rank() != 2 || w.packed() || w.stride(0) != static_cast<int64_t>(w.element_size())) return nullptr;
  if (inner_stride(x) != 4 || inner_stride(out) != 4) return nullptr;
  return K.row(w.type()).transposed;
}

// Whether the rows of t (every dim but the innermost) sit at one fixed byte stride.
bool uniform_rows(const Tensor& t, int64_t& stride) noexcept {
  const int r = t.rank();
  if (r < 2) {
    stride = 0;
    return true;
  }
  for (int i = 0; i + 2 < r; ++i)
    if (t.dim(i) > 1 && t.stride(i) != t.stride(i + 1) * t.dim(i + 1)) return false;
  stride = t.stride(r - 2);
  return true;
}

void quantize(const Level& K, Act a, const std::byte* xrow, int64_t k, std::byte* dst) noexcept {
  const auto* x = reinterpret_cast<const float*>(xrow);
  if (a == Act::Q8x32)
    K.isa->quantize_q8x32(x, k, dst);
  else
    K.isa->quantize_q8x256(x, k, dst);
}

// Bytes of n prepared x rows.
int64_t prepared_bytes(Act a, int64_t n, int64_t k) noexcept {
  return a == Act::Bf16Pairs ? x86::bf16_pairs_bytes(n, k) : n * x86::act_layout(a, k).row_bytes;
}

// Weight rows [begin, end) against x rows given as (base, stride) or one by one when x or out is
// not uniform. `xs` holds dense x (act None) or prepared rows of `act_stride` bytes.
void run_rows(GemvFn fn, const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end,
              const std::byte* prepared, int64_t act_stride) noexcept {
  const int64_t rows = row_count(x.shape());
  Gemv g;
  g.w = w.raw() + begin * w.stride(0);
  g.w_stride = w.stride(0);
  g.rows = end - begin;
  g.k = x.shape().back();
  g.out_col = inner_stride(out);
  int64_t xs = 0, os = 0;
  std::byte* out0 = out.raw_mut() + begin * g.out_col;
  if (uniform_rows(x, xs) && uniform_rows(out, os)) {
    g.x = prepared ? prepared : x.raw();
    g.x_stride = prepared ? act_stride : xs;
    g.n = rows;
    g.out = out0;
    g.out_row = os;
    fn(g);
    return;
  }
  g.n = 1;
  for (int64_t r = 0; r < rows; ++r) {
    g.x = prepared ? prepared + r * act_stride : x.raw() + row_offset(x.shape(), x.strides(), r);
    g.out = out0 + row_offset(out.shape(), out.strides(), r);
    fn(g);
  }
}

// Output columns [begin, end) of x times the transposed weight, x rows one by one when not uniform.
void run_transposed(x86::GemmTFn fn, const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin,
                    int64_t end) noexcept {
  x86::GemmT g;
  g.w = w.raw() + begin * w.stride(0);
  g.w_stride = w.stride(1);
  g.cols = end - begin;
  g.k = x.shape().back();
  int64_t xs = 0, os = 0;
  if (uniform_rows(x, xs) && uniform_rows(out, os)) {
    g.x = x.raw();
    g.x_stride = xs;
    g.n = row_count(x.shape());
    g.out = out.raw_mut() + begin * 4;
    g.out_row = os;
    return fn(g);
  }
  g.n = 1;
  for (int64_t r = 0; r < row_count(x.shape()); ++r) {
    g.x = x.raw() + row_offset(x.shape(), x.strides(), r);
    g.out = out.raw_mut() + row_offset(out.shape(), out.strides(), r) + begin * 4;
    fn(g);
  }
}

template <IsaLevel L>
void matmul(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end) noexcept {
  const Level& K = level_of<L>();
  if (const x86::GemmTFn t = route_transposed(K, x, w, out)) return run_transposed(t, x, w, out, begin, end);
  const Route rt = route(K, x, w, false);
  const int64_t k = x.shape().back();
  if (!rt.fn || (rt.act != Act::None && k > kStackK)) return ref::matmul(x, w, out, begin, end);
  if (rt.act == Act::None) return run_rows(rt.fn, x, w, out, begin, end, nullptr, 0);
  // No scratch: each x row is quantized here, once per call of this chunk.
  alignas(64) std::byte buf[kStackBytes];
  const int64_t rows = row_count(x.shape());
  Gemv g;
  g.w = w.raw() + begin * w.stride(0);
  g.w_stride = w.stride(0);
  g.rows = end - begin;
  g.k = k;
  g.x = buf;
  g.n = 1;
  g.out_col = inner_stride(out);
  for (int64_t r = 0; r < rows; ++r) {
    quantize(K, rt.act, x.raw() + row_offset(x.shape(), x.strides(), r), k, buf);
    g.out = out.raw_mut() + row_offset(out.shape(), out.strides(), r) + begin * g.out_col;
    rt.fn(g);
  }
}

size_t scratch_of(Route rt, int64_t rows, int64_t k) noexcept {
  if (!rt.fn || rt.act == Act::None) return 0;
  return static_cast<size_t>(prepared_bytes(rt.act, rows, k));
}

template <IsaLevel L>
size_t matmul_scratch(const Tensor& x, const Tensor& w) noexcept {
  const Level& K = level_of<L>();
  return scratch_of(route(K, x, w, true), row_count(x.shape()), x.shape().back());
}

template <IsaLevel L>
size_t matmul_scratch_for(GgmlType type, BlockOrder order, int64_t rows, int64_t k) noexcept {
  const Level& K = level_of<L>();
  return scratch_of(route_of(K, type, order, rows, k, true), rows, k);
}

template <IsaLevel L>
void matmul_prepare(const Tensor& x, const Tensor& w, std::byte* scratch, int64_t r0, int64_t r1) noexcept {
  const Level& K = level_of<L>();
  const Route rt = route(K, x, w, true);
  const int64_t k = x.shape().back(), n = row_count(x.shape());
  const int64_t stride = x86::act_layout(rt.act, k).row_bytes;
  for (int64_t r = r0; r < r1; ++r) {
    const std::byte* row = x.raw() + row_offset(x.shape(), x.strides(), r);
    if (rt.act == Act::Bf16Pairs)
      K.split_bf16_pairs(reinterpret_cast<const float*>(row), k, r, n, scratch);
    else
      quantize(K, rt.act, row, k, scratch + r * stride);
  }
}

template <IsaLevel L>
void matmul_prepared(const Tensor& x, const Tensor& w, const Tensor& out, int64_t begin, int64_t end,
                     const std::byte* scratch) noexcept {
  const Level& K = level_of<L>();
  const Route rt = route(K, x, w, true);
  run_rows(rt.fn, x, w, out, begin, end, scratch, x86::act_layout(rt.act, x.shape().back()).row_bytes);
}

// Rows with contiguous elements go to the ISA's row softmax; anything else to the reference.
template <IsaLevel L>
void softmax(const Tensor& x, const SoftmaxParams& p, const Tensor& out) noexcept {
  const Level& K = level_of<L>();
  if (inner_stride(x) != 4 || inner_stride(out) != 4) return ref::softmax(x, p, out);
  const int64_t rows = row_count(x.shape()), n = x.shape().back();
  const int64_t queries = x.rank() >= 2 ? x.dim(x.rank() - 2) : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const auto [begin, end] = softmax_visible(p, r, queries, n);
    K.isa->softmax_row(reinterpret_cast<const float*>(x.raw() + row_offset(x.shape(), x.strides(), r)),
                       reinterpret_cast<float*>(out.raw_mut() + row_offset(out.shape(), out.strides(), r)), begin, end,
                       n, p.scale, p.softcap, p.sink);
  }
}

// Whether each cell's elements are contiguous (packed rows always are; a narrowed packed view splits
// only at blocks) and the bytes of a row's first `elements` (whole blocks).
bool contiguous_cells(const Tensor& t) noexcept {
  return t.packed() || inner_stride(t) == static_cast<int64_t>(t.element_size());
}
int64_t bytes_of(const Tensor& t, int64_t elements) noexcept {
  const TypeTraits& traits = type_traits(t.type());
  return elements / traits.block_elements * traits.block_bytes;
}

// One query (a decode step) over a cache with contiguous cells goes to the level's fused kernels for
// the keys' and the values' types (x86/attend.hpp: each cell read and converted once for the task's
// heads), the softmax between them here. Prefill chunks (ops::attention hands them dense caches) and
// other layouts go head by head through this table's matmul and softmax; a quantized cache there
// goes to the reference, whose products read its blocks exactly (this table's matmul would quantize
// the query to 8 bits).
template <IsaLevel L>
void attention_heads(const Tensor& q, const Tensor& keys, const Tensor& values, const AttentionHeads& a,
                     const Tensor& scores, const Tensor& out) noexcept {
  const Level& K = level_of<L>();
  const x86::AttendFn keys_fn = K.row(keys.type()).attend_keys, values_fn = K.row(values.type()).attend_values;
  const int64_t hd = a.head_dim, cells = keys.dim(0);
  if (!keys_fn || !values_fn || q.dim(0) != 1 || !x86::attend_takes(hd) || !contiguous_cells(keys) ||
      !contiguous_cells(values) || inner_stride(q) != 4 || inner_stride(out) != 4 || inner_stride(scores) != 4) {
    if (keys.packed() || values.packed()) return ref::attention_heads(q, keys, values, a, scores, out);
    return ref::detail::attention_heads_by_parts(&matmul<L>, &softmax<L>, q, keys, values, a, scores, out);
  }
  const auto [begin, end] = softmax_visible(a.softmax, 0, 1, cells);
  const int64_t g = a.h0 / a.group, heads = a.h1 - a.h0;
  const x86::Attend task{.q = reinterpret_cast<const float*>(q.raw()) + a.h0 * hd,
                         .k = keys.raw() + bytes_of(keys, g * hd),
                         .v = values.raw() + bytes_of(values, g * hd),
                         .k_stride = keys.stride(0),
                         .v_stride = values.stride(0),
                         .begin = begin,
                         .end = end,
                         .cells = cells,
                         .heads = heads,
                         .head_dim = hd,
                         .scores = reinterpret_cast<float*>(scores.raw_mut()),
                         .scores_stride = scores.stride(0) / 4,
                         .out = reinterpret_cast<float*>(out.raw_mut()) + a.h0 * hd,
                         .scale = a.softmax.scale,
                         .softcap = a.softmax.softcap};
  keys_fn(task);
  for (int64_t h = 0; h < heads; ++h) {
    float* s = task.scores + h * task.scores_stride;
    K.isa->softmax_row(s, s, begin, end, cells, task.scale, task.softcap, a.sinks ? a.sinks[a.h0 + h] : a.softmax.sink);
  }
  values_fn(task);
}

// F32 with contiguous rows of `shape` (the elementwise row kernels' condition; broadcasts, strided
// rows and other types go to the reference).
bool f32_rows(const Tensor& t, const Shape& shape) noexcept {
  return t.type() == GgmlType::F32 && t.shape() == shape && inner_stride(t) == 4;
}

template <class Fn>
void for_each_row(const Tensor& t, Fn&& fn) noexcept {
  const int64_t rows = row_count(t.shape());
  for (int64_t r = 0; r < rows; ++r) fn(r, row_offset(t.shape(), t.strides(), r));
}

template <IsaLevel L>
void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) noexcept {
  const Level& K = level_of<L>();
  if (!f32_rows(gate, out.shape()) || !f32_rows(up, out.shape()) || !f32_rows(out, out.shape()))
    return ref::swiglu(gate, up, out);
  const int64_t n = out.shape().back();
  for_each_row(out, [&](int64_t r, int64_t at) {
    K.isa->swiglu_row(reinterpret_cast<const float*>(gate.raw() + row_offset(gate.shape(), gate.strides(), r)),
                      reinterpret_cast<const float*>(up.raw() + row_offset(up.shape(), up.strides(), r)),
                      reinterpret_cast<float*>(out.raw_mut() + at), n);
  });
}

template <IsaLevel L>
void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) noexcept {
  const Level& K = level_of<L>();
  const int64_t n = x.shape().back();
  if (!f32_rows(x, out.shape()) || !f32_rows(out, out.shape()) || (weight.defined() && !f32_rows(weight, Shape{n})))
    return ref::rms_norm(x, weight, eps, out);
  const float* w = weight.defined() ? reinterpret_cast<const float*>(weight.raw()) : nullptr;
  for_each_row(out, [&](int64_t r, int64_t at) {
    K.isa->rms_norm_row(reinterpret_cast<const float*>(x.raw() + row_offset(x.shape(), x.strides(), r)), w, eps,
                        reinterpret_cast<float*>(out.raw_mut() + at), n);
  });
}

// F32 -> F16 (a KV cache write) on the ISA's conversion; every other copy on the reference.
template <IsaLevel L>
void copy(const Tensor& src, const Tensor& dst) noexcept {
  const Level& K = level_of<L>();
  if (!f32_rows(src, dst.shape()) || dst.type() != GgmlType::F16 || inner_stride(dst) != 2) return ref::copy(src, dst);
  const int64_t n = src.shape().back();
  for_each_row(dst, [&](int64_t r, int64_t at) {
    K.isa->f32_to_f16_row(reinterpret_cast<const float*>(src.raw() + row_offset(src.shape(), src.strides(), r)),
                          reinterpret_cast<uint16_t*>(dst.raw_mut() + at), n);
  });
}

template <IsaLevel L>
bool feeds(GgmlType type, BlockOrder order) noexcept {
  const Level& K = level_of<L>();
  return x86::feeds(K, type, order);
}

template <IsaLevel L>
KernelTable make_table() noexcept {
  const Level& K = level_of<L>();
  KernelTable t = reference_table();
  t.matmul = &matmul<L>;
  t.matmul_scratch = &matmul_scratch<L>;
  t.matmul_scratch_for = &matmul_scratch_for<L>;
  t.matmul_prepare = &matmul_prepare<L>;
  t.matmul_prepared = &matmul_prepared<L>;
  t.feeds = &feeds<L>;
  t.softmax = &softmax<L>;
  t.swiglu = &swiglu<L>;
  t.rms_norm = &rms_norm<L>;
  t.copy = &copy<L>;
  t.attention_heads = &attention_heads<L>;
  t.name = K.name;
  return t;
}

}  // namespace

const char* isa_level_name(IsaLevel level) noexcept {
  switch (level) {
    case IsaLevel::Reference: return "reference";
    case IsaLevel::Avx2: return "avx2";
    case IsaLevel::Avx512: return "avx512";
    case IsaLevel::Amx: return "amx";
  }
  return "?";
}

const KernelTable* table_for(IsaLevel level) noexcept {
#if defined(SKAINET_X86_KERNELS)
  if (level != IsaLevel::Reference && !x86::level(level)) return nullptr;
  if (level == IsaLevel::Avx2) {
    static const KernelTable avx2 = make_table<IsaLevel::Avx2>();
    return &avx2;
  }
  if (level == IsaLevel::Avx512) {
    static const KernelTable avx512 = make_table<IsaLevel::Avx512>();
    return &avx512;
  }
  if (level == IsaLevel::Amx) {
    static const KernelTable amx = make_table<IsaLevel::Amx>();
    return &amx;
  }
#endif
  return level == IsaLevel::Reference ? &reference_table() : nullptr;
}

IsaLevel best_level() noexcept {
  static const IsaLevel best = [] {
    // SKAINET_ISA=reference|avx2|avx512|amx caps the choice (A/B measurements, bisecting a kernel).
    if (const char* want = std::getenv("SKAINET_ISA"))
      for (IsaLevel l : kIsaLevels)
        if (std::strcmp(want, isa_level_name(l)) == 0 && table_for(l)) return l;
    for (IsaLevel l : {IsaLevel::Amx, IsaLevel::Avx512, IsaLevel::Avx2})
      if (table_for(l)) return l;
    return IsaLevel::Reference;
  }();
  return best;
}

const KernelTable& best_table() noexcept { return *table_for(best_level()); }

}  // namespace skainet::kernels
