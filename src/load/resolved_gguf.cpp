#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "skainet/compute/kernels.hpp"
#include "skainet/model/load.hpp"
#include "skainet/core/thread_pool.hpp"

namespace skainet::load {
namespace {

using placement::Decision;

constexpr uint64_t kChunkBytes = 4u << 20;  // bounded staging for converted tensors

void check_matches(const gguf::Header& h, const plan::MemoryPlan& p) {
  if (p.tensors.size() != h.tensors.size())
    throw InvalidArgument(fmt::format("{}: the plan lists {} tensors, the file has {}", h.path.string(),
                                      p.tensors.size(), h.tensors.size()));
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const Decision& d = p.tensors[i];
    const gguf::TensorInfo& t = h.tensors[i];
    if (d.tensor != t.name || d.file_type != t.type || d.file_offset != t.file_offset || d.file_bytes != t.bytes ||
        d.shape != t.shape)
      throw InvalidArgument(fmt::format(
          "{}: plan entry {} ('{}' {} at {}, {} bytes) does not describe file tensor '{}' ({} at {}, {} bytes)",
          h.path.string(), i, d.tensor, type_name(d.file_type), d.file_offset, d.file_bytes, t.name, type_name(t.type),
          t.file_offset, t.bytes));
  }
}

// Reads a tensor's file bytes with pread (they never enter this process's mapping) in bounded chunks,
// converting rows on the way when the held type differs; `emit(first_row, rows, held bytes)`.
template <class Emit>
void read_held_chunks(const base::FileReader& file, const Decision& d, std::vector<std::byte>& stage,
                      std::vector<std::byte>& converted, std::vector<float>& row, Emit&& emit) {
  const uint64_t in_row = row_bytes(d.file_type, d.shape[0]);
  const uint64_t out_row = row_bytes(d.held_type, d.shape[0]);
  const uint64_t rows = d.file_bytes / in_row;
  const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / in_row);
  const bool same = d.held_type == d.file_type;
  stage.resize(std::min(rows, rows_per_chunk) * in_row);
  if (!same) converted.resize(std::min(rows, rows_per_chunk) * out_row);
  row.resize(d.shape[0]);
  for (uint64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
    const uint64_t n = std::min(rows_per_chunk, rows - r0);
    file.read_at(d.file_offset + r0 * in_row, stage.data(), n * in_row);
    if (same) {
      emit(r0, std::span<const std::byte>(stage.data(), n * in_row));
      continue;
    }
    for (uint64_t r = 0; r < n; ++r) {
      const std::byte* src = stage.data() + r * in_row;
      std::byte* o = converted.data() + r * out_row;
      const auto count = static_cast<int64_t>(d.shape[0]);
      if (d.held_type == GgmlType::F32) {
        kernels::ref::dequantize_row(d.file_type, src, reinterpret_cast<float*>(o), count);
      } else {
        kernels::ref::dequantize_row(d.file_type, src, row.data(), count);
        kernels::ref::quantize_row(d.held_type, row.data(), o, count);
      }
    }
    emit(r0, std::span<const std::byte>(converted.data(), n * out_row));
  }
}

void read_converted(const base::FileReader& file, const Decision& d, const Tensor& out, std::vector<std::byte>& stage,
                    std::vector<float>& row) {
  std::byte* dst = out.mutable_bytes();
  const uint64_t out_row = row_bytes(d.held_type, d.shape[0]);
  std::vector<std::byte> converted;
  read_held_chunks(file, d, stage, converted, row, [&](uint64_t r0, std::span<const std::byte> bytes) {
    std::memcpy(dst + r0 * out_row, bytes.data(), bytes.size());
  });
}

