// The CUDA harness's device allocator, host side (plain C++: built and unit-tested without nvcc).
// Storages live at offsets inside one device arena (one cudaMalloc); this class decides the
// offsets and keeps the byte ledger. The ledger counts each storage's exact bytes, as the
// executor's walker and the simulator's `exact` allocator do (DESIGN.md §3), so the harness's
// measured peak is comparable to the simulated one; offsets are rounded up to `alignment` only
// to place buffers, and the arena's high-water mark (reserved-like) is reported beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace sim {
struct Graph;
}

namespace cuda_harness {

// Contract: allocate() places `bytes` (>= 0) at an offset aligned to `alignment` inside
// [0, capacity) by first fit over free ranges ordered by offset, or returns -1 when no free range
// fits (the caller then falls back to a buffer of its own, still counted via count_outside());
// release() frees a placement returned by allocate(). live_bytes() is the sum of the exact bytes
// of live placements (plus counted outside buffers); peak_live_bytes() its maximum since reset.
class ArenaPlanner {
 public:
  ArenaPlanner(int64_t capacity, int64_t alignment);  // throws std::invalid_argument

  int64_t allocate(int64_t bytes);        // offset, or -1 when nothing fits
  void release(int64_t offset);           // throws std::logic_error when not a live placement
  void count_outside(int64_t bytes);      // a live buffer outside the arena (+bytes, or -bytes)
  void reset_peaks();                     // peaks restart from the current state

  int64_t capacity() const { return capacity_; }
  int64_t live_bytes() const { return live_; }
  int64_t peak_live_bytes() const { return peak_live_; }
  int64_t high_water() const { return high_water_; }  // highest end offset of a placement
  int64_t placements() const { return static_cast<int64_t>(used_.size()); }

  // Rounds `bytes` up to a multiple of `alignment` (checked: std::overflow_error).
  static int64_t round_up(int64_t bytes, int64_t alignment);

 private:
  struct Used {
    int64_t size = 0;   // rounded size taken from the free list
    int64_t bytes = 0;  // exact bytes counted in the ledger
  };
  int64_t capacity_ = 0;
  int64_t alignment_ = 1;
  std::map<int64_t, int64_t> free_;  // offset -> size, coalesced, ordered by offset
  std::map<int64_t, Used> used_;     // offset -> placement
  int64_t live_ = 0, peak_live_ = 0, high_water_ = 0;
};

// The arena's capacity for a step: every storage of the graph placed at once (aligned), plus the
// largest transient workspace. Any live set of storages is a subset of them, so the arena holds
// the step's live bytes; only fragmentation can make a first fit fail, and then the caller's
// fallback buffer is counted the same.
int64_t arena_capacity(const std::vector<int64_t>& storage_bytes, int64_t max_scratch_bytes,
                       int64_t alignment);

// Where each storage of one step's graph sits: the CUDA backend keeps one, and the host tests
// drive one through the executor's walker over the CPU backend, so the accounting a GPU run
// reports is the accounting CI checks.
// Contract: place(s) gives storage s (its graph bytes) an arena offset, or -1 when the caller must
// give it a buffer of its own (outside(s) then holds; its bytes are counted all the same); a
// storage placed while live is released first (a second step re-makes the persistent ones).
// remove(s) drops a live storage. place_scratch()/remove_scratch(): the running event's one
// transient workspace, likewise.
class StorageArena {
 public:
  // The arena holds every storage of the graph at once (arena_capacity()), or `max_capacity`
  // (rounded down to the alignment) when that is less: a device with too little memory for all
  // of them places what fits and the caller makes buffers of their own for the rest.
  StorageArena(const sim::Graph& g, int64_t alignment, int64_t max_capacity = INT64_MAX);

  int64_t place(int32_t s);
  void remove(int32_t s);                  // throws std::logic_error when s is not live
  bool live(int32_t s) const { return state_.at(static_cast<std::size_t>(s)) != kDead; }
  bool outside(int32_t s) const { return state_.at(static_cast<std::size_t>(s)) == kOutside; }
  int64_t offset(int32_t s) const;         // arena offset of a placed storage, else -1
  int64_t place_scratch(int64_t bytes);    // offset, or -1 (outside, counted)
  void remove_scratch();                   // no-op when no scratch is placed
  bool scratch_outside() const { return scratch_ == kOutside; }

  const ArenaPlanner& planner() const { return planner_; }
  ArenaPlanner& planner() { return planner_; }

 private:
  static constexpr int64_t kDead = -1, kOutside = -2;
  std::vector<int64_t> bytes_;
  std::vector<int64_t> state_;  // offset, kDead or kOutside, per storage
  int64_t scratch_ = kDead, scratch_bytes_ = 0;
  ArenaPlanner planner_;
};

}  // namespace cuda_harness
