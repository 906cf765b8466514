// Shared by the executor tests (test_exec11, test_exec12, test_exec13, test_exec_lora6): one
// training step of a graph under a strategy, the finite-difference check of every parameter's
// gradient, and the comparison of a step with the simulator under each strategy.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "sim/graph.hpp"
#include "sim/schedule.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

namespace fixtures {

// Two sequences of 8 tokens under an implementation, precision and attention (test_exec12,
// test_exec13).
inline sim::TrainSetup small(sim::Impl impl, sim::Precision p, sim::AttentionKind att) {
  sim::TrainSetup s;
  s.impl = impl;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = p;
  s.attention = att;
  return s;
}

// How many of g's ops run the executor kernel `e`.
inline int count(const sim::Graph& g, sim::Exec e) {
  int n = 0;
  for (const sim::OpArgs& a : g.args) n += a.exec == e;
  return n;
}

// One step of g under `strategy` on the CPU reference executor.
inline executor::StepResult execute(const sim::Graph& g, const char* strategy,
                                    const executor::StepOptions& o = {}) {
  const sim::Plan plan = sim::resolve(sim::parse_strategy(strategy), g.n_blocks);
  const sim::Schedule sched = sim::build_schedule(g, plan, sim::recompute_mode(g));
  return executor::run_cpu(g, plan, sched, o);
}

// Every parameter element's gradient against a Richardson-extrapolated central difference
// (h = 5e-3; |fd - an| <= 1e-4 + 1e-3 |an|, test_executor.cpp's bound). Returns the count.
inline int64_t finite_differences(const sim::Graph& g) {
  const executor::StepResult base = execute(g, "full");
  const double h = 5e-3;
  int64_t checked = 0;
  for (size_t p = 0; p < g.param_storages.size(); ++p)
    for (int64_t i = 0; i < static_cast<int64_t>(base.grads[p].size()); ++i) {
      auto diff = [&](double step) {
        executor::StepOptions up, down;
        up.perturb_param = down.perturb_param = static_cast<int32_t>(p);
        up.perturb_element = down.perturb_element = i;
        up.perturb_delta = step;
        down.perturb_delta = -step;
        const executor::StepResult a = execute(g, "none", up), b = execute(g, "none", down);
        return (a.loss - b.loss) / (a.perturbed_value - b.perturbed_value);
      };
      const double fd = (4 * diff(h) - diff(2 * h)) / 3;
      const double an = base.grads[p][i];
      CAPTURE(p);
      CAPTURE(i);
      CHECK(std::abs(fd - an) <= 1e-4 + 1e-3 * std::abs(an));
      ++checked;
    }
  return checked;
}

// exec13 (moved from test_exec12.cpp, where test_exec13.cpp needs it too): under each strategy,
// the peak, its event and phase as the simulator has them, the step's end at its baseline, a
// finite loss and gradients bitwise identical to `none`'s.
inline void runs_exact(const sim::ModelConfig& m, const sim::TrainSetup& s, const sim::Device& dev,
                       const std::vector<const char*>& strategies) {
  const sim::Graph g = sim::build_graph_exec(m, s, dev);
  const executor::StepResult ref = execute(g, "none");
  bool nonzero = false;
  for (const auto& gr : ref.grads)
    for (double x : gr) nonzero = nonzero || x != 0.0;
  CHECK(nonzero);
  for (const char* st : strategies) {
    const std::string strategy = st;
    CAPTURE(strategy);
    const sim::Result sim = sim::simulate(m, s, dev, sim::parse_strategy(st));
    const executor::StepResult run = execute(g, st);
    CHECK(run.peak_bytes == sim.peak_requested_bytes);
    CHECK(run.peak_event_index == sim.peak_event_index);
    CHECK(run.peak_phase == sim.peak_phase);
    CHECK(run.end_bytes == run.baseline_bytes);
    CHECK(std::isfinite(run.loss));
    CHECK(run.loss == ref.loss);
    CHECK(run.grad_bytes == ref.grad_bytes);
  }
}

}  // namespace fixtures
