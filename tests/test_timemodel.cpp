// The time model (DESIGN.md §5): kernel classes, communication on its own stream, the host lane.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "../sim/src/comm.hpp"
#include "../sim/src/kernels.hpp"
#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

// Seconds of one m x n x k GEMM at the device's large-GEMM rate after quantization.
double gemm_s(int64_t m, int64_t n, int64_t k, const Device& d) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         (d.peak_bf16_flops_per_s * d.compute_efficiency *
          gemm_shape_efficiency(m, n, k, 1, d.sm_count, true));
}

}  // namespace

TEST_CASE("GEMM efficiency: tile and wave quantization as the formula says") {
  const Device d = fixtures::h100();  // 132 SMs
  // 132 tiles of 256 x 128 fill one wave exactly: no loss.
  CHECK(gemm_shape_efficiency(256 * 132, 128, 4096, 1, 132, true) == doctest::Approx(1.0));
  // One row more: 133 tiles of the best shape; the time is waves x tile area, so at least the
  // single wave's time and at most twice it.
  const double full = gemm_s(256 * 132, 128, 4096, d);
  const double more = gemm_s(256 * 132 + 1, 128, 4096, d);
  CHECK(more > full * 1.01);
  CHECK(more <= 2 * full * (1 + 1e-12));
  // A partial tile: 64 x 128 output is one 64 x 128 tile on one of 132 SMs.
  CHECK(gemm_shape_efficiency(64, 128, 4096, 1, 132, true) == doctest::Approx(1.0 / 132));
  // The best shapes of stas00's mamf-finder quantize to within 3 % (research note §14a).
  CHECK(gemm_shape_efficiency(2048, 2048, 13312, 1, 132, true) > 0.96);
  CHECK(gemm_shape_efficiency(1024, 10240, 5120, 1, 108, true) > 0.98);
  // A 16-bit GEMM with a dimension not a multiple of 8 pays the alignment penalty (0.69).
  CHECK(gemm_shape_efficiency(4096, 4096, 10922, 4, 132, true) ==
        doctest::Approx(gemm_shape_efficiency(4096, 4096, 10944, 4, 132, true) * 272.73 / 396.0));
  CHECK(gemm_shape_efficiency(4096, 4096, 10922, 4, 132, false) ==
        doctest::Approx(gemm_shape_efficiency(4096, 4096, 10944, 4, 132, false)));
  // Time never falls as M grows (aligned M), and efficiency is in (0, 1].
  double prev = 0;
  for (int64_t m = 8; m <= 8192; m += 8) {
    const double e = gemm_shape_efficiency(m, 3072, 768, 1, 132, true);
    CHECK_MESSAGE((e > 0 && e <= 1 + 1e-12), m);
    const double t = gemm_s(m, 3072, 768, d);
    CHECK_MESSAGE(t >= prev * (1 - 1e-12), m);
    prev = t;
  }
}

TEST_CASE("attention kernels follow their published curves") {
  Device a100 = fixtures::h100();
  a100.sm_arch = 80;
  a100.peak_bf16_flops_per_s = 312e12;
  const Device h100 = fixtures::h100();
  using K = KernelChoice;
  // Table points (research/kernel_throughput.md §10, §11).
  CHECK(attention_flops_per_s(K::kFlashAttention2, a100, 2048, 128, true, false) ==
        doctest::Approx(155e12));
  CHECK(attention_flops_per_s(K::kFlashAttention2, h100, 8192, 128, false, false) ==
        doctest::Approx(370e12));
  CHECK(attention_flops_per_s(K::kFlashAttention3, h100, 4096, 64, true, false) ==
        doctest::Approx(420e12));
  CHECK(attention_flops_per_s(K::kCudnnAttention, h100, 1024, 128, false, true) ==
        doctest::Approx(408e12));
  // FA2 on H100: forward and backward together reproduce the forward+backward figure.
  for (int64_t s : {512, 2048, 16384}) {
    const double f = attention_flops_per_s(K::kFlashAttention2, h100, s, 128, true, false);
    const double b = attention_flops_per_s(K::kFlashAttention2, h100, s, 128, true, true);
    const double fb = 3.5 / (1 / f + 2.5 / b);
    const double table = s == 512 ? 163e12 : s == 2048 ? 265e12 : 328e12;
    CHECK(fb == doctest::Approx(table));
  }
  // Between table points: log-linear in the sequence length, inside the bracket.
  const double mid = attention_flops_per_s(K::kFlashAttention2, a100, 3000, 64, false, false);
  CHECK(mid > 162e12);
  CHECK(mid < 171e12);
  // Causal masks cost throughput at short lengths; FA3 beats FA2 on Hopper at long ones.
  CHECK(attention_flops_per_s(K::kFlashAttention2, h100, 1024, 128, true, false) <
        attention_flops_per_s(K::kFlashAttention2, h100, 1024, 128, false, false));
  CHECK(attention_flops_per_s(K::kFlashAttention3, h100, 8192, 128, true, false) >
        1.5 * attention_flops_per_s(K::kFlashAttention2, h100, 8192, 128, true, false));
  // The class choice: flash attention defaults to FA2, the hook overrides it.
  Op op;
  op.kind = OpKind::kFlashAttention;
  CHECK(pick_kernel(op).attention == K::kFlashAttention2);
  op.kernel = K::kFlashAttention3;
  CHECK(pick_kernel(op).attention == K::kFlashAttention3);
  op.kind = OpKind::kLinear;
  CHECK(pick_kernel(op).cls == KernelClass::kGemm);
  op.kind = OpKind::kSoftmax;
  CHECK(pick_kernel(op).cls == KernelClass::kMemoryBound);
}

