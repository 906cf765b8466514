// The caching allocator model. Every rule below is PyTorch's, described by behaviour from
// c10/cuda/CUDACachingAllocator.cpp (REFERENCE.md "PyTorch"); none of its code is used.
#include "sim/allocator.hpp"

#include <stdexcept>

namespace sim {

// Requests round up to a multiple of 512 bytes, and nothing is smaller than 512.
int64_t alloc_round_size(int64_t bytes) {
  if (bytes < kAllocMinBlockBytes) return kAllocMinBlockBytes;
  return (bytes + kAllocMinBlockBytes - 1) / kAllocMinBlockBytes * kAllocMinBlockBytes;
}

bool alloc_is_small(int64_t rounded) { return rounded <= kAllocSmallSizeBytes; }

// A new segment: 2 MiB for the small pool; 20 MiB for requests under 10 MiB; larger requests get
// a segment of their own size rounded up to 2 MiB.
int64_t alloc_segment_size(int64_t rounded) {
  if (alloc_is_small(rounded)) return kAllocSmallSegmentBytes;
  if (rounded < kAllocMinLargeAllocBytes) return kAllocLargeSegmentBytes;
  return (rounded + kAllocRoundLargeBytes - 1) / kAllocRoundLargeBytes * kAllocRoundLargeBytes;
}

namespace {
// A block is split only when what remains is worth keeping: in the small pool any remainder of at
// least 512 bytes, in the large pool only a remainder above 1 MiB. Otherwise the caller gets the
// whole block and it all counts as allocated.
bool should_split(bool small, int64_t remaining) {
  return small ? remaining >= kAllocMinBlockBytes : remaining > kAllocSmallSizeBytes;
}
int pool_index(bool small) { return small ? 1 : 0; }
// Expandable segments reserve a large virtual range per pool; these bases keep the two apart.
constexpr int64_t kExpandableBase[2] = {int64_t{1} << 50, int64_t{1} << 51};
}  // namespace

CachingAllocator::CachingAllocator(int64_t capacity_bytes, bool expandable)
    : capacity_(capacity_bytes), expandable_(expandable) {}

void CachingAllocator::reset(int64_t capacity_bytes, bool expandable) {
  capacity_ = capacity_bytes;
  expandable_ = expandable;
  stats_ = AllocatorStats{};
  blocks_.clear();
  spare_blocks_.clear();
  segments_.clear();
  free_[0].clear();
  free_[1].clear();
  expandable_segment_[0] = expandable_segment_[1] = -1;
  next_address_ = 0;
  whole_free_.clear();
  whole_free_count_ = 0;
  whole_free_low_ = 0;
}

void CachingAllocator::set_whole_free(int32_t segment, bool on) {
  const size_t word = static_cast<size_t>(segment) >> 6;
  const uint64_t bit = uint64_t{1} << (segment & 63);
  if (word >= whole_free_.size()) whole_free_.resize(word + 1, 0);
  const bool was = (whole_free_[word] & bit) != 0;
  if (was == on) return;
  whole_free_[word] ^= bit;
  whole_free_count_ += on ? 1 : -1;
  if (on && word < whole_free_low_) whole_free_low_ = word;
}

int32_t CachingAllocator::new_block() {
  if (!spare_blocks_.empty()) {
    const int32_t b = spare_blocks_.back();
    spare_blocks_.pop_back();
    blocks_[b] = Block{};
    return b;
  }
  blocks_.emplace_back();
  return static_cast<int32_t>(blocks_.size() - 1);
}

// A free block without neighbours is its whole segment: what release_cached frees (outside
// expandable segments). Its segment is kept in whole_free_ here (a free block's links do not
// change while it is in the free set), so that release_cached visits only those (issue 15: it
// scanned every segment ever made on each allocation over capacity, quadratic in the blocks).
void CachingAllocator::insert_free(int32_t b) {
  const Block& k = blocks_[b];
  free_[pool_index(segments_[k.segment].small)].insert({k.size, k.addr, b});
  if (!expandable_ && k.prev < 0 && k.next < 0) set_whole_free(k.segment, true);
}

void CachingAllocator::erase_free(int32_t b) {
  const Block& k = blocks_[b];
  auto& pool = free_[pool_index(segments_[k.segment].small)];
  pool.erase(pool.find({k.size, k.addr, b}));  // a free block is always in its pool's set
  if (!expandable_ && k.prev < 0 && k.next < 0) set_whole_free(k.segment, false);
}

// Best fit: the smallest free block of the pool that is large enough, the lowest address among
// equals. Addresses are handed out in segment-creation order, so ties resolve the same way on
// every run.
int32_t CachingAllocator::find_free(bool small, int64_t rounded) {
  auto& pool = free_[pool_index(small)];
  auto it = pool.lower_bound({rounded, INT64_MIN, INT32_MIN});
  if (it == pool.end()) return -1;
  const int32_t b = std::get<2>(*it);
  pool.erase(it);
  if (!expandable_ && blocks_[b].prev < 0 && blocks_[b].next < 0)
    set_whole_free(blocks_[b].segment, false);
  return b;
}

// The OOM retry: when a new segment (or new pages) would exceed the capacity, PyTorch frees every
// cached segment that is wholly unused and tries once more. Segments are never released
// otherwise. Returns false when the room is still missing after the retry.
bool CachingAllocator::make_room(int64_t bytes) {
  if (stats_.reserved_bytes + bytes <= capacity_) return true;
  ++stats_.alloc_retries;
  release_cached();
  return stats_.reserved_bytes + bytes <= capacity_;
}

void CachingAllocator::reserve(int64_t bytes, bool fits) {
  if (!fits) ++stats_.over_capacity;
  stats_.reserved_bytes += bytes;
  ++stats_.segments;
}

int32_t CachingAllocator::new_segment(bool small, int64_t rounded) {
  const int64_t size = alloc_segment_size(rounded);
  reserve(size, make_room(size));
  Segment seg;
  seg.base = next_address_;
  seg.size = size;
  seg.small = small;
  next_address_ += size;
  const int32_t b = new_block();
  const int32_t sid = static_cast<int32_t>(segments_.size());
  blocks_[b].addr = seg.base;
  blocks_[b].size = size;
  blocks_[b].segment = sid;
  seg.first = seg.last = b;
  segments_.push_back(seg);
  return b;
}

// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): one segment per pool
// whose virtual range grows by mapping 2 MiB pages at its end, so free space never strands in a
// separate segment. A request that no free block fits extends the free tail (or a new tail) by
// just enough pages.
int32_t CachingAllocator::grow_expandable(bool small, int64_t rounded) {
  const int p = pool_index(small);
  if (expandable_segment_[p] < 0) {
    Segment seg;
    seg.base = kExpandableBase[p];
    seg.small = small;
    expandable_segment_[p] = static_cast<int32_t>(segments_.size());
    segments_.push_back(seg);
  }
  const int32_t sid = expandable_segment_[p];
  // Pages still missing once the free tail (if any) is used; the retry may shrink that tail.
  auto missing_pages = [&] {
    const int32_t t = segments_[sid].last;
    const int64_t have = t >= 0 && !blocks_[t].allocated ? blocks_[t].size : 0;
    return (rounded - have + kAllocPageBytes - 1) / kAllocPageBytes;
  };
  int64_t pages = missing_pages();
  bool fits = make_room(pages * kAllocPageBytes);
  if (!fits) {
    pages = missing_pages();
    fits = stats_.reserved_bytes + pages * kAllocPageBytes <= capacity_;
  }
  reserve(pages * kAllocPageBytes, fits);
  Segment& seg = segments_[sid];
  const int32_t tail = seg.last;
  const bool tail_free = tail >= 0 && !blocks_[tail].allocated;
  int32_t b = tail;
  if (tail_free) {
    erase_free(tail);
  } else {
    b = new_block();
    blocks_[b].addr = seg.base + seg.size;
    blocks_[b].segment = sid;
    blocks_[b].prev = tail;
    if (tail >= 0) blocks_[tail].next = b;
    if (seg.first < 0) seg.first = b;
    seg.last = b;
  }
  blocks_[b].size += pages * kAllocPageBytes;
  seg.size += pages * kAllocPageBytes;
  return b;
}

int32_t CachingAllocator::allocate(int64_t bytes) {
  if (bytes < 0) throw std::logic_error("allocator: negative request");
  const int64_t rounded = alloc_round_size(bytes);
  const bool small = alloc_is_small(rounded);
  int32_t b = find_free(small, rounded);
  if (b < 0) b = expandable_ ? grow_expandable(small, rounded) : new_segment(small, rounded);
  const int64_t remaining = blocks_[b].size - rounded;
  if (should_split(small, remaining)) {
    const int32_t rest = new_block();  // may reallocate blocks_: index, never hold references
    blocks_[rest].addr = blocks_[b].addr + rounded;
    blocks_[rest].size = remaining;
    blocks_[rest].segment = blocks_[b].segment;
    blocks_[rest].prev = b;
    blocks_[rest].next = blocks_[b].next;
    if (blocks_[b].next >= 0) blocks_[blocks_[b].next].prev = rest;
    else segments_[blocks_[b].segment].last = rest;
    blocks_[b].next = rest;
    blocks_[b].size = rounded;
    insert_free(rest);
  }
  Block& k = blocks_[b];
  k.allocated = true;
  k.requested = bytes;
  stats_.allocated_bytes += k.size;
  stats_.requested_bytes += bytes;
  note_peaks();
  return b;
}

void CachingAllocator::free(int32_t handle) {
  if (handle < 0 || handle >= static_cast<int32_t>(blocks_.size()) || !blocks_[handle].allocated)
    throw std::logic_error("allocator: free of a block that is not allocated");
  stats_.allocated_bytes -= blocks_[handle].size;
  stats_.requested_bytes -= blocks_[handle].requested;
  blocks_[handle].allocated = false;
  blocks_[handle].requested = 0;
  // A freed block merges with a free neighbour on either side within its segment.
  int32_t b = handle;
  const int32_t prev = blocks_[b].prev;
  if (prev >= 0 && !blocks_[prev].allocated) {
    erase_free(prev);
    blocks_[prev].size += blocks_[b].size;
    blocks_[prev].next = blocks_[b].next;
    if (blocks_[b].next >= 0) blocks_[blocks_[b].next].prev = prev;
    else segments_[blocks_[b].segment].last = prev;
    spare_blocks_.push_back(b);
    b = prev;
  }
  const int32_t next = blocks_[b].next;
  if (next >= 0 && !blocks_[next].allocated) {
    erase_free(next);
    blocks_[b].size += blocks_[next].size;
    blocks_[b].next = blocks_[next].next;
    if (blocks_[next].next >= 0) blocks_[blocks_[next].next].prev = b;
    else segments_[blocks_[b].segment].last = b;
    spare_blocks_.push_back(next);
  }
  insert_free(b);
}

// Frees what the cache holds unused: every segment that is one free block; for expandable
// segments the whole free pages at the tail. (PyTorch also unmaps free pages inside an
// expandable segment; only the tail is modeled, so after a retry the model may hold up to the
// interior free pages more than PyTorch.)
void CachingAllocator::release_cached() {
  // Every segment that is one free block, in the order of their ids (as the scan below would).
  // Words below whole_free_low_ are all zero (set_whole_free lowers it when it sets a bit).
  for (size_t w = whole_free_low_; !expandable_ && whole_free_count_ > 0 && w < whole_free_.size();
       ++w) {
    while (whole_free_[w] != 0) {
      const int32_t sid = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(whole_free_[w])));
      Segment& seg = segments_[sid];
      const int32_t tail = seg.last;
      erase_free(tail);  // drops the segment from whole_free_
      stats_.reserved_bytes -= seg.size;
      seg.live = false;
      seg.first = seg.last = -1;
      spare_blocks_.push_back(tail);
    }
  }
  if (!expandable_) {
    whole_free_low_ = whole_free_.size();  // every bit is clear now
    return;
  }
  for (int32_t sid = 0; sid < static_cast<int32_t>(segments_.size()); ++sid) {
    Segment& seg = segments_[sid];
    if (!seg.live || seg.last < 0) continue;
    const int32_t tail = seg.last;
    if (blocks_[tail].allocated) continue;
    if (!expandable_) {
      if (seg.first != tail) continue;
      erase_free(tail);
      stats_.reserved_bytes -= seg.size;
      seg.live = false;
      seg.first = seg.last = -1;
      spare_blocks_.push_back(tail);
      continue;
    }
    const int64_t end = seg.base + seg.size;
    const int64_t first_page =
        seg.base + (blocks_[tail].addr - seg.base + kAllocPageBytes - 1) / kAllocPageBytes *
                       kAllocPageBytes;
    const int64_t unmap = end - first_page;
    if (unmap <= 0) continue;
    erase_free(tail);
    seg.size -= unmap;
    stats_.reserved_bytes -= unmap;
    blocks_[tail].size -= unmap;
    if (blocks_[tail].size == 0) {
      seg.last = blocks_[tail].prev;
      if (seg.last >= 0) blocks_[seg.last].next = -1;
      else seg.first = -1;
      spare_blocks_.push_back(tail);
    } else {
      insert_free(tail);
    }
  }
}

void CachingAllocator::reset_peaks() {
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::note_peaks() {
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  if (stats_.requested_bytes > stats_.peak_requested_bytes)
    stats_.peak_requested_bytes = stats_.requested_bytes;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes)
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

int64_t CachingAllocator::segment_bytes(int32_t handle) const {
  return segments_[blocks_[handle].segment].size;
}

}  // namespace sim
