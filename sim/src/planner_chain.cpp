// The chain side of the budget planner (sim/planner.hpp): the model's terms per unit, exact
// evaluation of a plan, the rotor-style dynamic program over the chain, and Revolve's DP.
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>
#include <type_traits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "sim/planner.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sim {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

Cost add(Cost a, Cost b) { return {a.time_ns + b.time_ns, a.flops + b.flops}; }

// ---------------------------------------------------------------------------------------------
// Unit terms of the model (the contract in planner.hpp), exact bytes relative to base_bytes.

// Prefix sums over the chain that the unit terms need.
struct Prefix {
  std::vector<int64_t> fwd_only;  // D_i: sum of fwd_only_bytes of blocks < i
  explicit Prefix(const ChainModel& m) : fwd_only(m.blocks.size() + 1, 0) {
    for (size_t i = 0; i < m.blocks.size(); ++i)
      fwd_only[i + 1] = fwd_only[i] + m.blocks[i].fwd_only_bytes;
  }
};

struct UnitTerms {
  int64_t local = 0;  // peak above the held bytes of earlier units
  int64_t held = 0;
  Cost cost;
};

UnitTerms single_terms(const ChainModel& m, const Prefix& p, int64_t i, PlanOption o) {
  const OptionRow& r = m.blocks[static_cast<size_t>(i)].single[static_cast<size_t>(o)];
  return {std::max(p.fwd_only[static_cast<size_t>(i)] + r.fwd_bytes, r.bwd_bytes), r.held_bytes,
          r.cost};
}

// A segment [a, b] grown one block at a time (extend), so that a scan over b is linear.
class SegmentTerms {
 public:
  SegmentTerms(const ChainModel& m, const Prefix& p, int64_t a) : m_(m), a_(a) {
    fwd_base_ = p.fwd_only[static_cast<size_t>(a)];
  }
  // Adds block b = last + 1 and returns the terms of [a, b].
  UnitTerms extend() {
    const int64_t b = a_ + len_;
    const BlockCosts& c = m_.blocks[static_cast<size_t>(b)];
    const bool head = len_ == 0;
    fwd_peak_ = std::max(fwd_peak_, fwd_base_ + fwd_held_ + (head ? c.seg_head_fwd : c.seg_inner_fwd));
    fwd_held_ += head ? c.seg_head_fwd_held : c.seg_inner_fwd_held;
    held_ += head ? c.seg_head_held : c.seg_inner_held;
    // Recompute and backward of block b with the recomputed blocks a..b-1 below it.
    rc_peak_ = std::max(rc_peak_, recomputed_ + c.seg_recompute);
    bwd_peak_ = std::max(bwd_peak_, recomputed_ + c.seg_bwd);
    recomputed_ += c.seg_recomputed;
    if (len_ > 0) {
      inner_cost_ = add(inner_cost_, prev_inner_);  // block b - 1 is now inner
      final_inner_ = add(final_inner_, prev_final_);  // planner8
    }
    prev_inner_ = c.seg_inner_cost;
    prev_final_ = final_inner_cost(c);  // planner8
    ++len_;
    UnitTerms t;
    // The recompute runs with the gradients live before b's backward (seg_grad_state of b).
    t.local = std::max({fwd_peak_, rc_peak_ + c.seg_grad_state, bwd_peak_});
    t.held = held_;
    // planner8: the segment that ends at the chain's last block is recomputed first in
    // backward, its inner blocks at their seg_final_inner_cost
    t.cost = add(b + 1 == static_cast<int64_t>(m_.blocks.size()) ? final_inner_ : inner_cost_,
                 c.seg_last_cost);
    return t;
  }
  // The part of the terms that only grows with b (the gradient state may shrink).
  int64_t growing() const { return std::max({fwd_peak_, bwd_peak_, held_}); }

 private:
  const ChainModel& m_;
  int64_t a_ = 0, len_ = 0;
  int64_t fwd_base_ = 0, fwd_held_ = 0, fwd_peak_ = std::numeric_limits<int64_t>::min();
  int64_t held_ = 0, recomputed_ = 0;
  int64_t rc_peak_ = std::numeric_limits<int64_t>::min(), bwd_peak_ = rc_peak_;
  Cost inner_cost_, prev_inner_;
  Cost final_inner_, prev_final_;  // planner8
};

int64_t head_local(const ChainModel& m, const Prefix& p) {
  return std::max(p.fwd_only.back() + m.head_fwd_bytes, m.head_bwd_bytes);
}

