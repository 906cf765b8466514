// execreg (issue 10): the CPU executor runs fsdp2-bf16 and deepspeed-bf16 at one rank (last
// cases below) and offload plans (`offload`, `offload+full`, custom
// plans with offload clauses). Saved storages go to a host pool at the schedule's kOffload
// events and come back at its kPrefetch events; a device buffer whose copy to the host runs past
// its kFree stays until the simulator's copy stream says the copy ended (the CPU has no copy
// engine: sim::Result::copy_releases). The device peak equals the simulator's peak_allocated to
// the byte at the same event, the host pool's peak its pinned_host_bytes, and the gradients equal
// those of the plan without offload bit for bit (the data come back from the host exactly).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

using Case = fixtures::ExecCase;

std::vector<Case> cases() {
  const TrainSetup s = fixtures::executor_setup();
  TrainSetup flash = s;
  flash.attention = AttentionKind::kFlash;
  flash.dropout = 0.1;
  TrainSetup fp32 = s;
  fp32.precision = Precision::kFp32;
  TrainSetup prefetch2 = s;
  prefetch2.prefetch = 2;
  const TrainSetup paper = fixtures::executor_paper();
  return {{"gpt dropout bf16-amp", fixtures::tiny_gpt(), s},
          {"llama flash dropout", fixtures::tiny_gqa_llama(), flash},
          {"llama fp32", fixtures::tiny_gqa_llama(), fp32},
          {"gpt bf16-amp, prefetch 2", fixtures::tiny_gpt(), prefetch2},
          {"gpt paper profile (reentrant)", fixtures::tiny_gpt(), paper}};
}

const char* const kOffloadStrategies[] = {"offload", "offload+full",
                                          "custom:offload@0-1+full@2-3+none@4-4",
                                          "custom:offload-full@0-1+sac@2-2+offload@3-4"};

executor::StepResult none_step(const Graph& g) {
  const Plan plan = resolve(parse_strategy("none"), g.n_blocks);
  return executor::run_cpu(g, plan, build_schedule(g, plan, recompute_mode(g)));
}

struct Run {
  Result sim;
  executor::StepResult exec;
};

// One step of g under `strategy`, simulated on `dev` and executed with that simulation's copy ends.
Run run(const Graph& g, const char* strategy, const Device& dev) {
  const Plan plan = resolve(parse_strategy(strategy), g.n_blocks);
  const Schedule sched = build_schedule(g, plan, recompute_mode(g));
  Run r;
  r.sim = run_engine(g, sched, dev, {});
  executor::StepOptions o;
  o.has_copy_releases = true;
  o.copy_releases = r.sim.copy_releases;
  r.exec = executor::run_cpu(g, plan, sched, o);
  return r;
}

void check_against_simulator(const Run& r) {
  CHECK(r.exec.peak_bytes == r.sim.peak_allocated_bytes);
  CHECK(r.exec.peak_event_index == r.sim.peak_event_index);
  CHECK(r.exec.peak_phase == r.sim.peak_phase);
  CHECK(r.exec.baseline_bytes == r.sim.baseline_bytes);
  CHECK(r.exec.end_bytes == r.exec.baseline_bytes);
  CHECK(r.exec.offload_bytes == r.sim.offload_bytes);
  CHECK(r.exec.host_peak_bytes == r.sim.pinned_host_bytes);
  CHECK(r.exec.offload_bytes > 0);
}

// A device whose host link is slow enough that copies to the host run past their kFree (and some
// prefetches find the buffer still on the device).
Device slow_link(double bytes_per_s) {
  Device d = fixtures::executor_device();
  d.host_link_bytes_per_s = bytes_per_s;
  return d;
}

}  // namespace

TEST_CASE("executor: offload plans run to the simulator's byte, gradients identical to none") {
  const Device dev = fixtures::executor_device();
  for (const Case& c : cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    const executor::StepResult ref = none_step(g);
    for (const char* st : kOffloadStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Run r = run(g, st, dev);
      check_against_simulator(r);
      CHECK(r.exec.loss == ref.loss);
      REQUIRE(r.exec.grad_bytes.size() == ref.grad_bytes.size());
      for (size_t p = 0; p < ref.grad_bytes.size(); ++p) {
        CAPTURE(p);
        CHECK(r.exec.grad_bytes[p] == ref.grad_bytes[p]);
      }
    }
  }
}

TEST_CASE("executor: copies that run past their kFree keep the device buffer as the simulator does") {
  // On the H100's link every copy of these tiny tensors ends before its kFree for most storages;
  // on a slow link the device buffers outlive their frees and some come back without a copy.
  int64_t released_late = 0, taken_back = 0;
  for (const double link : {1e8, 1e7, 1e6})
  for (const Case& c : cases()) {
    const Device dev = slow_link(link);
    CAPTURE(link);
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    const executor::StepResult ref = none_step(g);
    for (const char* st : kOffloadStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Run r = run(g, st, dev);
      for (const Result::CopyRelease& cr : r.sim.copy_releases)
        (cr.taken_back ? taken_back : released_late) += 1;
      check_against_simulator(r);
      CHECK(r.exec.grad_bytes == ref.grad_bytes);
      // Without the copy ends the executor would release at the kFree: a lower device peak.
      if (!r.sim.copy_releases.empty()) {
        const Plan plan = resolve(parse_strategy(st), g.n_blocks);
        const Schedule sched = build_schedule(g, plan, recompute_mode(g));
        executor::StepOptions o;
        o.has_copy_releases = true;
        const executor::StepResult eager = executor::run_cpu(g, plan, sched, o);
        CHECK(eager.peak_bytes <= r.exec.peak_bytes);
        CHECK(eager.grad_bytes == ref.grad_bytes);
      }
    }
  }
  CHECK(released_late > 0);
  CHECK(taken_back > 0);
}

