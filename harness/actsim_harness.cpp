// actsim-harness: runs the simulator's schedules for real and writes measured rows in the CSV
// schema (DESIGN.md §6, §7). --backend cpu: the reference executor (harness/executor), whose
// peak is the exact ledger's peak (source `cpu`). --backend cuda: the same walker over the CUDA
// backend (harness/cuda, built when nvcc is found), source `cuda`: peak_allocated_bytes and
// peak_requested_bytes are its device arena's exact-byte peak, peak_reserved_bytes the arena's
// high-water mark (aligned placements); --timings writes its per-op timing table.
// Exit status as actsim's: 0 ok, 2 bad input (one line on stderr, no output file), 1 an internal
// error, which includes the executor disagreeing with the schedule; 3 the backend cannot run on
// this machine (CUDA backend not built, or no usable GPU), with one line on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "cuda_harness/timing.hpp"
#include "executor/executor.hpp"
#include "flags.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sim_io/output.hpp"
#include "sweep.hpp"
#ifdef ACTSIM_HAVE_CUDA
#include "cuda_harness/cuda_backend.hpp"
#endif

namespace {

struct HarnessFlags {
  cli_common::CommonFlags common;
  std::string backend = "cpu";
  uint64_t seed = 1;
  std::string timings;  // --backend cuda: the per-op timing table (CSV)
  bool allow_large = false;  // exec11: run a configuration past the size guard
};

// exec11 (issue 10): the size guard. The CPU executor computes every op in double precision with
// plain loops on one core and allocates every storage for real; a full-size model would run for
// hours or exhaust the host. Above either limit a configuration is refused (one line naming the
// model, its parameters, simulated peak and FLOPs) unless --allow-large. Measured: gpt2-small
// (nanogpt, fp32, SDPA, b 1, s 4; 3e9 FLOP, a 2.03 GiB peak) ran in 33.6 s and 3.6 GB of host
// memory on a loaded two-core machine, about 1e8 FLOP/s: the FLOP limit is about five minutes.
constexpr double kMaxExecutorFlops = 3e10;             // forward + backward + recompute
constexpr int64_t kMaxExecutorPeakBytes = 4LL << 30;   // the simulated peak (4 GiB)

void guard_size(const std::string& model, const sim::Graph& g, const sim::Plan& plan,
                const sim::Device& device) {
  const sim::Result r = sim::simulate_plan(g, plan, device);
  double flops = 0;
  for (const sim::Op& op : g.ops) flops += static_cast<double>(op.fwd.flops) + static_cast<double>(op.bwd.flops);
  flops += static_cast<double>(r.recompute_flops);
  if (flops <= kMaxExecutorFlops && r.peak_requested_bytes <= kMaxExecutorPeakBytes) return;
  throw sim::ConfigError(
      "--model", model,
      fmt::format("{:.3g} parameters, a simulated peak of {:.2f} GiB and {:.3g} FLOP per step: "
                  "too large for the CPU executor (limits {:.0f} GiB, {:.0e} FLOP: at about 1e8 FLOP/s, "
                  "double-precision loops on one core); --allow-large runs it anyway",
                  static_cast<double>(g.params),
                  static_cast<double>(r.peak_requested_bytes) / static_cast<double>(1LL << 30),
                  flops, static_cast<double>(kMaxExecutorPeakBytes >> 30),
                  kMaxExecutorFlops));
}

// The requested backend cannot run here (exit 3).
class Unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes a whole file or throws ConfigError naming the flag (a failed write leaves no file).
void write_file(const std::string& path, const std::string& flag, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw sim::ConfigError(flag, path, "cannot open for writing");
  const bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !ok) {
    std::remove(path.c_str());
    throw sim::ConfigError(flag, path, "write failed");
  }
}