int64_t ceil_slots(int64_t bytes, int64_t slot) {
  return bytes <= 0 ? 0 : bytes / slot + (bytes % slot != 0 ? 1 : 0);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ChainEval evaluate_chain(const ChainModel& m, const std::vector<ChainUnit>& units) {
  const Prefix p(m);
  ChainEval e;
  e.peak_bytes = m.outer_bytes;
  int64_t held = 0, next = 0;
  for (const ChainUnit& u : units) {
    if (u.first != next || u.last < u.first || (!u.segment && u.last != u.first))
      throw std::logic_error("evaluate_chain: units must be consecutive blocks");
    UnitTerms t;
    if (u.segment) {
      SegmentTerms s(m, p, u.first);
      for (int64_t b = u.first; b <= u.last; ++b) t = s.extend();
    } else {
      t = single_terms(m, p, u.first, u.option);
    }
    e.peak_bytes = std::max(e.peak_bytes, held + t.local);
    held += t.held;
    e.cost = add(e.cost, t.cost);
    next = u.last + 1;
  }
  if (next != static_cast<int64_t>(m.blocks.size()))
    throw std::logic_error("evaluate_chain: units must cover every block");
  e.peak_bytes = std::max(e.peak_bytes, held + head_local(m, p));
  return e;
}

// Issue 15 (planner at scale): evaluate_chain's peak of every:k for every k at once. A segment
// [a, e]'s terms (SegmentTerms) are maxima over its blocks of prefix sums, so with the prefix
// sums below and a sparse table of range maxima each segment costs O(1): sum over k of n / k
// segments, O(n log n) in all, where evaluating every k with evaluate_chain is O(n^2). Same
// integer arithmetic as SegmentTerms, regrouped (exact; tests/test_planner.cpp holds it equal to
// evaluate_chain for every k).
std::vector<int64_t> every_k_model_peaks(const ChainModel& m) {
  const int64_t n = static_cast<int64_t>(m.blocks.size());
  std::vector<int64_t> out(static_cast<size_t>(n + 1), 0);
  if (n == 0) return out;
  const Prefix p(m);
  const auto at = [&](int64_t b) -> const BlockCosts& { return m.blocks[static_cast<size_t>(b)]; };
  // FI: inner blocks' forward-held bytes, RC: recomputed bytes, HI: inner blocks' held bytes,
  // each summed over blocks < i.
  std::vector<int64_t> fi(static_cast<size_t>(n + 1), 0), rc = fi, hi = fi;
  for (int64_t b = 0; b < n; ++b) {
    const size_t u = static_cast<size_t>(b);
    fi[u + 1] = fi[u] + at(b).seg_inner_fwd_held;
    rc[u + 1] = rc[u] + at(b).seg_recomputed;
    hi[u + 1] = hi[u] + at(b).seg_inner_held;
  }
  // Per block b: forward peak as an inner block, recompute and backward peaks, each plus the
  // prefix below b (a segment [a, e] subtracts the prefix at its start).
  struct RangeMax {
    std::vector<std::vector<int64_t>> t;
    explicit RangeMax(std::vector<int64_t> x) {
      t.push_back(std::move(x));
      for (size_t w = 1; 2 * w <= t[0].size(); w *= 2) {
        const std::vector<int64_t>& prev = t.back();
        std::vector<int64_t> next(prev.size() - w);
        for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + w]);
        t.push_back(std::move(next));
      }
    }
    int64_t max(int64_t lo, int64_t hi_incl) const {  // lo <= hi_incl
      const size_t len = static_cast<size_t>(hi_incl - lo + 1);
      size_t lvl = 0;
      while ((size_t{2} << lvl) <= len) ++lvl;
      const std::vector<int64_t>& r = t[lvl];
      return std::max(r[static_cast<size_t>(lo)], r[static_cast<size_t>(hi_incl) + 1 - (size_t{1} << lvl)]);
    }
  };
  std::vector<int64_t> xf(static_cast<size_t>(n)), xr = xf, xb = xf;
  for (int64_t b = 0; b < n; ++b) {
    const size_t u = static_cast<size_t>(b);
    xf[u] = fi[u] + at(b).seg_inner_fwd;
    xr[u] = rc[u] + at(b).seg_recompute;
    xb[u] = rc[u] + at(b).seg_bwd;
  }
  const RangeMax mf(std::move(xf)), mr(std::move(xr)), mb(std::move(xb));
  const int64_t head = head_local(m, p);
  for (int64_t k = 1; k <= n; ++k) {
    int64_t peak = m.outer_bytes, held = 0;
    for (int64_t a = 0; a < n; a += k) {
      const int64_t e = std::min(a + k, n) - 1;
      const BlockCosts& c = at(a);
      const size_t ua = static_cast<size_t>(a);
      int64_t fwd = p.fwd_only[ua] + c.seg_head_fwd;
      if (e > a)
        fwd = std::max(fwd, p.fwd_only[ua] + c.seg_head_fwd_held - fi[ua + 1] + mf.max(a + 1, e));
      const int64_t rcp = mr.max(a, e) - rc[ua] + at(e).seg_grad_state;
      const int64_t bwd = mb.max(a, e) - rc[ua];
      peak = std::max(peak, held + std::max({fwd, rcp, bwd}));
      held += c.seg_head_held + hi[static_cast<size_t>(e) + 1] - hi[ua + 1];
    }
    out[static_cast<size_t>(k)] = std::max(peak, held + head);
  }
  return out;
}

ChainModel forward_view(const ChainModel& m) {
  ChainModel v = m;
  for (BlockCosts& c : v.blocks) {
    for (OptionRow& o : c.single) o.held_bytes = o.fwd_held_bytes;
    c.seg_head_held = c.seg_head_fwd_held;
    c.seg_inner_held = c.seg_inner_fwd_held;
    c.fwd_only_bytes = 0;
  }
  return v;
}

