// The planner of `budget:<bytes>` (DESIGN.md §4): the plan with the least recompute time whose
// peak fits a budget, chosen per block among store, selective, sac:mm and checkpointed segments.
//
// Three layers, each usable alone:
//  1. ChainModel: per-block costs (held bytes, peak terms, recompute time and FLOPs) for every
//     option, measured on the real graph by simulating five uniform probe plans (probe_chain).
//  2. solve_chain: a rotor-style dynamic program over the chain (Beaumont et al. 2019, "Optimal
//     checkpointing for heterogeneous chains"), exact under the ChainModel with memory counted in
//     slots (held bytes and peak terms rounded up to whole slots).
//  3. plan_budget: probe, solve, verify by simulating the plan; if the simulated peak exceeds the
//     budget, tighten the DP's budget by the excess and solve again (bounded). It solves two views
//     of the model (below) and keeps the cheaper verified plan, or a cheaper fixed strategy that
//     fits, since each view bounds one phase loosely.
//
// Contract of the memory model (what the DP assumes; plan_budget checks it by simulation):
// the step's peak is the largest of
//  - outside the blocks (embedding, optimizer): a constant;
//  - forward of block i: D_i + sum_{j<i} held_j + fwd_i, with D_i the forward-only bytes below i
//    (autocast's weight casts, cached until forward ends, of blocks whose option does not keep
//    them for backward, counted as if every option dropped them: conservative by the casts that
//    store and selective blocks keep; forward_view is the other way round);
//  - the head (final norm, loss), forward and backward: sum of all held_j plus a constant;
//  - backward of a unit (a block, or a segment recomputed as one): sum over earlier units of
//    held_j plus the unit's own backward term (for a segment: its recomputed blocks' bytes).
// held_j is what block j holds from the end of forward to its backward (the backward view).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "sim/strategy.hpp"

