// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), DESIGN.md §3
// "Allocators": what `--allocator caching` and `caching-expandable` report as allocated and
// reserved bytes. Addresses are virtual and assigned deterministically, so a replay of the same
// requests gives the same blocks, splits and figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <tuple>
#include <vector>

namespace sim {

inline constexpr int64_t kAllocMinBlockBytes = 512;          // rounding unit and minimum block
inline constexpr int64_t kAllocSmallSizeBytes = 1 << 20;     // <= this: small pool (1 MiB)
inline constexpr int64_t kAllocSmallSegmentBytes = 2 << 20;  // small pool segment (2 MiB)
inline constexpr int64_t kAllocLargeSegmentBytes = 20 << 20; // 1-10 MiB requests' segment
inline constexpr int64_t kAllocMinLargeAllocBytes = 10 << 20;  // >= this: own segment
inline constexpr int64_t kAllocRoundLargeBytes = 2 << 20;    // large segments' granularity
inline constexpr int64_t kAllocPageBytes = 2 << 20;          // expandable segments' page

int64_t alloc_round_size(int64_t bytes);     // the block size a request gets (512 multiple, >= 512)
int64_t alloc_segment_size(int64_t rounded); // the segment a new cudaMalloc makes for a request
bool alloc_is_small(int64_t rounded);        // small pool (<= 1 MiB) or large

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // bytes in allocated blocks (rounded, split remainders kept)
  int64_t requested_bytes = 0;       // bytes the callers asked for
  int64_t reserved_bytes = 0;        // bytes in segments (cudaMalloc'd or mapped)
  int64_t peak_allocated_bytes = 0;  // since construction or reset_peaks()
  int64_t peak_requested_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t segments = 0;              // segments created (expandable: page mappings)
  int64_t alloc_retries = 0;         // times a new segment did not fit and the cache was freed
  int64_t over_capacity = 0;         // segments made beyond the capacity even after the retry
};

// planner3 (issue 15): the free sets' node store. Nodes of one size (the sets' only size) are
// carved from chunks and recycled through a free list; anything else goes to operator new. A
// reset allocator keeps its chunks, so a planner's dozens of simulations allocate them once.
class AllocNodeArena {
 public:
  void* get(size_t bytes) {
    if (node_ == 0) node_ = (bytes + 15) / 16 * 16;
    if ((bytes + 15) / 16 * 16 != node_) return ::operator new(bytes);
    if (free_ == nullptr) refill();
    void* p = free_;
    free_ = *static_cast<void**>(p);
    return p;
  }
  void put(void* p, size_t bytes) {
    if ((bytes + 15) / 16 * 16 != node_) return ::operator delete(p);
    *static_cast<void**>(p) = free_;
    free_ = p;
  }

 private:
  static constexpr size_t kNodesPerChunk = 4096;
  void refill() {
    chunks_.push_back(std::make_unique<std::byte[]>(node_ * kNodesPerChunk));
    std::byte* c = chunks_.back().get();
    for (size_t i = kNodesPerChunk; i-- > 0;) put(c + i * node_, node_);
  }
  size_t node_ = 0;
  void* free_ = nullptr;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
};

template <class T>
struct AllocNodeAllocator {
  using value_type = T;
  AllocNodeArena* arena;
  explicit AllocNodeAllocator(AllocNodeArena* a) : arena(a) {}
  template <class U>
  AllocNodeAllocator(const AllocNodeAllocator<U>& o) : arena(o.arena) {}  // NOLINT: rebind
  T* allocate(size_t n) { return static_cast<T*>(arena->get(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { arena->put(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const AllocNodeAllocator<U>& o) const { return arena == o.arena; }
};

// Contract: allocate() returns a handle that stays valid until free(handle); every handle is freed
// once. Requests never fail: a segment that does not fit even after the OOM retry is still made
// and counted in over_capacity (PyTorch would raise; the caller judges the fit on reserved bytes).
// One stream: the simulator runs compute and collectives on streams that share tensors, which
// PyTorch's record_stream keeps in the allocating stream's pool.
class CachingAllocator {
 public:
  CachingAllocator(int64_t capacity_bytes, bool expandable);
  // planner3 (issue 15): back to the state of a new CachingAllocator(capacity_bytes, expandable),
  // keeping the vectors' capacity and the free sets' nodes for the next simulation (the planner
  // simulates dozens of plans; faulting their memory in anew cost ~8 % of its time).
  void reset(int64_t capacity_bytes, bool expandable);

  int32_t allocate(int64_t bytes);  // a handle for the block holding `bytes`
  void free(int32_t handle);
  void release_cached();            // empty_cache(): unmaps wholly free segments (or pages)
  void reset_peaks();               // peaks := current values (reset_peak_memory_stats)

  const AllocatorStats& stats() const { return stats_; }
  int64_t block_bytes(int32_t handle) const { return blocks_[handle].size; }  // rounded size
  int64_t block_address(int32_t handle) const { return blocks_[handle].addr; }
  int64_t segment_bytes(int32_t handle) const;  // size of the segment holding the block

 private:
  struct Block {
    int64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;  // 0 while free
    int32_t segment = -1;
    int32_t prev = -1, next = -1;  // neighbours in the segment, by address
    bool allocated = false;
  };
  struct Segment {
    int64_t base = 0;
    int64_t size = 0;   // mapped bytes
    int32_t first = -1, last = -1;
    bool small = false;
    bool live = true;
  };
  using FreeKey = std::tuple<int64_t, int64_t, int32_t>;  // (size, address, block): best fit order

  int32_t new_block();
  void insert_free(int32_t b);
  void erase_free(int32_t b);
  int32_t find_free(bool small, int64_t rounded);
  int32_t new_segment(bool small, int64_t rounded);
  int32_t grow_expandable(bool small, int64_t rounded);
  bool make_room(int64_t bytes);
  void reserve(int64_t bytes, bool fits);
  void note_peaks();

  int64_t capacity_;
  bool expandable_;
  AllocatorStats stats_;
  std::vector<Block> blocks_;
  std::vector<int32_t> spare_blocks_;  // recycled block slots, last freed first
  std::vector<Segment> segments_;
  // planner3 (issue 15): the free sets' nodes come from an arena that reset() keeps (the sets were
  // ~25 % of the planner's time under the caching allocator, much of it malloc and first touch).
  // Held by pointer so that its address, which the sets keep, survives a move of the allocator.
  using FreeSet = std::set<FreeKey, std::less<FreeKey>, AllocNodeAllocator<FreeKey>>;
  std::unique_ptr<AllocNodeArena> pool_ = std::make_unique<AllocNodeArena>();
  FreeSet free_[2] = {FreeSet(AllocNodeAllocator<FreeKey>(pool_.get())),
                      FreeSet(AllocNodeAllocator<FreeKey>(pool_.get()))};  // 0 large, 1 small
  int32_t expandable_segment_[2] = {-1, -1};
  int64_t next_address_ = 0;
  // Segments that are one free block (insert_free; issue 15), one bit per segment id
  // (planner3: a bitmap instead of a std::set, visited in id order by release_cached).
  std::vector<uint64_t> whole_free_;
  int64_t whole_free_count_ = 0;
  size_t whole_free_low_ = 0;  // no bit is set in the words below it
  void set_whole_free(int32_t segment, bool on);
};

}  // namespace sim
