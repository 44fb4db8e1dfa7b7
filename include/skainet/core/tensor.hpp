// skainet::tensor — Storage, the only owner of bytes, and Tensor, a view of a Storage.
//
//   auto s = Storage::heap(16 * 64 * 4, "scratch");        // 64-byte aligned, owned, id'd
//   Tensor t(s, Shape{16, 64}, GgmlType::F32);              // contiguous view at byte offset 0
//   Tensor cols = t.narrow(1, 8, 33);                        // zero copy: strides keep the row pitch
//   Tensor tr = t.transpose(0, 1);                           // dense only
//   float* p = t.mutable_data<float>();   // throws StorageClosedException once the storage died
//
// Shapes are outermost first (row-major, like numpy): a GGUF tensor with ggml ne {k, out} is the view
// Shape{out, k} (Shape::from_ggml reverses). Strides are in bytes. A packed (quantized) tensor keeps
// its innermost dimension as whole blocks: it can be narrowed there only at block boundaries.
//
// Liveness is checked where a tensor enters an accessor, a view or an op — never per element inside
// a kernel (kernels use the unchecked raw()/raw_mut()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "skainet/core/base.hpp"
#include "skainet/core/format.hpp"

namespace skainet {

inline constexpr int kMaxRank = 4;
inline constexpr uint64_t kStorageAlignment = 64;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);  // InvalidArgument: rank > 4 or a negative dim
  static Shape of(std::span<const int64_t> dims);
  static Shape from_ggml(std::span<const uint64_t> ne);  // ggml order (innermost first) reversed

  int rank() const noexcept { return rank_; }
  int64_t operator[](int i) const noexcept { return d_[static_cast<size_t>(i)]; }
  int64_t back() const noexcept { return rank_ ? d_[static_cast<size_t>(rank_ - 1)] : 1; }
  int64_t numel() const noexcept;
  Shape with(int i, int64_t v) const;  // copy with dim i replaced
  std::string to_string() const;       // "[2, 3]"
  friend bool operator==(const Shape& a, const Shape& b) noexcept;

 private:
  std::array<int64_t, kMaxRank> d_{};
  int rank_ = 0;
};

using Strides = std::array<int64_t, kMaxRank>;

// Where bytes live. SlabSlice: a piece of a ForwardScope slab.
enum class MemoryDomain : uint8_t { HostHeap, HostPages, MappedFile, SlabSlice };
// Owned: freed by this Storage. Borrowed: someone else keeps the bytes alive (a shared file
// mapping, a caller buffer). Alias: a window of another storage (slab slices). Symbolic: no bytes at
// all — a value of a recorded program (skainet::record), which has a size and an identity only.
enum class Ownership : uint8_t { Owned, Borrowed, Alias, Symbolic };
std::string_view domain_name(MemoryDomain d) noexcept;
std::string_view ownership_name(Ownership o) noexcept;

// The lifetime shared by every storage a scope hands out. The scope advances `generation` at each
// step boundary and sets `closed` when it ends; a storage is alive only while its own generation
// equals the lifetime's and the lifetime is open.
struct Lifetime {
  uint64_t generation = 1;
  bool closed = false;
  bool steps = false;      // a forward scope: its generations are step numbers
  std::string_view label;  // "forward scope", "model scope" (a literal)
};

// Thrown when a tensor whose storage has died is read, written, viewed or passed to an op.
class StorageClosedException : public Error {
 public:
  StorageClosedException(uint64_t storage_id, std::string origin, MemoryDomain domain, uint64_t died_in_step,
                         std::string_view scope, std::string_view action);
  uint64_t storage_id;
  std::string origin;  // who asked for the storage (an op or a tensor name)
  MemoryDomain domain;
  uint64_t died_in_step;  // forward step whose reset ended it; 0 when closed otherwise
  std::string action;     // what was attempted
};

class Storage {
 public:
  using Ref = std::shared_ptr<Storage>;
  static constexpr size_t kOriginChars = 63;

  static Ref heap(uint64_t bytes, std::string_view origin);  // 64-byte aligned
  // A dedicated page-aligned anonymous mapping (MADV_HUGEPAGE advised from 2 MiB); unmapped on close.
  static Ref pages(uint64_t bytes, std::string_view origin);
  // A read-only window [offset, offset + length) of a file, mapped by this storage.
  static Ref map_file(const std::filesystem::path& path, uint64_t offset, uint64_t length, std::string_view origin);
  // A read-only window of a mapping shared with other storages (one mapping per model file).
  static Ref mapped(std::shared_ptr<const base::FileMapping> mapping, uint64_t offset, uint64_t length,
                    std::string_view origin);
  // Caller-owned bytes; the caller keeps them alive for as long as the storage is used.
  static Ref borrow(void* data, uint64_t bytes, bool writable, std::string_view origin);
  // No bytes: a recorded value of `bytes` size (views and shape checks work; reading throws).
  static Ref symbolic(uint64_t bytes, std::string_view origin);

  // For scopes. A slice record is reused across steps: bind_slice gives it a new id, window and
  // generation; the scope's Lifetime decides whether the current binding is alive.
  static Ref slice_record(std::shared_ptr<const Lifetime> lifetime);
  void bind_slice(std::byte* data, uint64_t bytes, uint64_t generation, std::string_view origin) noexcept;
  // Ties any storage to a scope lifetime at its current generation (overflow and model storage).
  void attach(std::shared_ptr<const Lifetime> lifetime) noexcept;

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  uint64_t id() const noexcept { return id_; }
  uint64_t size() const noexcept { return size_; }
  MemoryDomain domain() const noexcept { return domain_; }
  Ownership ownership() const noexcept { return ownership_; }
  std::string_view origin() const noexcept { return {origin_, origin_len_}; }
  uint64_t generation() const noexcept { return generation_; }
  bool writable() const noexcept { return writable_; }
  bool closed() const noexcept { return closed_; }
  bool symbolic() const noexcept { return ownership_ == Ownership::Symbolic; }

