// The CUDA harness's host side (harness/cuda), which CI runs without a GPU: the device arena's
// placement and exact-byte ledger, the StorageArena the CUDA backend keeps, driven here by the
// executor's walker over the CPU backend for every strategy (its peak must be the walker's and
// the simulator's, to the byte, on the first and on a second step as run_cuda() measures it), the
// cuBLAS calls planned for every matmul (run through a column-major emulation of cuBLAS and held
// against the CPU backend's loops, with GQA and column views), the kernels' shared element math
// (the dropout generator bit for bit with the CPU backend's), the phase each call is timed
// under, and the timing table's rows and CSV.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_harness/arena.hpp"
#include "cuda_harness/gemm_plan.hpp"
#include "cuda_harness/kernel_math.hpp"
#include "cuda_harness/timing.hpp"
#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "numeric.hpp"

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
  // A device with too little memory: the arena is capped (to the alignment), and what does not
  // fit goes outside, counted the same.
  StorageArena small(g, 256, 600);
  CHECK(small.planner().capacity() == 512);
  CHECK(small.place(0) == 0);
  CHECK(small.place(1) == 256);
  CHECK(small.place(2) == -1);
  CHECK(small.outside(2));
  CHECK(small.planner().live_bytes() == 768);
  small.remove(2);
  CHECK(small.planner().live_bytes() == 512);
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
      const Schedule sched = build_schedule(g, plan, recompute_mode(g));
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
  CHECK(f.kernels == op.fwd.kernels);
  CHECK(f.math16 == op.math16);  // bf16-amp: the op's own rule
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
        "model,precision,attention,batch,seq,op,kind,block,phase,name,math16,flops,bytes,"
        "kernels,measured_ns\n");
  cuda_harness::TimingRow r;
  r.model = "exec-gpt";
  r.precision = "bf16-amp";
  r.attention = "flash";
  r.batch = 2;
  r.seq = 8;
  r.math16 = false;
  r.kernels = 3;
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
        "exec-gpt,bf16-amp,flash,2,8,12,linear,-1,backward,\"fc1, \"\"up\"\"\",0,4096,512,3,1500\n");
  // cudaEventElapsedTime gives float milliseconds.
  CHECK(cuda_harness::elapsed_ns(0.0f) == 0);
  CHECK(cuda_harness::elapsed_ns(0.5f) == 500000);
  CHECK(cuda_harness::elapsed_ns(0.0015f) == 1500);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(-1.0f), std::domain_error);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(std::nanf("")), std::domain_error);
  CHECK_THROWS_AS(cuda_harness::elapsed_ns(INFINITY), std::domain_error);
}

namespace {

using cuda_harness::AttnDims;
using cuda_harness::CublasGemm;
using cuda_harness::RowMajorGemm;
using Buf = std::vector<double>;

// cublasGemmStridedBatchedEx as its documentation defines it (column-major): for batch entry e,
// C[i + j ldc] = alpha sum_l op(A)(i, l) op(B)(l, j) + beta C[i + j ldc], with op(A)(i, l) =
// A[i + l lda] (N) or A[l + i lda] (T), every operand offset by e * its stride; with beta 0, C is
// not read.
void emulate(const std::vector<RowMajorGemm>& plan, const Buf& a, const Buf& b, Buf& c) {
  const Buf* buf[3] = {&a, &b, &c};
  for (const RowMajorGemm& rm : plan) {
    const CublasGemm g = cuda_harness::to_cublas(rm);
    const Buf& A = *buf[g.a.buffer];
    const Buf& B = *buf[g.b.buffer];
    REQUIRE(g.c.buffer == 2);
    for (int64_t e = 0; e < g.batch; ++e)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          double acc = 0;
          for (int64_t l = 0; l < g.k; ++l) {
            const int64_t ai = g.a.offset + e * g.a.stride + (g.trans_a ? l + i * g.a.ld : i + l * g.a.ld);
            const int64_t bi = g.b.offset + e * g.b.stride + (g.trans_b ? j + l * g.b.ld : l + j * g.b.ld);
            acc += A.at(static_cast<size_t>(ai)) * B.at(static_cast<size_t>(bi));
          }
          double& out = c.at(static_cast<size_t>(g.c.offset + e * g.c.stride + i + j * g.c.ld));
          out = g.alpha * acc + (g.beta == 0.0f ? 0.0 : g.beta * out);
        }
  }
}

