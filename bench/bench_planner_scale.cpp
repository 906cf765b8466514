// The budget planner at scale (issue 15): what `actsim plan` computes (sim::plan_budget and the
// best fixed strategy it prints beside the plan, sim::best_fixed) on the worst case of the
// options: ZeRO-3 over 64 ranks, the caching allocator, offload among the per-block options
// (always on in the planner), on the GPT (h 1024, 16 heads, vocab 32000, seq 2048, batch
// 4; bench/models/gpt-h1024-l*.json) with 1,000 and 10,000 identical blocks, and 128
// heterogeneous blocks (the same GPT's graph with each block's activation bytes and FLOPs scaled
// by a deterministic factor in [0.5, 1.5], so that the probes, the DP and every verifying
// simulation see blocks that differ).
//
// Each configuration is timed for the current planner and, unless --no-legacy, for the planner
// as it was before issue 15 (sim::plan_budget_legacy + sim::best_fixed_exhaustive) on the same
// binary. It exits 1, loudly, when the current plan costs more (recompute time plus offload
// stalls, then FLOPs) than the legacy one, exceeds the budget, or costs more than the best fixed
// strategy that fits; or when best_fixed differs from the exhaustive search.
//
// Usage: bench_planner_scale [--reps N] [--no-legacy] [--only NAME[,NAME...]]
// Prints one line per configuration and planner: min and median wall time over N repetitions
// (default 3), and the plan's figures.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"

namespace {

struct Config {
  std::string name;
  std::string model;  // under bench/models
  int64_t layers = 0;  // 0: the file's
  sim::AllocatorKind allocator = sim::AllocatorKind::kCaching;
  int64_t budget = 0;  // bytes; 0: halfway between the simulated peaks of full and none
  bool heterogeneous = false;
  bool legacy = true;  // the legacy planner is run (too slow for some sizes: see notes)
};


// Scales block b's non-persistent storages, transients and op costs by a factor in [0.5, 1.5]
// (64-bit LCG, Knuth's MMIX constants; bytes kept multiples of 2).
void make_heterogeneous(sim::Graph& g) {
  uint64_t state = 2026;
  std::vector<double> f(static_cast<size_t>(g.n_blocks));
  for (double& x : f) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = 0.5 + static_cast<double>(state >> 11) / 9007199254740992.0;
  }
  const auto scale = [](int64_t v, double x) {
    return static_cast<int64_t>(static_cast<double>(v / 2) * x) * 2;
  };
  for (sim::Storage& s : g.storages)
    if (s.block >= 0 && s.producer >= 0) s.bytes = std::max<int64_t>(2, scale(s.bytes, f[static_cast<size_t>(s.block)]));
  for (sim::Op& op : g.ops) {
    if (op.block < 0) continue;
    const double x = f[static_cast<size_t>(op.block)];
    op.fwd_transient_bytes = scale(op.fwd_transient_bytes, x);
    op.bwd_transient_bytes = scale(op.bwd_transient_bytes, x);
    op.fwd.flops = scale(op.fwd.flops, x);
    op.bwd.flops = scale(op.bwd.flops, x);
    op.fwd.bytes = scale(op.fwd.bytes, x);
    op.bwd.bytes = scale(op.bwd.bytes, x);
  }
}

// FNV-1a over a ChainModel's figures: the probes' output, to check that a change to them is
// only a change of speed.
uint64_t digest(const sim::ChainModel& m) {
  uint64_t h = 1469598103934665603ULL;
  const auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ static_cast<uint64_t>((v >> (8 * i)) & 0xff)) * 1099511628211ULL;
  };
  mix(m.base_bytes), mix(m.outer_bytes), mix(m.head_fwd_bytes), mix(m.head_bwd_bytes);
  for (const sim::BlockCosts& b : m.blocks) {
    for (const sim::OptionRow& o : b.single)
      for (int64_t v : {int64_t{o.available}, o.held_bytes, o.fwd_bytes, o.bwd_bytes, o.cost.time_ns,
                        o.cost.flops, o.fwd_held_bytes})
        mix(v);
    for (int64_t v : {b.fwd_only_bytes, b.seg_head_held, b.seg_inner_held, b.seg_head_fwd_held,
                      b.seg_inner_fwd_held, b.seg_head_fwd, b.seg_inner_fwd, b.seg_recomputed,
                      b.seg_bwd, b.seg_recompute, b.seg_grad_state, b.seg_inner_cost.time_ns,
                      b.seg_inner_cost.flops, b.seg_last_cost.time_ns, b.seg_last_cost.flops})
      mix(v);
  }
  return h;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall and CPU time (the machine is shared: CPU time is what the planner itself spent).
