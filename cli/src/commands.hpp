// The verbs of actsim. Each writes its output and returns the exit status; bad input throws
// sim::ConfigError (reported by actsim_main with exit status 2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
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
// What `plan` writes for one configuration (not a pipeline) in a format: the table, or the CSV
// or JSON with the implementation-settings section (native_* columns, a native object); the
// Python package's plan() reads the CSV form.
std::string plan_output(const Invocation& inv, const std::vector<std::filesystem::path>& dirs,
                        cli_common::Format format);
// --budget as plan takes it: bytes with an optional KiB..TiB suffix, positive; ConfigError naming
// --budget otherwise.
int64_t parse_budget(const std::string& text);
// pplan (issue 15): plan with --pp > 1 or --num-microbatches > 1, per stage
// (cli/src/cmd_plan_pipeline.cpp).
bool is_pipeline_plan(const Invocation& inv);
int cmd_plan_pipeline(const Invocation& inv);
// planner6 (issue 15): the implementation-settings section of `plan` (sim/planner_native.hpp)
// in its CSV (columns appended after schema v1's: native_status, native_impl, native_strategy,
// native_setting, native_peak_bytes, native_recompute_time_ns, native_recompute_flops,
// native_stage_strategies) and its JSON (a "native" object), for single-graph and pipeline
// plans (cli/src/cmd_plan.cpp). The figures are those of the plan's own row: one step (for a
// pipeline, simulate_pipeline's summary of the setting run on every stage); a stage's are one
// micro-batch's on that stage.
struct NativeSummary {
  std::string status = "no impl";  // found | none fits | not searched | no impl
  std::string impl;                // name@version
  std::string strategy, setting;   // when found
  int64_t peak_bytes = 0, recompute_time_ns = 0, offload_stall_ns = 0, recompute_flops = 0;
  int64_t candidates = 0;
  struct Stage {  // pipeline plans: the best setting for each stage alone
    int64_t stage = 0, in_flight = 1;
    bool found = false;
    std::string strategy, setting;
    int64_t peak_bytes = 0;
    int64_t added_time_ns = 0;  // recompute plus offload stall, one micro-batch
    int64_t recompute_flops = 0;
  };
  std::vector<Stage> stages;
};
std::string plan_csv(const sim_io::Row& row, const NativeSummary& native);
std::string plan_json(const sim_io::Row& row, const NativeSummary& native);
int cmd_calibrate(const Invocation& inv);  // fit a device's efficiencies to per-op timings
int cmd_snapshot(const Invocation& inv);   // a PyTorch memory snapshot's measured peaks
int cmd_compare(const Invocation& inv);    // a snapshot against the simulated step

}  // namespace actsim_cli
