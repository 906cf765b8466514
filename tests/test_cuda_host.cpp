// The CUDA harness's host side (harness/cuda), which CI runs without a GPU: the device arena's
// placement and exact-byte ledger, the StorageArena the CUDA backend keeps, driven here by the
// executor's walker over the CPU backend for every strategy (its peak must be the walker's and
// the simulator's, to the byte, on the first and on a second step as run_cuda() measures it), the
// phase each call is timed under, and the timing table's rows and CSV.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_harness/arena.hpp"
#include "cuda_harness/timing.hpp"
#include "executor/executor.hpp"
#include "executor_configs.hpp"

using namespace sim;
using cuda_harness::ArenaPlanner;
using cuda_harness::StorageArena;

namespace {

const char* const kStrategies[] = {"none",      "full",   "every:2", "sqrt",
                                   "block:1",   "selective", "sac:mm",
                                   "custom:none@0-0+full@1-2+sel@3-3+sac@4-4"};

// The CPU backend with the CUDA backend's allocation calls beside it: every storage and scratch
// buffer goes through a StorageArena exactly where CudaBackend places it, and every forward call
// is classified by the PhaseTracker that labels the CUDA timing rows.
class LedgerBackend final : public executor::Backend {
 public:
  LedgerBackend(const Graph& g, const executor::StepOptions& o)
      : cpu_(executor::make_cpu_backend(g, o)), arena_(g, 256), phases_(g.ops.size()) {}
  void allocate(int32_t s, int64_t bytes) override {
    arena_.place(s);
    cpu_->allocate(s, bytes);
  }
  void release(int32_t s) override {
    arena_.remove(s);
    cpu_->release(s);
  }
  void scratch(int64_t bytes) override {
    arena_.place_scratch(bytes);
    cpu_->scratch(bytes);
  }
  void release_scratch() override {
    arena_.remove_scratch();
    cpu_->release_scratch();
  }
  void initialize_persistent() override {
    phases_.reset();
    cpu_->initialize_persistent();
  }
  void forward(int32_t op) override {
    (phases_.forward_phase(op) == Phase::kForward ? forwards : recomputes)++;
    cpu_->forward(op);
  }
  void backward(int32_t op, const std::vector<int32_t>& reads) override {
    ++backwards;
    cpu_->backward(op, reads);
  }
  void optimizer(executor::StepResult& out) override { cpu_->optimizer(out); }

  StorageArena& arena() { return arena_; }
  int forwards = 0, recomputes = 0, backwards = 0;

 private:
  std::unique_ptr<executor::Backend> cpu_;
  StorageArena arena_;
  cuda_harness::PhaseTracker phases_;
};

}  // namespace

TEST_CASE("cuda host: first-fit placement at aligned offsets, exact bytes in the ledger") {
  ArenaPlanner a(1024, 256);
  CHECK(a.allocate(10) == 0);
  CHECK(a.allocate(300) == 256);  // takes two units: [256, 768)
  CHECK(a.allocate(256) == 768);
  CHECK(a.allocate(1) == -1);     // full
  CHECK(a.live_bytes() == 10 + 300 + 256);  // exact bytes, not the rounded placements
  CHECK(a.peak_live_bytes() == 566);
  CHECK(a.high_water() == 1024);
  a.release(256);
  CHECK(a.live_bytes() == 266);
  CHECK(a.peak_live_bytes() == 566);
  CHECK(a.allocate(200) == 256);  // first fit: the hole just freed
  CHECK(a.allocate(256) == 512);  // the rest of it
  CHECK(a.allocate(1) == -1);
  // Freed neighbours coalesce: everything free again holds one buffer of the whole capacity.
  a.release(0);
  a.release(512);
  a.release(256);
  a.release(768);
  CHECK(a.live_bytes() == 0);
  CHECK(a.placements() == 0);
  CHECK(a.allocate(1024) == 0);
  CHECK_THROWS_AS(a.release(256), std::logic_error);  // not a placement
  a.release(0);
  // A zero-byte buffer still gets a distinct placement; the ledger counts 0.
  const int64_t z1 = a.allocate(0), z2 = a.allocate(0);
  CHECK(z1 != z2);
  CHECK(a.live_bytes() == 0);
  a.release(z1);
  a.release(z2);
  // reset_peaks restarts the peak from the present.
  CHECK(a.allocate(700) == 0);
  a.reset_peaks();
  CHECK(a.peak_live_bytes() == 700);
  // Buffers outside the arena are counted the same.
  a.count_outside(5000);
  CHECK(a.live_bytes() == 5700);
  CHECK(a.peak_live_bytes() == 5700);
  a.count_outside(-5000);
  CHECK(a.live_bytes() == 700);
  CHECK_THROWS_AS(a.count_outside(-701), std::logic_error);
}

