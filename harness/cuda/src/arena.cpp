#include "cuda_harness/arena.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

#include "sim/graph.hpp"

namespace cuda_harness {

int64_t ArenaPlanner::round_up(int64_t bytes, int64_t alignment) {
  if (bytes < 0 || alignment <= 0) throw std::invalid_argument("arena: negative size or alignment");
  const int64_t rem = bytes % alignment;
  if (rem == 0) return bytes;
  if (bytes > std::numeric_limits<int64_t>::max() - (alignment - rem))
    throw std::overflow_error("arena: size overflows when aligned");
  return bytes + (alignment - rem);
}

ArenaPlanner::ArenaPlanner(int64_t capacity, int64_t alignment)
    : capacity_(capacity), alignment_(alignment) {
  if (capacity < 0 || alignment <= 0 || capacity % alignment != 0)
    throw std::invalid_argument("arena: capacity must be a non-negative multiple of the alignment");
  if (capacity > 0) free_.emplace(0, capacity);
}

int64_t ArenaPlanner::allocate(int64_t bytes) {
  // A zero-byte storage still gets a distinct placement (one alignment unit), as cudaMalloc
  // would give distinct pointers; the ledger counts its 0 bytes.
  const int64_t size = round_up(bytes == 0 ? 1 : bytes, alignment_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const int64_t off = it->first, rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_.emplace(off + size, rest);
    used_.emplace(off, Used{size, bytes});
    live_ += bytes;
    if (live_ > peak_live_) peak_live_ = live_;
    if (off + size > high_water_) high_water_ = off + size;
    return off;
  }
  return -1;
}

void ArenaPlanner::release(int64_t offset) {
  const auto u = used_.find(offset);
  if (u == used_.end())
    throw std::logic_error("arena: release of offset " + std::to_string(offset) +
                           ", which is not a live placement");
  int64_t off = offset, size = u->second.size;
  live_ -= u->second.bytes;
  used_.erase(u);
  // Coalesce with the free neighbours.
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->first == off + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(off, size);
}

void ArenaPlanner::count_outside(int64_t bytes) {
  live_ += bytes;
  if (live_ < 0) throw std::logic_error("arena: live bytes below zero");
  if (live_ > peak_live_) peak_live_ = live_;
}

void ArenaPlanner::reset_peaks() {
  peak_live_ = live_;
  high_water_ = 0;
  for (const auto& [off, u] : used_)
    if (off + u.size > high_water_) high_water_ = off + u.size;
}

int64_t arena_capacity(const std::vector<int64_t>& storage_bytes, int64_t max_scratch_bytes,
                       int64_t alignment) {
  int64_t total = ArenaPlanner::round_up(max_scratch_bytes == 0 ? 1 : max_scratch_bytes, alignment);
  for (int64_t b : storage_bytes) {
    const int64_t r = ArenaPlanner::round_up(b == 0 ? 1 : b, alignment);
    if (total > std::numeric_limits<int64_t>::max() - r)
      throw std::overflow_error("arena: capacity overflows");
    total += r;
  }
  return total;
}

namespace {

int64_t step_capacity(const sim::Graph& g, int64_t alignment) {
  std::vector<int64_t> bytes;
  bytes.reserve(g.storages.size());
  for (const sim::Storage& s : g.storages) bytes.push_back(s.bytes);
  int64_t scratch = g.optimizer_transient_bytes;
  for (const sim::Op& op : g.ops) {
    scratch = std::max(scratch, op.fwd_transient_bytes);
    scratch = std::max(scratch, op.bwd_transient_bytes + op.bwd_accum_bytes);
  }
  return arena_capacity(bytes, scratch, alignment);
}

}  // namespace

StorageArena::StorageArena(const sim::Graph& g, int64_t alignment, int64_t max_capacity)
    : state_(g.storages.size(), kDead),
      planner_(std::min(step_capacity(g, alignment),
                        std::max<int64_t>(0, max_capacity) / alignment * alignment),
               alignment) {
  bytes_.reserve(g.storages.size());
  for (const sim::Storage& s : g.storages) bytes_.push_back(s.bytes);
}

int64_t StorageArena::place(int32_t s) {
  if (live(s)) remove(s);
  const int64_t bytes = bytes_[static_cast<size_t>(s)];
  const int64_t off = planner_.allocate(bytes);
  if (off < 0) planner_.count_outside(bytes);
  state_[static_cast<size_t>(s)] = off >= 0 ? off : kOutside;
  return off;
}

void StorageArena::remove(int32_t s) {
  const int64_t st = state_.at(static_cast<size_t>(s));
  if (st == kDead)
    throw std::logic_error("arena: storage " + std::to_string(s) + " is removed while not live");
  if (st == kOutside) planner_.count_outside(-bytes_[static_cast<size_t>(s)]);
  else planner_.release(st);
  state_[static_cast<size_t>(s)] = kDead;
}

int64_t StorageArena::offset(int32_t s) const {
  const int64_t st = state_.at(static_cast<size_t>(s));
  return st >= 0 ? st : -1;
}

int64_t StorageArena::place_scratch(int64_t bytes) {
  remove_scratch();
  const int64_t off = planner_.allocate(bytes);
  if (off < 0) planner_.count_outside(bytes);
  scratch_ = off >= 0 ? off : kOutside;
  scratch_bytes_ = bytes;
  return off;
}

void StorageArena::remove_scratch() {
  if (scratch_ == kOutside) planner_.count_outside(-scratch_bytes_);
  else if (scratch_ >= 0) planner_.release(scratch_);
  scratch_ = kDead;
  scratch_bytes_ = 0;
}

}  // namespace cuda_harness