// A repacked tensor's file rows in chunks of a whole number of row groups of about `chunk_bytes`: each
// chunk repacks on its own to the same bytes as the whole tensor would, so chunks may go to threads
// (the load) or out one after another (the export's stream).
struct RepackChunks {
  uint64_t row_bytes, rows, rows_per_chunk;
  RepackChunks(const Decision& d, uint64_t chunk_bytes)
      : row_bytes(skainet::row_bytes(d.file_type, d.shape[0])),
        rows(d.file_bytes / row_bytes),
        rows_per_chunk(std::max<uint64_t>(1, chunk_bytes / (kInterleaveRows * row_bytes)) * kInterleaveRows) {}
  int64_t count() const { return static_cast<int64_t>((rows + rows_per_chunk - 1) / rows_per_chunk); }
  uint64_t first_row(int64_t c) const { return static_cast<uint64_t>(c) * rows_per_chunk; }
  uint64_t bytes_of(int64_t c) const { return std::min(rows_per_chunk, rows - first_row(c)) * row_bytes; }
  // Chunk c read from the file through `stage` and repacked into dst (bytes_of(c) bytes).
  void repack(const base::FileReader& file, const Decision& d, int64_t c, std::vector<std::byte>& stage,
              std::byte* dst) const {
    stage.resize(bytes_of(c));
    file.read_at(d.file_offset + first_row(c) * row_bytes, stage.data(), stage.size());
    kernels::ref::repack_rows(d.file_type, d.held_order, stage.data(), dst,
                              static_cast<int64_t>(stage.size() / row_bytes), static_cast<int64_t>(d.shape[0]));
  }
};

// The file's row-major blocks into the plan's kernel-feed order, in chunks of about
// kRepackChunkBytes split over the pool's threads when there is one: the copy out of the page cache,
// the kernel zeroing the new pages on first touch and the repack itself all run on every thread.
constexpr uint64_t kRepackChunkBytes = 1u << 20;

void read_repacked(const base::FileReader& file, const Decision& d, const Tensor& out, base::ThreadPool* pool) {
  const RepackChunks chunks(d, kRepackChunkBytes);
  std::byte* dst = out.mutable_bytes();
  std::mutex failed;
  std::exception_ptr error;
  const auto work = [&](int64_t c0, int64_t c1) noexcept {
    try {
      std::vector<std::byte> stage;
      for (int64_t c = c0; c < c1; ++c) chunks.repack(file, d, c, stage, dst + chunks.first_row(c) * chunks.row_bytes);
    } catch (...) {
      const std::lock_guard lock(failed);
      if (!error) error = std::current_exception();
    }
  };
  if (pool)
    pool->parallel_for(chunks.count(), 1, work);
  else
    work(0, chunks.count());
  if (error) std::rethrow_exception(error);
}