TEST_CASE("executor: an offload plan without copy ends, or with wrong ones, is refused") {
  const Device dev = fixtures::executor_device();
  const Graph g = build_graph_exec(fixtures::tiny_gpt(), [] {
    TrainSetup s;
    s.micro_batch = 2;
    s.seq = 8;
    return s;
  }(), dev);
  const Plan plan = resolve(parse_strategy("offload"), g.n_blocks);
  const Schedule sched = build_schedule(g, plan, recompute_mode(g));
  CHECK_THROWS_AS(executor::run_cpu(g, plan, sched), Unsupported);
  // A copy end naming a storage the plan keeps on the device (a parameter).
  executor::StepOptions o;
  o.has_copy_releases = true;
  o.copy_releases.push_back({5, g.param_storages[0], 0});
  CHECK_THROWS_AS(executor::run_cpu(g, plan, sched, o), executor::ExecutionError);
  // A schedule whose prefetch of a storage is removed: the executor expects it and fails.
  Schedule broken = sched;
  for (size_t k = 0; k < broken.events.size(); ++k)
    if (broken.events[k].kind == EventKind::kPrefetch) {
      broken.events.erase(broken.events.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  executor::StepOptions ok;
  ok.has_copy_releases = true;
  ok.copy_releases = run_engine(g, sched, dev, {}).copy_releases;
  CHECK_THROWS_AS(executor::run_cpu(g, plan, broken, ok), executor::ExecutionError);
}

namespace {
Graph regime_graph(Precision p, Impl impl) {
  TrainSetup t;
  t.micro_batch = 2;
  t.seq = 8;
  t.impl = impl;
  t.precision = p;
  return build_graph_exec(fixtures::tiny_gqa_llama(), t, fixtures::executor_device());
}
}  // namespace

TEST_CASE("executor: fsdp2-bf16 and deepspeed-bf16 at one rank run to the simulator's byte") {
  // fsdp2-bf16: fp32 shards (the parameters' storages) read as their bf16 all-gathered copies,
  // gradients reduced into the fp32 partitioned buffer; deepspeed-bf16: the bf16 module and its
  // bf16 .grad, the fp32 master partition in the optimizer state (not run by one step).
  const Device dev = fixtures::executor_device();
  for (const auto& [p, impl] : {std::pair{Precision::kFsdp2Bf16, Impl::kTorchtitan},
                                std::pair{Precision::kDeepspeedBf16, Impl::kHf}}) {
    const Graph g = regime_graph(p, impl);
    REQUIRE(g.precision == p);
    CAPTURE(name(p));
    const executor::StepResult ref = none_step(g);
    bool nonzero = false;
    for (const auto& gr : ref.grads)
      for (double x : gr) nonzero = nonzero || x != 0.0;
    CHECK(nonzero);
    for (const char* st : {"none", "full", "every:2", "selective", "offload", "offload+full"}) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Run r = run(g, st, dev);
      CHECK(r.exec.peak_bytes == r.sim.peak_allocated_bytes);
      CHECK(r.exec.peak_event_index == r.sim.peak_event_index);
      CHECK(r.exec.baseline_bytes == r.sim.baseline_bytes);
      CHECK(r.exec.loss == ref.loss);
      CHECK(r.exec.grad_bytes == ref.grad_bytes);
    }
  }
}

TEST_CASE("executor: fsdp2-bf16's gradients equal bf16-mixed's bit for bit (same bf16 values, fp32 reduction)") {
  // bf16-mixed keeps bf16 parameters and accumulates into an fp32 main_grad; FSDP2 at one rank
  // computes on bf16 copies of fp32 shards and reduces into fp32: the same arithmetic.
  const Graph fsdp2 = regime_graph(Precision::kFsdp2Bf16, Impl::kTorchtitan);
  const Graph mixed = regime_graph(Precision::kBf16Mixed, Impl::kTorchtitan);
  const executor::StepResult a = none_step(fsdp2), b = none_step(mixed);
  CHECK(a.loss == b.loss);
  REQUIRE(a.grad_bytes.size() == b.grad_bytes.size());
  CHECK(a.grad_bytes == b.grad_bytes);
  // Without the bf16 copies (the fp32 shards read as they are) the loss would differ: the
  // fsdp2 graph's parameters are fp32 storages.
  CHECK(fsdp2.storages[fsdp2.param_storages[0]].dtype == DType::kF32);
  CHECK(mixed.storages[mixed.param_storages[0]].dtype == DType::kBF16);
}