struct Timing {
  double min = 0, median = 0, cpu_min = 0, cpu_median = 0;
};
Timing time_it(int reps, const std::function<void()>& f) {
  std::vector<double> t, c;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    f();
    c.push_back(cpu_seconds() - c0);
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  std::sort(c.begin(), c.end());
  return {t.front(), t[t.size() / 2], c.front(), c[c.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  bool legacy = true, components = false, gui = false;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--components") {
      components = true;
    } else if (a == "--gui") {
      gui = true;
    } else if (a == "--no-legacy") {
      legacy = false;
    } else if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t p = 0; p <= list.size();) {
        const size_t c = std::min(list.find(',', p), list.size());
        only.push_back(list.substr(p, c - p));
        p = c + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--no-legacy] [--components] [--gui] [--only NAME[,NAME...]]\n", argv[0]);
      return 2;
    }
  }
  const std::filesystem::path src(ACTSIM_SOURCE_DIR);
  const std::vector<std::filesystem::path> dirs{src / "models"};
  const sim::Device device = sim_io::load_device("h100-sxm", dirs);
  constexpr int64_t kGiB = int64_t{1} << 30;
  std::vector<Config> configs = {
      {"gpt1k-exact", "gpt-h1024-l1000.json", 0, sim::AllocatorKind::kExact, 64 * kGiB},
      {"gpt1k-caching", "gpt-h1024-l1000.json", 0, sim::AllocatorKind::kCaching, 64 * kGiB},
      {"het128-caching", "gpt-h1024-l1000.json", 128, sim::AllocatorKind::kCaching, 0, true},
      // 64 GiB fits no plan at 10,000 blocks (offload+full peaks at 267 GiB reserved, full at 581 GiB):
      // a budget between them.
      {"gpt10k-caching", "gpt-h1024-l10000.json", 0, sim::AllocatorKind::kCaching, 512 * kGiB},
  };
  int failures = 0;
  std::printf("%-15s %-7s %8s %8s %8s %8s %9s %11s %6s  %s\n", "config", "planner", "wall min",
              "wall med", "cpu min", "cpu med", "peak GiB", "cost ms", "solves", "plan (caching simulations+warm-up-only ones+exact-allocator ones, DP tables)");
  for (const Config& c : configs) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    sim::ModelConfig model = sim_io::load_model((src / "bench" / "models" / c.model).string(), dirs);
    if (c.layers > 0) model.layers = c.layers;
    sim::TrainSetup setup;
    setup.micro_batch = 4;
    setup.seq = 2048;
    setup.dp = 64;
    setup.zero = 3;
    setup.allocator = c.allocator;
    sim::Graph g = sim::build_graph(model, setup, device);
    if (c.heterogeneous) make_heterogeneous(g);
    int64_t budget = c.budget;
    if (budget == 0) {
      const int64_t none = sim::budget_peak_bytes(
          sim::simulate_plan(g, sim::resolve(sim::parse_strategy("none"), g.n_blocks), device));
      const int64_t full = sim::budget_peak_bytes(
          sim::simulate_plan(g, sim::resolve(sim::parse_strategy("full"), g.n_blocks), device));
      budget = full + (none - full) / 2;
    }
    if (components) {  // the parts of plan_budget, once each
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      const sim::ChainModel m = sim::probe_chain(g, device);
      const double c1 = cpu_seconds();
      const int64_t target = budget - m.base_bytes;
      const int64_t slot = sim::slot_bytes_for(target, g.n_blocks);
      const sim::ChainSolution sol = sim::solve_chain(m, target, slot);
      const double c2 = cpu_seconds();
      const sim::Result r = sim::simulate_plan(g, sim::plan_of(sol.units, g.n_blocks), device);
      const double c3 = cpu_seconds();
      std::printf("%-15s probes %.3f s, solve_chain %.3f s (%" PRId64 " slots of %" PRId64
                  " MiB, optimal %d), one simulation %.3f s (CPU); wall %.3f s; model %016" PRIx64
                  ", plan %016" PRIx64 "\n",
                  c.name.c_str(), c1 - c0, c2 - c1, sol.slots, slot >> 20, sol.optimal ? 1 : 0,
                  c3 - c2, seconds_since(t0), digest(m),
                  sim::budget_peak_bytes(r) ^ (r.recompute_time_ns << 20) ^ r.offload_stall_ns);
      std::fflush(stdout);
      continue;
    }
    if (gui) {  // planner2: what the GUI computes when a budget: strategy is edited
      // gui::simulate_run (gui/src/update.cpp): plan_budget, then the plan simulated with the
      // timeline on (its lanes' sort, O(spans log spans), is not included).
      sim::Result r;
      const Timing t = time_it(reps, [&] {
        const sim::BudgetPlan bp = sim::plan_budget(g, device, budget);
        sim::SimOptions o;
        o.record_timeline = true;
        r = sim::simulate_plan(g, bp.plan, device, o);
      });
      std::printf("%-15s gui re-plan: wall min %.3f med %.3f s, cpu min %.3f med %.3f s, %zu spans\n",
                  c.name.c_str(), t.min, t.median, t.cpu_min, t.cpu_median, r.spans.size());
      std::fflush(stdout);
      continue;
    }
    struct Out {
      sim::BudgetPlan plan;
      sim::FixedChoice fixed;
    };
    const auto report = [&](const char* who, const Timing& t, const Out& o) {
      std::printf("%-15s %-7s %8.3f %8.3f %8.3f %8.3f %9.3f %11.3f %6" PRId64 "  (%" PRId64 "+%" PRId64 "+%" PRId64 ", %" PRId64 ") %.90s\n",
                  c.name.c_str(), who, t.min, t.median, t.cpu_min, t.cpu_median,
                  static_cast<double>(sim::budget_peak_bytes(o.plan.result)) / static_cast<double>(kGiB),
                  static_cast<double>(sim::cost_of(o.plan.result).time_ns) / 1e6, o.plan.solves,
                  o.plan.simulations, o.plan.warmup_simulations, o.plan.exact_simulations,
                  o.plan.dp_tables,
                  o.plan.strategy.canonical().c_str());
      std::fflush(stdout);
    };
    Out now;
    // What `actsim plan` runs: plan_budget alone, whose BudgetPlan::fixed is the best fixed
    // strategy it prints (planner2: best_fixed was called again here, probing and searching
    // twice, which the CLI does not).
    const Timing t_now = time_it(reps, [&] {
      now.plan = sim::plan_budget(g, device, budget);
      now.fixed = now.plan.fixed;
    });
    report("current", t_now, now);
    const auto fail = [&](const std::string& why) {
      std::fprintf(stderr, "FAIL %s: %s\n", c.name.c_str(), why.c_str());
      ++failures;
    };
    if (sim::budget_peak_bytes(now.plan.result) > budget) fail("the plan exceeds the budget");
    if (now.fixed.found && sim::cost_of(now.fixed.result) < sim::cost_of(now.plan.result))
      fail("the plan costs more than the best fixed strategy that fits, " +
           now.fixed.strategy.canonical());
    if (!(legacy && c.legacy)) continue;
    Out old;
    const Timing t_old = time_it(reps, [&] {
      old.plan = sim::plan_budget_legacy(g, device, budget);
      old.fixed = sim::best_fixed_exhaustive(g, device, budget);
    });
    report("legacy", t_old, old);
    if (sim::cost_of(old.plan.result) < sim::cost_of(now.plan.result))
      fail("the current plan costs more than the legacy planner's (" +
           std::to_string(sim::cost_of(now.plan.result).time_ns) + " ns > " +
           std::to_string(sim::cost_of(old.plan.result).time_ns) + " ns)");
    if (old.fixed.found != now.fixed.found ||
        (old.fixed.found && !(old.fixed.strategy == now.fixed.strategy)))
      fail("best_fixed found " + (now.fixed.found ? now.fixed.strategy.canonical() : "none") +
           ", the exhaustive search " + (old.fixed.found ? old.fixed.strategy.canonical() : "none"));
  }
  if (failures) std::fprintf(stderr, "%d check(s) FAILED\n", failures);
  return failures ? 1 : 0;
}