int64_t slot_bytes_for(int64_t budget_bytes, int64_t n_blocks) {
  int64_t slot = kMiB;
  while (budget_bytes / slot > kMaxSlots || (n_blocks + 1) * (budget_bytes / slot) > kMaxCells)
    slot *= 2;
  return slot;
}

namespace {

// The suffix dynamic program. Row a, slot m: the least cost of covering blocks [a, n) when m
// slots are left above the held bytes of blocks < a. Choice codes: 0 none, 1 + option for a
// single block, kSegCode + (length - 1) for a segment.
constexpr int32_t kSegCode = 1 + kPlanOptionCount;

struct DpEntry {
  int64_t j;
  Cost value;
};

// planner6 (issue 15): uninitialised storage of trivially copyable T in one block aligned to
// 2 MiB and, on Linux, advised for transparent huge pages (THP is madvise-only here). Advice
// only: on the machine of BENCHMARKS.md the kernel granted none (AnonHugePages stayed 0 kB), so
// the measured gain is the ring layout's alone. Grows only; contents are not kept across resize
// (every entry is written before it is read).
template <class T>
class HugeBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  HugeBuffer() = default;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  ~HugeBuffer() { std::free(data_); }
  void resize(size_t n) {
    if (n <= cap_) return;
    constexpr size_t kAlign = size_t{2} << 20;
    const size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);  // advice only: a refusal leaves 4 KiB pages
#endif
    std::free(data_);
    data_ = static_cast<T*>(p);
    cap_ = bytes / sizeof(T);
  }
  T* data() { return data_; }

 private:
  T* data_ = nullptr;
  size_t cap_ = 0;
};

// The DP's tables, kept across the passes of one solve_chain: the first pass faults the pages in,
// the later ones reuse them.
// planner7 (issue 15): the window's stacks are read only while a table is built, so one set
// (WindowWorkspace) serves the rounded-down and rounded-up tables of a ChainScratch: its ring
// block (~40 MB at 1,000 blocks) is faulted in once, not once per table.
struct WindowWorkspace {
  std::vector<std::vector<DpEntry>> stacks;
  // planner4 (issue 15): per stack, its back entry's value (push compares with it without
  // touching the stack's own memory) and the index of the last answer of window's search.
  std::vector<Cost> back;
  std::vector<int32_t> finger;
  // planner5 (issue 15): per stack, its front entry's j (the query compares with it first; read
  // from the stack's own memory it was a cache miss per slot and row, ~20 % of the DP's time).
  std::vector<int64_t> front;
  // planner6 (issue 15): the stacks as ring buffers in one block of memory (see RingStack).
  HugeBuffer<DpEntry> ring;
  std::vector<int32_t> ring_head, ring_size;
};
struct DpWorkspace {
  std::vector<int64_t> time, flops;
  std::vector<int32_t> choice;
  WindowWorkspace* window = nullptr;  // planner7: shared (see WindowWorkspace)
};

// planner6 (issue 15): the two layouts of the window's per-slot stacks, used through the same
// members (window_t is a template over them). VecStack: one std::vector per slot (each its own
// allocation, grown to as many entries as the chain has blocks when nothing pops). RingStack: a
// ring of R entries per slot, all slots in one block of memory (huge pages where the kernel
// grants them: madvise), R a power of two above the longest segment any row reads (lmax); the
// entries whose j is above a + lmax are never read again (no later row's bound reaches them), so
// they are dropped from the front before each push and a stack never holds more than lmax.
// planner7 (issue 15): the rings are interleaved by position (entry r of slot s at
// r * (slots + 1) + s, `stride`), not one block per slot: neighbouring slots' stacks have
// nearly the same sizes, so one row's pushes and queries walk the block nearly sequentially
// (one 4 KiB page per slot and row before: a TLB miss each).
struct VecStack {
  std::vector<DpEntry>& v;
  int64_t size() const { return static_cast<int64_t>(v.size()); }
  bool empty() const { return v.empty(); }
  const DpEntry& operator[](int64_t i) const { return v[static_cast<size_t>(i)]; }
  const DpEntry& back() const { return v.back(); }
  void pop_back() { v.pop_back(); }
  void push_back(const DpEntry& e) { v.push_back(e); }
};
struct RingStack {
  DpEntry* base;
  int32_t& head;
  int32_t& n;
  int32_t mask;
  size_t stride;
  int64_t size() const { return n; }
  bool empty() const { return n == 0; }
  const DpEntry& operator[](int64_t i) const { return base[static_cast<size_t>((head + i) & mask) * stride]; }
  const DpEntry& back() const { return base[static_cast<size_t>((head + n - 1) & mask) * stride]; }
  void pop_back() { --n; }
  void push_back(const DpEntry& e) { base[static_cast<size_t>((head + n) & mask) * stride] = e, ++n; }
  void pop_front() { head = (head + 1) & mask, --n; }
};

