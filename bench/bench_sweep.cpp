// Sweep rows per second through cli_common::run_sweep (what `actsim sweep` runs, without the
// file): GPT-2 small and GPT-2 XL x micro-batch 1..16 (x2) x seq 256..1024 (x2) x seven strategies
// = 210 rows, on one thread and on all cores, with and without graph sharing, plus CSV formatting
// of every row.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "flags.hpp"
#include "sim_io/output.hpp"
#include "sweep.hpp"

namespace {

cli_common::Axes axes() {
  cli_common::CommonFlags f;
  f.model = "gpt2-small,gpt2-xl";
  f.batch = "1:16:x2";
  f.seq = "256:1024:x2";
  f.strategy = "none,full,every:4,sqrt,selective,sac:mm,block:2";
  return cli_common::parse_axes(f);
}

void sweep(benchmark::State& state) {
  const cli_common::Axes ax = axes();
  const std::vector<std::filesystem::path> dirs{std::filesystem::path(ACTSIM_SOURCE_DIR) / "models"};
  const cli_common::Inputs in = cli_common::load_inputs(ax, dirs);
  cli_common::SweepOptions opt;
  opt.jobs = static_cast<int>(state.range(0));
  opt.share_graphs = state.range(1) != 0;
  int64_t rows = 0, bytes = 0;
  for (auto _ : state) {
    cli_common::run_sweep(ax, in, opt, [&](const sim_io::Row& r) {
      bytes += static_cast<int64_t>(sim_io::csv_row(r).size());
      ++rows;
    });
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate);
  state.counters["rows"] = static_cast<double>(cli_common::point_count(ax));
  state.SetLabel(std::string(opt.share_graphs ? "shared graphs" : "graph per row") + ", " +
                 std::to_string(opt.jobs) + " job(s)");
  benchmark::DoNotOptimize(bytes);
}

}  // namespace

BENCHMARK(sweep)->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
