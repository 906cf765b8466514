// The pipeline planner (issue 15, pplan; sim/planner_pipeline.hpp): what `actsim plan` computes
// with --pp and --num-microbatches, on the realistic case (Korthikanti et al. 2022's GPT-3
// 175B, tp 8 with sequence parallelism, pp 8, 64 micro-batches, seq 2048, A100 80 GB) and on the
// issue's 1,000-block GPT (bench/models/gpt-h1024-l1000.json; batch 4, seq 2048) over 8 stages of
// 125 blocks, 64 micro-batches, under the exact and the caching allocator.
//
// Usage: bench_planner_pipeline [--reps N] [--only NAME[,NAME...]]
// One line per configuration: min and median wall and CPU time over N repetitions (default 3),
// the stage simulations and DP solves, whether every stage's plan is proven the model's optimum,
// the worst stage's peak and the plan's recompute time against the best fixed strategy's. Exits
// 1 when a stage exceeds the budget or the plan recomputes more than the best fixed strategy.
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
#include "sim/planner_pipeline.hpp"
#include "sim/simulate.hpp"
#include "sim_io/load.hpp"

namespace {

struct Config {
  std::string name;
  std::string model;  // a models/ name, or a file under bench/models
  std::string device;
  sim::TrainSetup setup;
  int64_t budget = 0;  // 0: halfway between stage 0's peaks under full and none
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t p = 0; p <= list.size();) {
        const size_t c = std::min(list.find(',', p), list.size());
        only.push_back(list.substr(p, c - p));
        p = c + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--only NAME[,NAME...]]\n", argv[0]);
      return 2;
    }
  }
  const std::filesystem::path src(ACTSIM_SOURCE_DIR);
  const std::vector<std::filesystem::path> dirs{src / "models"};
  constexpr int64_t kGiB = int64_t{1} << 30;
  sim::TrainSetup gpt3;
  gpt3.micro_batch = 1;
  gpt3.seq = 2048;
  gpt3.tp = 8;
  gpt3.sp = true;
  gpt3.pp = 8;
  gpt3.microbatches = 64;
  sim::TrainSetup chain;
  chain.micro_batch = 4;
  chain.seq = 2048;
  chain.pp = 8;
  chain.microbatches = 64;
  sim::TrainSetup chain_caching = chain;
  chain_caching.allocator = sim::AllocatorKind::kCaching;
  const std::vector<Config> configs = {
      {"175b-pp8-60g", "korthikanti-175b", "a100-80gb", gpt3, 60 * kGiB},
      {"175b-pp8-48g", "korthikanti-175b", "a100-80gb", gpt3, 48 * kGiB},
      {"gpt1k-pp8-exact", "gpt-h1024-l1000.json", "h100-sxm", chain, 0},
      {"gpt1k-pp8-caching", "gpt-h1024-l1000.json", "h100-sxm", chain_caching, 0},
  };
  int failures = 0;
  std::printf("%-18s %8s %8s %8s %8s %6s %6s %6s %10s %12s %12s  %s\n", "config", "wall min",
              "wall med", "cpu min", "cpu med", "sims", "solves", "proven", "worst GiB",
              "plan rc ms", "fixed rc ms", "fixed");
  for (const Config& c : configs) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    const sim::Device device = sim_io::load_device(c.device, dirs);
    const sim::ModelConfig model =
        c.model.find(".json") != std::string::npos
            ? sim_io::load_model((src / "bench" / "models" / c.model).string(), dirs)
            : sim_io::load_model(c.model, dirs);
    int64_t budget = c.budget;
    if (budget == 0) {
      const auto stage0 = [&](const char* s) {
        return sim::budget_peak_bytes(
            sim::simulate_pipeline(model, c.setup, device, sim::parse_strategy(s)).stages[0].result);
      };
      const int64_t none = stage0("none"), full = stage0("full");
      budget = full + (none - full) / 2;
    }
    std::vector<double> wall, cpu;
    sim::PipelinePlan plan;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      plan = sim::plan_pipeline(model, c.setup, device, budget);
      cpu.push_back(cpu_seconds() - c0);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    int64_t plan_rc = 0, fixed_rc = 0;
    for (const sim::StageResult& s : plan.result.stages) {
      plan_rc += s.result.recompute_time_ns + s.result.offload_stall_ns;
      if (sim::budget_peak_bytes(s.result) > budget) {
        std::fprintf(stderr, "%s: stage %" PRId64 " over the budget\n", c.name.c_str(), s.stage);
        ++failures;
      }
    }
    if (plan.fixed_found) {
      for (size_t i = 0; i < plan.fixed_result.stages.size(); ++i) {
        const sim::Result& f = plan.fixed_result.stages[i].result;
        const sim::Result& p = plan.result.stages[i].result;
        fixed_rc += f.recompute_time_ns + f.offload_stall_ns;
        if (p.recompute_time_ns + p.offload_stall_ns > f.recompute_time_ns + f.offload_stall_ns) {
          std::fprintf(stderr, "%s: stage %zu costs more than %s\n", c.name.c_str(), i,
                       plan.fixed.canonical().c_str());
          ++failures;
        }
      }
    }
    std::printf("%-18s %8.3f %8.3f %8.3f %8.3f %6" PRId64 " %6" PRId64 " %6s %10.2f %12.3f %12.3f  %s\n",
                c.name.c_str(), wall.front(), wall[wall.size() / 2], cpu.front(),
                cpu[cpu.size() / 2], plan.simulations, plan.dp_solves, plan.proven ? "yes" : "no",
                static_cast<double>(sim::budget_peak_bytes(plan.result.summary)) / kGiB,
                static_cast<double>(plan_rc) / 1e6, static_cast<double>(fixed_rc) / 1e6,
                plan.fixed_found ? plan.fixed.canonical().c_str() : "(none fits)");
    std::fflush(stdout);
  }
  return failures > 0 ? 1 : 0;
}