class ChainDp {
 public:
  // round_up: every term rounded up to slots, so that every plan found fits in exact bytes;
  // otherwise rounded down, so that every plan that fits in exact bytes is considered.
  ChainDp(const ChainModel& m, int64_t slot, bool round_up, bool window, DpWorkspace& ws)
      : m_(m), p_(m), n_(static_cast<int64_t>(m.blocks.size())), slot_(slot), up_(round_up),
        allow_window_(window), time_(ws.time), flops_(ws.flops), choice_(ws.choice),
        stacks_(ws.window->stacks), back_(ws.window->back), finger_(ws.window->finger),
        front_(ws.window->front), ws_(*ws.window) {}

  // Fills the tables for every budget of up to `slots` slots (issue 15: one table answers every
  // lower budget with the same slot size, since g[0][s] is the optimum with s slots; row a's
  // values for s slots do not depend on the table's width).
  void build(int64_t slots) {
    built_ = slots;
    slots_ = slots;
    if (slots_ < 0) return;
    const size_t w = static_cast<size_t>(slots_ + 1);
    // Block 0 is never an inner block.
    window_ = allow_window_ && n_ > 0 &&
              std::all_of(m_.blocks.begin() + 1, m_.blocks.end(),
                          [](const BlockCosts& c) { return c.seg_inner_held == 0; });
    prefix_inner_.assign(static_cast<size_t>(n_ + 1), Cost{});
    for (int64_t i = 0; i < n_; ++i)
      prefix_inner_[static_cast<size_t>(i + 1)] =
          add(prefix_inner_[static_cast<size_t>(i)], m_.blocks[static_cast<size_t>(i)].seg_inner_cost);
    // planner7 (issue 15): whether every row's segment needs are monotone in the segment's end
    // (row()'s `monotone`), found in the pre-pass below; then no row reads a row other than the
    // next one (the window keeps the values it needs in its stacks), so the values are kept in
    // two rows that alternate (rolling_) instead of n + 1.
    bool all_monotone = false;
    if (window_) {
      // planner6 (issue 15): the longest segment any row reads (row()'s `locals`), which sizes
      // the ring stacks; when R x (slots + 1) entries would exceed kMaxRingEntries, the vectors.
      int64_t lmax = 0;
      all_monotone = true;
      for (int64_t a = 0; a < n_; ++a) {
        SegmentTerms seg(m_, p_, a);
        int64_t len = 0, last = 0;
        for (int64_t b = a; b < n_; ++b, ++len) {
          const UnitTerms t = seg.extend();
          if (rs(seg.growing()) > slots_) break;
          // planner7: the same test as row()'s.
          const int64_t lo = std::max(rs(t.local), rs(t.held));
          if (len > 0 && lo < last) all_monotone = false;
          last = lo;
        }
        lmax = std::max(lmax, len);
      }
      int64_t r = 1;
      while (r < lmax + 1) r *= 2;
      lmax_ = lmax;
      ring_cap_ = r;
      ring_ = r * (slots_ + 1) <= kMaxRingEntries;
      if (ring_) {
        ws_.ring.resize(static_cast<size_t>(r * (slots_ + 1)));
        ws_.ring_head.assign(static_cast<size_t>(slots_ + 1), 0);
        ws_.ring_size.assign(static_cast<size_t>(slots_ + 1), 0);
      } else {
        stacks_.resize(static_cast<size_t>(slots_ + 1));
        for (auto& st : stacks_) st.clear();
      }
      back_.assign(static_cast<size_t>(slots_ + 1), Cost{});
      finger_.assign(static_cast<size_t>(slots_ + 1), 0);
      front_.assign(static_cast<size_t>(slots_ + 1), 0);
    }
    rolling_ = window_ && all_monotone;
    // planner5 (issue 15): each row is set to its initial values (kInf, 0, 0) just before it is
    // filled, while it is in cache, instead of by a pass over the whole table first (at 1,000
    // blocks, 312 MB written twice per table); resize writes only what the vectors never held.
    time_.resize(static_cast<size_t>(rolling_ ? 2 : n_ + 1) * w);
    flops_.resize(time_.size());
    choice_.resize(static_cast<size_t>(n_) * w);
    clear_row(n_);
    const int64_t head = rs(head_local(m_, p_));
    head_slots_ = head;  // planner8: relax_final
    for (int64_t s = head; s <= slots_; ++s) time_[vidx(n_, s)] = 0, flops_[vidx(n_, s)] = 0;
    for (int64_t a = n_ - 1; a >= 0; --a) {
      clear_row(a);
      row(a);
    }
  }
  int64_t built() const { return built_; }
  void invalidate() { built_ = -1; }

