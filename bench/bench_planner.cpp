// The budget planner's speed (issue 5): the DP (sim::solve_chain) on 1,000 identical blocks and on
// heterogeneous chains of 128 blocks, and the whole of `budget:` (probes, DP, verification) on
// real models. Targets: 1,000 identical blocks under 2 s, 128 heterogeneous blocks under 1 s, one
// core. Block costs are measured (sim::probe_chain) on GPT-2 small's block (models/gpt2-small.json,
// b = 8, s = 1024, bf16-amp, h100-sxm) with the layer count changed; the heterogeneous chain
// scales each block's figures by a deterministic factor in [0.7, 1.3], so no two blocks are equal.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/planner.hpp"
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"

namespace {

struct Inputs {
  sim::ModelConfig model;
  sim::Device device;
  sim::TrainSetup setup;
};

Inputs inputs(int64_t layers, const char* name = "gpt2-small") {
  const std::vector<std::filesystem::path> dirs{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
  Inputs in;
  in.model = sim_io::load_model(name, dirs);
  in.model.layers = layers;
  in.device = sim_io::load_device("h100-sxm", dirs);
  in.setup.micro_batch = 8;
  in.setup.seq = 1024;
  return in;
}

// The model's peak of all-store and of all-full; budgets are taken between them.
struct Range {
  int64_t lo = 0, hi = 0;
};
Range range_of(const sim::ChainModel& m) {
  const int64_t n = static_cast<int64_t>(m.blocks.size());
  std::vector<sim::ChainUnit> store, full;
  for (int64_t b = 0; b < n; ++b) {
    store.push_back({b, b, false, sim::PlanOption::kStore});
    full.push_back({b, b, true, sim::PlanOption::kStore});
  }
  return {sim::evaluate_chain(m, full).peak_bytes, sim::evaluate_chain(m, store).peak_bytes};
}

const sim::ChainModel& identical_1000() {
  static const sim::ChainModel m = [] {
    const Inputs in = inputs(1000);
    return sim::probe_chain(sim::build_graph(in.model, in.setup, in.device), in.device);
  }();
  return m;
}

// Deterministic factor in [0.7, 1.3] per block and field (64-bit LCG, Knuth's MMIX constants).
sim::ChainModel perturbed(sim::ChainModel m, int64_t n) {
  uint64_t state = 42;
  const auto scale = [&state](int64_t& v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<int64_t>(static_cast<double>(v) * (0.7 + 0.6 * static_cast<double>(state >> 11) / 9007199254740992.0));
  };
  const sim::BlockCosts mid = m.blocks[1];
  m.blocks.assign(static_cast<size_t>(n), mid);
  for (sim::BlockCosts& b : m.blocks) {
    for (sim::OptionRow& o : b.single) {
      scale(o.held_bytes);
      scale(o.fwd_bytes);
      scale(o.bwd_bytes);
      scale(o.cost.time_ns);
    }
    scale(b.seg_head_held);
    scale(b.seg_recomputed);
    scale(b.seg_bwd);
    scale(b.seg_recompute);
    scale(b.seg_inner_cost.time_ns);
    scale(b.seg_last_cost.time_ns);
  }
  return m;
}

const sim::ChainModel& heterogeneous_128() {
  static const sim::ChainModel m = perturbed(identical_1000(), 128);
  return m;
}
const sim::ChainModel& heterogeneous_1000() {
  static const sim::ChainModel m = perturbed(identical_1000(), 1000);
  return m;
}

// range(0): budget as a share (percent) of the way from all-full's peak to all-store's.
void solve(benchmark::State& state, const sim::ChainModel& m, bool window = true) {
  const Range r = range_of(m);
  const int64_t budget = r.lo + (r.hi - r.lo) * state.range(0) / 100;
  const int64_t slot = sim::slot_bytes_for(budget, static_cast<int64_t>(m.blocks.size()));
  int64_t units = 0;
  for (auto _ : state) {
    const sim::ChainSolution s = sim::solve_chain(m, budget, slot, window);
    units = static_cast<int64_t>(s.units.size());
    benchmark::DoNotOptimize(s.cost);
  }
  state.counters["slots"] = static_cast<double>(budget / slot);
  state.counters["units"] = static_cast<double>(units);
}

void identical_1000_blocks(benchmark::State& s) { solve(s, identical_1000()); }
void heterogeneous_128_blocks(benchmark::State& s) { solve(s, heterogeneous_128()); }
// Without the sliding window: every segment end scanned (what the window saves).
void identical_1000_blocks_scan(benchmark::State& s) { solve(s, identical_1000(), false); }
void heterogeneous_128_blocks_scan(benchmark::State& s) { solve(s, heterogeneous_128(), false); }
void heterogeneous_1000_blocks(benchmark::State& s) { solve(s, heterogeneous_1000()); }

// The whole of budget: on a real model: five probes, the DP, the verifying simulation.
void plan_budget(benchmark::State& state, int64_t layers, const char* name) {
  const Inputs in = inputs(layers, name);
  const sim::Graph g = sim::build_graph(in.model, in.setup, in.device);
  const Range r = range_of(sim::probe_chain(g, in.device));
  const int64_t base = sim::probe_chain(g, in.device).base_bytes;
  const int64_t budget = base + r.lo + (r.hi - r.lo) * state.range(0) / 100;
  for (auto _ : state) {
    sim::BudgetPlan p = sim::plan_budget(g, in.device, budget);
    benchmark::DoNotOptimize(p.result.peak_allocated_bytes);
  }
}
void plan_gpt2_1000(benchmark::State& s) { plan_budget(s, 1000, "gpt2-small"); }
void plan_gpt2_128(benchmark::State& s) { plan_budget(s, 128, "gpt2-small"); }
void plan_llama3_8b(benchmark::State& s) { plan_budget(s, 32, "llama-3-8b"); }

}  // namespace

BENCHMARK(identical_1000_blocks)->Arg(10)->Arg(50)->Arg(90)->Unit(benchmark::kMillisecond);
BENCHMARK(heterogeneous_128_blocks)->Arg(10)->Arg(50)->Arg(90)->Unit(benchmark::kMillisecond);
BENCHMARK(identical_1000_blocks_scan)->Arg(50)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(heterogeneous_128_blocks_scan)->Arg(50)->Unit(benchmark::kMillisecond);
BENCHMARK(heterogeneous_1000_blocks)->Arg(50)->Unit(benchmark::kMillisecond);
BENCHMARK(plan_gpt2_1000)->Arg(50)->Unit(benchmark::kMillisecond);
BENCHMARK(plan_gpt2_128)->Arg(50)->Unit(benchmark::kMillisecond);
BENCHMARK(plan_llama3_8b)->Arg(50)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