TEST_CASE("optimizer launches follow multi_tensor_apply's chunking") {
  CHECK(optimizer_launches(10, 1000, 8, false) == 80);           // for-loop: per tensor and op
  CHECK(optimizer_launches(36, 36 * 100, 1, true) == 1);         // one launch: 36 tensors
  CHECK(optimizer_launches(37, 37 * 100, 1, true) == 2);
  CHECK(optimizer_launches(1, 320 * 65536, 1, true) == 2);       // 320 chunks + a partial one
}

TEST_CASE("collectives: NCCL ring bus factors and latency, NVLink inside a node") {
  const Device d = fixtures::h100();
  const CommGroup g8{8, 1};
  const double bytes = 1e9;
  // NVLink at NCCL's effective 20 of 25 GB/s per link (128 B SM payloads, comm.cpp): 360 of the
  // H100's 450 GB/s per direction (NCCL's maintainer: ~370 GB/s bus bandwidth with NCCL_ALGO=RING).
  const double nvlink = 450e9 * 0.8;
  CHECK(collective_seconds(Collective::kAllReduce, 1'000'000'000, g8, d) ==
        doctest::Approx(8.4e-6 + 14 * 3.4e-6 + bytes * 2 * 7 / 8 / nvlink));
  CHECK(collective_seconds(Collective::kAllGather, 1'000'000'000, g8, d) ==
        doctest::Approx(8.4e-6 + 7 * 3.4e-6 + bytes * 7 / 8 / nvlink));
  // Placement: tp 8 fills a node, so the dp group of 4 has one rank per node: 4 nodes.
  CHECK(comm_group(4, 8, 8).nodes == 4);
  CHECK(comm_group(8, 1, 8).nodes == 1);
  CHECK(comm_group(16, 1, 8).nodes == 2);
  // Across nodes: one rank per node drives one NIC (50 GB/s here): far slower than NVLink.
  CHECK(collective_seconds(Collective::kAllReduce, 1'000'000'000, comm_group(4, 8, 8), d) >
        5 * collective_seconds(Collective::kAllReduce, 1'000'000'000, CommGroup{4, 1}, d));
}

TEST_CASE("data-parallel all-reduce: hidden behind backward when compute is longer") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  t.dp = 8;
  t.precision = Precision::kBf16Amp;  // hfds: the Trainer over torch DDP (not DeepSpeed)
  t.seq = 1024;
  t.micro_batch = 16;
  const Result big = simulate(m, t, fixtures::h100(), parse_strategy("none"));
  REQUIRE(big.dp_comm_ns > 0);
  // DDP overlaps: what compute waits for is much less than the collectives' time.
  CHECK(big.comm_wait_ns < big.dp_comm_ns / 2);
  CHECK(big.dp_buckets > 4);
  // What stays exposed is the tail: the embedding's 154 MB of gradients arrive last (its first
  // reader is the first op). With a small vocabulary nearly everything hides.
  ModelConfig small_vocab = m;
  small_vocab.vocab = 1024;
  const Result hidden = simulate(small_vocab, t, fixtures::h100(), parse_strategy("none"));
  CHECK(hidden.comm_wait_ns < hidden.dp_comm_ns / 10);
  // Tiny compute: the same collectives are mostly exposed. (No host dispatch cost here: the
  // backward of a tiny step is otherwise host-bound, and the host's time hides them too.)
  t.micro_batch = 1;
  t.seq = 32;
  Device fast_host = fixtures::h100();
  fast_host.host_dispatch_ns = 0;
  const Result small = simulate(m, t, fast_host, parse_strategy("none"));
  CHECK(static_cast<double>(small.dp_comm_ns) ==
        doctest::Approx(static_cast<double>(big.dp_comm_ns)).epsilon(1e-9));
  // At best the stream overlaps all of backward; the rest is exposed.
  CHECK(small.comm_wait_ns + small.bwd_time_ns >= small.dp_comm_ns);
  CHECK(small.comm_wait_ns > 3 * big.comm_wait_ns / 2);
  CHECK(small.comm_wait_ns > small.dp_comm_ns / 3);
  // One node per rank: the all-reduce runs over the network and takes longer.
  SimOptions o;
  o.gpus_per_node = 1;
  TrainSetup t2 = t;
  const Result net = simulate(m, t2, fast_host, parse_strategy("none"), o);
  CHECK(net.dp_comm_ns > 3 * small.dp_comm_ns);
}

TEST_CASE("DDP buckets: 1 MiB first, then 25 MiB, in backward order") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  t.dp = 2;
  t.precision = Precision::kBf16Amp;  // hfds: the Trainer over torch DDP (not DeepSpeed)
  t.seq = 128;
  const Device d = fixtures::h100();
  const Graph g = build_graph(m, t, d);
  // Independent count: walk backward (reverse forward order), adding each parameter's fp32
  // gradient at the backward of its first forward reader; the total is every parameter's.
  std::vector<int64_t> at(g.ops.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) at[i] = 4 * g.ops[i].param_numel, total += at[i];
  CHECK(total == 4 * g.params_per_rank);
  int64_t buckets = 0, pending = 0;
  for (size_t i = g.ops.size(); i-- > 0;) {
    if (!g.ops[i].has_backward) continue;
    pending += at[i];
    if (pending >= (buckets == 0 ? (1 << 20) : 25 << 20)) ++buckets, pending = 0;
  }
  if (pending > 0) ++buckets;
  const Result r = simulate(m, t, d, parse_strategy("none"));
  CHECK(r.dp_buckets == buckets);
  // Each GPT-2 small block holds 7.1 M parameters, 28 MB of fp32 gradients: more than a bucket.
  CHECK(buckets >= m.layers);
}

TEST_CASE("ZeRO-3: one reduce-scatter per block, gathers prefetched") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  // ds3b: the per-block ZeRO-3 schedule (FSDP-style, here under nanoGPT); HF's default under
  // --zero 3 is DeepSpeed's per-module schedule, tested in test_deepspeed.cpp
  t.impl = Impl::kNanogpt;
  t.dp = 8;
  t.zero = 3;
  t.seq = 1024;
  t.micro_batch = 8;
  const Result r = simulate(m, t, fixtures::h100(), parse_strategy("none"));
  CHECK(r.dp_buckets == m.layers);
  // Gathers in forward and again in backward, reduce-scatters: more traffic than DDP's
  // all-reduce of the same gradients would move, and mostly hidden behind compute.
  CHECK(r.dp_comm_ns > 0);
  CHECK(r.comm_wait_ns < r.dp_comm_ns);
}

TEST_CASE("host lane: a tiny model is host-bound and the GPU waits") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.seq = 32;
  SimOptions o;
  o.record_timeline = true;
  const Result tiny = simulate(m, t, fixtures::h100(), parse_strategy("none"), o);
  CHECK(tiny.host_wait_ns > tiny.step_time_ns / 2);
  bool idle_span = false, host_span = false;
  for (const OpSpan& s : tiny.spans) {
    idle_span = idle_span || (s.op == kHostWaitSpan && s.stream == 0);
    host_span = host_span || s.stream == 4;
  }
  CHECK(idle_span);
  CHECK(host_span);
  // A large one is not: its kernels outlast the dispatch.
  TrainSetup big;
  big.seq = 2048;
  big.micro_batch = 1;
  const Result large = simulate(fixtures::gpt3_175b(), [&] {
    TrainSetup s = big;
    s.profile = Profile::kPaper;
    s.tp = 8;
    return s;
  }(), fixtures::h100(), parse_strategy("none"));
  CHECK(large.host_wait_ns < large.step_time_ns / 100);
}

TEST_CASE("topology: a world beyond one node must fill whole nodes") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  t.seq = 128;
  t.dp = 6;
  SimOptions o;
  o.gpus_per_node = 4;
  CHECK_THROWS_AS(simulate(m, t, fixtures::h100(), parse_strategy("none"), o), ConfigError);
  t.dp = 3;  // smaller than a node: fine
  CHECK_NOTHROW(simulate(m, t, fixtures::h100(), parse_strategy("none"), o));
  t.dp = 8;
  CHECK_NOTHROW(simulate(m, t, fixtures::h100(), parse_strategy("none"), o));
}