TEST_CASE("cuda host: arena sizes are checked") {
  CHECK(ArenaPlanner::round_up(0, 256) == 0);
  CHECK(ArenaPlanner::round_up(1, 256) == 256);
  CHECK(ArenaPlanner::round_up(512, 256) == 512);
  CHECK_THROWS_AS(ArenaPlanner::round_up(std::numeric_limits<int64_t>::max() - 3, 256),
                  std::overflow_error);
  CHECK_THROWS_AS(ArenaPlanner(1000, 256), std::invalid_argument);
  CHECK_THROWS_AS(ArenaPlanner(1024, 0), std::invalid_argument);
  // Every storage placed at once (rounded; an empty one takes one unit), plus the scratch.
  CHECK(cuda_harness::arena_capacity({10, 0, 300}, 1000, 256) == 256 + 256 + 512 + 1024);
}

TEST_CASE("cuda host: storages that no hole fits go outside the arena and are still counted") {
  Graph g;
  for (int i = 0; i < 3; ++i) g.storages.push_back(Storage{256});
  StorageArena a(g, 256);  // three storages and one unit of scratch: 1024 bytes
  REQUIRE(a.planner().capacity() == 1024);
  CHECK(a.place(0) == 0);
  CHECK(a.place(1) == 256);
  CHECK(a.place(2) == 512);
  CHECK(a.place_scratch(512) == -1);  // only [768, 1024) is free
  CHECK(a.scratch_outside());
  CHECK(a.planner().live_bytes() == 768 + 512);
  a.remove_scratch();
  CHECK(a.planner().live_bytes() == 768);
  a.remove(1);
  CHECK(a.place_scratch(512) == -1);  // two holes of 256, not adjacent
  a.remove_scratch();
  CHECK(a.place(1) == 256);
  CHECK(a.place(1) == 256);  // placed while live: released first, same hole
  CHECK(a.planner().live_bytes() == 768);
  a.remove(2);
  CHECK_FALSE(a.live(2));
  CHECK(a.offset(2) == -1);
  CHECK_THROWS_AS(a.remove(2), std::logic_error);
  CHECK(a.planner().peak_live_bytes() == 768 + 512);
}

TEST_CASE("cuda host: the device ledger's peak is the walker's and the simulator's, every strategy") {
  const Device dev = fixtures::executor_device();
  TrainSetup s;
  s.micro_batch = 2;
  s.seq = 8;
  TrainSetup flash = s;
  flash.attention = AttentionKind::kFlash;
  const struct {
    const char* name;
    ModelConfig model;
    TrainSetup setup;
  } cases[] = {{"gpt dropout", fixtures::tiny_gpt(), s},
               {"llama gqa", fixtures::tiny_gqa_llama(), s},
               {"llama flash", fixtures::tiny_gqa_llama(), flash}};
  for (const auto& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    for (const char* st : kStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Result sim = simulate(c.model, c.setup, dev, parse_strategy(st));
      const Plan plan = resolve(parse_strategy(st), g.n_blocks);
      const Schedule sched = build_schedule(g, plan, recompute_mode(g.profile));
      LedgerBackend be(g, {});
      const executor::StepResult first = executor::run_step(g, plan, sched, be);
      CHECK(be.arena().planner().peak_live_bytes() == first.peak_bytes);
      CHECK(first.peak_bytes == sim.peak_requested_bytes);
      // No placement needed a buffer outside the arena, and the arena never holds more than it
      // is sized for.
      CHECK(be.arena().planner().high_water() <= be.arena().planner().capacity());
      // Every forward op ran once as forward; recompute calls are the schedule's replays that run
      // (cached SAC outputs run nothing); every backward node once.
      int replays = 0, backwards = 0;
      for (const Event& e : sched.events) {
        if (e.kind == EventKind::kRecompute && (e.flags & kCachedOutput) == 0) ++replays;
        if (e.kind == EventKind::kBackward) ++backwards;
      }
      CHECK(be.forwards == static_cast<int>(g.ops.size()));
      CHECK(be.recomputes == replays);
      CHECK(be.backwards == backwards);
      // run_cuda's measured step: a second step on the same backend after a peak reset.
      be.arena().planner().reset_peaks();
      be.forwards = be.recomputes = 0;
      const executor::StepResult second = executor::run_step(g, plan, sched, be);
      CHECK(second.peak_bytes == first.peak_bytes);
      CHECK(be.arena().planner().peak_live_bytes() == second.peak_bytes);
      CHECK(be.forwards == static_cast<int>(g.ops.size()));
      CHECK(be.recomputes == replays);
      CHECK(second.grad_bytes == first.grad_bytes);
    }
  }
}

