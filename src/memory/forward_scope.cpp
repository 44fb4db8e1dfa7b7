#include <cstring>

#include <fmt/format.h>

#include "skainet/compute/memory.hpp"

namespace skainet::memory {
namespace {

uint64_t align64(uint64_t v) { return checked_align_up(v, kStorageAlignment, "forward scope offset"); }

// The slab is touched once when made, so its pages are resident from the start as the memory plan
// counts them (and no step pays first-touch page faults).
Storage::Ref new_slab(uint64_t bytes) {
  Storage::Ref s = Storage::pages(align64(bytes), "forward slab");
  std::memset(s->bytes(), 0, s->size());
  return s;
}

}  // namespace

ForwardScope::ForwardScope(ForwardScopeOptions options) : options_(options), life_(std::make_shared<Lifetime>()) {
  life_->steps = true;
  life_->label = "forward scope";
  if (options_.slab_bytes > 0) {
    slab_ = new_slab(options_.slab_bytes);
    stats_.slab_bytes = slab_->size();
    stats_.slab_allocations = 1;
  }
}

ForwardScope::~ForwardScope() {
  life_->closed = true;
  for (auto& s : overflow_) s->close();
  for (auto& r : records_) r->close();
}

// A record no tensor holds any more (use_count 1: only this scope) is reused; held ones keep
// their id and origin so that a late use can still be explained.
Storage::Ref ForwardScope::next_record() {
  while (cursor_ < records_.size() && records_[cursor_].use_count() > 1) ++cursor_;
  if (cursor_ == records_.size()) {
    records_.push_back(Storage::slice_record(life_));
    stats_.slices = records_.size();
  }
  return records_[cursor_++];
}

Tensor ForwardScope::allocate(const Shape& shape, GgmlType type, std::string_view origin) {
  if (life_->closed) throw ScopeClosedError(ScopeKind::Forward, "forward", std::string(origin));
  const uint64_t bytes = contiguous_bytes(shape, type);
  stats_.demand = checked_add(align64(stats_.demand), bytes, "forward scope demand");
  if (stats_.demand > stats_.peak) stats_.peak = stats_.demand;
  const uint64_t start = align64(stats_.used);
  if (slab_ && start <= slab_->size() && bytes <= slab_->size() - start) {
    Storage::Ref rec = next_record();
    rec->bind_slice(slab_->bytes() + start, bytes, life_->generation, origin);
    stats_.used = start + bytes;
    return Tensor(std::move(rec), shape, type);
  }
  // Does not fit: overflow storage of its own, counted so that the slab can be sized.
  Storage::Ref s = Storage::heap(bytes, origin);
  s->attach(life_);
  overflow_.push_back(s);
  stats_.overflow_bytes += bytes;
  stats_.overflow_count++;
  stats_.total_overflow_count++;
  if (stats_.overflow_bytes > stats_.max_overflow_bytes) stats_.max_overflow_bytes = stats_.overflow_bytes;
  return Tensor(std::move(s), shape, type);
}

void ForwardScope::reset() {
  life_->generation++;  // every slice and overflow storage of the ended step is dead from here on
  for (auto& s : overflow_) s->close();
  overflow_.clear();
  cursor_ = 0;
  stats_.step = life_->generation;
  stats_.used = 0;
  stats_.demand = 0;
  stats_.overflow_bytes = 0;
  stats_.overflow_count = 0;
  stats_.resets++;
  if (options_.grow_to_high_water && stats_.peak > stats_.slab_bytes) {
    slab_.reset();  // its slices are all dead: nothing reads it again
    slab_ = new_slab(stats_.peak);
    stats_.slab_bytes = slab_->size();
    stats_.slab_allocations++;
  }
}

}  // namespace skainet::memory