namespace sim {

// The per-block options a plan chooses among, one row each in BlockCosts::single. Checkpointed
// blocks (segments) are costed by BlockCosts' segment fields, since a segment spans blocks.
// To add an option, add a value here before kCount, measure its row in probe_chain (one uniform
// probe plan of that mode), map it in block_mode_of() and clause_mode_of() in planner.cpp; the DP
// iterates the table unchanged. Offload and offload+full are single-block rows: offload+full
// checkpoints one block alone (its input on the host), so it needs no segment terms. Their cost
// is the compute stream's wait on copies back (the stall) plus any recompute: the objective is
// the time the plan adds to the step, recompute and stalls together.
enum class PlanOption : uint8_t { kStore, kSelective, kSacMm, kOffload, kOffloadFull, kCount };
inline constexpr int kPlanOptionCount = static_cast<int>(PlanOption::kCount);

// A recompute cost: time first, FLOPs break ties (lexicographic).
struct Cost {
  int64_t time_ns = 0;
  int64_t flops = 0;
  friend bool operator==(const Cost&, const Cost&) = default;
  friend auto operator<=>(const Cost&, const Cost&) = default;
};

// One option's costs for one block. Bytes are relative to ChainModel::base_bytes.
struct OptionRow {
  bool available = true;
  int64_t held_bytes = 0;  // held from the end of forward until the block's backward
  int64_t fwd_bytes = 0;   // forward peak = D_i + held below + this
  int64_t bwd_bytes = 0;   // backward peak (recompute inside the block included) = held below + this
  Cost cost;               // recompute
  int64_t fwd_held_bytes = 0;  // held below later blocks during forward (autocast's casts too)
  friend bool operator==(const OptionRow&, const OptionRow&) = default;
};

// One block's costs. Segment terms: a segment [a, b] is checkpointed at a's input and recomputed
// as one unit before b's backward (sim::Segment).
struct BlockCosts {
  std::array<OptionRow, kPlanOptionCount> single;
  int64_t fwd_only_bytes = 0;  // D: forward-only bytes this block adds below later blocks
  // As a segment's first block (head) or a later one (inner):
  int64_t seg_head_held = 0;    // held: the checkpointed input
  int64_t seg_inner_held = 0;   // held by a later block of a segment (normally 0)
  int64_t seg_head_fwd_held = 0, seg_inner_fwd_held = 0;  // held below later blocks in forward
  int64_t seg_head_fwd = 0, seg_inner_fwd = 0;  // forward peak above what is below it
  int64_t seg_recomputed = 0;   // held once recomputed, below later blocks of its segment
  int64_t seg_bwd = 0;          // backward peak above what is below it (recomputed included)
  int64_t seg_recompute = 0;    // recompute peak above what is below it and seg_grad_state(b)
  int64_t seg_grad_state = 0;   // gradients live when the segment ending here starts recompute
  Cost seg_inner_cost;          // recompute as a non-last block of a segment
  Cost seg_last_cost;           // recompute as a segment's last block (early stop applies)
  // --- planner8 (issue 15): recompute as a non-last block of the segment that ends at the
  // chain's last block, which backward recomputes first (right after the head's backward, before
  // any block's gradients are queued on the data-parallel stream); time < 0: seg_inner_cost ---
  Cost seg_final_inner_cost{-1, -1};
  // --- end planner8 ---
  friend bool operator==(const BlockCosts&, const BlockCosts&) = default;
};

// planner8: a block's inner cost in the segment ending at the chain's last block.
inline const Cost& final_inner_cost(const BlockCosts& c) {
  return c.seg_final_inner_cost.time_ns < 0 ? c.seg_inner_cost : c.seg_final_inner_cost;
}

struct ChainModel {
  std::vector<BlockCosts> blocks;
  int64_t base_bytes = 0;       // persistent state before the step; every term is relative to it
  int64_t outer_bytes = 0;      // peak outside the blocks and the head (embedding, optimizer)
  int64_t head_fwd_bytes = 0;   // head forward peak = D_n + sum of held + this
  int64_t head_bwd_bytes = 0;   // head backward peak = sum of held + this
  // --- planner8 (issue 15): the probe simulations the model was measured by (7, or 9 where the
  // inner blocks' recompute is timed beside the data-parallel stream: planner_probe.cpp) ---
  int64_t probes = 7;
  // --- end planner8 ---
  friend bool operator==(const ChainModel&, const ChainModel&) = default;
};

// The forward view of a model: every option holds what the forward pass sees (autocast's weight
// casts included, whether or not the option keeps them for backward) and no forward-only term.
// Exact in forward, conservative in backward by the casts an option drops when forward ends,
// where the model itself (the backward view) is exact in backward and conservative in forward.
// plan_budget solves both and keeps the cheaper verified plan.
struct ChainModel;
ChainModel forward_view(const ChainModel& model);

// One unit of a chain plan: a block in a single option, or a segment [first, last].
struct ChainUnit {
  int64_t first = 0;
  int64_t last = 0;
  bool segment = false;
  PlanOption option = PlanOption::kStore;  // when !segment
  friend bool operator==(const ChainUnit&, const ChainUnit&) = default;
};

// What the model says about a plan: its peak (relative to base_bytes) and recompute cost.
struct ChainEval {
  int64_t peak_bytes = 0;
  Cost cost;
};
// Peak and cost of `units` (consecutive, covering every block) under `model`, exact bytes.
ChainEval evaluate_chain(const ChainModel& model, const std::vector<ChainUnit>& units);

// Issue 15: evaluate_chain's peak_bytes of every:k (segments [a, min(a + k, n) - 1]) for every
// k = 1..n at once (index k; index 0 unused), in O(n log n) instead of O(n^2).
std::vector<int64_t> every_k_model_peaks(const ChainModel& model);

struct ChainSolution {
  bool feasible = false;
  bool optimal = false;  // proven optimal in exact bytes (see solve_chain)
  std::vector<ChainUnit> units;
  Cost cost;
  Cost lower_bound;      // when !optimal: no plan that fits costs less
  int64_t model_peak_bytes = 0;  // evaluate_chain's peak of the plan (exact bytes)
  int64_t slot_bytes = 1;
  int64_t slots = 0;
};

// The least-cost plan whose model peak is at most budget_bytes (relative to base_bytes), memory
// counted in slots of slot_bytes. First every term rounded down (a relaxation: its optimum is a
// lower bound on the exact one, and is the exact optimum when its plan fits in exact bytes, then
// `optimal`); else rounded down again on budgets lowered by the overshoot (up to three passes)
// until a plan fits in exact bytes, else every term rounded up (its plans always fit; the
// rounding costs at most one slot per unit). Infeasible when no plan fits.
// Segment ends are found by a sliding-window minimum when no block holds anything as a segment's
// inner block (true of transformer blocks), which makes long chains of repeated blocks cheap:
// O(n * slots * log K) instead of O(n * K * slots) for segments of up to K blocks. window = false
// scans every segment end instead (the reference the tests hold the window against).
ChainSolution solve_chain(const ChainModel& model, int64_t budget_bytes, int64_t slot_bytes,
                          bool window = true);

// solve_chain for many budgets of one model and slot size (issue 15): the DP's tables are built
// once, at the largest budget asked (or `reserve_bytes` when larger), and every lower budget is
// read from them, so that the planner's verify-and-tighten loop costs one DP per table, not one
// per target. solve() returns what solve_chain returns (same costs; among plans of equal cost it
// may name another); least_memory() what solve_chain_least_memory returns.
// The DP's table memory, lent to one ChainSolver at a time (solvers built one after the other
// reuse it instead of faulting in fresh pages; at 1,000 blocks a table is ~60 MB of choices, its
// values two rows where every row reads only the next one (planner7), ~300 MB before).
class ChainScratch {
 public:
  ChainScratch();
  ~ChainScratch();
  struct Buffers;
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

class ChainSolver {
 public:
  ChainSolver(const ChainModel& model, int64_t slot_bytes, bool window = true,
              ChainScratch* scratch = nullptr);
  ~ChainSolver();
  ChainSolver(const ChainSolver&) = delete;
  ChainSolver& operator=(const ChainSolver&) = delete;
  void reserve(int64_t budget_bytes) { built_hint_ = std::max(built_hint_, budget_bytes); }
  ChainSolution solve(int64_t budget_bytes);
  ChainSolution least_memory(int64_t budget_bytes);
  int64_t slot_bytes() const { return slot_; }
  int64_t builds() const { return builds_; }  // DP tables filled so far