TEST_CASE("cuda host: timing rows carry the op's kind, block, name and cost for the phase") {
  const Graph g = build_graph_exec(fixtures::tiny_gpt(), [] {
    TrainSetup s;
    s.micro_batch = 2;
    s.seq = 8;
    return s;
  }(), fixtures::executor_device());
  int32_t lin = -1;
  for (size_t i = 0; i < g.ops.size() && lin < 0; ++i)
    if (g.ops[i].kind == OpKind::kLinear && g.ops[i].block == 1) lin = static_cast<int32_t>(i);
  REQUIRE(lin >= 0);
  const Op& op = g.ops[static_cast<size_t>(lin)];
  REQUIRE(op.fwd.flops > 0);
  REQUIRE(op.bwd.flops > op.fwd.flops);  // dx and dw: twice the forward's matmul
  const cuda_harness::TimingRow f = cuda_harness::timing_row(g, 7, lin, Phase::kForward, 1234);
  CHECK(f.row_index == 7);
  CHECK(f.op == lin);
  CHECK(f.kind == "linear");
  CHECK(f.block == 1);
  CHECK(f.name == std::string(op.name));
  CHECK(f.phase == "forward");
  CHECK(f.flops == op.fwd.flops);
  CHECK(f.bytes == op.fwd.bytes);
  CHECK(f.measured_ns == 1234);
  const cuda_harness::TimingRow r = cuda_harness::timing_row(g, 7, lin, Phase::kRecompute, 1);
  CHECK(r.phase == "recompute");
  CHECK(r.flops == op.fwd.flops);
  const cuda_harness::TimingRow b = cuda_harness::timing_row(g, 7, lin, Phase::kBackward, 2);
  CHECK(b.phase == "backward");
  CHECK(b.flops == op.bwd.flops);
  CHECK(b.bytes == op.bwd.bytes);
  CHECK_THROWS_AS(cuda_harness::timing_row(g, 0, static_cast<int32_t>(g.ops.size()), Phase::kForward, 0),
                  std::out_of_range);
  // The step row sums its own point's calls only.
  cuda_harness::TimingRow other = f;
  other.row_index = 8;
  const cuda_harness::TimingRow step = cuda_harness::step_row(7, {f, r, b, other}, 99);
  CHECK(step.op == -1);
  CHECK(step.kind == "step");
  CHECK(step.flops == 2 * op.fwd.flops + op.bwd.flops);
  CHECK(step.bytes == 2 * op.fwd.bytes + op.bwd.bytes);
  CHECK(step.measured_ns == 99);
  // The phase tracker: first call forward, later ones recompute, until reset.
  cuda_harness::PhaseTracker t(3);
  CHECK(t.forward_phase(2) == Phase::kForward);
  CHECK(t.forward_phase(2) == Phase::kRecompute);
  CHECK(t.forward_phase(0) == Phase::kForward);
  t.reset();
  CHECK(t.forward_phase(2) == Phase::kForward);
  CHECK_THROWS_AS(t.forward_phase(3), std::out_of_range);
}

TEST_CASE("cuda host: the timing table's CSV and event times") {
  CHECK(cuda_harness::timing_header() ==
        "row_index,op_index,kind,block,phase,name,flops,bytes,measured_ns\n");
  cuda_harness::TimingRow r;
  r.row_index = 3;
  r.op = 12;
  r.kind = "linear";
  r.block = -1;
  r.phase = "backward";
  r.name = "fc1, \"up\"";  // quoted as RFC 4180 says
  r.flops = 4096;
  r.bytes = 512;
  r.measured_ns = 1500;
  CHECK(cuda_harness::timing_csv_row(r) ==
        "3,12,linear,-1,backward,\"fc1, \"\"up\"\"\",4096,512,1500\n");
  // cudaEventElapsedTime gives float milliseconds.
  CHECK(cuda_harness::elapsed_ns(0.0f) == 0);
  CHECK(cuda_harness::elapsed_ns(0.5f) == 500000);
  CHECK(cuda_harness::elapsed_ns(0.0015f) == 1500);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(-1.0f), std::domain_error);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(std::nanf("")), std::domain_error);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(INFINITY), std::domain_error);
}