  bool alive() const noexcept;
  // Throws StorageClosedException naming this storage unless alive() and `generation` is current.
  void check_alive(uint64_t generation, std::string_view action) const;
  // Frees owned bytes now, exactly once; every later use throws. Idempotent.
  void close() noexcept;
  std::byte* bytes() const noexcept { return data_; }  // unchecked

 private:
  Storage() = default;
  // A storage with a fresh id; each factory sets what else is its own (mapping, writability, counts).
  static Ref make(std::byte* data, uint64_t size, MemoryDomain domain, Ownership ownership, std::string_view origin);
  void set_origin(std::string_view origin) noexcept;
  void count_acquire() noexcept;

  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t id_ = 0;
  uint64_t generation_ = 0;
  uint64_t map_length_ = 0;  // pages: the mmap length
  MemoryDomain domain_ = MemoryDomain::HostHeap;
  Ownership ownership_ = Ownership::Owned;
  bool writable_ = true;
  bool closed_ = false;
  std::shared_ptr<const Lifetime> lifetime_;
  std::shared_ptr<const base::FileMapping> mapping_;
  char origin_[kOriginChars + 1] = {};
  uint8_t origin_len_ = 0;
};

// Process-wide counts of owned bytes acquired and released, per domain (index = MemoryDomain).
struct StorageCounters {
  std::array<uint64_t, 4> acquired{};
  std::array<uint64_t, 4> released{};
  std::array<uint64_t, 4> bytes_acquired{};
  std::array<uint64_t, 4> bytes_released{};
};
StorageCounters storage_counters() noexcept;

class Tensor {
 public:
  Tensor() = default;
  // A contiguous view at `offset`. InvalidArgument if it does not fit the storage, the innermost
  // dimension is not whole blocks, or a dense element would be misaligned.
  Tensor(Storage::Ref storage, const Shape& shape, GgmlType type, uint64_t offset = 0,
         BlockOrder order = BlockOrder::RowMajor);
  // Explicit byte strides (for a packed type the innermost stride is ignored: rows are whole blocks).
  Tensor(Storage::Ref storage, const Shape& shape, const Strides& strides, GgmlType type, uint64_t offset,
         BlockOrder order = BlockOrder::RowMajor);

  bool defined() const noexcept { return storage_ != nullptr; }
  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  int64_t dim(int i) const noexcept { return shape_[i < 0 ? i + rank() : i]; }
  int64_t numel() const noexcept { return shape_.numel(); }
  int64_t stride(int i) const noexcept { return strides_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  const Strides& strides() const noexcept { return strides_; }
  uint64_t offset() const noexcept { return offset_; }
  GgmlType type() const noexcept { return type_; }
  Format format() const noexcept { return format_of(type_); }
  BlockOrder block_order() const noexcept { return order_; }
  bool packed() const noexcept;
  uint32_t element_size() const noexcept;  // dense: bytes per element; packed: 0
  uint64_t row_bytes() const;              // bytes of one innermost row when stored contiguously
  bool is_contiguous() const noexcept;
  uint64_t nbytes() const;       // bytes of the contiguous layout of this shape and type
  std::string describe() const;  // "F32[2, 3] @ storage #7+128 (ops::add)"

  const Storage& storage() const noexcept { return *storage_; }
  const Storage::Ref& storage_ref() const noexcept { return storage_; }
  uint64_t generation() const noexcept { return generation_; }
  bool alive() const noexcept;
  void check_alive(std::string_view action) const;  // StorageClosedException naming the storage

  // Zero-copy views (they check liveness; they never own bytes).
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor select(int dim, int64_t index) const;  // drops `dim`
  Tensor transpose(int d0, int d1) const;       // dense only
  Tensor reshape(const Shape& shape) const;     // contiguous only; same element count
  Tensor rows(int64_t start, int64_t count) const { return narrow(0, start, count); }
  Tensor row(int64_t i) const { return select(0, i); }

  // Checked accessors: liveness, and for typed access a dense type of sizeof(T) bytes.
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(checked_bytes(sizeof(T), false));
  }
  template <class T>
  T* mutable_data() const {
    return reinterpret_cast<T*>(checked_bytes(sizeof(T), true));
  }
  const std::byte* bytes() const { return checked_bytes(0, false); }
  std::byte* mutable_bytes() const { return checked_bytes(0, true); }

  // Unchecked, for kernels that were handed views already checked at op entry.
  const std::byte* raw() const noexcept { return storage_->bytes() + offset_; }
  std::byte* raw_mut() const noexcept { return storage_->bytes() + offset_; }

 private:
  std::byte* checked_bytes(size_t element_size, bool write) const;
  void validate() const;

  Storage::Ref storage_;
  uint64_t generation_ = 0;
  uint64_t offset_ = 0;
  Shape shape_;
  Strides strides_{};
  GgmlType type_ = GgmlType::F32;
  BlockOrder order_ = BlockOrder::RowMajor;
};

// Row-major byte strides of `shape` stored contiguously in `type` (innermost stride 0 if packed).
Strides contiguous_strides(const Shape& shape, GgmlType type);
// Bytes of `shape` in `type` stored contiguously (InvalidArgument if the last dim is not whole blocks).
uint64_t contiguous_bytes(const Shape& shape, GgmlType type);

}  // namespace skainet