TEST_CASE("contention: compute overlapping a collective runs kOverlapComputeSlowdown slower") {
  CHECK(contended_ns(1000, 0) == 1000);
  CHECK(contended_ns(0, 500) == 0);
  // Wholly inside the busy window: 18.9 % slower.
  CHECK(contended_ns(1000, 10'000) == 1189);
  // Partly: the window's 1189 ns do 1000 / 1.189 ... of the work; the rest at full speed.
  CHECK(contended_ns(2000, 1189) == 1189 + 1000);
  // In the engine: FSDP's gathers overlap forward, so forward takes longer than without data
  // parallelism, by at most the slowdown.
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  t.seq = 1024;
  t.micro_batch = 8;
  Device d = fixtures::h100();
  d.host_dispatch_ns = 0;
  t.precision = Precision::kDeepspeedBf16;  // hfds: HF's regime under ZeRO-3, alone too
  const Result alone = simulate(m, t, d, parse_strategy("none"));
  t.dp = 8;
  t.zero = 3;
  const Result fsdp = simulate(m, t, d, parse_strategy("none"));
  CHECK(fsdp.fwd_time_ns > alone.fwd_time_ns);
  CHECK(static_cast<double>(fsdp.fwd_time_ns) <=
        static_cast<double>(alone.fwd_time_ns) * (1 + kOverlapComputeSlowdown) + 1);
}

TEST_CASE("kernel choice per implementation (issue 11): the impl row names its attention kernel") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.seq = 256;
  const Device d = fixtures::h100();
  auto kernel_of = [&](Impl impl) {
    TrainSetup ti = t;
    ti.impl = impl;
    const Graph g = build_graph(m, ti, d);
    for (const Op& op : g.ops)
      if (op.kind == OpKind::kFlashAttention) return op.kernel;
    FAIL("no flash attention op");
    return KernelChoice::kDefault;
  };
  CHECK(kernel_of(Impl::kMegatron) == KernelChoice::kCudnnAttention);  // TE: cuDNN on Hopper
  CHECK(kernel_of(Impl::kTorchtitan) == KernelChoice::kFlashAttention2);
  CHECK(kernel_of(Impl::kHf) == KernelChoice::kFlashAttention2);
  // The choice reaches the timing: cuDNN's H100 table is faster than FA2's at these shapes.
  CHECK(attention_flops_per_s(KernelChoice::kCudnnAttention, d, 4096, 128, true, false) >
        attention_flops_per_s(KernelChoice::kFlashAttention2, d, 4096, 128, true, false));
}

TEST_CASE("optimizer kinds (issue 11): a per-parameter loop launches per tensor, fused once") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup t;
  t.seq = 128;
  const Device d = fixtures::h100();
  auto opt_ns = [&](Optimizer o) {
    TrainSetup to = t;
    to.optimizer = o;
    return simulate(m, to, d, parse_strategy("none")).optimizer_time_ns;
  };
  const int64_t loop = opt_ns(Optimizer::kAdamLoop), foreach_ = opt_ns(Optimizer::kAdamForeach),
                fused = opt_ns(Optimizer::kAdamFused);
  // GPT-2 small has dozens of parameter tensors: the loop's 8 launches per tensor cost at least
  // (8 x tensors - foreach's launches) x the launch overhead more than foreach over the same bytes.
  const Graph g = build_graph(m, t, d);
  const int64_t tensors = static_cast<int64_t>(g.param_storages.size());
  CHECK(tensors > 50);
  CHECK(loop - foreach_ >=
        (8 * tensors - optimizer_launches(tensors, g.params_per_rank, 8, true)) *
            d.launch_overhead_ns);
  CHECK(fused < foreach_);  // 28 B per parameter against 80, one launch group against eight
}

