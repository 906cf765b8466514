// The budget planner (sim/planner.hpp): probes that measure a ChainModel, the rotor-style dynamic
// program over the chain, and the verify-and-tighten loop.
#include "sim/planner.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "sim/error.hpp"
#include "sim/schedule.hpp"
#include "sim/simulate.hpp"

namespace sim {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

BlockMode option_block_mode(PlanOption o) {
  switch (o) {
    case PlanOption::kStore: return BlockMode::kStore;
    case PlanOption::kSelective: return BlockMode::kSelective;
    case PlanOption::kSacMm: return BlockMode::kSacMm;
    case PlanOption::kCount: break;
  }
  return BlockMode::kStore;
}

ClauseMode clause_mode_of(PlanOption o) {
  switch (o) {
    case PlanOption::kStore: return ClauseMode::kNone;
    case PlanOption::kSelective: return ClauseMode::kSelective;
    case PlanOption::kSacMm: return ClauseMode::kSacMm;
    case PlanOption::kCount: break;
  }
  return ClauseMode::kNone;
}

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
    if (len_ > 0) inner_cost_ = add(inner_cost_, prev_inner_);  // block b - 1 is now inner
    prev_inner_ = c.seg_inner_cost;
    ++len_;
    UnitTerms t;
    // The recompute runs with the gradients live before b's backward (seg_grad_state of b).
    t.local = std::max({fwd_peak_, rc_peak_ + c.seg_grad_state, bwd_peak_});
    t.held = held_;
    t.cost = add(inner_cost_, c.seg_last_cost);
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

// The DP's tables, kept across the passes of one solve_chain: the first pass faults the pages in,
// the later ones reuse them.
struct DpWorkspace {
  std::vector<int64_t> time, flops;
  std::vector<int32_t> choice;
  std::vector<std::vector<DpEntry>> stacks;
};

class ChainDp {
 public:
  // round_up: every term rounded up to slots, so that every plan found fits in exact bytes;
  // otherwise rounded down, so that every plan that fits in exact bytes is considered.
  ChainDp(const ChainModel& m, int64_t budget, int64_t slot, bool round_up, bool window,
          DpWorkspace& ws)
      : m_(m), p_(m), n_(static_cast<int64_t>(m.blocks.size())), slot_(slot), up_(round_up),
        allow_window_(window), time_(ws.time), flops_(ws.flops), choice_(ws.choice),
        stacks_(ws.stacks) {
    slots_ = budget < 0 ? -1 : budget / slot;
  }

