#include "cuda_harness/arena.hpp"

#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

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

}  // namespace cuda_harness