TEST_CASE("FSDP2 (issue 11): bf16 all-gathers of fp32 shards, copies on the compute stream") {
  ModelConfig m = fixtures::tiny_llama();  // widened: bandwidth, not per-call latency, dominates
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  TrainSetup t;
  t.seq = 512;
  t.dp = 8;
  t.zero = 3;
  t.impl = Impl::kTorchtitan;
  Device d = fixtures::h100();
  d.host_dispatch_ns = 0;
  const Result fsdp2 = simulate(m, t, d, parse_strategy("none"));
  // The same ZeRO-3 schedule over fp32 weights (bf16 autocast) gathers 4 B per parameter:
  // FSDP2 gathers 2 B (param_dtype) in forward and backward and reduce-scatters 4 B (fp32), so
  // its traffic is (2 + 2 + 4) / (4 + 4 + 4) of the other's, less per-call latency.
  TrainSetup amp = t;
  amp.precision = Precision::kBf16Amp;
  const Result zero3 = simulate(m, amp, d, parse_strategy("none"));
  const auto z3 = static_cast<double>(zero3.dp_comm_ns);
  CHECK(static_cast<double>(fsdp2.dp_comm_ns) < z3 * 0.8);
  CHECK(static_cast<double>(fsdp2.dp_comm_ns) > z3 * 0.5);
}