void release_file_pages(const base::FileReader& file, uint64_t offset, uint64_t length) {
  ::posix_fadvise(file.fd(), static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
}

// A mapped expert stack's pinned experts (placement::pinned_file_ranges): each range of the file
// mapping replaced in place by anonymous pages holding the same bytes, so the model's one 3-D view
// reads pinned experts from process memory and the others from file pages the kernel may drop. The
// file pages read on the way are dropped, as after any copy.
uint64_t pin_expert_pages(const base::FileReader& file, const base::FileMapping& mapping, const Decision& d,
                          uint64_t page_size) {
  uint64_t pinned = 0;
  for (const placement::FileRange& r : placement::pinned_file_ranges(d, page_size)) {
    // The mapping covers the whole file from offset 0, so a file offset is an offset into it; the
    // page-aligned range lies inside the stack and the stack inside the file.
    if (r.end > mapping.size() || mapping.file_offset() != 0)
      throw InvalidArgument(fmt::format("pinned expert pages [{}, {}) are outside the file mapping", r.begin, r.end));
    void* at = const_cast<std::byte*>(mapping.data()) + r.begin;
    const size_t length = r.end - r.begin;
    void* got = ::mmap(at, length, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (got == MAP_FAILED)
      throw Error(
          fmt::format("pinning {} of expert pages: mmap failed: {}", base::format_bytes(length), std::strerror(errno)));
    file.read_at(r.begin, static_cast<std::byte*>(got), length);
    if (::mprotect(got, length, PROT_READ) != 0)
      throw Error(fmt::format("pinning expert pages: mprotect failed: {}", std::strerror(errno)));
    release_file_pages(file, r.begin, length);
    pinned += length;
  }
  return pinned;
}

}  // namespace

void stream_held_bytes(const base::FileReader& file, const Decision& d,
                       const std::function<void(std::span<const std::byte>)>& sink) {
  if (d.held_order != BlockOrder::RowMajor) {
    // The kernel-feed order: what the load puts in memory, written out instead.
    const RepackChunks chunks(d, kChunkBytes);
    std::vector<std::byte> stage, repacked;
    for (int64_t c = 0; c < chunks.count(); ++c) {
      repacked.resize(chunks.bytes_of(c));
      chunks.repack(file, d, c, stage, repacked.data());
      sink(repacked);
    }
  } else {
    std::vector<std::byte> stage, converted;
    std::vector<float> row;
    read_held_chunks(file, d, stage, converted, row, [&](uint64_t, std::span<const std::byte> bytes) { sink(bytes); });
  }
  release_file_pages(file, d.file_offset, d.file_bytes);
}

ResolvedGguf::ResolvedGguf(gguf::Header header, plan::MemoryPlan plan)
    : header_(std::move(header)), plan_(std::move(plan)) {
  check_matches(header_, plan_);
  if (!plan_.fits) {
    std::string advice;
    for (const auto& s : plan_.suggestions)
      advice += fmt::format("; {} saves {}", s.action, base::format_bytes(s.saves));
    // With several slots, each one's KV cache counts: say so, and what one slot costs.
    if (plan_.slots > 1 && plan_.kv)
      advice += fmt::format("; {} slots take {} of KV cache ({} each): fewer --slots fit in less", plan_.slots,
                            base::format_bytes(plan_.totals.kv), base::format_bytes(plan_.kv->bytes));
    throw BudgetError(
        fmt::format("{}: the plan{} needs {} resident but the budget is {} (nothing was loaded){}",
                    header_.path.string(), plan_.slots > 1 ? fmt::format(" for {} slots", plan_.slots) : std::string(),
                    base::format_bytes(plan_.totals.resident()), base::format_bytes(*plan_.budget), advice),
        plan_.totals.resident(), *plan_.budget);
  }
}

LoadedModel ResolvedGguf::load(memory::ModelScope& scope, const LoadOptions& options) const {
  const auto start = std::chrono::steady_clock::now();
  LoadedModel m;
  const base::FileReader file(header_.path);
  bool any_mapped = false;
  for (const auto& d : plan_.tensors) any_mapped |= d.spec.domain == MemoryDomain::MappedFile;
  if (any_mapped) m.mapping = std::make_shared<const base::FileMapping>(header_.path, 0, header_.file_size);

  uint64_t total = 0;
  for (const auto& d : plan_.tensors) total += d.spec.bytes;
  base::Progress progress("loading", options.progress ? total : 0);
  // Threads for the repacks, started only when the plan has one.
  std::optional<base::ThreadPool> pool;
  bool any_repacked = false;
  for (const auto& d : plan_.tensors) any_repacked |= d.held_order != BlockOrder::RowMajor;
  if (any_repacked && options.threads > 1) pool.emplace(options.threads);
  std::vector<std::byte> stage;
  std::vector<float> row;

  for (const Decision& d : plan_.tensors) {
    const Shape shape = Shape::from_ggml(d.shape);
    progress.item(d.tensor);
    Tensor t;
    try {
      if (d.spec.domain == MemoryDomain::MappedFile) {
        auto storage = Storage::mapped(m.mapping, d.file_offset, d.file_bytes, d.tensor);
        scope.adopt(storage);
        t = Tensor(storage, shape, d.file_type);
        // The machine's page, as Platform::detect gave the plan.
        const uint64_t pinned = pin_expert_pages(file, *m.mapping, d, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
        m.stats.pinned_expert_bytes += pinned;
        m.stats.mapped_bytes += d.file_bytes - pinned;
        ++m.stats.mapped;
      } else if (d.held_order != BlockOrder::RowMajor) {
        if (d.held_type != d.file_type || shape.rank() != 2 || !kernels::ref::can_repack(d.held_type, d.held_order))
          throw InvalidArgument(fmt::format("the plan asks for {} {} in {} order, and no repacker makes it",
                                            shape.to_string(), type_name(d.held_type), block_order_name(d.held_order)));
        const Tensor rows = scope.allocate_in(d.spec.domain, shape, d.held_type, d.tensor);
        t = Tensor(rows.storage_ref(), shape, d.held_type, rows.offset(), d.held_order);
        read_repacked(file, d, t, pool ? &*pool : nullptr);
        m.stats.repacked_bytes += d.file_bytes;
        ++m.stats.repacked;
        // The file pages it came from are dropped: a repacked weight is never resident twice.
        release_file_pages(file, d.file_offset, d.file_bytes);
      } else {
        t = scope.allocate_in(d.spec.domain, shape, d.held_type, d.tensor);
        if (d.held_type == d.file_type) {
          file.read_at(d.file_offset, t.mutable_bytes(), d.file_bytes);
          m.stats.copied_bytes += d.file_bytes;
          ++m.stats.copied;
        } else {
          read_converted(file, d, t, stage, row);
          m.stats.converted_bytes += d.spec.bytes;
          ++m.stats.converted;
        }
        release_file_pages(file, d.file_offset, d.file_bytes);
      }
    } catch (Error& e) {
      e.add_context(fmt::format("{}: loading tensor '{}'", header_.path.string(), d.tensor));
      throw;
    }
    m.names.push_back(d.tensor);
    m.weights.emplace(d.tensor, std::move(t));
    if (options.progress) progress.advance(d.spec.bytes);
  }
  progress.finish();
  m.stats.payload_bytes_read = file.bytes_read();
  m.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

const Tensor* LoadedModel::find(std::string_view name) const noexcept {
  const auto it = weights.find(name);
  return it == weights.end() ? nullptr : &it->second;
}

const Tensor& LoadedModel::weight(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  throw Error(fmt::format("the model has no tensor '{}'", name));
}

template <class Allocate>
KvCacheStore::KvCacheStore(const plan::KvCachePlan& kv, Allocate&& allocate) : plan_(kv) {
  placement_ = {kv.domain, memory::ScopeKind::Model, kv.bytes};
  const Shape shape{static_cast<int64_t>(kv.n_ctx), static_cast<int64_t>(uint64_t{kv.kv_heads} * kv.head_dim)};
  k_.reserve(kv.layers);
  v_.reserve(kv.layers);
  for (uint32_t l = 0; l < kv.layers; ++l)
    for (auto* list : {&k_, &v_})
      list->push_back(allocate(shape, list == &k_ ? kv.k_type : kv.v_type,
                               fmt::format("kv cache {} layer {}", list == &k_ ? "K" : "V", l)));
}

KvCacheStore::KvCacheStore(memory::ModelScope& scope, const plan::KvCachePlan& kv)
    : KvCacheStore(kv, [&](const Shape& shape, GgmlType type, const std::string& origin) {
        Tensor t = scope.allocate_in(kv.domain, shape, type, origin);
        std::memset(t.mutable_bytes(), 0, t.nbytes());
        return t;
      }) {}

KvCacheStore KvCacheStore::recorded(memory::Scope& scope, const plan::KvCachePlan& kv) {
  return KvCacheStore(kv, [&](const Shape& shape, GgmlType type, const std::string& origin) {
    return scope.allocate(shape, type, origin);
  });
}

}  // namespace skainet::load