  // The plan for `budget` bytes (at most built() slots): the least-cost one, or the one of least
  // memory (ties: least cost) when least_memory.
  ChainSolution extract(int64_t budget, bool least_memory) const {
    ChainSolution sol;
    sol.slot_bytes = slot_;
    const int64_t slots = budget < 0 ? -1 : budget / slot_;
    sol.slots = slots;
    if (slots < 0 || rs(m_.outer_bytes) > slots) return sol;
    if (slots > built_) throw std::logic_error("ChainDp::extract: budget beyond the table");
    int64_t start = -1;
    if (least_memory) {
      for (int64_t s = 0; s <= slots && start < 0; ++s)
        if (time_[vidx(0, s)] != kInf) start = s;
    } else if (time_[vidx(0, slots)] != kInf) {
      start = slots;
    }
    if (start < 0) return sol;
    sol.feasible = true;
    sol.cost = {time_[vidx(0, start)], flops_[vidx(0, start)]};
    for (int64_t a = 0, s = start; a < n_;) {
      const int32_t code = choice_[idx(a, s)];
      ChainUnit u;
      u.first = a;
      UnitTerms t;
      if (code >= kSegCode) {
        u.segment = true;
        u.last = a + (code - kSegCode);
        SegmentTerms seg(m_, p_, a);
        for (int64_t b = a; b <= u.last; ++b) t = seg.extend();
      } else {
        u.last = a;
        u.option = static_cast<PlanOption>(code - 1);
        t = single_terms(m_, p_, a, u.option);
      }
      sol.units.push_back(u);
      s -= rs(t.held);
      a = u.last + 1;
    }
    sol.model_peak_bytes = evaluate_chain(m_, sol.units).peak_bytes;
    return sol;
  }

 private:
  int64_t rs(int64_t bytes) const {
    if (bytes <= 0) return 0;
    return up_ ? ceil_slots(bytes, slot_) : bytes / slot_;
  }
  size_t idx(int64_t a, int64_t s) const {
    return static_cast<size_t>(a) * static_cast<size_t>(slots_ + 1) + static_cast<size_t>(s);
  }
  // planner7 (issue 15): the index of row a's value at s: row a % 2 of two when rolling_.
  size_t vidx(int64_t a, int64_t s) const { return idx(rolling_ ? (a & 1) : a, s); }
  // planner7 (issue 15): only the times are reset. A cell's FLOPs and choice are read only
  // where its time is finite (relax and the window compare FLOPs only on equal finite times;
  // extract follows choices from a finite cell through finite cells), and every finite time is
  // written together with its FLOPs and choice.
  void clear_row(int64_t a) {
    const size_t w = static_cast<size_t>(slots_ + 1);
    std::fill_n(time_.begin() + static_cast<std::ptrdiff_t>(vidx(a, 0)), w, kInf);
  }

  // g[a][s] = min(cost + g[next][s - held]) over s >= local.
  // planner8: relax(a, n, t, code) against the last row as build() set it.
  void relax_final(int64_t a, const UnitTerms& t, int32_t code) {
    const int64_t h = rs(t.held);
    const int64_t from = std::max({rs(t.local), h, head_slots_ + h});
    int64_t* ct = &time_[vidx(a, 0)];
    int64_t* cf = &flops_[vidx(a, 0)];
    int32_t* ch = &choice_[idx(a, 0)];
    for (int64_t s = from; s <= slots_; ++s)
      if (t.cost.time_ns < ct[s] || (t.cost.time_ns == ct[s] && t.cost.flops < cf[s]))
        ct[s] = t.cost.time_ns, cf[s] = t.cost.flops, ch[s] = code;
  }

  void relax(int64_t a, int64_t next, const UnitTerms& t, int32_t code) {
    const int64_t lo = rs(t.local), h = rs(t.held);
    const int64_t from = std::max(lo, h);
    if (from > slots_) return;
    // planner4: rows a and next never overlap, and nothing here writes the bounds or the costs
    // added, so they live in registers (the loop reloaded slots_ after every store).
    int64_t* __restrict ct = &time_[vidx(a, 0)];
    int64_t* __restrict cf = &flops_[vidx(a, 0)];
    int32_t* __restrict ch = &choice_[idx(a, 0)];
    const int64_t* __restrict nt = &time_[vidx(next, 0)] - h;
    const int64_t* __restrict nf = &flops_[vidx(next, 0)] - h;
    const int64_t end = slots_, dt = t.cost.time_ns, df = t.cost.flops;
    for (int64_t s = from; s <= end; ++s) {
      const int64_t n_t = nt[s];
      if (n_t == kInf) continue;
      const int64_t tt = n_t + dt;
      if (tt > ct[s]) continue;
      const int64_t ff = nf[s] + df;
      if (tt < ct[s] || ff < cf[s]) ct[s] = tt, cf[s] = ff, ch[s] = code;
    }
  }

