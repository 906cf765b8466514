// The budget planner as it was before issue 15 (sim/planner.hpp plan_budget_legacy,
// best_fixed_exhaustive), kept verbatim so that the benchmark (bench/bench_planner_scale.cpp) and
// tests/test_planner.cpp can hold the current planner's plans against it on the same binary:
// every view solved and verified from scratch, and every fixed strategy simulated (2n + 5
// simulations). Not used by the CLI, the GUI or sweeps.
#include <cinttypes>
#include <cstdio>

#include "sim/error.hpp"
#include "sim/planner.hpp"
#include "sim/simulate.hpp"

namespace sim {
namespace {

// The model with each block's forward-only bytes set to what the option `units` chose for it
// drops when forward ends (instead of the most any option drops): exact for that plan and the
// plans near it, optimistic for plans that drop more (the simulation catches those).
ChainModel with_forward_terms_of(const ChainModel& m, const std::vector<ChainUnit>& units) {
  ChainModel r = m;
  for (const ChainUnit& u : units)
    for (int64_t b = u.first; b <= u.last; ++b) {
      BlockCosts& c = r.blocks[static_cast<size_t>(b)];
      const OptionRow& o = c.single[static_cast<size_t>(u.option)];
      c.fwd_only_bytes = !u.segment    ? o.fwd_held_bytes - o.held_bytes
                         : b == u.first ? c.seg_head_fwd_held - c.seg_head_held
                                        : c.seg_inner_fwd_held - c.seg_inner_held;
    }
  return r;
}

}  // namespace

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

BudgetPlan plan_budget_legacy(const Graph& graph, const Device& device, int64_t budget) {
  // The model is exact (up to autocast's casts) for plans that keep everything on the device;
  // offload's device bytes depend on when copies complete, which it sees only roughly. So the
  // views below solve without the offload options, and the full model (offload allowed) is
  // solved once more at the end: its plan is kept only if, simulated, it fits and costs less.
  const ChainModel with_offload = probe_chain(graph, device);
  ChainModel model = with_offload;
  for (BlockCosts& b : model.blocks) {
    b.single[static_cast<size_t>(PlanOption::kOffload)].available = false;
    b.single[static_cast<size_t>(PlanOption::kOffloadFull)].available = false;
  }
  const int64_t n = graph.n_blocks;
  BudgetPlan out;
  out.budget_bytes = budget;
  Verified best = solve_verified(graph, device, model, budget);
  out.solves = best.solves;
  int views = 1;
  bool tightened = best.solves > 1;
  const char* view = "backward view";
  bool refined = false;
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
  // The backward view charges every block's casts in forward; refined to the forward terms of
  // the best plan so far, the model is exact for that plan, and its optimum is tried too.
  for (int r = 0; r < 3 && casts && best.found; ++r) {
    Verified v = solve_verified(graph, device, with_forward_terms_of(model, best.units), budget);
    out.solves += v.solves;
    tightened = tightened || v.solves > 1;
    if (!v.found || !(cost_of(v.result) < cost_of(best.result))) break;
    best = std::move(v);
    best.optimal = false;  // optimal under a model fitted to an earlier plan: no bound
    refined = true;
  }
  {
    Verified v = solve_verified(graph, device, with_offload, budget);
    out.solves += v.solves;
    if (v.found && (!best.found || cost_of(v.result) < cost_of(best.result))) {
      best = std::move(v);
      view = "offload view";
      refined = false;
    }
  }
  if (n <= kFullSearchBlocks) {
    // Both views bound some terms loosely (autocast's casts in one phase; under the caching
    // allocator, reserved bytes at all), so a fixed strategy can fit where the DP's plans needed
    // more room: the cheapest fixed strategy that fits is a candidate too, and wins ties never.
    // It also stands in when the DP's plans all missed the budget in simulation (offload's
    // copies in flight are the loosest term).
    FixedChoice f = best_fixed_exhaustive(graph, device, budget);
    if (f.found && (!best.found || cost_of(f.result) < cost_of(best.result))) {
      best.found = true;
      best.slot = best.slot == 0 ? slot_bytes_for(budget - model.base_bytes, n) : best.slot;
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
    // The least-memory plans of the model (with and without offload), `full` and offload+full,
    // simulated: the smallest peak on offer.
    std::vector<ChainUnit> full, offload_full;
    for (int64_t b = 0; b < n; ++b) {
      full.push_back({b, b, true, PlanOption::kStore});
      offload_full.push_back({b, b, false, PlanOption::kOffloadFull});
    }
    std::vector<ChainUnit> best_units = full;
    Result least_result = simulate_plan(graph, plan_of(full, n), device);
    const auto consider = [&](const std::vector<ChainUnit>& u) {
      Result r = simulate_plan(graph, plan_of(u, n), device);
      if (budget_peak_bytes(r) < budget_peak_bytes(least_result))
        least_result = std::move(r), best_units = u;
    };
    consider(offload_full);
    const int64_t hi = 2 * evaluate_chain(model, full).peak_bytes + (n + 1) * kMiB;
    for (const ChainModel* m : std::array<const ChainModel*, 2>{&model, &with_offload}) {
      const ChainSolution least = solve_chain_least_memory(*m, hi, slot_bytes_for(hi, n));
      if (least.feasible) consider(least.units);
    }
    if (budget_peak_bytes(least_result) > budget)
      throw ConfigError("--strategy", "budget",
                        "no plan fits a peak of " + gib_text(budget) +
                            "; the smallest feasible peak is " + gib_text(budget_peak_bytes(least_result)) +
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
  } else if (refined) {
    std::snprintf(quality, sizeof quality,
                  "found with the model refined to the plan's own forward terms (exact for it)");
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
                "rotor-style DP over %" PRId64 " blocks x {store, selective, sac:mm, offload, "
                "offload+full, segments}; costs (recompute and offload stalls) from 7 probe "
                "simulations; memory in %" PRId64 " MiB slots; %s; %" PRId64
                " DP solve%s (%s%s)",
                n, out.slot_bytes / kMiB, quality, out.solves, out.solves == 1 ? "" : "s",
                views == 1 ? "backward view, refinements" : "backward and forward views, refinements",
                tightened ? ", tightened after simulation" : "");
  out.model_line = buf;
  return out;
}

FixedChoice best_fixed_exhaustive(const Graph& graph, const Device& device, int64_t budget) {
  FixedChoice best;
  for (const Strategy& s : fixed_strategies(graph.n_blocks)) {
    Result r;
    try {
      r = simulate_plan(graph, resolve(s, graph.n_blocks), device);
    } catch (const ConfigError&) {
      continue;  // not simulable in this profile
    }
    if (budget_peak_bytes(r) > budget) continue;
    const Cost c = cost_of(r);
    if (best.found && !(c < cost_of(best.result))) continue;
    best.found = true;
    best.strategy = s;
    best.result = std::move(r);
  }
  return best;
}

}  // namespace sim
