// The verbs of actsim. Each writes its output and returns the exit status; bad input throws
// sim::ConfigError (reported by actsim_main with exit status 2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "app.hpp"
#include "sim/graph.hpp"
#include "sim/planner.hpp"
#include "sim_io/output.hpp"
#include "sweep.hpp"

namespace actsim_cli {

int cmd_run(const Invocation& inv);     // one table (or CSV rows, or JSON objects) per point
int cmd_sweep(const Invocation& inv);   // every point, in parallel, rows in configuration order
int cmd_valley(const Invocation& inv);  // peak memory against the number of checkpoints
int cmd_trace(const Invocation& inv);   // one configuration's step as a Chrome/Perfetto trace
int cmd_models(const Invocation& inv);  // the models and devices that names resolve to
int cmd_merge(const Invocation& inv);   // join a sharded sweep's CSV files
int cmd_validate(const Invocation& inv);  // measured rows against re-simulation (exit 3: misses)
int cmd_plan(const Invocation& inv);    // the least-recompute plan under --budget
// The steps of `actsim plan` up to its plan, shared with the Python package's plan(): the one
// configuration the flags name, its graph, and the planner's plan under --budget (a planner
// error re-named after --budget). Throws sim::ConfigError.
struct PlannedPoint {
  cli_common::Axes axes;
  cli_common::Inputs inputs;
  cli_common::Point point;
  int64_t budget = 0;
  sim::Graph graph;
  sim::BudgetPlan plan;
  sim_io::Row row() const;  // the plan's row of CSV schema v1 (strategy: the plan's)
};
PlannedPoint plan_point(const Invocation& inv, const std::vector<std::filesystem::path>& dirs);
// --budget as plan takes it: bytes with an optional KiB..TiB suffix, positive; ConfigError naming
// --budget otherwise.
int64_t parse_budget(const std::string& text);
// pplan (issue 15): plan with --pp > 1 or --num-microbatches > 1, per stage
// (cli/src/cmd_plan_pipeline.cpp).
bool is_pipeline_plan(const Invocation& inv);
int cmd_plan_pipeline(const Invocation& inv);
int cmd_calibrate(const Invocation& inv);  // fit a device's efficiencies to per-op timings
int cmd_snapshot(const Invocation& inv);   // a PyTorch memory snapshot's measured peaks
int cmd_compare(const Invocation& inv);    // a snapshot against the simulated step

}  // namespace actsim_cli