  void row(int64_t a) {
    for (int o = 0; o < kPlanOptionCount; ++o) {
      const PlanOption opt = static_cast<PlanOption>(o);
      if (!m_.blocks[static_cast<size_t>(a)].single[static_cast<size_t>(o)].available) continue;
      relax(a, a + 1, single_terms(m_, p_, a, opt), 1 + o);
    }
    // Segments [a, b]. With the window, the slots each length needs are collected and the
    // transitions are taken from the stacks; a start whose needs are not monotone in b (a
    // shrinking gradient state can make a longer segment need less) is relaxed one by one.
    std::vector<int64_t> locals;
    bool monotone = true;
    int64_t held = 0;
    SegmentTerms seg(m_, p_, a);
    UnitTerms final_t;  // planner8: the segment [a, n - 1], relaxed outside the window
    bool has_final = false;
    for (int64_t b = a; b < n_; ++b) {
      const UnitTerms t = seg.extend();
      if (rs(seg.growing()) > slots_) break;  // no longer segment from a fits either
      const int64_t lo = std::max(rs(t.local), rs(t.held));
      if (window_) {
        monotone = monotone && (locals.empty() || lo >= locals.back());
        locals.push_back(lo);
        held = rs(t.held);
        if (b == n_ - 1) final_t = t, has_final = true;
      } else if (lo <= slots_) {
        relax(a, b + 1, t, kSegCode + static_cast<int32_t>(b - a));
      }
    }
    if (!window_) return;
    // planner4 (issue 15): j = a + 1 is pushed and the window read in one pass over the slots
    // (the stack read at s, s - held, was pushed held slots earlier in the same pass, so its
    // memory is still in cache; two passes touched every stack twice per row).
    if (ring_)
      window_t<RingStack>(a, locals, held, monotone);
    else
      window_t<VecStack>(a, locals, held, monotone);
    // planner8 (issue 15): the window prices [a, b] as P(b) - P(a) + last(b); the segment that
    // ends at the chain's last block has inner costs of its own (seg_final_inner_cost), so it
    // is never pushed (push skips j = n) and is relaxed here against the last row, g[n][s] = 0
    // for s >= the head's slots (build()), which a rolling table no longer holds.
    if (has_final) relax_final(a, final_t, kSegCode + static_cast<int32_t>(n_ - 1 - a));
    if (monotone) return;
    SegmentTerms again(m_, p_, a);
    for (int64_t b = a; b < a + static_cast<int64_t>(locals.size()); ++b) {
      const UnitTerms t = again.extend();
      if (std::max(rs(t.local), rs(t.held)) <= slots_)
        relax(a, b + 1, t, kSegCode + static_cast<int32_t>(b - a));
    }
  }

  // Segment transitions by a sliding-window minimum (repeated blocks make it pay: the scan is
  // O(n * K * slots) for segments of up to K blocks, this O(n * slots * log K)). Valid when no
  // inner block of a segment holds anything, so a segment from a holds a's head bytes whatever
  // its end. A segment [a, b] costs P(b) - P(a) + last(b), P the prefix sum of inner costs, so
  // the candidate of end b, j = b + 1, is value(j) = P(b) + last(b) + g[j][s'], s' = s - held,
  // less P(a). For every s' a stack holds the j pushed so far (j > a) that no smaller j
  // dominates (smaller j, value no larger: whenever j's segment fits, the shorter one fits too,
  // since a start's needs are monotone in b where the window is used); values strictly fall as
  // j grows, so the best j <= a + kmax(s) is the largest such, found by a search from the last
  // answer (planner4; a binary search before).
  using Entry = DpEntry;
  template <class S>
  S stack(int64_t s);
  template <class S>
  void window_t(int64_t a, const std::vector<int64_t>& locals, int64_t h, bool query) {
    const int64_t kcap = query ? static_cast<int64_t>(locals.size()) : 0;
    const int64_t j = a + 1;  // pushed at every s before the query
    const Cost base = add(prefix_inner_[static_cast<size_t>(a)], m_.blocks[static_cast<size_t>(a)].seg_last_cost);
    const Cost pa = prefix_inner_[static_cast<size_t>(a)];
    int64_t k = 0;  // segments of lengths 1..k fit in s slots
    int64_t* ct = &time_[vidx(a, 0)];
    int64_t* cf = &flops_[vidx(a, 0)];
    int32_t* ch = &choice_[idx(a, 0)];
    // planner7 (issue 15): no software prefetch (planner4 prefetched each stack's back and
    // finger entries 16 slots ahead, when each stack had its own memory): with the rings
    // interleaved by position, 75 % of pushes at 1,000 blocks land next to the previous slot's
    // and the query's finger moves by at most two entries, so the accesses are sequential and
    // the prefetches cost ~8 % of the DP's time.
    for (int64_t s = 0; s <= slots_; ++s) {
      push<S>(j, s, base, a);
      while (k < kcap && locals[static_cast<size_t>(k)] <= s) ++k;
      if (k == 0 || s - h < 0) continue;
      const S st = stack<S>(s - h);
      // st is ordered by decreasing j (back = smallest j); find the largest j <= a + k, the
      // first index whose j is in reach. planner4 (issue 15): searched from the index this
      // stack answered last (the bound a + k moves by about one block per row, so the answer
      // is at or next to it), galloping away from it; the same index as a binary search over
      // the whole stack (which cost ~40 % of the DP in cache misses and mispredicted branches).
      const int64_t size = static_cast<int64_t>(st.size());
      if (size == 0) continue;
      int32_t& finger = finger_[static_cast<size_t>(s - h)];
      const int64_t found = front_[static_cast<size_t>(s - h)] <= a + k ? 0  // every j in reach
                            : first_in_reach(st, std::min<int64_t>(finger, size - 1), a + k);
      if (found == size) continue;
      finger = static_cast<int32_t>(found);
      const Entry* it = &st[found];
      const Cost cost = {it->value.time_ns - pa.time_ns, it->value.flops - pa.flops};
      if (cost.time_ns < ct[s] || (cost.time_ns == ct[s] && cost.flops < cf[s]))
        ct[s] = cost.time_ns, cf[s] = cost.flops,
        ch[s] = kSegCode + static_cast<int32_t>(it->j - 1 - a);
    }
  }
  // Pushes j (the segment ending at j - 1) onto the stack of s; base: P(j - 1) + last(j - 1).
  template <class S>
  void push(int64_t j, int64_t s, Cost base, int64_t a) {
    if (j == n_) return;  // planner8: the segment ending at the last block: relax_final
    const size_t i = vidx(j, s);  // j = a + 1: the next row
    if (time_[i] == kInf) return;
    const Cost v = {time_[i] + base.time_ns, flops_[i] + base.flops};
    S st = stack<S>(s);
    if constexpr (std::is_same_v<S, RingStack>) {
      // planner6: entries above a + lmax_ are never read again (no bound reaches them; while
      // in the stack they are out of every bound's reach, as in the vectors); dropped, in one
      // run from the front, only when the ring is full (it then holds at least one: at most
      // lmax_ - 1 below them).
      if (st.size() == ring_cap_) {
        int32_t dropped = 0;
        while (!st.empty() && st[0].j > a + lmax_) st.pop_front(), ++dropped;
        int32_t& finger = finger_[static_cast<size_t>(s)];
        finger = std::max(0, finger - dropped);  // the same entry: a search start only
        if (!st.empty()) front_[static_cast<size_t>(s)] = st[0].j;
      }
    }
    // Dominated by the shorter j. planner4: the back's value is read from back_ (contiguous
    // over s), the stack itself only when it pops.
    Cost& top = back_[static_cast<size_t>(s)];
    if (!st.empty() && !(top < v)) {
      st.pop_back();
      while (!st.empty() && !(st.back().value < v)) st.pop_back();
    }
    st.push_back({j, v});
    top = v;
    if (st.size() == 1) front_[static_cast<size_t>(s)] = j;
  }