Buf random_buf(size_t n, uint64_t salt) {
  Buf v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919 + salt * 104729) % 23) / 11.0 - 1.0;
  return v;
}

void check_close(const Buf& got, const Buf& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - want[i]) <= 1e-12 * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("cuda host: the linear layer's cuBLAS calls compute y = x w^T, dx = dy w, dw = dy^T x") {
  const int64_t rows = 5, in = 3, out = 4, ld_x = 7, ld_dy = 6;  // x and dy as column views
  const Buf x = random_buf(rows * ld_x, 1), w = random_buf(out * in, 2), dy = random_buf(rows * ld_dy, 3);
  Buf y(rows * out, 99.0), dx(rows * in, 99.0), dw(out * in, 99.0);  // beta 0: old C is ignored
  emulate(cuda_harness::linear_forward(rows, in, out, ld_x), x, w, y);
  emulate(cuda_harness::linear_dx(rows, in, out, ld_dy), dy, w, dx);
  emulate(cuda_harness::linear_dw(rows, in, out, ld_dy, ld_x), dy, x, dw);
  // The CPU backend's loops (cpu_backend.cpp, Exec::kLinear).
  Buf ry(rows * out, 0.0), rdx(rows * in, 0.0), rdw(out * in, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < in; ++k) {
        ry[r * out + o] += x[r * ld_x + k] * w[o * in + k];
        rdx[r * in + k] += dy[r * ld_dy + o] * w[o * in + k];
        rdw[o * in + k] += dy[r * ld_dy + o] * x[r * ld_x + k];
      }
  check_close(y, ry);
  check_close(dx, rdx);
  check_close(dw, rdw);
}

TEST_CASE("cuda host: attention's cuBLAS calls match the CPU backend with GQA and fused-qkv views") {
  for (const int64_t grp : {int64_t{1}, int64_t{2}, int64_t{4}}) {
    CAPTURE(grp);
    const AttnDims a{2, 4, 3, 2, grp};
    const int64_t b = a.b, heads = a.heads, s = a.s, d = a.d, kvh = a.kv_heads();
    const int64_t qw = heads * d, kw = kvh * d, tokens = b * s;
    const int64_t ld_q = qw + 2 * kw + 1, ld_k = kw + 3, ld_v = kw + 5, ld_do = qw;  // views
    const float scale = 0.5f;
    const Buf q = random_buf(tokens * ld_q, 4), k = random_buf(tokens * ld_k, 5),
              v = random_buf(tokens * ld_v, 6), ds = random_buf(b * heads * s * s, 7),
              p = random_buf(b * heads * s * s, 8), dout = random_buf(tokens * ld_do, 9);
    Buf sc(b * heads * s * s, 99.0), dq(tokens * qw, 99.0), dk(tokens * kw, 99.0),
        o(tokens * qw, 99.0), dp(b * heads * s * s, 99.0), dv(tokens * kw, 99.0);
    emulate(cuda_harness::qk_forward(a, ld_q, ld_k, scale), q, k, sc);
    emulate(cuda_harness::qk_dq(a, ld_k, scale), ds, k, dq);
    emulate(cuda_harness::qk_dk(a, ld_q, scale), ds, q, dk);
    emulate(cuda_harness::av_forward(a, ld_v), p, v, o);
    emulate(cuda_harness::av_dp(a, ld_do, ld_v), dout, v, dp);
    emulate(cuda_harness::av_dv(a, ld_do), p, dout, dv);
    // The CPU backend's index maps and loops (cpu_backend.cpp, Exec::kQk and Exec::kAv).
    auto sidx = [&](int64_t bi, int64_t h, int64_t i, int64_t j) { return ((bi * heads + h) * s + i) * s + j; };
    auto qrow = [&](int64_t bi, int64_t i) { return bi * s + i; };
    Buf rsc(sc.size(), 0.0), rdq(dq.size(), 0.0), rdk(dk.size(), 0.0), ro(o.size(), 0.0),
        rdp(dp.size(), 0.0), rdv(dv.size(), 0.0);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j)
            for (int64_t e = 0; e < d; ++e) {
              const int64_t qi = qrow(bi, i) * ld_q + h * d + e, kj = qrow(bi, j) * ld_k + (h / grp) * d + e;
              const int64_t vj = qrow(bi, j) * ld_v + (h / grp) * d + e;
              rsc[sidx(bi, h, i, j)] += scale * q[qi] * k[kj];
              rdq[qrow(bi, i) * qw + h * d + e] += scale * ds[sidx(bi, h, i, j)] * k[kj];
              rdk[qrow(bi, j) * kw + (h / grp) * d + e] += scale * ds[sidx(bi, h, i, j)] * q[qi];
              ro[qrow(bi, i) * qw + h * d + e] += p[sidx(bi, h, i, j)] * v[vj];
              rdp[sidx(bi, h, i, j)] += dout[qrow(bi, i) * ld_do + h * d + e] * v[vj];
              rdv[qrow(bi, j) * kw + (h / grp) * d + e] += p[sidx(bi, h, i, j)] * dout[qrow(bi, i) * ld_do + h * d + e];
            }
    check_close(sc, rsc);
    check_close(dq, rdq);
    check_close(dk, rdk);
    check_close(o, ro);
    check_close(dp, rdp);
    check_close(dv, rdv);
  }
}

