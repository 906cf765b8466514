// Simulations per second of the pinned scenario of issue 2: GPT-3 175B (models/
// korthikanti-175b.json), b = 1, s = 2048, t = 8, on models/devices/h100-sxm.json, strategies none,
// full and selective, timeline off and on. "Full pipeline" builds the graph each time (what one
// `actsim run` point costs); "plan only" reuses the graph, as sweeps over strategies do. The third
// argument reuses a sim::Workspace across iterations (as a sweep worker does) or not.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "sim/simulate.hpp"
#include "sim_io/load.hpp"

namespace {

struct Scenario {
  sim::ModelConfig model;
  sim::Device device;
  sim::TrainSetup setup;
};

const Scenario& scenario() {
  static const Scenario s = [] {
    const std::vector<std::filesystem::path> dirs{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
    Scenario sc;
    sc.model = sim_io::load_model("korthikanti-175b", dirs);
    sc.device = sim_io::load_device("h100-sxm", dirs);
    sc.setup.micro_batch = 1;
    sc.setup.seq = 2048;
    sc.setup.tp = 8;
    return sc;
  }();
  return s;
}

const char* kStrategies[] = {"none", "full", "selective"};

void full_pipeline(benchmark::State& state) {
  const Scenario& sc = scenario();
  const sim::Strategy st = sim::parse_strategy(kStrategies[state.range(0)]);
  sim::SimOptions opt;
  opt.record_timeline = state.range(1) != 0;
  const bool reuse = state.range(2) != 0;
  sim::Workspace ws;
  for (auto _ : state) {
    sim::Result r = reuse ? sim::simulate(sc.model, sc.setup, sc.device, st, opt, ws)
                          : sim::simulate(sc.model, sc.setup, sc.device, st, opt);
    benchmark::DoNotOptimize(r.peak_allocated_bytes);
  }
  state.SetLabel(std::string(kStrategies[state.range(0)]) + (opt.record_timeline ? " timeline" : "") +
                 (reuse ? " workspace" : ""));
  state.counters["sims/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void plan_only(benchmark::State& state) {
  const Scenario& sc = scenario();
  const sim::Graph g = sim::build_graph(sc.model, sc.setup, sc.device);
  const sim::Plan plan = sim::resolve(sim::parse_strategy(kStrategies[state.range(0)]), g.n_blocks);
  sim::SimOptions opt;
  opt.record_timeline = state.range(1) != 0;
  const bool reuse = state.range(2) != 0;
  sim::Workspace ws;
  for (auto _ : state) {
    sim::Result r = reuse ? sim::simulate_plan(g, plan, sc.device, opt, ws)
                          : sim::simulate_plan(g, plan, sc.device, opt);
    benchmark::DoNotOptimize(r.peak_allocated_bytes);
  }
  state.SetLabel(std::string(kStrategies[state.range(0)]) + (opt.record_timeline ? " timeline" : "") +
                 (reuse ? " workspace" : ""));
  state.counters["sims/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void graph_build(benchmark::State& state) {
  const Scenario& sc = scenario();
  for (auto _ : state) {
    sim::Graph g = sim::build_graph(sc.model, sc.setup, sc.device);
    benchmark::DoNotOptimize(g.ops.size());
  }
}

}  // namespace

BENCHMARK(full_pipeline)->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(plan_only)->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(graph_build)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