  // The first index of `st` (j decreasing with the index) whose j is at most `bound`, or
  // st.size(): galloping from `from` towards the answer, then a binary search in the bracket.
  template <class S>
  static int64_t first_in_reach(const S& st, int64_t from, int64_t bound) {
    const int64_t size = st.size();
    const auto in = [&](int64_t i) { return st[i].j <= bound; };
    int64_t lo = 0, hi = size;  // answer in [lo, hi]: !in(lo - 1), in(hi) (or hi == size)
    if (in(from)) {
      hi = from;
      for (int64_t step = 1;; step *= 2) {
        const int64_t i = hi - step;
        if (i < 0) { lo = 0; break; }
        if (!in(i)) { lo = i + 1; break; }
        hi = i;
      }
    } else {
      lo = from + 1;
      for (int64_t step = 1;; step *= 2) {
        const int64_t i = lo - 1 + step;
        if (i >= size) { hi = size; break; }
        if (in(i)) { hi = i; break; }
        lo = i + 1;
      }
    }
    while (lo < hi) {  // in(hi) or hi == size; !in(lo - 1)
      const int64_t mid = lo + (hi - lo) / 2;
      if (in(mid)) hi = mid; else lo = mid + 1;
    }
    return lo;
  }

  const ChainModel& m_;
  Prefix p_;
  int64_t n_ = 0, slot_ = 1, slots_ = 0, built_ = -1;
  bool up_ = true;
  bool allow_window_ = true, window_ = false;
  std::vector<int64_t>& time_;
  std::vector<int64_t>& flops_;
  std::vector<int32_t>& choice_;
  std::vector<std::vector<Entry>>& stacks_;
  std::vector<Cost>& back_;
  std::vector<int32_t>& finger_;
  std::vector<int64_t>& front_;
  std::vector<Cost> prefix_inner_;  // P(i): inner recompute costs of blocks < i
  // planner6 (issue 15): the ring stacks (RingStack), when R x (slots + 1) entries stay within
  // kMaxRingEntries (24 bytes each: 384 MiB at most), else the vectors.
  static constexpr int64_t kMaxRingEntries = int64_t{1} << 24;
  WindowWorkspace& ws_;
  int64_t lmax_ = 0, ring_cap_ = 1;
  bool ring_ = false;
  bool rolling_ = false;  // planner7: two value rows (vidx)
  int64_t head_slots_ = 0;  // planner8: the last row's first finite slot (relax_final)
};

template <>
inline VecStack ChainDp::stack<VecStack>(int64_t s) {
  return {stacks_[static_cast<size_t>(s)]};
}
template <>
inline RingStack ChainDp::stack<RingStack>(int64_t s) {
  const size_t u = static_cast<size_t>(s);
  return {ws_.ring.data() + u, ws_.ring_head[u], ws_.ring_size[u],
          static_cast<int32_t>(ring_cap_ - 1), static_cast<size_t>(slots_ + 1)};
}

// The tables of one model and slot size, kept across budgets (issue 15): the rounded-down and
// rounded-up tables are built on first use at the largest budget asked so far, and every budget
// at or below it is a reconstruction only.
}  // namespace

