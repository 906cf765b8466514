// time5 (issue 11): --norm-kernel triton, torchtitan's fused Triton RMSNorm
// (torchtitan/models/norms.py TritonFusedRMSNorm @ 04133643 and 9dec370), a run setting; and
// Megatron's vocab-parallel cross entropy timed per kernel.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

TrainSetup titan(NormKernel k) {
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  t.impl_version = "9dec370";
  t.micro_batch = 2;
  t.seq = 64;
  t.norm_kernel = k;
  return t;
}

bool eager_norm_op(std::string_view name) { return name.rfind("rmsnorm", 0) == 0; }

}  // namespace

TEST_CASE("the Triton RMSNorm is one op: one kernel forward, three backward, x and rstd saved") {
  const ModelConfig m = fixtures::tiny_llama();
  const int64_t n = 2 * 64, h = m.hidden;  // rows M, width N
  REQUIRE(h == 256);
  const Graph g = build_graph(m, titan(NormKernel::kTriton), fixtures::h100());
  int found = 0;
  for (const Op& op : g.ops) {
    CHECK_FALSE(eager_norm_op(op.name));  // none of the eager op list is left
    if (op.kind != OpKind::kRmsNorm) continue;
    // forward: x (bf16 under fsdp2-bf16) and w read, y (empty_like(x)) and rstd (fp32 per row)
    // written, by _rms_norm_fwd_kernel alone
    CHECK(op.fwd.bytes == 2 * n * h + 2 * h + 2 * n * h + 4 * n);
    CHECK(op.fwd.kernels == 1);
    // backward: _rms_norm_bwd_kernel_sm, _dw.sum(0), .to(weight.dtype); reads x, rstd, w and dy,
    // writes dx and dw
    CHECK(op.bwd.kernels == 3);
    CHECK(op.bwd.bytes >= 3 * 2 * n * h + 4 * n);
    // polish: the per-SM partial weight gradient _dw [sm_count, N] fp32, written and summed, and
    // the sum's fp32 [N], written and cast: memory and bytes (norms.py @ 9dec370 backward)
    const int64_t sm = fixtures::h100().sm_count;
    REQUIRE(sm == 132);
    CHECK(op.bwd_transient_bytes == sm * h * 4 + h * 4);  // bf16 weight: the sum is a temporary
    ++found;
  }
  CHECK(found == 2 * m.layers + 1);
  found = 0;
  {
    // A100's 108 SMs: the buffer follows the device; bytes grow by 2 x 4 x sm x N over the
    // same graph with no SMs counted
    Device a100 = fixtures::h100();
    a100.sm_count = 108;
    const Graph ga = build_graph(m, titan(NormKernel::kTriton), a100);
    Device none = fixtures::h100();
    none.sm_count = 0;  // not a valid device (validate refuses it): isolates the buffer's part
    const Graph g0 = build_graph(m, titan(NormKernel::kTriton), none);
    REQUIRE(ga.ops.size() == g0.ops.size());
    for (std::size_t i = 0; i < ga.ops.size(); ++i) {
      if (ga.ops[i].kind != OpKind::kRmsNorm) continue;
      CHECK(ga.ops[i].bwd_transient_bytes == 108 * h * 4 + h * 4);
      CHECK(ga.ops[i].bwd.bytes - g0.ops[i].bwd.bytes == 2 * 4 * 108 * h);
    }
  }
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kRmsNorm) continue;
    // saves x, the weight and rstd (ctx.save_for_backward(x, weight, rstd)); the graph's saves
    // list activations only (a parameter lives anyway): x and rstd
    int64_t saved = 0;
    for (const int32_t* st = g.begin(op.saves); st != g.end(op.saves); ++st)
      saved += g.storages[*st].bytes;
    CHECK(saved == 2 * n * h + 4 * n);
    ++found;
  }
  CHECK(found == 2 * m.layers + 1);  // two per block and the final norm

  // The eager op list moves more bytes through more kernels; the fused one is faster and, under
  // no checkpointing, keeps less (no fp32 copy of x saved).
  const Graph e = build_graph(m, titan(NormKernel::kDefault), fixtures::h100());
  int64_t eager_bytes = 0, eager_kernels = 0, fused_bytes = 0;
  for (const Op& op : e.ops)
    if (eager_norm_op(op.name)) eager_bytes += op.fwd.bytes, eager_kernels += op.fwd.kernels;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::kRmsNorm) fused_bytes += op.fwd.bytes;
  CHECK(eager_kernels > found);
  CHECK(eager_bytes > 4 * fused_bytes);
  const Result rf = fixtures::run(m, titan(NormKernel::kTriton), "none");
  const Result re = fixtures::run(m, titan(NormKernel::kDefault), "none");
  CHECK(rf.step_time_ns < re.step_time_ns);
  CHECK(rf.activation_bytes_per_layer < re.activation_bytes_per_layer);
}

TEST_CASE("--norm-kernel triton only where the release has it and the model has a plain RMSNorm") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t = titan(NormKernel::kTriton);
  CHECK(resolve_setup(m, t).norm_kernel == NormKernel::kTriton);
  t.impl_version = "v0.2.2";  // torchtitan v0.2.2 has no fused_rmsnorm
  CHECK_THROWS_AS(resolve_setup(m, t), NotInCode);
  t.impl = Impl::kHf;
  t.impl_version = {};
  CHECK_THROWS_AS(resolve_setup(m, t), NotInCode);
  CHECK(parse_norm_kernel("triton") == NormKernel::kTriton);
  CHECK(parse_norm_kernel("default") == NormKernel::kDefault);
  CHECK_FALSE(parse_norm_kernel("fused").has_value());
  CHECK(name(NormKernel::kTriton) == "triton");
}

// cross_entropy.py @ d98e8a6: six kernels over the [tokens, vocab/t] logits forward (.float(),
// max, -=, exp, sum, div_: 38 B per logit from 16-bit logits) and two backward (mul_, the cast
// back: 14 B); 20 and 8 kernels in all with the small ones over the tokens.
TEST_CASE("Megatron's vocab-parallel cross entropy moves its logits through each kernel") {
  const ModelConfig m = fixtures::gpt2_small();
  for (int64_t tp : {1, 4}) {
    TrainSetup t;
    t.impl = Impl::kMegatron;
    t.micro_batch = 2;
    t.seq = 128;
    t.tp = tp;
    const Graph g = build_graph(m, t, fixtures::h100());
    int found = 0;
    for (const Op& op : g.ops) {
      if (op.kind != OpKind::kVocabCe) continue;
      // Megatron pads the vocabulary to a multiple of 128 x tp, split over the tp ranks
      const int64_t v = (m.vocab + 128 * tp - 1) / (128 * tp) * (128 * tp) / tp;
      const int64_t nv = 2 * 128 * v;
      CHECK(op.fwd.bytes >= 38 * nv);
      CHECK(op.fwd.bytes < 38 * nv + 64 * 2 * 128);  // + the labels and the loss
      CHECK(op.bwd.bytes >= 14 * nv);
      CHECK(op.fwd.kernels == 20);
      CHECK(op.bwd.kernels == 8);
      ++found;
    }
    CHECK(found == 1);
  }
}
