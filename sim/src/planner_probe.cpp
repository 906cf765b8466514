// The probes of the budget planner (sim/planner.hpp): five uniform plans simulated with the
// timeline on, reduced to a ChainModel.
#include <algorithm>
#include <functional>
#include <vector>

#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/schedule.hpp"
#include "sim/simulate.hpp"
#include "workspace.hpp"

namespace sim {
namespace {

// Probes: one uniform plan simulated with the timeline, reduced to per-block figures.

struct Probe {
  bool ok = false;
  int64_t base = 0;
  std::vector<int64_t> hf, hb;           // held by each block at forward end / backward start
  std::vector<int64_t> fwd_peak, bwd_peak, rc_peak, live_before_bwd;
  std::vector<Cost> rc_cost;
  int64_t head_fwd_peak = 0, head_bwd_peak = 0, outer_peak = 0;
};

// planner3 (issue 15): the probes share one schedule and the engine's and scheduler's scratch
// (their capacity only; a reused Workspace equals fresh simulations, tests/test_workspace.cpp),
// so that 10,000 blocks' seven probes do not fault their vectors in seven times.
struct ProbeScratch {
  Schedule sched;
  ScheduleScratch schedule_scratch;
  EngineScratch engine_scratch;
};

Probe run_probe(const Graph& g, const Device& d, const Plan& plan, ProbeScratch& ps) {
  Probe p;
  const size_t n = static_cast<size_t>(g.n_blocks);
  Schedule& sched = ps.sched;
  Result r;
  try {
    build_schedule(g, plan, recompute_mode(g), sched, ps.schedule_scratch);
    r = run_engine(g, sched, d, SimOptions{true}, ps.engine_scratch);
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
    if (e.kind == EventKind::kFree || e.kind == EventKind::kOptimizer ||
        e.kind == EventKind::kOffload || e.kind == EventKind::kPrefetch)
      return -1;
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
  // Offload: a freed buffer stays until its copy to the host completes (the engine's rule), so
  // the replay keeps it until the simulated time passes the copy's end (from the copy spans and
  // the time of each event's sample).
  std::vector<int64_t> copy_done;
  std::vector<int64_t> t_of(ev.size(), 0);
  for (const OpSpan& s : r.spans)
    if (s.stream == 2 && s.storage >= 0) {
      if (copy_done.empty()) copy_done.assign(g.storages.size(), 0);
      copy_done[static_cast<size_t>(s.storage)] = s.start_ns + s.duration_ns;
    }
  if (!copy_done.empty()) {
    for (const MemorySample& smp : r.timeline) t_of[static_cast<size_t>(smp.event_index)] = smp.t_ns;
    for (size_t k = 1; k < t_of.size(); ++k) t_of[k] = std::max(t_of[k], t_of[k - 1]);
  }
  std::vector<std::pair<int64_t, int32_t>> pending;
  std::vector<uint8_t> live(g.storages.size(), 0);
  const auto tally = [&](std::vector<int64_t>& out) {
    for (size_t s = 0; s < g.storages.size(); ++s) {
      const Storage& st = g.storages[s];
      if (live[s] && st.block >= 0 && st.producer >= 0) out[static_cast<size_t>(st.block)] += st.bytes;
    }
  };
  // pending: a min-heap of (completion, storage), so that only copies complete by an event's
  // time are visited (scanning every pending copy at every event was quadratic in the blocks).
  std::vector<uint8_t> in_pending(g.storages.size(), 0);
  for (int32_t k = 0; k < static_cast<int32_t>(ev.size()); ++k) {
    while (!pending.empty() && pending.front().first <= t_of[static_cast<size_t>(k)]) {
      std::pop_heap(pending.begin(), pending.end(), std::greater<>());
      const int32_t s = pending.back().second;
      pending.pop_back();
      if (!in_pending[static_cast<size_t>(s)]) continue;  // fetched back meanwhile
      live[static_cast<size_t>(s)] = 0;
      in_pending[static_cast<size_t>(s)] = 0;
    }
    if (k == sched.forward_end) tally(p.hf);
    if (k == first_bwd) tally(p.hb);
    const Event& e = ev[static_cast<size_t>(k)];
    const bool on_op = e.kind == EventKind::kForward || e.kind == EventKind::kRecompute ||
                       e.kind == EventKind::kBackward;
    const Op* op = on_op ? &g.ops[static_cast<size_t>(e.id)] : nullptr;
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
      case EventKind::kFree:
        if (!copy_done.empty() && copy_done[static_cast<size_t>(e.id)] > t_of[static_cast<size_t>(k)]) {
          pending.push_back({copy_done[static_cast<size_t>(e.id)], e.id});
          std::push_heap(pending.begin(), pending.end(), std::greater<>());
          in_pending[static_cast<size_t>(e.id)] = 1;
        }
        else
          live[static_cast<size_t>(e.id)] = 0;
        break;
      case EventKind::kOptimizer: break;
      case EventKind::kOffload: break;
      case EventKind::kPrefetch:  // a buffer still being copied out is used as it is
        in_pending[static_cast<size_t>(e.id)] = 0;  // (pending at most once: see the engine)
        live[static_cast<size_t>(e.id)] = 1;
        break;
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
  // Recompute time per block, and offload's stalls: a wait on copies back belongs to the block
  // of the compute op it delays (the next span on the compute stream).
  int64_t stall = 0;
  for (const OpSpan& s : r.spans) {
    if (s.stream != 0) continue;
    if (s.op == kStallSpan) {
      stall += s.duration_ns;
      continue;
    }
    if (s.op < 0) continue;
    const Op& op = g.ops[static_cast<size_t>(s.op)];
    if (op.block >= 0) {
      Cost& c = p.rc_cost[static_cast<size_t>(op.block)];
      if (s.phase == Phase::kRecompute) c.time_ns += s.duration_ns;
      c.time_ns += stall;
    }
    stall = 0;
  }
  for (const Event& e : ev)
    if (e.kind == EventKind::kRecompute && !(e.flags & kCachedOutput)) {
      const Op& op = g.ops[static_cast<size_t>(e.id)];
      if (op.block >= 0) p.rc_cost[static_cast<size_t>(op.block)].flops += op.fwd.flops;
    }
  // planner4: the timeline's memory goes back to the scratch for the next probe.
  ps.engine_scratch.timeline = std::move(r.timeline);
  ps.engine_scratch.timeline_breakdown = std::move(r.timeline_breakdown);
  ps.engine_scratch.spans = std::move(r.spans);
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
}  // namespace

ChainModel probe_chain(const Graph& graph, const Device& device) {
  Graph g = graph;
  g.allocator = AllocatorKind::kExact;  // the model counts exact bytes; verification does not
  const int64_t n = g.n_blocks;
  if (n < 1) throw ConfigError("--strategy", "budget", "the model has no blocks to plan");
  std::array<Probe, kPlanOptionCount> single;
  ProbeScratch ps;
  for (int o = 0; o < kPlanOptionCount; ++o) {
    const PlanOption opt = static_cast<PlanOption>(o);
    Plan plan = uniform_plan(n, block_mode_of(opt));
    if (opt == PlanOption::kOffloadFull)  // one-block segments, inputs on the host
      for (int64_t b = 0; b < n; ++b) plan.segments.push_back({b, b, true});
    single[static_cast<size_t>(o)] = run_probe(g, device, plan, ps);
  }
  const Probe full = run_probe(g, device, segments_plan(n, 1), ps);
  const Probe one = run_probe(g, device, segments_plan(n, n), ps);
  // planner8 (issue 15): the recompute of a segment's inner blocks, timed where plans run it.
  // The engine slows a kernel that runs while the data-parallel stream is busy (comm.hpp
  // kOverlapComputeSlowdown). In `one` the whole chain is recomputed first in backward, on a
  // stream that has only the head's gradients queued, so its inner blocks run at full speed;
  // in a plan's segment recomputed after other blocks' backward, that stream is mostly still
  // busy with their gathers and reduce-scatters (DeepSpeed ZeRO-3's per-module replay,
  // deepspeed.cpp; bench_planner_scale's 1,000 blocks at dp 64: every:6 simulated 1,141 ms
  // where `one`'s inner costs priced it 1,003 ms, `full` 1,132 ms priced exactly). Two
  // probes of two-block segments, offset by one, time every block as a segment's first
  // (inner) block after one block's backward: [0,1],[2,3],... and [0],[1,2],[3,4],...
  // Without a data-parallel stream to contend with they equal `one`'s (the same kernels), so
  // they are run only where one exists: dp > 1, or the experts' edp group (engine.cpp edp_).
  // The segment that ends at block n - 1 is still recomputed as in `one`, first in backward:
  // its inner blocks keep `one`'s costs (BlockCosts::seg_final_inner_cost).
  const bool contends = n >= 2 && (g.dp > 1 || g.tp * g.dp > std::max<int64_t>(1, g.etp * g.ep));
  Probe pairs_even, pairs_odd;
  if (contends) {
    Plan even = segments_plan(n, 2), odd = segments_plan(1, 1);
    odd.mode.assign(static_cast<size_t>(n), BlockMode::kCheckpoint);
    for (int64_t b = 1; b < n; b += 2) odd.segments.push_back({b, std::min(n, b + 2) - 1});
    pairs_even = run_probe(g, device, even, ps);
    pairs_odd = run_probe(g, device, odd, ps);
  }
  // The inner cost of block j as a pairs probe saw it (j the first of a two-block segment),
  // or `one`'s where no probe has one.
  const auto contended_inner = [&](size_t j, const Cost& fallback) {
    const Probe& p = j % 2 == 0 ? pairs_even : pairs_odd;
    if (!contends || !p.ok || static_cast<int64_t>(j) + 1 >= n) return fallback;
    return p.rc_cost[j];
  };
  const Probe& store = single[0];
  if (!store.ok || !full.ok || !one.ok)
    throw ConfigError("--strategy", "budget", "the planner's probe plans cannot be simulated");

  ChainModel m;
  m.probes = contends ? 9 : 7;  // planner8
  m.base_bytes = store.base;
  m.blocks.resize(static_cast<size_t>(n));
  const int64_t base = m.base_bytes;
  // Terms outside the blocks come from the probes that keep everything on the device: an
  // offload probe's head and outer peaks also hold buffers still being copied out or already
  // fetched back, which depend on the whole plan's timing (verification by simulation sees them).
  std::vector<const Probe*> all = {&full, &one};
  for (int o = 0; o < kPlanOptionCount; ++o) {
    const PlanOption opt = static_cast<PlanOption>(o);
    if (single[static_cast<size_t>(o)].ok && opt != PlanOption::kOffload &&
        opt != PlanOption::kOffloadFull)
      all.push_back(&single[static_cast<size_t>(o)]);
  }
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
    c.seg_inner_cost = j + 1 < n ? contended_inner(i, one.rc_cost[i]) : full.rc_cost[i];
    // planner8: in the segment ending at block n - 1 (recomputed first in backward), as `one`
    // recomputed it
    if (contends && j + 1 < n) c.seg_final_inner_cost = one.rc_cost[i];
  }
  return m;
}

}  // namespace sim
