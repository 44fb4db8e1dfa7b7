#include <fmt/format.h>

#include "skainet/compute/memory.hpp"

namespace skainet::memory {

std::string_view scope_kind_name(ScopeKind k) noexcept {
  switch (k) {
    case ScopeKind::Model: return "model";
    case ScopeKind::Forward: return "forward";
    case ScopeKind::Ambient: return "ambient";
  }
  return "?";
}

ScopeClosedError::ScopeClosedError(ScopeKind k, std::string name, std::string org)
    : Error(fmt::format("{} scope '{}' is closed: it cannot allocate storage for '{}'", scope_kind_name(k), name, org)),
      kind(k),
      scope_name(std::move(name)),
      origin(std::move(org)) {}

Tensor AmbientScope::allocate(const Shape& shape, GgmlType type, std::string_view origin) {
  return Tensor(Storage::heap(contiguous_bytes(shape, type), origin), shape, type);
}

AmbientScope& ambient() {
  static AmbientScope scope;
  return scope;
}

ModelScope::ModelScope(std::string name, ModelScopeOptions options)
    : name_(std::move(name)), options_(options), life_(std::make_shared<Lifetime>()) {
  life_->label = "model scope";
  // Generation 0 is what every storage starts with, so adopting one keeps its existing views valid.
  life_->generation = 0;
}

ModelScope::~ModelScope() { close(); }

void ModelScope::check_open(std::string_view origin) const {
  if (life_->closed) throw ScopeClosedError(ScopeKind::Model, name_, std::string(origin));
}

Tensor ModelScope::allocate(const Shape& shape, GgmlType type, std::string_view origin) {
  const uint64_t bytes = contiguous_bytes(shape, type);
  return allocate_in(bytes >= options_.off_heap_threshold ? MemoryDomain::HostPages : MemoryDomain::HostHeap, shape,
                     type, origin);
}

Tensor ModelScope::allocate_in(MemoryDomain domain, const Shape& shape, GgmlType type, std::string_view origin) {
  check_open(origin);
  const uint64_t bytes = contiguous_bytes(shape, type);
  Storage::Ref s;
  if (domain == MemoryDomain::HostHeap)
    s = Storage::heap(bytes, origin);
  else if (domain == MemoryDomain::HostPages)
    s = Storage::pages(bytes, origin);
  else
    throw InvalidArgument(
        fmt::format("model scope '{}': cannot allocate '{}' in the {} domain", name_, origin, domain_name(domain)));
  s->attach(life_);
  storages_.push_back(s);
  stats_.storages++;
  (domain == MemoryDomain::HostHeap ? stats_.heap_bytes : stats_.page_bytes) += bytes;
  return Tensor(std::move(s), shape, type);
}

void ModelScope::adopt(const Storage::Ref& storage) {
  check_open(storage ? storage->origin() : "?");
  if (!storage) throw InvalidArgument(fmt::format("model scope '{}': adopt of a null storage", name_));
  if (storage->domain() == MemoryDomain::SlabSlice || !storage->alive())
    throw InvalidArgument(fmt::format("model scope '{}': cannot adopt storage #{} ('{}', {}): retain() a copy instead",
                                      name_, storage->id(), storage->origin(), domain_name(storage->domain())));
  storage->attach(life_);
  storages_.push_back(storage);
  stats_.storages++;
  stats_.adopted_bytes += storage->size();
}

void ModelScope::close() noexcept {
  if (life_->closed) return;
  life_->closed = true;
  for (auto& s : storages_) {
    if (!s->closed()) stats_.closed_storages++;
    s->close();
  }
  storages_.clear();
  stats_.closed = true;
}

ModelScopeStats ModelScope::stats() const noexcept { return stats_; }

Tensor retain(const Tensor& t, Scope& to) {
  t.check_alive("retain");
  if (t.storage().symbolic()) return t;
  Tensor out = to.allocate(t.shape(), t.type(), t.storage().origin());
  kernels::reference_table().copy(t, out);
  return out;
}

}  // namespace skainet::memory