  ChainSolution solve(bool least_memory) {
    ChainSolution sol;
    sol.slot_bytes = slot_;
    sol.slots = slots_;
    if (slots_ < 0 || rs(m_.outer_bytes) > slots_) return sol;
    const size_t w = static_cast<size_t>(slots_ + 1);
    time_.assign(static_cast<size_t>(n_ + 1) * w, kInf);
    flops_.assign(time_.size(), 0);
    choice_.assign(static_cast<size_t>(n_) * w, 0);
    const int64_t head = rs(head_local(m_, p_));
    for (int64_t s = head; s <= slots_; ++s) time_[idx(n_, s)] = 0, flops_[idx(n_, s)] = 0;
    // Block 0 is never an inner block.
    window_ = allow_window_ && n_ > 0 &&
              std::all_of(m_.blocks.begin() + 1, m_.blocks.end(),
                          [](const BlockCosts& c) { return c.seg_inner_held == 0; });
    prefix_inner_.assign(static_cast<size_t>(n_ + 1), Cost{});
    for (int64_t i = 0; i < n_; ++i)
      prefix_inner_[static_cast<size_t>(i + 1)] =
          add(prefix_inner_[static_cast<size_t>(i)], m_.blocks[static_cast<size_t>(i)].seg_inner_cost);
    if (window_) {
      stacks_.resize(static_cast<size_t>(slots_ + 1));
      for (auto& st : stacks_) st.clear();
    }
    for (int64_t a = n_ - 1; a >= 0; --a) row(a);
    int64_t start = -1;
    if (least_memory) {
      for (int64_t s = 0; s <= slots_ && start < 0; ++s)
        if (time_[idx(0, s)] != kInf) start = s;
    } else if (time_[idx(0, slots_)] != kInf) {
      start = slots_;
    }
    if (start < 0) return sol;
    sol.feasible = true;
    sol.cost = {time_[idx(0, start)], flops_[idx(0, start)]};
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

  // g[a][s] = min(cost + g[next][s - held]) over s >= local.
  void relax(int64_t a, int64_t next, const UnitTerms& t, int32_t code) {
    const int64_t lo = rs(t.local), h = rs(t.held);
    const int64_t from = std::max(lo, h);
    if (from > slots_) return;
    int64_t* ct = &time_[idx(a, 0)];
    int64_t* cf = &flops_[idx(a, 0)];
    int32_t* ch = &choice_[idx(a, 0)];
    const int64_t* nt = &time_[idx(next, 0)] - h;
    const int64_t* nf = &flops_[idx(next, 0)] - h;
    for (int64_t s = from; s <= slots_; ++s) {
      if (nt[s] == kInf) continue;
      const int64_t tt = nt[s] + t.cost.time_ns, ff = nf[s] + t.cost.flops;
      if (tt < ct[s] || (tt == ct[s] && ff < cf[s])) ct[s] = tt, cf[s] = ff, ch[s] = code;
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
    if (window_) push(a + 1);
    std::vector<int64_t> locals;
    bool monotone = true;
    int64_t held = 0;
    SegmentTerms seg(m_, p_, a);
    for (int64_t b = a; b < n_; ++b) {
      const UnitTerms t = seg.extend();
      if (rs(seg.growing()) > slots_) break;  // no longer segment from a fits either
      const int64_t lo = std::max(rs(t.local), rs(t.held));
      if (window_) {
        monotone = monotone && (locals.empty() || lo >= locals.back());
        locals.push_back(lo);
        held = rs(t.held);
      } else if (lo <= slots_) {
        relax(a, b + 1, t, kSegCode + static_cast<int32_t>(b - a));
      }
    }
    if (!window_) return;
    if (monotone) {
      window(a, locals, held);
      return;
    }
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
  // j grows, so the best j <= a + kmax(s) is the largest such, found by binary search.
  using Entry = DpEntry;
  void window(int64_t a, const std::vector<int64_t>& locals, int64_t h) {
    if (locals.empty()) return;
    const int64_t kcap = static_cast<int64_t>(locals.size());
    const Cost pa = prefix_inner_[static_cast<size_t>(a)];
    int64_t k = 0;  // segments of lengths 1..k fit in s slots
    int64_t* ct = &time_[idx(a, 0)];
    int64_t* cf = &flops_[idx(a, 0)];
    int32_t* ch = &choice_[idx(a, 0)];
    for (int64_t s = 0; s <= slots_; ++s) {
      while (k < kcap && locals[static_cast<size_t>(k)] <= s) ++k;
      if (k == 0 || s - h < 0) continue;
      const std::vector<Entry>& st = stacks_[static_cast<size_t>(s - h)];
      // st is ordered by decreasing j (back = smallest j); find the largest j <= a + k.
      auto it = std::lower_bound(st.begin(), st.end(), a + k,
                                 [](const Entry& x, int64_t v) { return x.j > v; });
      if (it == st.end()) continue;
      const Cost cost = {it->value.time_ns - pa.time_ns, it->value.flops - pa.flops};
      if (cost.time_ns < ct[s] || (cost.time_ns == ct[s] && cost.flops < cf[s]))
        ct[s] = cost.time_ns, cf[s] = cost.flops,
        ch[s] = kSegCode + static_cast<int32_t>(it->j - 1 - a);
    }
  }
  void push(int64_t j) {
    const BlockCosts& last = m_.blocks[static_cast<size_t>(j - 1)];
    const Cost base = add(prefix_inner_[static_cast<size_t>(j - 1)], last.seg_last_cost);
    for (int64_t s = 0; s <= slots_; ++s) {
      const size_t i = idx(j, s);
      if (time_[i] == kInf) continue;
      const Cost v = {time_[i] + base.time_ns, flops_[i] + base.flops};
      std::vector<Entry>& st = stacks_[static_cast<size_t>(s)];
      while (!st.empty() && !(st.back().value < v)) st.pop_back();  // dominated by the shorter j
      st.push_back({j, v});
    }
  }

  const ChainModel& m_;
  Prefix p_;
  int64_t n_ = 0, slot_ = 1, slots_ = 0;
  bool up_ = true;
  bool allow_window_ = true, window_ = false;
  std::vector<int64_t>& time_;
  std::vector<int64_t>& flops_;
  std::vector<int32_t>& choice_;
  std::vector<std::vector<Entry>>& stacks_;
  std::vector<Cost> prefix_inner_;  // P(i): inner recompute costs of blocks < i
};

}  // namespace

ChainSolution solve_chain(const ChainModel& model, int64_t budget_bytes, int64_t slot_bytes,
                          bool window) {
  if (slot_bytes < 1) throw std::logic_error("solve_chain: slot_bytes < 1");
  // Rounded down, the DP's feasible set holds every plan that fits in exact bytes, so its
  // optimum is a lower bound; when its plan fits in exact bytes it is the optimum.
  DpWorkspace ws;
  ChainSolution low = ChainDp(model, budget_bytes, slot_bytes, false, window, ws).solve(false);
  if (!low.feasible) return low;  // then nothing fits
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
    target -= std::max(probe.model_peak_bytes - budget_bytes, slot_bytes);
    if (target < 0) break;
    probe = ChainDp(model, target, slot_bytes, false, window, ws).solve(false);
    if (!probe.feasible) break;
    if (probe.model_peak_bytes <= budget_bytes) {
      best = probe;
      break;
    }
  }
  if (!best.feasible) best = ChainDp(model, budget_bytes, slot_bytes, true, window, ws).solve(false);
  best.optimal = best.feasible && best.cost == bound;
  best.lower_bound = bound;
  return best;
}

namespace {

ChainSolution solve_least_memory(const ChainModel& model, int64_t budget_bytes, int64_t slot) {
  DpWorkspace ws;
  return ChainDp(model, budget_bytes, slot, true, true, ws).solve(true);
}

// ---------------------------------------------------------------------------------------------
// Probes: one uniform plan simulated with the timeline, reduced to per-block figures.

struct Probe {
  bool ok = false;
  int64_t base = 0;
  std::vector<int64_t> hf, hb;           // held by each block at forward end / backward start
  std::vector<int64_t> fwd_peak, bwd_peak, rc_peak, live_before_bwd;
  std::vector<Cost> rc_cost;
  int64_t head_fwd_peak = 0, head_bwd_peak = 0, outer_peak = 0;
};

Probe run_probe(const Graph& g, const Device& d, const Plan& plan) {
  Probe p;
  const size_t n = static_cast<size_t>(g.n_blocks);
  Schedule sched;
  Result r;
  try {
    sched = build_schedule(g, plan, recompute_mode(g.profile));
    r = run_engine(g, sched, d, SimOptions{true});
  } catch (const ConfigError&) {
    return p;
  }
  p.ok = true;
  p.base = r.baseline_bytes;
  p.hf.assign(n, 0);
  p.hb.assign(n, 0);
  p.fwd_peak.assign(n, 0);
  p.bwd_peak.assign(n, 0);
  p.rc_peak.assign(n, 0);
  p.live_before_bwd.assign(n, 0);
  p.rc_cost.assign(n, Cost{});
  const auto& ev = sched.events;
  const auto block_of = [&](int32_t k) -> int32_t {
    const Event& e = ev[static_cast<size_t>(k)];
    if (e.kind == EventKind::kFree || e.kind == EventKind::kOptimizer) return -1;
    return g.ops[static_cast<size_t>(e.id)].block;
  };
  // Where the blocks' forward ends and their backward begins, and each block's first
  // backward-phase event.
  int32_t last_fwd = -1, first_bwd = static_cast<int32_t>(ev.size());
  std::vector<int32_t> first_bwd_of(n, -1);
  for (int32_t k = 0; k < static_cast<int32_t>(ev.size()); ++k) {
    const int32_t b = block_of(k);
    if (b < 0) continue;
    if (ev[static_cast<size_t>(k)].kind == EventKind::kForward) {
      last_fwd = k;
    } else {
      first_bwd = std::min(first_bwd, k);
      if (first_bwd_of[static_cast<size_t>(b)] < 0) first_bwd_of[static_cast<size_t>(b)] = k;
    }
  }
  // Held bytes per block: replay the schedule's allocations and frees to the forward's end and
  // to the first backward event of a block.
  std::vector<uint8_t> live(g.storages.size(), 0);
  const auto tally = [&](std::vector<int64_t>& out) {
    for (size_t s = 0; s < g.storages.size(); ++s) {
      const Storage& st = g.storages[s];
      if (live[s] && st.block >= 0 && st.producer >= 0) out[static_cast<size_t>(st.block)] += st.bytes;
    }
  };
  for (int32_t k = 0; k < static_cast<int32_t>(ev.size()); ++k) {
    if (k == sched.forward_end) tally(p.hf);
    if (k == first_bwd) tally(p.hb);
    const Event& e = ev[static_cast<size_t>(k)];
    const Op* op = e.kind == EventKind::kFree || e.kind == EventKind::kOptimizer
                       ? nullptr : &g.ops[static_cast<size_t>(e.id)];
    switch (e.kind) {
      case EventKind::kForward:
        for (const int32_t* s = g.begin(op->outputs); s != g.end(op->outputs); ++s) live[*s] = 1;
        break;
      case EventKind::kRecompute:
        if (!(e.flags & kCachedOutput))
          for (const int32_t* s = g.begin(op->outputs); s != g.end(op->outputs); ++s) live[*s] = 1;
        break;
      case EventKind::kBackward:
        for (const int32_t* s = g.begin(op->bwd_allocs); s != g.end(op->bwd_allocs); ++s) live[*s] = 1;
        break;
      case EventKind::kFree: live[static_cast<size_t>(e.id)] = 0; break;
      case EventKind::kOptimizer: break;
    }
  }
  // Peaks per group from the timeline (samples of free events never exceed the one before).
  size_t next_bwd = 0;  // blocks in order of their first backward event
  std::vector<int32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return first_bwd_of[static_cast<size_t>(x)] < first_bwd_of[static_cast<size_t>(y)];
  });
  while (next_bwd < n && first_bwd_of[static_cast<size_t>(order[next_bwd])] < 0) ++next_bwd;
  int64_t last_live = 0;
  for (const MemorySample& smp : r.timeline) {
    const int32_t k = smp.event_index;
    while (next_bwd < n && k >= first_bwd_of[static_cast<size_t>(order[next_bwd])]) {
      p.live_before_bwd[static_cast<size_t>(order[next_bwd])] = last_live;
      ++next_bwd;
    }
    last_live = smp.allocated_bytes;
    const Event& e = ev[static_cast<size_t>(k)];
    if (e.kind == EventKind::kFree) continue;
    const int64_t v = smp.allocated_bytes;
    const int32_t b = block_of(k);
    if (b >= 0) {
      const size_t i = static_cast<size_t>(b);
      int64_t& slot = e.kind == EventKind::kForward     ? p.fwd_peak[i]
                      : e.kind == EventKind::kRecompute ? p.rc_peak[i]
                                                        : p.bwd_peak[i];
      slot = std::max(slot, v);
    } else if (k > last_fwd && k < first_bwd) {
      int64_t& slot = k < sched.forward_end ? p.head_fwd_peak : p.head_bwd_peak;
      slot = std::max(slot, v);
    } else {
      p.outer_peak = std::max(p.outer_peak, v);
    }
  }
  for (const OpSpan& s : r.spans) {
    if (s.phase != Phase::kRecompute || s.stream != 0 || s.op < 0) continue;
    const Op& op = g.ops[static_cast<size_t>(s.op)];
    if (op.block < 0) continue;
    Cost& c = p.rc_cost[static_cast<size_t>(op.block)];
    c.time_ns += s.duration_ns;
  }
  for (const Event& e : ev)
    if (e.kind == EventKind::kRecompute && !(e.flags & kCachedOutput)) {
      const Op& op = g.ops[static_cast<size_t>(e.id)];
      if (op.block >= 0) p.rc_cost[static_cast<size_t>(op.block)].flops += op.fwd.flops;
    }
  return p;
}

Plan uniform_plan(int64_t n, BlockMode mode) {
  Plan p;
  p.mode.assign(static_cast<size_t>(n), mode);
  return p;
}

Plan segments_plan(int64_t n, int64_t group) {
  Plan p;
  p.mode.assign(static_cast<size_t>(n), BlockMode::kCheckpoint);
  for (int64_t b = 0; b < n; b += group) p.segments.push_back({b, std::min(n, b + group) - 1});
  return p;
}

std::vector<int64_t> prefix_of(const std::vector<int64_t>& v) {
  std::vector<int64_t> out(v.size() + 1, 0);
  for (size_t i = 0; i < v.size(); ++i) out[i + 1] = out[i] + v[i];
  return out;
}

int64_t sum_of(const std::vector<int64_t>& v) { return prefix_of(v).back(); }

std::string gib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB (%" PRId64 " bytes)",
                static_cast<double>(bytes) / static_cast<double>(kGiB), bytes);
  return buf;
}

}  // namespace