 private:
  struct Tables;
  ChainSolution pass(bool up, int64_t budget, bool least_memory);
  const ChainModel& model_;  // must outlive the solver
  int64_t slot_ = 1, built_hint_ = 0, builds_ = 0;
  bool window_ = true;
  ChainScratch* scratch_ = nullptr;
  std::unique_ptr<ChainScratch> own_scratch_;
  std::unique_ptr<Tables> tables_;
};

// The plan of least model peak (ties: least cost) among those that fit budget_bytes, every term
// rounded up to slots: what plan_budget names when no plan fits the user's budget.
ChainSolution solve_chain_least_memory(const ChainModel& model, int64_t budget_bytes,
                                       int64_t slot_bytes);

// The slot size solve_chain is given by plan_budget: 1 MiB, doubled until the budget spans at
// most kMaxSlots slots and the DP's table ((n + 1) x slots cells of 20 bytes) at most kMaxCells.
inline constexpr int64_t kMaxSlots = 1 << 14;
inline constexpr int64_t kMaxCells = int64_t{1} << 25;
int64_t slot_bytes_for(int64_t budget_bytes, int64_t n_blocks = 0);

// Measures the ChainModel of `graph` by simulating five uniform plans with the timeline on
// (none, selective, sac:mm, full, and one segment of all blocks) under the exact allocator.
ChainModel probe_chain(const Graph& graph, const Device& device);

// The sim::BlockMode of a single-block option.
BlockMode block_mode_of(PlanOption option);

// The sim::Plan of a chain plan, and its custom: strategy (canonical, adjacent clauses merged).
Plan plan_of(const std::vector<ChainUnit>& units, int64_t n_blocks);
Strategy strategy_of(const std::vector<ChainUnit>& units);
// The chain units of a resolved plan (every fixed strategy is one).
std::vector<ChainUnit> units_of(const Plan& plan);

// The peak a budget is compared with: reserved bytes (equal to allocated under exact), as `fits`.
int64_t budget_peak_bytes(const Result& result);
// What a plan adds to the step, as every planner here compares plans: recompute time plus the
// wait on offload's copies back, then recompute FLOPs.
Cost cost_of(const Result& result);
// "12.34 GiB (13249974108 bytes)", as the planners' messages write a peak.
std::string gib_text(int64_t bytes);

// Up to this many blocks plan_budget also solves the forward view (deeper models use the
// backward view's DP alone; the fixed strategies are tried at any depth since issue 15).
inline constexpr int64_t kFullSearchBlocks = 256;

struct FixedChoice {
  bool found = false;
  Strategy strategy;
  Result result;
};

struct BudgetPlan {
  Strategy strategy;          // custom:<spec>
  Plan plan;
  Result result;              // the plan simulated
  int64_t budget_bytes = 0;
  int64_t slot_bytes = 0;     // the DP's memory unit
  int64_t solves = 0;         // DP runs (1 + tightenings)
  int64_t model_peak_bytes = 0;  // the DP model's peak of the plan, absolute
  std::string model_line;     // the model and discretization, for the output
  std::string note;           // set when a fixed strategy replaced the DP's plan
  // Issue 15 (planner at scale):
  FixedChoice fixed;          // best_fixed's answer for this budget (a candidate at any depth)
  int64_t simulations = 0;    // plans simulated to verify (probes not counted; repeats cached)
  int64_t dp_tables = 0;      // DP tables filled (ChainSolver::builds, all views)
  // planner4: fixed strategies settled as misses by an exact-allocator simulation (a fifth of a
  // caching one) instead of a caching-allocator simulation (not in `simulations`).
  int64_t exact_simulations = 0;
  // planner5: plans settled as misses by the caching allocator's warm-up step alone (half a
  // caching simulation each; not in `simulations`).
  int64_t warmup_simulations = 0;
};

// The plan of `budget:<bytes>`: the DP's plan, verified by simulation (budget_peak_bytes);
// tightened and re-solved when the simulation exceeds the budget; the cheaper of the two views'
// plans, or a cheaper fixed strategy that fits (`note` says so; see kFullSearchBlocks). Throws ConfigError("--strategy"/"budget", ...) naming the
// smallest feasible peak when no plan fits.
BudgetPlan plan_budget(const Graph& graph, const Device& device, int64_t budget_bytes);

// The fixed strategies a plan is compared with: none, full, every:k (k = 2..n), sqrt, selective,
// sac:mm, block:k (k = 1..n-1), in this order.
std::vector<Strategy> fixed_strategies(int64_t n_blocks);

// The fixed strategy with the least recompute time (FLOPs, then list order, break ties) whose
// simulated peak (budget_peak_bytes) is at most budget_bytes; found = false when none fits.
// Issue 15: found without simulating every strategy: costs from the chain model (probe_chain;
// checked against each simulation, best_fixed_exhaustive on any difference), block:k by
// galloping and bisection on k (it assumes that checkpointing one more block never raises the
// simulated peak), every:k by bisection below the k of least model peak (it assumes the peak
// falls with k up to there and rises after; planner2: guarded, every k skipped whose model peak
// is below that of a k simulated not to fit is simulated too), the others simulated while they
// could win. plan_budget computes
// it too (BudgetPlan::fixed). planner2: where the model's costs differ from the simulation's
// (ZeRO-3's compute slowed by overlapping collectives, issue 11's time model), up to
// kFullSearchBlocks blocks it returns best_fixed_exhaustive's answer (planner8: found by
// simulating only the strategies whose cost bound, model cost / (1 + kOverlapComputeSlowdown),
// does not exceed the best cost found; the exhaustive search itself if a simulated cost falls
// below its bound); deeper, the cheapest
// simulated candidate, counting as candidates those within twice the largest relative
// difference seen (not proven to be the exhaustive answer; the benchmark compares at 1,000).
FixedChoice best_fixed(const Graph& graph, const Device& device, int64_t budget_bytes);

// The planner as it was before issue 15 (sim/src/planner_legacy.cpp): every view solved and
// verified from scratch, fixed strategies tried only up to kFullSearchBlocks blocks, each of them
// simulated. Kept so that the benchmark and the tests hold plan_budget and best_fixed against it
// on the same binary; nothing else calls it.
BudgetPlan plan_budget_legacy(const Graph& graph, const Device& device, int64_t budget_bytes);
// best_fixed by simulating every fixed strategy (2n + 5 simulations).
FixedChoice best_fixed_exhaustive(const Graph& graph, const Device& device, int64_t budget_bytes);

// The strategy a row runs: `budget:` becomes its plan's custom: spec (DESIGN.md §4), any other
// strategy is returned unchanged.
Strategy concrete_strategy(const Strategy& strategy, const Graph& graph, const Device& device);

// Revolve's optimum on an abstract unit-cost chain (Griewank & Walther 2000), by its recursive
// dynamic program (not the closed form): the least number of forward steps to reverse a chain of
// l steps with c checkpoint slots (one of them holding the chain's input). Counting: every step
// is advanced once in the first sweep except the last, and a step's forward immediately before
// its reverse (taping) is not counted. Multi-level: recomputed states may be checkpointed again.
// Returns -1 when c < 1.
int64_t revolve_steps(int64_t l, int64_t c);

}  // namespace sim