TEST_CASE("fp8 GEMMs (time2): the device's dense fp8 peak at MAMF's fp8/bf16 share") {
  Device d = fixtures::h100();
  // kernels.hpp: 1,402.6/1,979 over 794.5/989 (stas00 MAMF, H100 SXM).
  CHECK(fp8_gemm_relative_efficiency() == doctest::Approx(0.8822).epsilon(1e-4));
  d.peak_fp8_flops_per_s = 1.979e15;
  CHECK(fp8_gemm_peak_flops_per_s(d) == doctest::Approx(1.979e15 * 0.8822).epsilon(1e-4));
  // A file with a different fp8 figure is read, not 2 x bf16.
  d.peak_fp8_flops_per_s = 1.5e15;
  CHECK(fp8_gemm_peak_flops_per_s(d) == doctest::Approx(1.5e15 * 0.8822).epsilon(1e-4));
  // None given: twice the bf16 peak.
  d.peak_fp8_flops_per_s = 0;
  CHECK(fp8_gemm_peak_flops_per_s(d) ==
        doctest::Approx(2 * d.peak_bf16_flops_per_s * 0.8822).epsilon(1e-4));
}

TEST_CASE("fp8 GEMMs (time2): the engine times fp8 linears at the device's fp8 rate") {
  // tiny_llama widened so that the GEMMs, not the host, set the step time (as test_lora.cpp)
  ModelConfig m = fixtures::wide_llama();
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.seq = 2048;
  Device d = fixtures::h100();
  const Result bf16 = simulate(m, t, d, parse_strategy("none"));
  t.fp8 = Fp8Recipe::kTeDelayed;
  d.peak_fp8_flops_per_s = 2 * d.peak_bf16_flops_per_s;
  const Result fp8 = simulate(m, t, d, parse_strategy("none"));
  CHECK(fp8.step_time_ns < bf16.step_time_ns);
  // A larger fp8 peak in the device file makes the same step faster: the field is read.
  Device faster = d;
  faster.peak_fp8_flops_per_s = 4 * d.peak_bf16_flops_per_s;
  CHECK(simulate(m, t, faster, parse_strategy("none")).step_time_ns < fp8.step_time_ns);
  // An fp8 rate equal to the bf16 one (peak x 0.882 = bf16 peak): the GEMMs gain nothing and
  // the recipe's casts cost extra, so the step is no faster than bf16's.
  Device same = d;
  same.peak_fp8_flops_per_s = d.peak_bf16_flops_per_s / fp8_gemm_relative_efficiency();
  CHECK(simulate(m, t, same, parse_strategy("none")).step_time_ns >= bf16.step_time_ns);
}
