// The pipeline planner (sim/planner_pipeline.hpp; issue 15, pplan): one plan per stage, each the
// least-cost one whose stage peak (one micro-batch's peak plus the in-flight stash) fits.
#include "sim/planner_pipeline.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/error.hpp"
#include "sim/units.hpp"
#include "workspace.hpp"

namespace sim {
namespace {

// The bytes the chain model says `units` hold from the end of forward to their backward: what
// one micro-batch stashes in its blocks.
int64_t held_of(const ChainModel& m, const std::vector<ChainUnit>& units) {
  int64_t h = 0;
  for (const ChainUnit& u : units) {
    const BlockCosts& first = m.blocks[static_cast<size_t>(u.first)];
    if (!u.segment) {
      h += first.single[static_cast<size_t>(u.option)].held_bytes;
      continue;
    }
    h += first.seg_head_held;
    for (int64_t b = u.first + 1; b <= u.last; ++b) h += m.blocks[static_cast<size_t>(b)].seg_inner_held;
  }
  return h;
}

// One distinct stage graph (stage 0, the inner stages, stage p - 1, as simulate_pipeline builds
// them), its chain model and the simulations of the plans tried on it (cached by spec).
struct StageGraph {
  Graph graph;
  std::optional<ChainModel> model;
  int64_t sigma0 = 0;  // the non-block stash: simulated stash of `none` less the model's held
  int64_t held_max = 0;
  std::map<std::string, std::optional<Result>> sims;  // nullopt: the plan is refused here
  ChainModel no_offload;  // the model with the offload options unavailable
};

class Planner {
 public:
  Planner(const ModelConfig& model, const TrainSetup& setup, const Device& device,
          const SimOptions& options, int64_t budget)
      : model_(model), setup_(setup), device_(device), options_(options), budget_(budget) {}

  PipelinePlan run();

 private:
  StageGraph& graph_of(int64_t stage);
  const std::optional<Result>& simulate(StageGraph& g, const Strategy& s);
  int64_t stage_peak(const Result& one, int64_t stage) const {
    return budget_peak_bytes(one) + in_flight_bytes(one, stage, setup_.pp, setup_.vpp,
                                                    setup_.microbatches) -
           one.stash_bytes;
  }
  // The model's in-flight extra for H block bytes held per micro-batch.
  int64_t extra_model(const StageGraph& g, int64_t held, int64_t stage) const {
    Result fake;
    fake.stash_bytes = held + g.sigma0;
    fake.stash_block_bytes = held;
    return in_flight_bytes(fake, stage, setup_.pp, setup_.vpp, setup_.microbatches) -
           fake.stash_bytes;
  }
  void plan_stage(int64_t stage, PipelinePlan& out);
  // planner8 (issue 15): every:k and block:k are candidates on a stage only where the chain
  // model puts the stage peak within budget / kFixedModelMargin of the budget; their model
  // cost (the chain model's, on the stage's graph).
  bool within_margin(StageGraph& g, const Strategy& s, int64_t stage) const {
    const std::vector<ChainUnit> units = units_of(resolve(s, g.graph.n_blocks));
    const int64_t model_peak = g.model->base_bytes + evaluate_chain(*g.model, units).peak_bytes +
                               extra_model(g, held_of(*g.model, units), stage);
    return model_peak <= budget_ + budget_ / kFixedModelMargin;
  }
  static Cost model_cost(const StageGraph& g, const Strategy& s) {
    return evaluate_chain(*g.model, units_of(resolve(s, g.graph.n_blocks))).cost;
  }