ChainModel probe_chain(const Graph& graph, const Device& device) {
  Graph g = graph;
  g.allocator = AllocatorKind::kExact;  // the model counts exact bytes; verification does not
  const int64_t n = g.n_blocks;
  if (n < 1) throw ConfigError("--strategy", "budget", "the model has no blocks to plan");
  std::array<Probe, kPlanOptionCount> single;
  for (int o = 0; o < kPlanOptionCount; ++o)
    single[static_cast<size_t>(o)] =
        run_probe(g, device, uniform_plan(n, option_block_mode(static_cast<PlanOption>(o))));
  const Probe full = run_probe(g, device, segments_plan(n, 1));
  const Probe one = run_probe(g, device, segments_plan(n, n));
  const Probe& store = single[0];
  if (!store.ok || !full.ok || !one.ok)
    throw ConfigError("--strategy", "budget", "the planner's probe plans cannot be simulated");

  ChainModel m;
  m.base_bytes = store.base;
  m.blocks.resize(static_cast<size_t>(n));
  const int64_t base = m.base_bytes;
  std::vector<const Probe*> all = {&full, &one};
  for (const Probe& p : single)
    if (p.ok) all.push_back(&p);
  for (const Probe* p : all) {
    m.outer_bytes = std::max(m.outer_bytes, p->outer_peak - base);
    m.head_fwd_bytes = std::max(m.head_fwd_bytes, p->head_fwd_peak - sum_of(p->hf) - base);
    m.head_bwd_bytes = std::max(m.head_bwd_bytes, p->head_bwd_peak - sum_of(p->hb) - base);
  }
  std::array<std::vector<int64_t>, kPlanOptionCount> hf, hb;
  for (int o = 0; o < kPlanOptionCount; ++o)
    if (single[static_cast<size_t>(o)].ok) {
      hf[static_cast<size_t>(o)] = prefix_of(single[static_cast<size_t>(o)].hf);
      hb[static_cast<size_t>(o)] = prefix_of(single[static_cast<size_t>(o)].hb);
    }
  const std::vector<int64_t> full_hf = prefix_of(full.hf), full_hb = prefix_of(full.hb);
  const std::vector<int64_t> one_hf = prefix_of(one.hf);
  for (int64_t j = 0; j < n; ++j) {
    const size_t i = static_cast<size_t>(j);
    BlockCosts& c = m.blocks[i];
    for (int o = 0; o < kPlanOptionCount; ++o) {
      const Probe& p = single[static_cast<size_t>(o)];
      OptionRow& r = c.single[static_cast<size_t>(o)];
      if (!p.ok) {
        r.available = false;
        continue;
      }
      r.held_bytes = p.hb[i];
      r.fwd_held_bytes = p.hf[i];
      r.fwd_bytes = p.fwd_peak[i] - hf[static_cast<size_t>(o)][i] - base;
      r.bwd_bytes = std::max(p.bwd_peak[i], p.rc_peak[i]) - hb[static_cast<size_t>(o)][i] - base;
      r.cost = p.rc_cost[i];
      c.fwd_only_bytes = std::max(c.fwd_only_bytes, p.hf[i] - p.hb[i]);
    }
    c.fwd_only_bytes = std::max(c.fwd_only_bytes, full.hf[i] - full.hb[i]);
    c.seg_head_held = full.hb[i];
    c.seg_head_fwd_held = full.hf[i];
    c.seg_head_fwd = full.fwd_peak[i] - full_hf[i] - base;
    // Inner figures from the one-segment probe (block 0 is its head, so only j >= 1).
    if (j >= 1) {
      c.fwd_only_bytes = std::max(c.fwd_only_bytes, one.hf[i] - one.hb[i]);
      c.seg_inner_held = one.hb[i];
      c.seg_inner_fwd_held = one.hf[i];
      c.seg_inner_fwd = std::max(c.seg_head_fwd, one.fwd_peak[i] - one_hf[i] - base);
    } else {  // block 0 is never an inner block
      c.seg_inner_held = 0;
      c.seg_inner_fwd_held = c.seg_head_fwd_held;
      c.seg_inner_fwd = c.seg_head_fwd;
    }
    c.seg_recomputed = store.hb[i];
    c.seg_bwd = std::max(store.bwd_peak[i] - hb[0][i], full.bwd_peak[i] - full_hb[i]) - base;
    // Recompute of block j in `full` starts from live_before_bwd(j), which holds block j's own
    // checkpoint (full.hb[j]) and the gradient state: the peak above what is below is
    // rc_peak - live_before + hb[j], and the gradient state is live_before - held up to j.
    c.seg_recompute = full.rc_peak[i] - full.live_before_bwd[i] + full.hb[i];
    c.seg_grad_state = full.live_before_bwd[i] - full_hb[i + 1] - base;
    c.seg_last_cost = full.rc_cost[i];
    c.seg_inner_cost = j + 1 < n ? one.rc_cost[i] : full.rc_cost[i];
  }
  return m;
}

