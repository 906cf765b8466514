// time9 (issue 11): dropout inside fused attention kernels, timed from published with/without
// figures (sim/src/kernels.cpp attention_dropout_factor), and the host calls of the kernels an op
// runs after its own (sim/src/engine.cpp host_ops: fp8 casts, CP merges, main_grad adds, fills).
#include <doctest/doctest.h>

#include <cstdlib>

#include "../sim/src/kernels.hpp"
#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

Device a100() {
  Device d = fixtures::h100();
  d.sm_arch = 80;
  return d;
}

// A Megatron GPT on the test device: TE's fused attention (cuDNN on Hopper)
TrainSetup megatron() {
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.micro_batch = 2;
  t.seq = 512;
  t.attention = AttentionKind::kFlash;
  return t;
}

ModelConfig gpt2(double p_attn) {
  ModelConfig m = fixtures::gpt2_small();
  m.attn_dropout = p_attn;
  return m;
}

}  // namespace

TEST_CASE("time9: the dropout factor per kernel is the published ratio, 1 without dropout") {
  const Device h = fixtures::h100(), a = a100();
  using K = KernelChoice;
  for (K k : {K::kDefault, K::kFlashAttention2, K::kFlashAttention3, K::kCudnnAttention,
              K::kSdpaMemEfficient})
    for (const Device& d : {h, a}) CHECK(attention_dropout_factor(k, d, 0.0f) == 1.0);
  // TE issue 3312 (H200, sbhd, fwd + bwd): 0.594 -> 0.614 ms
  CHECK(attention_dropout_factor(K::kCudnnAttention, h, 0.1f) == doctest::Approx(1.0337).epsilon(1e-4));
  // TE PR 3313 (flash-attn 2.7.4): 0.695 -> 0.728 ms; cuDNN before Hopper is timed as FA2
  const double fa2 = attention_dropout_factor(K::kFlashAttention2, h, 0.1f);
  CHECK(fa2 == doctest::Approx(1.0475).epsilon(1e-4));
  CHECK(attention_dropout_factor(K::kDefault, a, 0.1f) == fa2);
  CHECK(attention_dropout_factor(K::kCudnnAttention, a, 0.1f) == fa2);
  // the philox draw is made for every probability whatever p is: one factor for any p > 0
  CHECK(attention_dropout_factor(K::kCudnnAttention, h, 0.5f) ==
        attention_dropout_factor(K::kCudnnAttention, h, 0.1f));
  // FA3 has no dropout path; no figure for the memory-efficient kernel
  CHECK(attention_dropout_factor(K::kFlashAttention3, h, 0.1f) == 1.0);
  CHECK(attention_dropout_factor(K::kSdpaMemEfficient, h, 0.1f) == 1.0);
}

TEST_CASE("time9: the builder hands the probabilities' dropout to the fused attention op") {
  for (double p : {0.0, 0.1}) {
    int flash = 0;
    for (const Op& op : build_graph(gpt2(p), megatron(), fixtures::h100()).ops) {
      if (op.kind == OpKind::kFlashAttention) {
        ++flash;
        CHECK(op.attn_dropout == doctest::Approx(p));
        CHECK(op.kernel == KernelChoice::kCudnnAttention);  // Megatron on Hopper
      } else {
        CHECK(op.attn_dropout == 0.0f);
      }
    }
    CHECK(flash == gpt2(p).layers);
  }
  // --dropout overrides the model's probability (TrainSetup::dropout)
  TrainSetup t = megatron();
  t.dropout = 0.0;
  for (const Op& op : build_graph(gpt2(0.1), t, fixtures::h100()).ops)
    CHECK(op.attn_dropout == 0.0f);
}