  const ModelConfig& model_;
  const TrainSetup& setup_;
  const Device& device_;
  const SimOptions& options_;
  int64_t budget_;
  Workspace ws_;
  std::map<int, std::unique_ptr<StageGraph>> graphs_;  // 0 first, 1 inner, 2 last
  std::vector<Strategy> fixed_;
  int64_t simulations_ = 0, solves_ = 0, cells_ = 0;
  ChainScratch scratch_;
};

StageGraph& Planner::graph_of(int64_t stage) {
  const int64_t p = setup_.pp;
  const int key = stage == 0 ? 0 : stage == p - 1 ? 2 : 1;
  auto& slot = graphs_[key];
  if (!slot) {
    slot = std::make_unique<StageGraph>();
    build_stage_graph(model_, setup_, device_, stage, slot->graph);
  }
  return *slot;
}

const std::optional<Result>& Planner::simulate(StageGraph& g, const Strategy& s) {
  const std::string key = s.canonical();
  auto it = g.sims.find(key);
  if (it != g.sims.end()) return it->second;
  std::optional<Result> r;
  try {
    r = simulate_plan(g.graph, resolve(s, g.graph.n_blocks), device_, options_, ws_);
    ++simulations_;
  } catch (const Unsupported&) {
    // a strategy this set-up refuses (e.g. offload where it is not modeled) is no candidate
  }
  return g.sims.emplace(key, std::move(r)).first->second;
}

void Planner::plan_stage(int64_t stage, PipelinePlan& out) {
  StageGraph& g = graph_of(stage);
  const int64_t nb = g.graph.n_blocks;
  StagePlan best;
  best.stage = stage;
  best.in_flight = in_flight(stage, setup_.pp, setup_.vpp, setup_.microbatches);
  bool found = false;
  int64_t least_peak = -1;
  const auto offer = [&](const Strategy& s, const std::string& source,
                         bool optimal) -> std::optional<int64_t> {
    const std::optional<Result>& r = simulate(g, s);
    if (!r) return std::nullopt;
    const int64_t peak = stage_peak(*r, stage);
    if (least_peak < 0 || peak < least_peak) least_peak = peak;
    if (peak > budget_) return peak;
    const Cost c = cost_of(*r);
    if (!found || c < best.cost) {  // ties: the first offered (fixed strategies, in list order)
      found = true;
      best.strategy = s;
      best.source = source;
      best.cost = c;
      best.peak_bytes = peak;
      best.model_optimal = optimal;
    }
    return peak;
  };

  // The chain model of the stage's graph (once per graph).
  if (!g.model) {
    g.model = probe_chain(g.graph, device_);
    std::vector<ChainUnit> none(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) none[static_cast<size_t>(b)] = {b, b, false, PlanOption::kStore};
    g.held_max = held_of(*g.model, none);
    const std::optional<Result>& r = simulate(g, Strategy{});
    g.sigma0 = r ? r->stash_bytes - g.held_max : 0;
    g.no_offload = *g.model;
    for (BlockCosts& b : g.no_offload.blocks) {
      b.single[static_cast<size_t>(PlanOption::kOffload)].available = false;
      b.single[static_cast<size_t>(PlanOption::kOffloadFull)].available = false;
    }
  }
  // The fixed strategies: candidates on every stage. every:k and block:k (2 n of them) are
  // simulated only where the chain model's stage peak is within kFixedModelMargin of the
  // budget: the model is exact for fixed plans that keep everything on the device under the
  // exact allocator, up to autocast's casts (sim/planner.hpp), and the caching allocator only
  // adds to the peak; the margin covers the casts.
  // planner8 (issue 15): every:k and block:k within the margin are offered after the DP's
  // plans, in order of model cost, and only while one could still win the stage (below).
  std::vector<size_t> deferred;
  size_t best_fixed_index = fixed_.size();  // the list index of a fixed best (ties: the first)
  for (size_t fi = 0; fi < fixed_.size(); ++fi) {
    const Strategy& s = fixed_[fi];
    if (s.kind == StrategyKind::kEvery || s.kind == StrategyKind::kBlock) {
      if (within_margin(g, s, stage)) deferred.push_back(fi);
      continue;
    }
    const bool was = found;
    const Cost before = best.cost;
    offer(s, "fixed " + s.canonical(), true);
    if (found && (!was || best.cost < before)) best_fixed_index = fi;
  }

  // The DP over the stash bound S, by branch and bound (see the header).

  ChainModel constrained;
  // The least-cost plan with held <= s_hi whose model peak fits the budget less extra(s_lo).
  // slot: the DP's memory unit (0: slot_bytes_for, plan_budget's); a finer one lets the branch
  // and bound split intervals below 1 MiB where the table stays small (see `finer` below).
  const auto solve = [&](const ChainModel& base, int64_t s_lo, int64_t s_hi, int64_t less,
                         int64_t slot_given = 0) {
    const int64_t rel = budget_ - base.base_bytes - extra_model(g, s_lo, stage) - less;
    if (rel < 0) {  // nothing fits: a bound no cost reaches
      ChainSolution none;
      none.lower_bound = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
      return none;
    }
    constrained = base;  // the head term forces held <= s_hi: held + head <= rel
    constrained.head_bwd_bytes = std::max(base.head_bwd_bytes, rel - s_hi);
    const int64_t slot = slot_given > 0 ? slot_given : slot_bytes_for(rel, nb);
    ChainSolver solver(constrained, slot, true, &scratch_);
    ++solves_;
    cells_ += (nb + 1) * (rel / slot + 1);
    return solver.solve(rel);
  };
  const Cost inf{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
  const auto lower = [&](const ChainSolution& sol) {
    return sol.feasible ? (sol.optimal ? sol.cost : sol.lower_bound) : sol.lower_bound;
  };
  Cost upper = inf;  // the least model cost of a plan found (fits under the model)
  int64_t best_s = 0;  // the bound at which it was found
  struct Interval {
    Cost lb;
    int64_t lo, hi;
    int64_t unit;  // the DP slot its bound was solved with
    bool operator>(const Interval& o) const {
      return lb != o.lb ? lb > o.lb : lo != o.lo ? lo > o.lo : hi > o.hi;
    }
  };
  // A plan at the bound s: feasible under the model; simulated (tightened by its excess when the
  // simulation is over, up to three times).
  const auto point = [&](const ChainModel& base, int64_t s_bound, int64_t slot = 0) {
    int64_t less = 0;
    for (int round = 0; round < 4; ++round) {
      const ChainSolution sol = solve(base, s_bound, s_bound, less, slot);
      if (!sol.feasible) return;
      if (round == 0 && sol.cost < upper) {
        upper = sol.cost;
        best_s = s_bound;
      }
      const std::optional<int64_t> peak = offer(strategy_of(sol.units), "DP", sol.optimal);
      if (!peak || *peak <= budget_) return;
      less += *peak - budget_;
    }
  };
  // The branch and bound on one view of the model; returns the proven lower bound.
  const auto search = [&](const ChainModel& m) {
    upper = inf;
    const int64_t hi = std::max<int64_t>(g.held_max, 0);
    point(m, hi);
    if (extra_model(g, hi, stage) == extra_model(g, 0, stage)) {
      // No micro-batch in flight besides this one (or interleaved chunks that cost nothing
      // more): the stash bound constrains nothing; the one solve is the model's optimum (or its
      // bound).
      return std::min(upper, lower(solve(m, hi, hi, 0)));
    }
    // lb(lo, hi) bounds the cost of every plan whose held bytes H lie in [lo, hi]: such a plan
    // fits the budget less extra(H) <= the budget less extra(lo), and holds at most hi.
    std::priority_queue<Interval, std::vector<Interval>, std::greater<>> open;
    const int64_t room = std::max<int64_t>(budget_ - m.base_bytes, 1);
    const int64_t unit = slot_bytes_for(room, nb);
    open.push({lower(solve(m, 0, hi, 0)), 0, hi, unit});
    Cost bound = inf;  // of the intervals left unsplit
    const int64_t at_start = cells_;
    // A finer DP slot for an interval one slot wide (0: none): 1/64 of it, at least kFineSlot
    // bytes, and only while the table keeps within plan_budget's limits (kMaxSlots, kMaxCells) at
    // this budget. Every slot gives a valid bound (the DP's rounded-down relaxation) and feasible
    // plans (rounded up), so a finer one only tightens the interval's bound and lets it split
    // further; where the floor is reached the gap left is extra(hi) - extra(lo) of one fine slot.
    constexpr int64_t kFineSlot = 4096;
    const auto finer = [&](int64_t u) -> int64_t {
      const int64_t f = std::max({u / 64, kFineSlot, (room + kMaxSlots - 1) / kMaxSlots});
      if (f >= u || (nb + 1) * (room / f + 1) > kMaxCells) return 0;
      return f;
    };
    while (!open.empty()) {
      const Interval iv = open.top();
      if (!(iv.lb < upper)) break;  // every plan left costs at least the best found
      open.pop();
      // Split down to one slot of the DP (the intervals' bound cannot tighten below it), then
      // again at a finer slot where one is allowed, and at most kMaxStageCells DP table cells
      // per view.
      const bool capped = cells_ - at_start >= kMaxStageCells;
      if (iv.hi - iv.lo <= iv.unit && !capped) {
        if (const int64_t f = finer(iv.unit); f > 0) {
          const Cost lb = lower(solve(m, iv.lo, iv.hi, 0, f));
          if (lb < upper) open.push({lb, iv.lo, iv.hi, f});
          continue;
        }
      }
      if (iv.hi - iv.lo <= iv.unit || capped) {
        // A leaf: its plans fit the budget less extra(lo) at best; the plan at hi is optimal
        // among them for the budget less extra(hi) - extra(lo) (the gap).
        bound = std::min(bound, iv.lb);
        point(m, iv.hi, iv.unit);
        best.gap_bytes = std::max(best.gap_bytes, extra_model(g, iv.hi, stage) -
                                                      extra_model(g, iv.lo, stage));
        continue;
      }
      const int64_t mid = iv.lo + (iv.hi - iv.lo) / 2;
      point(m, mid, iv.unit);
      for (const auto& [a, b] : {std::pair{iv.lo, mid}, std::pair{mid, iv.hi}}) {
        const Cost lb = lower(solve(m, a, b, 0, iv.unit));
        if (lb < upper) open.push({lb, a, b, iv.unit});
      }
    }
    return std::min(bound, upper);
  };
  // As plan_budget: the model sees offload's device bytes only roughly, so the view without the
  // offload options is searched first, then the whole model; both views' plans are candidates
  // (simulated), and the bound is the whole model's (it covers every option).
  search(g.no_offload);
  const Cost without = upper;
  best.lower_bound = search(*g.model);
  upper = std::min(upper, without);
  // planner8 (issue 15): the deferred every:k and block:k, cheapest model cost first. Before,
  // all of them were simulated (~250 per distinct stage graph at 125 blocks: 1.3 s of the 3.3 s
  // the 1,000-block, 8-stage plan took under the caching allocator). Their model cost is exact
  // where the chain model is (no data-parallel stream to slow recompute; tests/test_planner.cpp),
  // checked against each simulation: once one differs, every remaining one is simulated, as
  // before. One whose model cost exceeds the stage's best cannot win it. Ties go to the fixed
  // strategy first in list order, as when they were offered before the DP's plans.
  {
    std::vector<Cost> mc(fixed_.size());
    for (size_t fi : deferred) mc[fi] = model_cost(g, fixed_[fi]);
    std::stable_sort(deferred.begin(), deferred.end(),
                     [&](size_t x, size_t y) { return mc[x] < mc[y]; });
    bool exact = true;
    for (size_t fi : deferred) {
      if (exact && found && best.cost < mc[fi]) break;
      const Strategy& s = fixed_[fi];
      const std::optional<Result>& r = simulate(g, s);
      if (!r) continue;
      if (!(cost_of(*r) == mc[fi])) exact = false;
      const int64_t peak = stage_peak(*r, stage);
      if (least_peak < 0 || peak < least_peak) least_peak = peak;
      if (peak > budget_) continue;
      const Cost c = cost_of(*r);
      const bool fixed_best = best.source.rfind("fixed ", 0) == 0;
      if (!found || c < best.cost ||
          (c == best.cost && (!fixed_best || fi < best_fixed_index))) {
        found = true;
        best.strategy = s;
        best.source = "fixed " + s.canonical();
        best.cost = c;
        best.peak_bytes = peak;
        best.model_optimal = true;
        best_fixed_index = fi;
      }
    }
  }
  if (!found) {
    throw ConfigError("--strategy", "budget",
                      "no plan fits a peak of " + gib_text(budget_) + " on pipeline stage " +
                          std::to_string(stage) + " (" + std::to_string(best.in_flight) +
                          " micro-batch(es) in flight); the smallest stage peak found is " +
                          gib_text(least_peak));
  }
  best.model_cost = upper;
  out.proven = out.proven && best.model_optimal && best.model_cost == best.lower_bound;
  out.gap_bytes = std::max(out.gap_bytes, best.gap_bytes);
  out.stages.push_back(best);
}

PipelinePlan Planner::run() {
  validate(device_);
  validate(model_);
  validate(model_, setup_);
  const int64_t p = setup_.pp;
  PipelinePlan out;
  out.budget_bytes = budget_;
  fixed_ = fixed_strategies(graph_of(0).graph.n_blocks);
  for (int64_t i = 0; i < p; ++i) plan_stage(i, out);
  for (const StagePlan& s : out.stages) out.per_stage.push_back(s.strategy);
  out.strategy = join_stage_strategies(out.per_stage, graph_of(0).graph.n_blocks);

  // The best fixed strategy for the whole pipeline: every stage fits, least summed cost (ties:
  // the first in list order). every:k and block:k outside a stage's margin do not fit it.
  // planner8 (issue 15): the stages no longer simulate every every:k and block:k within their
  // margin, so the strategies are tried in order of summed model cost, simulated on demand
  // (cached), and the first that fits every stage is the answer while every simulated cost
  // equals the model's; after a difference, all are tried, as before.
  std::vector<Cost> summed(fixed_.size());
  for (size_t fi = 0; fi < fixed_.size(); ++fi)
    for (int64_t i = 0; i < p; ++i) {
      const Cost c = model_cost(graph_of(i), fixed_[fi]);
      summed[fi].time_ns += c.time_ns;
      summed[fi].flops += c.flops;
    }
  std::vector<size_t> order(fixed_.size());
  for (size_t fi = 0; fi < order.size(); ++fi) order[fi] = fi;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return summed[x] < summed[y]; });
  Cost best_cost;
  size_t best_index = fixed_.size();
  bool exact = true;
  for (size_t fi : order) {
    if (exact && out.fixed_found) break;  // the first that fit: no later one costs less
    const Strategy& s = fixed_[fi];
    Cost total;
    bool fits = true;
    for (int64_t i = 0; i < p; ++i) {
      StageGraph& sg = graph_of(i);
      if ((s.kind == StrategyKind::kEvery || s.kind == StrategyKind::kBlock) &&
          !within_margin(sg, s, i)) {
        fits = false;
        break;
      }
      const std::optional<Result>& r = simulate(sg, s);
      if (!r) {
        fits = false;
        break;
      }
      if (!(cost_of(*r) == model_cost(sg, s))) exact = false;
      if (stage_peak(*r, i) > budget_) {
        fits = false;
        break;
      }
      total.time_ns += cost_of(*r).time_ns;
      total.flops += cost_of(*r).flops;
    }
    if (fits && (!out.fixed_found || total < best_cost || (total == best_cost && fi < best_index))) {
      out.fixed_found = true;
      out.fixed = s;
      best_cost = total;
      best_index = fi;
    }
  }
  if (out.fixed_found) out.fixed_result = simulate_pipeline(model_, setup_, device_,
                                                            std::vector<Strategy>(static_cast<size_t>(p), out.fixed),
                                                            options_);