Plan plan_of(const std::vector<ChainUnit>& units, int64_t n) {
  Plan p;
  p.mode.assign(static_cast<size_t>(n), BlockMode::kStore);
  for (const ChainUnit& u : units) {
    if (u.segment) {
      p.segments.push_back({u.first, u.last});
      for (int64_t b = u.first; b <= u.last; ++b) p.mode[static_cast<size_t>(b)] = BlockMode::kCheckpoint;
    } else {
      p.mode[static_cast<size_t>(u.first)] = option_block_mode(u.option);
    }
  }
  return p;
}

Strategy strategy_of(const std::vector<ChainUnit>& units) {
  // Written as clauses and parsed back, so that adjacent clauses merge as the grammar's
  // canonical form does (runs of equal segments become seg@a-b/k).
  std::string spec = "custom:";
  for (size_t i = 0; i < units.size(); ++i) {
    const ChainUnit& u = units[i];
    if (i) spec += '+';
    const ClauseMode mode = u.segment ? (u.first == u.last ? ClauseMode::kFull : ClauseMode::kSeg)
                                      : clause_mode_of(u.option);
    Strategy one;
    one.kind = StrategyKind::kCustom;
    Clause c;
    c.mode = mode;
    c.first = u.first;
    c.last = u.last;
    c.group = mode == ClauseMode::kSeg ? u.last - u.first + 1 : 1;
    one.clauses = {c};
    spec += one.canonical().substr(7);  // "custom:" dropped
  }
  return parse_strategy(spec);
}

