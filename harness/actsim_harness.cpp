// actsim-harness: runs the simulator's schedules for real and writes measured rows in the CSV
// schema (DESIGN.md §6, §7). --backend cpu: the reference executor (harness/executor), whose
// peak is the exact ledger's peak (source `cpu`); --backend cuda is not built yet.
// Exit status as actsim's: 0 ok, 2 bad input (one line on stderr, no output file), 1 an internal
// error, which includes the executor disagreeing with the schedule.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>

#include "executor/executor.hpp"
#include "flags.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sim_io/output.hpp"
#include "sweep.hpp"

namespace {

struct HarnessFlags {
  cli_common::CommonFlags common;
  std::string backend = "cpu";
  uint64_t seed = 1;
};

// One measured row: the point's key as the user named it, and the executor's peak.
sim_io::Row measure(const cli_common::Axes& axes, const cli_common::Inputs& in, int64_t index,
                    uint64_t seed) {
  const cli_common::Point p = cli_common::point_at(axes, index);
  if (p.setup.allocator != sim::AllocatorKind::kExact)
    throw sim::ConfigError("--allocator", "allocator",
                           "the CPU executor measures exact bytes only (use exact)");
  const sim::ModelConfig& model = in.models[static_cast<size_t>(p.model)];
  const sim::Graph g =
      sim::build_graph_exec(model, p.setup, in.devices[static_cast<size_t>(p.device)]);
  const sim::Plan plan = sim::resolve(axes.strategies[static_cast<size_t>(p.strategy)], g.n_blocks);
  const sim::Schedule schedule = sim::build_schedule(g, plan, sim::recompute_mode(g.profile));
  executor::StepOptions opt;
  opt.seed = seed;
  const executor::StepResult run = executor::run_cpu(g, plan, schedule, opt);
  sim_io::Row row;
  row.row_index = index;
  row.source = "cpu";
  row.key = cli_common::row_key(axes, p);
  row.peak_only = true;
  sim::Result r;
  r.layers = g.n_blocks;
  r.params = g.params;
  r.params_per_rank = g.params_per_rank;
  r.peak_allocated_bytes = r.peak_requested_bytes = r.peak_reserved_bytes = run.peak_bytes;
  r.peak_phase = run.peak_phase;
  row.result = r;
  return row;
}

int harness_main(int argc, char** argv) {
  HarnessFlags f;
  CLI::App app{
      "actsim-harness: run the simulator's schedules for real and write the measured rows as CSV "
      "(schema v1) for `actsim validate`"};
  app.name("actsim-harness");
  cli_common::add_common_flags(app, f.common, {true, true, "csv (the only one)"});
  app.add_option("--backend", f.backend, "cpu (the reference executor) or cuda")
      ->capture_default_str();
  app.add_option("--seed", f.seed, "seed of the weights, token ids and labels")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "actsim-harness: error: {}\n", e.what());
    return 2;
  }
  try {
    if (f.backend == "cuda")
      throw sim::ConfigError("--backend", "backend",
                             "the CUDA backend is not built yet (harness/cuda, DESIGN.md §6 step 4)");
    if (f.backend != "cpu")
      throw sim::ConfigError("--backend", "backend", "'" + f.backend + "' is not cpu or cuda");
    cli_common::parse_format(f.common.format, "csv", cli_common::Format::kCsv);
    const cli_common::Axes axes = cli_common::parse_axes(f.common);
    const cli_common::Inputs in = cli_common::load_inputs(axes, cli_common::search_dirs());
    const int64_t n = cli_common::point_count(axes);
    std::string out = sim_io::csv_header();
    for (int64_t i = 0; i < n; ++i) out += sim_io::csv_row(measure(axes, in, i, f.seed));
    // Everything measured first: an error above leaves no output file.
    if (f.common.output.empty()) {
      std::fputs(out.c_str(), stdout);
      return 0;
    }
    std::FILE* file = std::fopen(f.common.output.c_str(), "wb");
    if (file == nullptr)
      throw sim::ConfigError("--output", f.common.output, "cannot open for writing");
    const bool ok = std::fwrite(out.data(), 1, out.size(), file) == out.size();
    if (std::fclose(file) != 0 || !ok) {
      std::remove(f.common.output.c_str());
      throw sim::ConfigError("--output", f.common.output, "write failed");
    }
    return 0;
  } catch (const sim::ConfigError& e) {
    fmt::print(stderr, "actsim-harness: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "actsim-harness: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return harness_main(argc, argv); }
