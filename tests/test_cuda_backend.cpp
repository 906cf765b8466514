// The CUDA backend (harness/cuda) against the CPU backend, built only with nvcc. On a machine with
// a GPU: for every strategy on small GPT, Llama (GQA) and flash configurations, the device
// ledger's peak is the CPU executor's (and so the simulator's) to the byte at the same event,
// and in fp32 the loss and every parameter gradient agree with the CPU backend's (double
// accumulation there, fp32 here: within 1e-3 of each parameter's largest gradient; dropout masks
// come from the same generator, so they are the same masks); in bf16-amp the loss agrees within
// 2%. Without a usable GPU (CI), the backend refuses cleanly with cudaGetDeviceCount's error,
// which is what is checked then. NOT YET RUN ON A GPU (none was lent when it was written).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_harness/cuda_backend.hpp"
#include "executor/executor.hpp"
#include "executor_configs.hpp"

using namespace sim;

namespace {

const char* const kStrategies[] = {"none",      "full",   "every:2", "sqrt",
                                   "block:1",   "selective", "sac:mm",
                                   "custom:none@0-0+full@1-2+sel@3-3+sac@4-4"};

}  // namespace

TEST_CASE("cuda backend: the CPU backend's peak, loss and gradients on a GPU, a clean refusal without one") {
  const std::string why = cuda_harness::device_unavailable();
  if (!why.empty()) {
    MESSAGE("no usable GPU: checking the refusal only (" << why << ")");
    CHECK(why.find("cudaGetDeviceCount") != std::string::npos);
    return;
  }
  MESSAGE("GPU: " << cuda_harness::device_description());
  const Device dev = fixtures::executor_device();
  TrainSetup fp32;
  fp32.micro_batch = 2;
  fp32.seq = 8;
  fp32.precision = Precision::kFp32;
  TrainSetup flash = fp32;
  flash.attention = AttentionKind::kFlash;
  flash.dropout = 0.1;
  TrainSetup bf16 = fp32;
  bf16.precision = Precision::kBf16Amp;
  const struct {
    const char* name;
    ModelConfig model;
    TrainSetup setup;
  } cases[] = {{"gpt fp32 dropout", fixtures::tiny_gpt(), fp32},
               {"llama gqa fp32", fixtures::tiny_gqa_llama(), fp32},
               {"llama flash dropout fp32", fixtures::tiny_gqa_llama(), flash},
               {"gpt bf16-amp", fixtures::tiny_gpt(), bf16}};
  for (const auto& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    for (const char* st : kStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Plan plan = resolve(parse_strategy(st), g.n_blocks);
      const Schedule sched = build_schedule(g, plan, recompute_mode(g));
      const executor::StepResult cpu = executor::run_cpu(g, plan, sched, {});
      const cuda_harness::CudaStep gpu = cuda_harness::run_cuda(g, plan, sched, {}, 0);
      CHECK(gpu.step.peak_bytes == cpu.peak_bytes);
      CHECK(gpu.ledger_peak_bytes == cpu.peak_bytes);
      CHECK(gpu.step.peak_event_index == cpu.peak_event_index);
      REQUIRE(std::isfinite(gpu.step.loss));
      // One timing row per forward, recompute and backward call, then the step's.
      REQUIRE(!gpu.timings.empty());
      CHECK(gpu.timings.back().op == -1);
      CHECK(gpu.timings.back().measured_ns > 0);
      if (c.setup.precision != Precision::kFp32) {
        CHECK(std::abs(gpu.step.loss - cpu.loss) <= 0.02 * std::abs(cpu.loss));
        continue;
      }
      CHECK(std::abs(gpu.step.loss - cpu.loss) <= 1e-5 * (1 + std::abs(cpu.loss)));
      REQUIRE(gpu.step.grads.size() == cpu.grads.size());
      for (size_t p = 0; p < cpu.grads.size(); ++p) {
        CAPTURE(p);
        REQUIRE(gpu.step.grads[p].size() == cpu.grads[p].size());
        double scale = 0;
        for (double x : cpu.grads[p]) scale = std::max(scale, std::abs(x));
        double worst = 0;
        for (size_t i = 0; i < cpu.grads[p].size(); ++i)
          worst = std::max(worst, std::abs(gpu.step.grads[p][i] - cpu.grads[p][i]));
        CHECK(worst <= 1e-3 * scale + 1e-7);
      }
    }
  }
}
