#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "skainet/core/tensor.hpp"

namespace skainet {
namespace {

std::atomic<uint64_t> g_next_id{1};

struct Counters {
  std::array<std::atomic<uint64_t>, 4> acquired{}, released{}, bytes_acquired{}, bytes_released{};
};
Counters& counters() noexcept {
  static Counters c;
  return c;
}
size_t idx(MemoryDomain d) noexcept { return static_cast<size_t>(d); }

uint64_t page_size() noexcept { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }
constexpr uint64_t kHugePageAdviseBytes = 2ull << 20;

}  // namespace

std::string_view domain_name(MemoryDomain d) noexcept {
  switch (d) {
    case MemoryDomain::HostHeap: return "heap";
    case MemoryDomain::HostPages: return "pages";
    case MemoryDomain::MappedFile: return "mapped";
    case MemoryDomain::SlabSlice: return "slab slice";
  }
  return "?";
}

std::string_view ownership_name(Ownership o) noexcept {
  switch (o) {
    case Ownership::Owned: return "owned";
    case Ownership::Borrowed: return "borrowed";
    case Ownership::Alias: return "alias";
    case Ownership::Symbolic: return "symbolic";
  }
  return "?";
}

StorageClosedException::StorageClosedException(uint64_t id, std::string org, MemoryDomain dom, uint64_t step,
                                               std::string_view scope, std::string_view act)
    : Error(step ? fmt::format("{}: storage #{} ({}, origin '{}') died at the end of step {} of its {}; reading "
                               "it now would see reused memory",
                               act, id, domain_name(dom), org, step, scope.empty() ? "scope" : scope)
                 : fmt::format("{}: storage #{} ({}, origin '{}') was closed{}{}", act, id, domain_name(dom), org,
                               scope.empty() ? "" : " with its ", scope)),
      storage_id(id),
      origin(std::move(org)),
      domain(dom),
      died_in_step(step),
      action(act) {}

StorageCounters storage_counters() noexcept {
  StorageCounters out;
  for (size_t i = 0; i < 4; ++i) {
    out.acquired[i] = counters().acquired[i].load();
    out.released[i] = counters().released[i].load();
    out.bytes_acquired[i] = counters().bytes_acquired[i].load();
    out.bytes_released[i] = counters().bytes_released[i].load();
  }
  return out;
}

void Storage::set_origin(std::string_view origin) noexcept {
  const size_t n = origin.size() < kOriginChars ? origin.size() : kOriginChars;
  std::memcpy(origin_, origin.data(), n);
  origin_[n] = '\0';
  origin_len_ = static_cast<uint8_t>(n);
}

void Storage::count_acquire() noexcept {
  counters().acquired[idx(domain_)]++;
  counters().bytes_acquired[idx(domain_)] += size_;
}

Storage::Ref Storage::make(std::byte* data, uint64_t size, MemoryDomain domain, Ownership ownership,
                           std::string_view origin) {
  Ref s(new Storage());
  s->data_ = data;
  s->size_ = size;
  s->id_ = g_next_id++;
  s->domain_ = domain;
  s->ownership_ = ownership;
  s->set_origin(origin);
  return s;
}

Storage::Ref Storage::heap(uint64_t bytes, std::string_view origin) {
  if (bytes > (uint64_t{1} << 62))
    throw InvalidArgument(fmt::format("heap storage for '{}': {} bytes is too large", origin, bytes));
  // Borrowed until the bytes are in, so a failed allocation frees and counts nothing.
  Ref s = make(nullptr, bytes, MemoryDomain::HostHeap, Ownership::Borrowed, origin);
  // operator new(align_val_t) never returns null for size 0, so every storage has a distinct address.
  s->data_ = static_cast<std::byte*>(::operator new (static_cast<size_t>(bytes), std::align_val_t{kStorageAlignment}));
  s->ownership_ = Ownership::Owned;
  s->count_acquire();
  return s;
}

Storage::Ref Storage::pages(uint64_t bytes, std::string_view origin) {
  const uint64_t length = checked_align_up(bytes == 0 ? 1 : bytes, page_size(), "page storage length");
  Ref s = make(nullptr, bytes, MemoryDomain::HostPages, Ownership::Borrowed, origin);  // as heap(): owned once mapped
  void* p = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw IoError(fmt::format("page storage for '{}': cannot map {} bytes: {}", origin, length, std::strerror(errno)));
#ifdef MADV_HUGEPAGE
  if (length >= kHugePageAdviseBytes) ::madvise(p, static_cast<size_t>(length), MADV_HUGEPAGE);  // advice only
#endif
  s->data_ = static_cast<std::byte*>(p);
  s->map_length_ = length;
  s->ownership_ = Ownership::Owned;
  s->count_acquire();
  return s;
}

Storage::Ref Storage::map_file(const std::filesystem::path& path, uint64_t offset, uint64_t length,
                               std::string_view origin) {
  auto mapping = std::make_shared<const base::FileMapping>(path, offset, length);
  Ref s = mapped(std::move(mapping), 0, length, origin);
  s->ownership_ = Ownership::Owned;
  s->count_acquire();
  return s;
}

Storage::Ref Storage::mapped(std::shared_ptr<const base::FileMapping> mapping, uint64_t offset, uint64_t length,
                             std::string_view origin) {
  if (!mapping) throw InvalidArgument(fmt::format("mapped storage for '{}': no mapping", origin));
  if (offset > mapping->size() || length > mapping->size() - offset)
    throw InvalidArgument(fmt::format("mapped storage for '{}': window [{}, +{}) exceeds the {}-byte mapping", origin,
                                      offset, length, mapping->size()));
  // writable_ = false guards the const_cast.
  Ref s = make(const_cast<std::byte*>(mapping->data()) + offset, length, MemoryDomain::MappedFile, Ownership::Borrowed,
               origin);
  s->writable_ = false;
  s->mapping_ = std::move(mapping);
  return s;
}

Storage::Ref Storage::borrow(void* data, uint64_t bytes, bool writable, std::string_view origin) {
  Ref s = make(static_cast<std::byte*>(data), bytes, MemoryDomain::HostHeap, Ownership::Borrowed, origin);
  s->writable_ = writable;
  return s;
}

Storage::Ref Storage::symbolic(uint64_t bytes, std::string_view origin) {
  return make(nullptr, bytes, MemoryDomain::HostHeap, Ownership::Symbolic, origin);
}

Storage::Ref Storage::slice_record(std::shared_ptr<const Lifetime> lifetime) {
  Ref s(new Storage());
  s->domain_ = MemoryDomain::SlabSlice;
  s->ownership_ = Ownership::Alias;
  s->lifetime_ = std::move(lifetime);
  s->closed_ = true;  // nothing bound yet
  return s;
}

void Storage::bind_slice(std::byte* data, uint64_t bytes, uint64_t generation, std::string_view origin) noexcept {
  data_ = data;
  size_ = bytes;
  generation_ = generation;
  id_ = g_next_id++;
  closed_ = false;
  set_origin(origin);
}

void Storage::attach(std::shared_ptr<const Lifetime> lifetime) noexcept {
  generation_ = lifetime ? lifetime->generation : 0;
  lifetime_ = std::move(lifetime);
}

Storage::~Storage() { close(); }

bool Storage::alive() const noexcept {
  if (closed_) return false;
  return !lifetime_ || (!lifetime_->closed && lifetime_->generation == generation_);
}

void Storage::check_alive(uint64_t generation, std::string_view action) const {
  if (alive() && generation == generation_) return;
  // A slab slice (or overflow storage) whose step ended names that step; anything else was closed.
  const bool step_ended = lifetime_ && lifetime_->steps && generation_ != 0;
  throw StorageClosedException(id_, std::string(origin()), domain_, step_ended ? generation_ : 0,
                               lifetime_ ? lifetime_->label : std::string_view(), action);
}

void Storage::close() noexcept {
  if (closed_) return;
  closed_ = true;
  if (ownership_ != Ownership::Owned) {
    mapping_.reset();
    return;
  }
  switch (domain_) {
    case MemoryDomain::HostHeap: ::operator delete (data_, std::align_val_t{kStorageAlignment}); break;
    case MemoryDomain::HostPages: ::munmap(data_, static_cast<size_t>(map_length_)); break;
    case MemoryDomain::MappedFile: mapping_.reset(); break;
    case MemoryDomain::SlabSlice: break;
  }
  counters().released[idx(domain_)]++;
  counters().bytes_released[idx(domain_)] += size_;
  data_ = nullptr;
}

}  // namespace skainet
