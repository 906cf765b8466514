// cpfp8 (issues 11/13): MFU under --fp8 (sim/src/utilization.cpp) and torch's context-parallel
// ring as the source shows it (sim/src/cp.cpp).
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include <utility>
#include <vector>

#include "sim/graph.hpp"
#include "sim/pipeline.hpp"
#include "sim/simulate.hpp"

using namespace sim;

TEST_CASE("MFU under --fp8: the 16-bit dense peak (torchtitan's convention), and the mixed peak") {
  const ModelConfig m = fixtures::wide_llama();
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.seq = 2048;
  t.micro_batch = 1;
  Device d = fixtures::h100();
  d.peak_fp8_flops_per_s = 2 * d.peak_bf16_flops_per_s;
  const Result bf16 = simulate(m, t, d, parse_strategy("none"));
  CHECK(bf16.fp8_model_flops == 0);
  CHECK(bf16.mfu_fp8_mixed == 0);
  CHECK(bf16.mfu_peak_flops_per_s == d.peak_bf16_flops_per_s);
  t.fp8 = Fp8Recipe::kTeDelayed;
  const Result r = simulate(m, t, d, parse_strategy("none"));
  const double step_s = static_cast<double>(r.step_time_ns) * 1e-9;
  // mfu stays against the bf16 peak, under fp8 as without it
  CHECK(r.mfu_peak_flops_per_s == d.peak_bf16_flops_per_s);
  CHECK(r.mfu == doctest::Approx(static_cast<double>(r.model_flops) /
                                 (step_s * d.peak_bf16_flops_per_s)).epsilon(1e-12));
  // The fp8 model FLOPs, by hand: every block linear but the lm head, forward 2 x tokens x
  // weights and backward twice that: q 2048 x 2048, k and v 2048 x 512, o 2048 x 2048, gate,
  // up, down 3 x 2048 x 5632, 4 layers, 2,048 tokens.
  const int64_t w = 2048LL * 2048 * 2 + 2048LL * 512 * 2 + 3LL * 2048 * 5632;
  CHECK(r.fp8_model_flops == 6 * 2048 * w * 4);
  CHECK(r.fp8_model_flops < r.model_flops);
  // mixed: the ideal time (fp8 FLOPs at the fp8 peak, the rest at bf16) over the step time
  const double f8 = static_cast<double>(r.fp8_model_flops);
  const double ideal =
      f8 / d.peak_fp8_flops_per_s + (static_cast<double>(r.model_flops) - f8) / d.peak_bf16_flops_per_s;
  CHECK(r.mfu_fp8_mixed == doctest::Approx(ideal / step_s).epsilon(1e-12));
  CHECK(r.mfu_fp8_mixed < r.mfu);
  CHECK(r.mfu_fp8_mixed > 0);
  // A pipeline sums its stages' fp8 FLOPs like its model FLOPs: the same model over 2 stages
  t.pp = 2;
  t.microbatches = 2;
  const PipelineResult p = simulate_pipeline(m, t, d, parse_strategy("none"));
  CHECK(p.summary.fp8_model_flops == 2 * r.fp8_model_flops);  // 2 micro-batches
  CHECK(p.summary.mfu_peak_flops_per_s == d.peak_bf16_flops_per_s);
  CHECK(p.summary.mfu_fp8_mixed > 0);
  CHECK(p.summary.mfu_fp8_mixed < p.summary.mfu);
}

TEST_CASE("torch's CP ring: its transients as torch 1.13 measured the ring's eager code") {
  // harness/census/cp.json (harness/census_cp.py): the ring's eager code on the CPU for rank
  // cp - 1, b 1, 4 query heads, 64 local tokens, head dim 16, bf16, stand-ins for the flash
  // kernels and the collectives: q = out = 8,192 B, lse = 1,024 B. Forward: peak rise less its
  // outputs (out, lse); backward: less its gradients (dq, dk + dv); CPU-only cast temporaries of
  // in-place mixed-dtype adds left out. The simulator's flash op carries the ring's transients on
  // top of its own (the flash backward's dq accumulator ...), so each is compared with the same
  // op at cp 1 and the same 64 local tokens.
  ModelConfig m = fixtures::tiny_llama();
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 1;
  m.head_dim = 16;
  m.ffn_hidden = 128;
  struct Row {
    const char* version;  // 9dec370 repeats k, v to 4 heads (kv 16,384 B); v0.2.2 keeps 1 (4,096)
    int64_t cp, fwd, bwd;
  };
  const Row rows[] = {{"9dec370", 2, 100'352, 180'224}, {"9dec370", 4, 133'120, 212'992},
                      {"9dec370", 8, 198'656, 278'528}, {"v0.2.2", 2, 75'776, 63'488},
                      {"v0.2.2", 4, 83'968, 71'680},    {"v0.2.2", 8, 100'352, 88'064}};
  auto flash_ops = [&](const char* version, int64_t cp) {
    TrainSetup t;
    t.impl = Impl::kTorchtitan;
    t.impl_version = version;
    t.seq = 64 * cp;
    t.cp = cp;
    t.zero = cp > 1 ? 3 : 0;  // FSDP2 over dp x cp; one rank has nothing to shard
    std::vector<Op> ops;
    for (const Op& op : build_graph(m, t, fixtures::h100()).ops)
      if (op.kind == OpKind::kFlashAttention) ops.push_back(op);
    return ops;
  };
  for (const Row& r : rows) {
    const std::vector<Op> base = flash_ops(r.version, 1), ring = flash_ops(r.version, r.cp);
    REQUIRE(base.size() == static_cast<size_t>(m.layers));
    REQUIRE(ring.size() == base.size());
    for (size_t i = 0; i < ring.size(); ++i) {
      CHECK(ring[i].fwd_transient_bytes - base[i].fwd_transient_bytes == r.fwd);
      CHECK(ring[i].bwd_transient_bytes - base[i].bwd_transient_bytes == r.bwd);
    }
  }
}