  // Verified together: never an unverified plan.
  out.result = simulate_pipeline(model_, setup_, device_, out.per_stage, options_);
  for (size_t i = 0; i < out.result.stages.size(); ++i) {
    const int64_t peak = budget_peak_bytes(out.result.stages[i].result);
    if (peak != out.stages[i].peak_bytes || peak > budget_)
      throw std::logic_error("plan_pipeline: stage " + std::to_string(i) + " simulated at " +
                             gib_text(peak) + ", planned at " + gib_text(out.stages[i].peak_bytes));
  }
  out.simulations = simulations_;
  out.dp_solves = solves_;
  return out;
}

}  // namespace

PipelinePlan plan_pipeline(const ModelConfig& model, const TrainSetup& setup, const Device& device,
                           int64_t budget_bytes, const SimOptions& options) {
  if (budget_bytes < 1) throw ConfigError("--strategy", "budget", "the budget must be positive");
  Planner planner(model, setup, device, options, budget_bytes);
  return planner.run();
}

Strategy join_stage_strategies(const std::vector<Strategy>& per_stage, int64_t n_blocks) {
  std::vector<ChainUnit> all;
  for (size_t i = 0; i < per_stage.size(); ++i) {
    const int64_t off = static_cast<int64_t>(i) * n_blocks;
    for (ChainUnit u : units_of(resolve(per_stage[i], n_blocks))) {
      u.first += off;
      u.last += off;
      all.push_back(u);
    }
  }
  return strategy_of(all);
}

std::vector<Strategy> stage_strategies(const Strategy& s, int64_t layers, int64_t p) {
  const int64_t nb = layers / p;
  const bool global = p > 1 && s.kind == StrategyKind::kCustom && !s.clauses.empty() &&
                      s.clauses.back().last == layers - 1 && nb * p == layers;
  if (!global) return std::vector<Strategy>(static_cast<size_t>(p), s);
  const std::vector<ChainUnit> units = units_of(resolve(s, layers));
  std::vector<std::vector<ChainUnit>> parts(static_cast<size_t>(p));
  for (ChainUnit u : units) {
    const int64_t st = u.first / nb;
    if (u.last / nb != st)
      throw ConfigError("--strategy", s.canonical(),
                        "a checkpointed segment spans pipeline stages " + std::to_string(st) +
                            " and " + std::to_string(u.last / nb) + " (blocks " +
                            std::to_string(u.first) + "-" + std::to_string(u.last) + "; " +
                            std::to_string(nb) + " blocks per stage)");
    u.first -= st * nb;
    u.last -= st * nb;
    parts[static_cast<size_t>(st)].push_back(u);
  }
  std::vector<Strategy> out;
  for (const auto& part : parts) out.push_back(strategy_of(part));
  return out;
}

}  // namespace sim