TEST_CASE("time9: attention with dropout takes the factor longer, forward and backward") {
  const Device h = fixtures::h100();
  const Graph g = build_graph(gpt2(0.1), megatron(), h);
  int checked = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kFlashAttention) continue;
    Op off = op;
    off.attn_dropout = 0;
    for (bool bwd : {false, true}) {
      const double with = attention_seconds(op, bwd, h), without = attention_seconds(off, bwd, h);
      REQUIRE(without > 0);
      CHECK(with / without == doctest::Approx(0.614 / 0.594));
    }
    ++checked;
  }
  REQUIRE(checked > 0);
  // end to end: the step grows by the attention kernels' share, nothing else moves
  const Strategy none = parse_strategy("none");
  const Result r0 = simulate(gpt2(0.0), megatron(), h, none);
  const Result r1 = simulate(gpt2(0.1), megatron(), h, none);
  CHECK(r1.peak_allocated_bytes == r0.peak_allocated_bytes);
  double attn_fwd_ns = 0;
  for (const Op& op : build_graph(gpt2(0.0), megatron(), h).ops)
    if (op.kind == OpKind::kFlashAttention) attn_fwd_ns += attention_seconds(op, false, h) * 1e9;
  REQUIRE(attn_fwd_ns > 0);
  const double expect = (0.614 / 0.594 - 1) * attn_fwd_ns;
  CHECK(static_cast<double>(r1.fwd_time_ns - r0.fwd_time_ns) ==
        doctest::Approx(expect).epsilon(0.02));
  CHECK(r1.step_time_ns > r0.step_time_ns);
}

TEST_CASE("time9: an op's kernels after its own are host calls too (eager Float8 casts)") {
  ModelConfig m = fixtures::tiny_llama();
  m.hidden = 128, m.heads = m.kv_heads = 4, m.head_dim = 32, m.ffn_hidden = 344, m.layers = 3;
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  t.impl_version = "9dec370";
  t.micro_batch = 2;
  t.seq = 64;
  t.precision = Precision::kFsdp2Bf16;
  t.attention = AttentionKind::kFlash;
  t.fp8 = Fp8Recipe::kTorchaoTensorwise;
  const Device d = fixtures::h100();
  REQUIRE(d.host_dispatch_ns > 0);
  SimOptions o;
  o.record_timeline = true;
  const Result r = simulate(m, t, d, parse_strategy("none"), o);
  const Graph g = build_graph(m, t, d);
  int fwd = 0, bwd = 0;
  for (const OpSpan& s : r.spans) {
    if (s.stream != 4 || s.op < 0) continue;
    const Op& op = g.ops[static_cast<size_t>(s.op)];
    const bool back = s.phase == Phase::kBackward;
    const int64_t kernels = back ? op.bwd.kernels : op.fwd.kernels;
    const int32_t serial = back ? op.bwd_serial_kernels : op.fwd_serial_kernels;
    // eager: one call per kernel (at least one), then one per kernel after the op's own
    CHECK(s.duration_ns == (std::max<int64_t>(1, kernels) + serial) * d.host_dispatch_ns);
    if (serial > 0) ++(back ? bwd : fwd);
  }
  CHECK(fwd > 0);  // the casts of the linears' inputs
  CHECK(bwd > 0);  // the grad outputs' casts and layout copies
  // so a host-bound eager Float8 step is longer than without the casts' calls by at least the
  // forward casts' calls (the GPU work is microseconds at 128 tokens)
  TrainSetup plain = t;
  plain.fp8 = Fp8Recipe::kOff;
  const Result rp = simulate(m, plain, d, parse_strategy("none"));
  int64_t cast_calls = 0;
  for (const Op& op : g.ops) cast_calls += op.fwd_serial_kernels;
  REQUIRE(cast_calls > 0);
  CHECK(r.host_wait_ns > 0);
  CHECK(r.step_time_ns - rp.step_time_ns >= cast_calls * d.host_dispatch_ns);
}

TEST_CASE("time9: the optimizer step reads the gradients for their norm and scales them") {
  // Megatron bf16-mixed: TE's FusedAdam 28 B + the bf16 copy 2 B, + the clip: 4 B read for the
  // norm, 4 + 4 B for the scale, per element of this rank's shard (no ZeRO: every parameter)
  const Graph g = build_graph(gpt2(0.1), megatron(), fixtures::h100());
  REQUIRE(g.params_per_rank > 0);
  CHECK(g.optimizer_cost.bytes == (28 + 2 + 12) * g.params_per_rank);
  // sharded over dp 4 (ZeRO 1): the shard's elements only
  TrainSetup z = megatron();
  z.dp = 4;
  z.zero = 1;
  const Graph gz = build_graph(gpt2(0.1), z, fixtures::h100());
  CHECK(gz.optimizer_cost.bytes == (28 + 2 + 12) * (gz.params_per_rank / 4));
}
