// The caching allocator model (sim/src/allocator.cpp) against the rules of PyTorch's
// c10/cuda/CUDACachingAllocator.cpp (REFERENCE.md), and its use by the engine.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "fixtures.hpp"
#include "sim/allocator.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {
constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;
constexpr int64_t kHuge = int64_t{1} << 40;  // capacity that never triggers the OOM retry
}  // namespace

TEST_CASE("sizes round to 512 and pick their pool and segment") {
  CHECK(alloc_round_size(0) == 512);
  CHECK(alloc_round_size(1) == 512);
  CHECK(alloc_round_size(512) == 512);
  CHECK(alloc_round_size(513) == 1024);
  CHECK(alloc_is_small(MiB));
  CHECK_FALSE(alloc_is_small(MiB + 512));
  CHECK(alloc_segment_size(512) == 2 * MiB);
  CHECK(alloc_segment_size(MiB + 512) == 20 * MiB);
  CHECK(alloc_segment_size(10 * MiB - 512) == 20 * MiB);
  CHECK(alloc_segment_size(10 * MiB) == 10 * MiB);
  CHECK(alloc_segment_size(11 * MiB) == 12 * MiB);
}

TEST_CASE("1 B takes a 512 B block of a 2 MiB small segment") {
  CachingAllocator a(kHuge, false);
  const int32_t h = a.allocate(1);
  CHECK(a.block_bytes(h) == 512);
  CHECK(a.segment_bytes(h) == 2 * MiB);
  CHECK(a.stats().allocated_bytes == 512);
  CHECK(a.stats().requested_bytes == 1);
  CHECK(a.stats().reserved_bytes == 2 * MiB);
}

TEST_CASE("1 MiB + 1 B makes a 20 MiB segment, 11 MiB a 12 MiB one") {
  CachingAllocator a(kHuge, false);
  const int32_t h = a.allocate(MiB + 1);
  CHECK(a.block_bytes(h) == MiB + 512);
  CHECK(a.segment_bytes(h) == 20 * MiB);
  CachingAllocator b(kHuge, false);
  const int32_t g = b.allocate(11 * MiB);
  CHECK(b.segment_bytes(g) == 12 * MiB);
  CHECK(b.stats().requested_bytes == 11 * MiB);
}

TEST_CASE("split rule: a large block splits only above a 1 MiB remainder") {
  {
    // 19.5 MiB in a 20 MiB segment leaves 0.5 MiB: no split, the whole block is allocated.
    CachingAllocator a(kHuge, false);
    const int32_t h = a.allocate(19 * MiB + 512 * KiB);
    CHECK(a.segment_bytes(h) == 20 * MiB);
    CHECK(a.block_bytes(h) == 20 * MiB);
    CHECK(a.stats().allocated_bytes == 20 * MiB);
    CHECK(a.stats().requested_bytes == 19 * MiB + 512 * KiB);
  }
  {
    // 11 MiB in a 12 MiB segment: the remainder is exactly 1 MiB, not above it: whole block.
    CachingAllocator a(kHuge, false);
    const int32_t h = a.allocate(11 * MiB);
    CHECK(a.stats().allocated_bytes == 12 * MiB);
    CHECK(a.block_bytes(h) == 12 * MiB);
  }
  {
    // 2 MiB in a 20 MiB segment: split, 18 MiB stays free in the cache and serves the next one.
    CachingAllocator a(kHuge, false);
    const int32_t h = a.allocate(2 * MiB);
    CHECK(a.block_bytes(h) == 2 * MiB);
    const int32_t g = a.allocate(3 * MiB);
    CHECK(a.block_address(g) == a.block_address(h) + 2 * MiB);
    CHECK(a.stats().reserved_bytes == 20 * MiB);
  }
  {
    // Small pool: any remainder of at least 512 B is split off.
    CachingAllocator a(kHuge, false);
    a.allocate(MiB);
    a.allocate(MiB - 512);
    CHECK(a.stats().allocated_bytes == 2 * MiB - 512);
    a.allocate(512);
    CHECK(a.stats().allocated_bytes == 2 * MiB);
    CHECK(a.stats().reserved_bytes == 2 * MiB);
  }
}