int64_t budget_peak_bytes(const Result& r) { return r.peak_reserved_bytes; }

namespace {

Cost cost_of(const Result& r) { return {r.recompute_time_ns, r.recompute_flops}; }

}  // namespace

std::vector<ChainUnit> units_of(const Plan& p) {
  std::vector<ChainUnit> u;
  const int64_t n = static_cast<int64_t>(p.mode.size());
  size_t seg = 0;
  for (int64_t b = 0; b < n;) {
    if (p.mode[static_cast<size_t>(b)] == BlockMode::kCheckpoint) {
      while (seg < p.segments.size() && p.segments[seg].first < b) ++seg;
      const int64_t e = seg < p.segments.size() && p.segments[seg].first == b ? p.segments[seg].last : b;
      u.push_back({b, e, true, PlanOption::kStore});
      b = e + 1;
      continue;
    }
    PlanOption o = PlanOption::kStore;
    for (int k = 0; k < kPlanOptionCount; ++k)
      if (option_block_mode(static_cast<PlanOption>(k)) == p.mode[static_cast<size_t>(b)])
        o = static_cast<PlanOption>(k);
    u.push_back({b, b, false, o});
    ++b;
  }
  return u;
}

namespace {

// One view's plan, solved, simulated and tightened until it fits.
struct Verified {
  bool found = false, optimal = false;
  std::vector<ChainUnit> units;
  Result result;
  Cost lower_bound;
  int64_t slot = 0, model_peak = 0, solves = 0;
};

Verified solve_verified(const Graph& graph, const Device& device, const ChainModel& model,
                        int64_t budget) {
  constexpr int kMaxSolves = 8;
  const int64_t n = graph.n_blocks;
  Verified v;
  // The first solve uses the whole budget. When the simulation exceeds it (the caching
  // allocator's rounding and fragmentation, which the exact-bytes model does not see, or a term
  // it bounds loosely), the next target is lowered by the excess until a plan fits, then bisected
  // between the highest target that fit and the lowest that did not: the DP's optimum only falls
  // as the target rises, so the highest fitting target gives the cheapest plan found.
  int64_t target = budget - model.base_bytes, fit = -1, miss = target + 1;
  for (int t = 0; t < kMaxSolves && target >= 0; ++t) {
    const int64_t slot = slot_bytes_for(target, n);
    const ChainSolution sol = solve_chain(model, target, slot);
    ++v.solves;
    if (v.slot == 0) v.slot = slot;
    if (!sol.feasible) break;
    if (t == 0) v.lower_bound = sol.optimal ? sol.cost : sol.lower_bound;
    Result r = simulate_plan(graph, plan_of(sol.units, n), device);
    const int64_t peak = budget_peak_bytes(r);
    if (peak <= budget) {
      if (!v.found || cost_of(r) < cost_of(v.result)) {
        v.found = true;
        v.optimal = sol.optimal && t == 0;
        v.units = sol.units;
        v.result = std::move(r);
        v.slot = slot;
        v.model_peak = sol.model_peak_bytes + model.base_bytes;
      }
      fit = target;
    } else {
      miss = target;
    }
    if (fit == target && miss == target + 1) break;  // the whole budget fit
    if (fit >= 0 && miss - fit <= slot) break;
    target = fit < 0 ? target - std::max(peak - budget, slot) : fit + (miss - fit) / 2;
  }
  return v;
}

}  // namespace