TEST_CASE("cuda host: the kernels' generator, dropout masks, weights and tokens are the CPU backend's") {
  namespace m = cuda_harness::math;
  using executor::detail::uniform;
  int kept = 0;
  for (uint64_t op = 0; op < 40; ++op)
    for (uint64_t i = 0; i < 200; ++i) {
      const uint64_t step = i % 3, seed = 1 + op % 2;
      REQUIRE(m::uniform(seed, op, i, step) == uniform(seed, op, i, step));
      // cpu_backend's keep_scale: 1 / (1 - p) where uniform >= p, else 0.
      const double p = 0.1;
      const float k = m::keep_scale(seed, op, i, step, p);
      CHECK(k == (uniform(seed, op, i, step) >= p ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f));
      kept += k != 0.0f;
      // Weights (before rounding) and token ids, as cpu_backend draws them.
      const double u = uniform(seed, 0x5eed, op, i) - 0.5;
      CHECK(m::param_value(seed, op, i, false) == 0.8 * u);
      CHECK(m::param_value(seed, op, i, true) == 1.0 + 0.4 * u);
      CHECK(m::token(seed, 0x1d5, i, 40) ==
            static_cast<int64_t>(std::floor(uniform(seed, 0x1d5, i) * 40.0)));
    }
  // p = 0.1 keeps about 90% (8,000 draws: the count is within a few standard deviations).
  CHECK(kept > 7000);
  CHECK(kept < 7400);
}

TEST_CASE("cuda host: GeLU and SiLU and their derivatives in fp32 match the double formulas") {
  namespace m = cuda_harness::math;
  for (double x = -6.0; x <= 6.0; x += 0.125) {
    CAPTURE(x);
    const float v = static_cast<float>(x);
    const double th = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    const double gelu = 0.5 * x * (1 + th);
    const double dgelu = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    const double sg = 1.0 / (1.0 + std::exp(-x));
    CHECK(std::abs(m::gelu(v) - gelu) <= 1e-6 * (1 + std::abs(gelu)));
    CHECK(std::abs(m::gelu_grad(v) - dgelu) <= 1e-6 * (1 + std::abs(dgelu)));
    CHECK(std::abs(m::silu(v) - x * sg) <= 1e-6 * (1 + std::abs(x * sg)));
    CHECK(std::abs(m::silu_grad(v) - sg * (1 + x * (1 - sg))) <= 1e-6);
  }
}