TEST_CASE("best fit takes the smallest adequate free block, lowest address among equals") {
  CachingAllocator a(kHuge, false);
  // Three 12 MiB-class segments of their own: 12, 14 and 16 MiB requests, then freed.
  const int32_t s12 = a.allocate(12 * MiB);
  const int32_t s16 = a.allocate(16 * MiB);
  const int32_t s14 = a.allocate(14 * MiB);
  const int64_t addr14 = a.block_address(s14);
  a.free(s12);
  a.free(s16);
  a.free(s14);
  const int64_t reserved = a.stats().reserved_bytes;
  const int32_t h = a.allocate(13 * MiB);  // 14 fits best (16 would too)
  CHECK(a.block_address(h) == addr14);
  CHECK(a.block_bytes(h) == 14 * MiB);     // remainder 1 MiB: not split
  CHECK(a.stats().reserved_bytes == reserved);
}

TEST_CASE("freed neighbours merge within their segment") {
  CachingAllocator a(kHuge, false);
  const int32_t x = a.allocate(4 * MiB);
  const int32_t y = a.allocate(4 * MiB);
  const int32_t z = a.allocate(4 * MiB);
  const int64_t base = a.block_address(x);
  CHECK(a.block_address(z) == base + 8 * MiB);  // one 20 MiB segment, split three times
  a.free(x);
  a.free(z);
  a.free(y);  // x, y, z and the 8 MiB tail are one free block again
  const int32_t w = a.allocate(19 * MiB);
  CHECK(a.block_address(w) == base);
  CHECK(a.block_bytes(w) == 20 * MiB);  // whole segment: remainder 1 MiB is not split
  CHECK(a.stats().reserved_bytes == 20 * MiB);
}

TEST_CASE("OOM retry frees cached segments and tries again") {
  CachingAllocator a(40 * MiB, false);
  const int32_t x = a.allocate(12 * MiB);   // 12 MiB segment
  const int32_t y = a.allocate(14 * MiB);   // 14 MiB segment
  a.free(x);
  a.free(y);
  CHECK(a.stats().reserved_bytes == 26 * MiB);
  const int32_t z = a.allocate(30 * MiB);   // 26 + 30 > 40: both cached segments are released
  CHECK(a.stats().alloc_retries == 1);
  CHECK(a.stats().over_capacity == 0);
  CHECK(a.stats().reserved_bytes == 30 * MiB);
  CHECK(a.segment_bytes(z) == 30 * MiB);
  // Beyond the capacity even after the retry: made anyway, and counted.
  a.allocate(20 * MiB);
  CHECK(a.stats().over_capacity == 1);
  CHECK(a.stats().reserved_bytes == 50 * MiB);
}

TEST_CASE("without pressure segments are never released") {
  CachingAllocator a(kHuge, false);
  for (int i = 0; i < 4; ++i) a.free(a.allocate((12 + 2 * i) * MiB));
  // Each request found only smaller cached blocks: 12 + 14 + 16 + 18 MiB stay reserved.
  CHECK(a.stats().reserved_bytes == 60 * MiB);
  CHECK(a.stats().allocated_bytes == 0);
}

TEST_CASE("expandable segments: reserved is the used bytes rounded up to 2 MiB pages") {
  CachingAllocator a(kHuge, true);
  a.allocate(12 * MiB + 512);
  CHECK(a.stats().reserved_bytes == 14 * MiB);
  a.allocate(3 * MiB);  // the 2 MiB - 512 B free tail plus one more page... split rule applies
  CHECK(a.stats().reserved_bytes == 16 * MiB);
  CachingAllocator b(kHuge, true);
  for (int i = 0; i < 4; ++i) b.free(b.allocate((12 + 2 * i) * MiB));
  // One segment that grows: no stranded segments (compare 60 MiB above).
  CHECK(b.stats().reserved_bytes == 18 * MiB);
  CachingAllocator c(kHuge, true);
  c.allocate(1);
  CHECK(c.stats().reserved_bytes == 2 * MiB);
}