BudgetPlan plan_budget(const Graph& graph, const Device& device, int64_t budget) {
  const ChainModel model = probe_chain(graph, device);
  const int64_t n = graph.n_blocks;
  BudgetPlan out;
  out.budget_bytes = budget;
  Verified best = solve_verified(graph, device, model, budget);
  out.solves = best.solves;
  int views = 1;
  bool tightened = best.solves > 1;
  const char* view = "backward view";
  // The forward view is exact where the backward view is conservative (see forward_view). Its
  // segments' inner blocks hold their casts in forward, which rules out the sliding window, so
  // deep models (where it would scan every segment end) use the backward view alone.
  const ChainModel fwd = forward_view(model);
  const bool casts = !(fwd == model);
  if (casts && n <= kFullSearchBlocks) {
    Verified other = solve_verified(graph, device, fwd, budget);
    out.solves += other.solves;
    ++views;
    tightened = tightened || other.solves > 1;
    if (other.found && (!best.found || cost_of(other.result) < cost_of(best.result))) {
      best = std::move(other);
      view = "forward view";
    }
  }
  if (best.found && n <= kFullSearchBlocks) {
    // Both views bound some terms loosely (autocast's casts in one phase; under the caching
    // allocator, reserved bytes at all), so a fixed strategy can fit where the DP's plans needed
    // more room: the cheapest fixed strategy that fits is a candidate too, and wins ties never.
    FixedChoice f = best_fixed(graph, device, budget);
    if (f.found && cost_of(f.result) < cost_of(best.result)) {
      best.units = units_of(resolve(f.strategy, n));
      best.result = std::move(f.result);
      best.optimal = false;
      best.model_peak = evaluate_chain(model, best.units).peak_bytes + model.base_bytes;
      out.note = "the fixed strategy " + f.strategy.canonical() +
                 " fit with less recompute than the DP's plans (the model bounds it loosely)";
    }
  }
  out.slot_bytes = best.slot;
  bool found = best.found;
  std::vector<ChainUnit> units = best.units;
  if (found) {
    out.result = std::move(best.result);
    out.model_peak_bytes = best.model_peak;
  }
  if (!found) {
    // The least-memory plan of the model, and `full`, simulated: the smallest peak on offer.
    std::vector<ChainUnit> full;
    for (int64_t b = 0; b < n; ++b) full.push_back({b, b, true, PlanOption::kStore});
    std::vector<ChainUnit> best_units = full;
    Result least_result = simulate_plan(graph, plan_of(full, n), device);
    const int64_t hi = 2 * evaluate_chain(model, full).peak_bytes + (n + 1) * kMiB;
    const ChainSolution least = solve_least_memory(model, hi, slot_bytes_for(hi, n));
    if (least.feasible) {
      Result r = simulate_plan(graph, plan_of(least.units, n), device);
      if (budget_peak_bytes(r) < budget_peak_bytes(least_result)) least_result = std::move(r), best_units = least.units;
    }
    if (budget_peak_bytes(least_result) > budget)
      throw ConfigError("--strategy", "budget",
                        "no plan fits a peak of " + gib(budget) +
                            "; the smallest feasible peak is " + gib(budget_peak_bytes(least_result)) +
                            ", reached by " + strategy_of(best_units).canonical());
    // It fits where the DP's rounded model did not.
    units = best_units;
    out.result = std::move(least_result);
    out.model_peak_bytes = evaluate_chain(model, units).peak_bytes + model.base_bytes;
  }
  if (out.slot_bytes == 0) out.slot_bytes = slot_bytes_for(std::max<int64_t>(budget - model.base_bytes, 0), n);
  const bool optimal = best.optimal;
  const Cost lower_bound = best.lower_bound;
  out.strategy = strategy_of(units);
  out.plan = plan_of(units, n);
  char quality[160];
  if (!found) {
    std::snprintf(quality, sizeof quality, "the least-memory plan (the DP's slots found none)");
  } else if (graph.allocator != AllocatorKind::kExact) {
    std::snprintf(quality, sizeof quality,
                  "the model counts exact bytes, the reserved peak is checked by simulation");
  } else if (!out.note.empty()) {
    std::snprintf(quality, sizeof quality, "a fixed strategy beat the DP's plans (note)");
  } else if (optimal) {
    std::snprintf(quality, sizeof quality, "optimal under the model's %s in exact bytes", view);
  } else {
    // The rounded-down pass is a relaxation: no plan that fits recomputes for less.
    const double gap = lower_bound.time_ns > 0
                           ? 100.0 * static_cast<double>(out.result.recompute_time_ns -
                                                         lower_bound.time_ns) /
                                 static_cast<double>(lower_bound.time_ns)
                           : 0.0;
    std::snprintf(quality, sizeof quality,
                  "recompute time within %.2f %% of the %s's lower bound (slots rounded down)",
                  gap, view);
  }
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "rotor-style DP over %" PRId64 " blocks x {store, selective, sac:mm, segments}; "
                "costs from 5 probe simulations; memory in %" PRId64 " MiB slots; %s; %" PRId64
                " DP solve%s (%s%s)",
                n, out.slot_bytes / kMiB, quality, out.solves, out.solves == 1 ? "" : "s",
                views == 1 ? "one view of the model" : "backward and forward views",
                tightened ? ", tightened after simulation" : "");
  out.model_line = buf;
  return out;
}