// One measured row: the point's key as the user named it, and the executor's peak. With the
// CUDA backend, the point's timing rows are appended to `timings`.
sim_io::Row measure(const cli_common::Axes& axes, const cli_common::Inputs& in, int64_t index,
                    uint64_t seed, bool cuda, std::string& timings, bool allow_large) {
  const cli_common::Point p = cli_common::point_at(axes, index);
  if (p.setup.allocator != sim::AllocatorKind::kExact)
    throw sim::ConfigError("--allocator", "allocator",
                           "the executor measures exact bytes only (use exact)");
  const sim::ModelConfig& model = in.models[static_cast<size_t>(p.model)];
  const sim::Graph g =
      sim::build_graph_exec(model, p.setup, in.devices[static_cast<size_t>(p.device)]);
  const sim::Plan plan = sim::resolve(axes.strategies[static_cast<size_t>(p.strategy)], g.n_blocks);
  const sim::Schedule schedule = sim::build_schedule(g, plan, sim::recompute_mode(g));
  if (!allow_large)  // exec11
    guard_size(axes.models[static_cast<size_t>(p.model)], g, plan,
               in.devices[static_cast<size_t>(p.device)]);
  executor::StepOptions opt;
  opt.seed = seed;
  executor::StepResult run;
  int64_t reserved = 0;
  if (cuda) {
#ifdef ACTSIM_HAVE_CUDA
    cuda_harness::CudaStep step = cuda_harness::run_cuda(g, plan, schedule, opt, index);
    // The calibration table: per-op calls keyed by the point (the whole-step row is not a
    // kernel's and stays out; actsim calibrate reads forward, recompute and backward rows).
    for (cuda_harness::TimingRow t : step.timings) {
      if (t.op < 0) continue;
      t.model = axes.models[static_cast<size_t>(p.model)];
      t.precision = std::string(sim::name(sim::resolved_precision(p.setup)));
      t.attention = std::string(sim::name(sim::resolved_attention(p.setup)));
      t.batch = p.setup.micro_batch;
      t.seq = p.setup.seq;
      timings += cuda_harness::timing_csv_row(t);
    }
    reserved = step.arena_high_water;
    run = std::move(step.step);
#else
    (void)timings;  // unreachable: main() refuses --backend cuda in a build without it
#endif
  } else {
    // execreg (issue 10): offload plans take the copy stream's ends from the simulator
    const sim::Result sim_run =
        sim::run_engine(g, schedule, in.devices[static_cast<size_t>(p.device)], {});
    opt.has_copy_releases = true;
    opt.copy_releases = sim_run.copy_releases;
    run = executor::run_cpu(g, plan, schedule, opt);
    reserved = run.peak_bytes;
  }
  sim_io::Row row;
  row.row_index = index;
  row.source = cuda ? "cuda" : "cpu";
  row.key = cli_common::row_key(axes, in, p);
  row.peak_only = true;
  sim::Result r;
  r.layers = g.n_blocks;
  r.params = g.params;
  r.params_per_rank = g.params_per_rank;
  r.peak_allocated_bytes = r.peak_requested_bytes = run.peak_bytes;
  r.peak_reserved_bytes = reserved;
  r.peak_phase = run.peak_phase;
  r.offload_bytes = run.offload_bytes;        // execreg: the executor's host pool
  r.pinned_host_bytes = run.host_peak_bytes;
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
  app.add_option("--timings", f.timings,
                 "--backend cuda: write the per-op timing table (CSV: row_index, op_index, kind, "
                 "block, phase, name, flops, bytes, measured_ns) to this file");
  app.add_flag("--allow-large", f.allow_large,
               "run configurations past the size guard (a full-size model runs for hours here)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    fmt::print(stderr, "actsim-harness: error: {}\n", e.what());
    return 2;
  }
  try {
    if (f.backend != "cpu" && f.backend != "cuda")
      throw sim::ConfigError("--backend", "backend", "'" + f.backend + "' is not cpu or cuda");
    const bool cuda = f.backend == "cuda";
    if (!f.timings.empty() && !cuda)
      throw sim::ConfigError("--timings", "timings", "only --backend cuda times its ops");
    cli_common::parse_format(f.common.format, "csv", cli_common::Format::kCsv);
    const cli_common::Axes axes = cli_common::parse_axes(f.common);
    const cli_common::Inputs in = cli_common::load_inputs(axes, cli_common::search_dirs());
    if (cuda) {
#ifdef ACTSIM_HAVE_CUDA
      const std::string why = cuda_harness::device_unavailable();
      if (!why.empty()) throw Unavailable("--backend cuda: " + why);
#else
      throw Unavailable(
          "--backend cuda: this build has no CUDA backend (no CUDA compiler was found when it was "
          "configured)");
#endif
    }
    const int64_t n = cli_common::point_count(axes);
    std::string out = sim_io::csv_header();
    std::string timings = cuda_harness::timing_header();
    for (int64_t i = 0; i < n; ++i) out += sim_io::csv_row(measure(axes, in, i, f.seed, cuda, timings, f.allow_large));
    // Everything measured first: an error above leaves no output file.
    if (!f.timings.empty()) write_file(f.timings, "--timings", timings);
    if (f.common.output.empty()) {
      std::fputs(out.c_str(), stdout);
      return 0;
    }
    try {
      write_file(f.common.output, "--output", out);
    } catch (...) {
      if (!f.timings.empty()) std::remove(f.timings.c_str());
      throw;
    }
    return 0;
  } catch (const sim::ConfigError& e) {
    fmt::print(stderr, "actsim-harness: error: {}\n", e.what());
    return 2;
  } catch (const Unavailable& e) {
    fmt::print(stderr, "actsim-harness: error: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "actsim-harness: internal error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return harness_main(argc, argv); }