TEST_CASE("the same requests give the same blocks and figures") {
  auto run = [] {
    CachingAllocator a(64 * MiB, false);
    std::vector<int32_t> live;
    std::vector<int64_t> seen;
    uint64_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      if (!live.empty() && (x >> 60) < 7) {
        const size_t k = (x >> 20) % live.size();
        a.free(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        live.push_back(a.allocate(static_cast<int64_t>((x >> 30) % (6 * MiB)) + 1));
        seen.push_back(a.block_address(live.back()));
      }
    }
    seen.push_back(a.stats().peak_reserved_bytes);
    seen.push_back(a.stats().peak_allocated_bytes);
    return seen;
  };
  CHECK(run() == run());
}

// planner3 (issue 15): reset() is what the engine's Workspace does between simulations; a reset
// allocator must replay any sequence exactly as a new one does (addresses, retries, peaks),
// whatever it held before, under pressure (OOM retries) and across both kinds of segments.
TEST_CASE("reset: a reused allocator replays requests as a new one does") {
  auto replay = [](CachingAllocator& a, uint64_t seed) {
    std::vector<int32_t> live;
    std::vector<int64_t> seen;
    uint64_t x = seed;
    for (int i = 0; i < 3000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      if (!live.empty() && (x >> 60) < 7) {
        const size_t k = (x >> 20) % live.size();
        a.free(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        live.push_back(a.allocate(static_cast<int64_t>((x >> 30) % (24 * MiB)) + 1));
        seen.push_back(a.block_address(live.back()));
        seen.push_back(a.stats().reserved_bytes);
      }
    }
    const AllocatorStats& st = a.stats();
    for (int64_t v : {st.peak_reserved_bytes, st.peak_allocated_bytes, st.alloc_retries,
                      st.over_capacity, st.segments, st.requested_bytes})
      seen.push_back(v);
    return seen;
  };
  CachingAllocator reused(kHuge, true);
  (void)replay(reused, 7);  // leave it holding blocks, segments and free sets
  for (const bool expandable : {false, true, false}) {
    for (const int64_t cap : {96 * MiB, kHuge}) {
      CachingAllocator fresh(cap, expandable);
      const std::vector<int64_t> want = replay(fresh, 99);
      reused.reset(cap, expandable);
      CHECK(replay(reused, 99) == want);
      if (!expandable && cap == 96 * MiB) CHECK(fresh.stats().alloc_retries > 0);
    }
  }
}

TEST_CASE("engine: caching keeps the exact peak as requested, reserved >= allocated >= requested") {
  const ModelConfig m = fixtures::gpt2_small();
  const Device dev = fixtures::h100();
  for (const char* st : {"none", "full", "every:2", "block:1", "sqrt", "selective", "sac:mm"}) {
    CAPTURE(st);
    TrainSetup t;
    t.micro_batch = 4;
    const Result exact = simulate(m, t, dev, parse_strategy(st));
    CHECK(exact.peak_requested_bytes == exact.peak_allocated_bytes);
    CHECK(exact.peak_reserved_bytes == exact.peak_allocated_bytes);
    for (AllocatorKind k : {AllocatorKind::kCaching, AllocatorKind::kCachingExpandable}) {
      t.allocator = k;
      const Result r = simulate(m, t, dev, parse_strategy(st));
      CHECK(r.peak_requested_bytes == exact.peak_requested_bytes);
      CHECK(r.peak_allocated_bytes == r.allocator_allocated_peak_bytes);
      CHECK(r.peak_allocated_bytes >= r.peak_requested_bytes);
      CHECK(r.peak_reserved_bytes >= r.peak_allocated_bytes);
      CHECK(r.headroom_bytes == r.device_bytes - r.peak_reserved_bytes - r.cuda_context_bytes -
                                    r.comm_buffer_bytes);
      // Rounding and splitting cost something, but not more than the segments' granularity allows.
      CHECK(r.peak_allocated_bytes < exact.peak_requested_bytes * 11 / 10);
      CHECK(r.end_bytes == r.baseline_bytes);
      const Result again = simulate(m, t, dev, parse_strategy(st));
      CHECK(again.peak_reserved_bytes == r.peak_reserved_bytes);
      CHECK(again.peak_allocated_bytes == r.peak_allocated_bytes);
    }
  }
}

TEST_CASE("engine: the caching timeline's allocated maximum is the reported peak") {
  TrainSetup t;
  t.allocator = AllocatorKind::kCaching;
  SimOptions o;
  o.record_timeline = true;
  const Result r = simulate(fixtures::gpt2_small(), t, fixtures::h100(), parse_strategy("full"), o);
  int64_t max_alloc = 0, max_reserved = 0;
  for (const MemorySample& s : r.timeline) {
    max_alloc = std::max(max_alloc, s.allocated_bytes);
    max_reserved = std::max(max_reserved, s.reserved_bytes);
    CHECK(s.reserved_bytes >= s.allocated_bytes);
  }
  CHECK(max_alloc == r.peak_allocated_bytes);
  CHECK(max_reserved == r.peak_reserved_bytes);
}

TEST_CASE("engine: allocator figures are ordered over varied set-ups, and under pressure") {
  const Device dev = fixtures::h100();
  int ran = 0;
  for (int i = 0; i < 48; ++i) {
    const ModelConfig m = i % 2 ? fixtures::gpt2_small() : fixtures::tiny_llama();
    TrainSetup t;
    t.micro_batch = 1 + i % 3;
    t.seq = 256 << (i % 3);
    t.precision = std::array{Precision::kBf16Mixed, Precision::kBf16Amp, Precision::kFp32}[i % 3];
    t.attention = i % 4 < 2 ? AttentionKind::kStandard : AttentionKind::kFlash;
    if (i % 5 == 0) t.tp = 2;
    if (i % 7 == 0) {
      t.dp = 4;
      t.zero = i % 4;
    }
    const char* st = std::array{"none", "full", "every:2", "selective", "sac:mm"}[i % 5];
    CAPTURE(i);
    CAPTURE(st);
    Result exact;
    try {
      exact = simulate(m, t, dev, parse_strategy(st));
    } catch (const ConfigError&) {
      continue;
    }
    ++ran;
    t.allocator = i % 3 ? AllocatorKind::kCaching : AllocatorKind::kCachingExpandable;
    const Result r = simulate(m, t, dev, parse_strategy(st));
    CHECK(r.peak_requested_bytes == exact.peak_requested_bytes);
    CHECK(r.peak_reserved_bytes >= r.peak_allocated_bytes);
    CHECK(r.peak_allocated_bytes >= r.peak_requested_bytes);
    // A device only just larger than the exact need: the OOM retry runs, nothing breaks, and
    // the fit is judged on reserved bytes.
    Device tight = dev;
    tight.hbm_bytes = exact.peak_requested_bytes + dev.driver_reserved_bytes +
                      dev.cuda_context_bytes + 4 * MiB;
    const Result p = simulate(m, t, tight, parse_strategy(st));
    CHECK(p.peak_requested_bytes == exact.peak_requested_bytes);
    CHECK(p.peak_reserved_bytes >= p.peak_allocated_bytes);
    CHECK(p.fits == (p.peak_reserved_bytes + p.cuda_context_bytes + p.comm_buffer_bytes <=
                     p.device_bytes));
  }
  CHECK(ran > 30);
}