std::vector<Strategy> fixed_strategies(int64_t n) {
  std::vector<Strategy> out;
  const auto add_one = [&](StrategyKind kind, int64_t k) {
    Strategy s;
    s.kind = kind;
    s.k = k;
    out.push_back(s);
  };
  add_one(StrategyKind::kNone, 0);
  add_one(StrategyKind::kFull, 0);
  for (int64_t k = 2; k <= n; ++k) add_one(StrategyKind::kEvery, k);
  add_one(StrategyKind::kSqrt, 0);
  add_one(StrategyKind::kSelective, 0);
  add_one(StrategyKind::kSacMm, 0);
  for (int64_t k = 1; k < n; ++k) add_one(StrategyKind::kBlock, k);
  return out;
}

FixedChoice best_fixed(const Graph& graph, const Device& device, int64_t budget) {
  FixedChoice best;
  for (const Strategy& s : fixed_strategies(graph.n_blocks)) {
    Result r;
    try {
      r = simulate_plan(graph, resolve(s, graph.n_blocks), device);
    } catch (const ConfigError&) {
      continue;  // not simulable in this profile
    }
    if (budget_peak_bytes(r) > budget) continue;
    const Cost c{r.recompute_time_ns, r.recompute_flops};
    if (best.found && !(c < Cost{best.result.recompute_time_ns, best.result.recompute_flops}))
      continue;
    best.found = true;
    best.strategy = s;
    best.result = std::move(r);
  }
  return best;
}

Strategy concrete_strategy(const Strategy& s, const Graph& graph, const Device& device) {
  if (s.kind != StrategyKind::kBudget) return s;
  return plan_budget(graph, device, s.k).strategy;
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