struct ChainScratch::Buffers {
  WindowWorkspace window;
  DpWorkspace down{{}, {}, {}, &window}, up{{}, {}, {}, &window};
  const void* down_owner = nullptr;  // the ChainDp whose table each holds
  const void* up_owner = nullptr;
};
ChainScratch::ChainScratch() : buffers_(std::make_unique<Buffers>()) {}
ChainScratch::~ChainScratch() = default;

struct ChainSolver::Tables {
  ChainDp down, up;
  Tables(const ChainModel& m, int64_t slot, bool window, ChainScratch& scratch)
      : down(m, slot, false, window, scratch.buffers().down),
        up(m, slot, true, window, scratch.buffers().up) {}
};

ChainSolver::ChainSolver(const ChainModel& model, int64_t slot_bytes, bool window,
                         ChainScratch* scratch)
    : model_(model), slot_(slot_bytes), window_(window), scratch_(scratch) {
  if (slot_bytes < 1) throw std::logic_error("solve_chain: slot_bytes < 1");
}
ChainSolver::~ChainSolver() = default;

ChainSolution ChainSolver::pass(bool up, int64_t budget, bool least_memory) {
  if (!tables_) {
    if (!scratch_) {
      own_scratch_ = std::make_unique<ChainScratch>();
      scratch_ = own_scratch_.get();
    }
    tables_ = std::make_unique<Tables>(model_, slot_, window_, *scratch_);
  }
  ChainDp& dp = up ? tables_->up : tables_->down;
  const void*& owner = up ? scratch_->buffers().up_owner : scratch_->buffers().down_owner;
  if (owner != &dp) dp.invalidate();  // another solver's table is in the scratch now
  const int64_t slots = budget < 0 ? -1 : budget / slot_;
  if (slots > dp.built()) {
    ++builds_;
    dp.build(std::max(slots, built_hint_ / slot_));
    owner = &dp;
  }
  return dp.extract(budget, least_memory);
}

ChainSolution ChainSolver::solve(int64_t budget_bytes) {
  // Rounded down, the DP's feasible set holds every plan that fits in exact bytes, so its
  // optimum is a lower bound; when its plan fits in exact bytes it is the optimum.
  ChainSolution low = pass(false, budget_bytes, false);
  if (!low.feasible) {  // then nothing fits (pplan: a lower bound no cost reaches)
    low.lower_bound = {kInf, kInf};
    return low;
  }
  if (low.model_peak_bytes <= budget_bytes) {
    low.optimal = true;
    return low;
  }
  // Otherwise rounded-down passes on budgets lowered by the overshoot (at most three), and the
  // rounded-up pass (whose plans always fit) when none of them fits.
  const Cost bound = low.cost;
  ChainSolution best;
  int64_t target = budget_bytes;
  ChainSolution probe = low;
  for (int i = 0; i < 3; ++i) {
    target -= std::max(probe.model_peak_bytes - budget_bytes, slot_);
    if (target < 0) break;
    probe = pass(false, target, false);
    if (!probe.feasible) break;
    if (probe.model_peak_bytes <= budget_bytes) {
      best = probe;
      break;
    }
  }
  if (!best.feasible) best = pass(true, budget_bytes, false);
  best.optimal = best.feasible && best.cost == bound;
  best.lower_bound = bound;
  return best;
}

ChainSolution ChainSolver::least_memory(int64_t budget_bytes) { return pass(true, budget_bytes, true); }

ChainSolution solve_chain(const ChainModel& model, int64_t budget_bytes, int64_t slot_bytes,
                          bool window) {
  return ChainSolver(model, slot_bytes, window).solve(budget_bytes);
}

ChainSolution solve_chain_least_memory(const ChainModel& model, int64_t budget_bytes,
                                       int64_t slot_bytes) {
  return ChainSolver(model, slot_bytes).least_memory(budget_bytes);
}

int64_t revolve_steps(int64_t l, int64_t c) {
  if (c < 1 || l < 1) return l < 1 ? 0 : -1;
  // T[i][s]: chain of i steps from a stored input with s slots.
  //   T[1][s] = 0 (the single step is taped and reversed at once);
  //   T[i][1] = T[i-1][1] + (i - 1): advance i - 1 steps from the input, reverse the last step,
  //             and reverse the first i - 1 steps the same way;
  //   T[i][s] = min over 1 <= j < i of j + T[i-j][s-1] + T[j][s]: advance j steps, store the state
  //             in a second slot, reverse the right part with s - 1 slots, then the left part.
  const size_t L = static_cast<size_t>(l), C = static_cast<size_t>(c);
  std::vector<std::vector<int64_t>> T(L + 1, std::vector<int64_t>(C + 1, 0));
  for (size_t i = 2; i <= L; ++i) {
    T[i][1] = T[i - 1][1] + static_cast<int64_t>(i - 1);
    for (size_t s = 2; s <= C; ++s) {
      int64_t best = kInf;
      for (size_t j = 1; j < i; ++j)
        best = std::min(best, static_cast<int64_t>(j) + T[i - j][s - 1] + T[j][s]);
      T[i][s] = best;
    }
  }
  return T[L][C];
}

}  // namespace sim
