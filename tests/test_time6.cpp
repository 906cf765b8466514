// time6 (issue 11): a load-balanced context-parallel ring's steps after the first are non-causal
// flash calls (half a block's pairs each), timed at the kernel's non-causal rate
// (Op::noncausal_calls; sim/src/cp.cpp, sim/src/kernels.cpp attention_seconds).
#include <doctest/doctest.h>

#include <vector>

#include "../sim/src/kernels.hpp"
#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

TEST_CASE("CP ring: cp - 1 of every cp flash calls are non-causal, set by the builder") {
  ModelConfig m = fixtures::tiny_llama();
  auto flash = [&](Impl impl, int64_t cp) {
    TrainSetup t;
    t.impl = impl;
    t.seq = 64 * cp;
    t.cp = cp;
    t.zero = impl == Impl::kTorchtitan && cp > 1 ? 3 : 0;
    for (const Op& op : build_graph(m, t, fixtures::h100()).ops)
      if (op.kind == OpKind::kFlashAttention) return op;
    FAIL("no flash attention op");
    return Op{};
  };
  for (Impl impl : {Impl::kTorchtitan, Impl::kMegatron}) {
    CHECK(flash(impl, 1).noncausal_calls == 0);
    for (int64_t cp : {2, 4, 8}) {
      const Op op = flash(impl, cp);
      CHECK(op.shape[4] == 1);           // causal model
      CHECK(op.shape[0] == cp);          // b 1 x cp calls
      CHECK(op.noncausal_calls == cp - 1);
    }
  }
}

TEST_CASE("CP ring: the non-causal calls' share is timed at the non-causal rate") {
  const Device h100 = fixtures::h100();
  Op op;
  op.kind = OpKind::kFlashAttention;
  op.kernel = KernelChoice::kFlashAttention2;
  const int64_t cp = 4, heads = 32, s = 4096, hd = 128;
  op.shape = {cp, heads, s, hd, 1};
  for (bool bwd : {false, true}) {
    // one causal call's kernel FLOPs: 4 s^2 d per head, halved, x 2.5 backward
    const double f = 4.0 * heads * s * s * hd * 0.5 * (bwd ? 2.5 : 1.0);
    const double rc = attention_flops_per_s(KernelChoice::kFlashAttention2, h100, s, hd, true, bwd);
    const double rn = attention_flops_per_s(KernelChoice::kFlashAttention2, h100, s, hd, false, bwd);
    op.noncausal_calls = 0;
    const double all_causal = attention_seconds(op, bwd, h100);
    CHECK(all_causal == doctest::Approx(cp * f / rc));
    op.noncausal_calls = cp - 1;
    const double ring = attention_seconds(op, bwd, h100);
    CHECK(ring == doctest::Approx(f / rc + (cp - 1) * f / rn));
    // FA2's published H100 curves: non-causal faster than causal at 4k (fwd 368 vs 319 TFLOP/s)
    if (!bwd) CHECK(ring < all_causal);
  }
  // a non-causal op ignores the field
  op.shape[4] = 0;
  op.noncausal_calls = cp - 1;
  const double f_nc = 4.0 * heads * s * s * hd;
  CHECK(attention_seconds(op, false, h100) ==
        doctest::Approx(cp * f_nc /
                        attention_flops_per_s(KernelChoice::kFlashAttention2, h100, s, hd, false,
                                              false)));
}

// Megatron's --no-gradient-accumulation-fusion (--grad-accum-fusion off): each linear's wgrad is
// a separate 16-bit GEMM output that the DDP hook adds into the fp32 main_grad: one more kernel
// per linear in backward, 2 + 4 + 4 B per weight element (sim/src/ops.hpp).
TEST_CASE("--grad-accum-fusion off: an add of 10 B per weight element after each linear's backward") {
  const ModelConfig m = fixtures::gpt2_small();
  auto setup = [](bool fusion, int64_t tp) {
    TrainSetup t;
    t.impl = Impl::kMegatron;
    t.micro_batch = 2;
    t.seq = 128;
    t.tp = tp;
    t.grad_accum_fusion = fusion;
    return t;
  };
  for (int64_t tp : {1, 4}) {
    const Graph on = build_graph(m, setup(true, tp), fixtures::h100());
    const Graph off = build_graph(m, setup(false, tp), fixtures::h100());
    REQUIRE(on.ops.size() == off.ops.size());
    int linears = 0;
    int64_t added = 0;
    for (size_t i = 0; i < on.ops.size(); ++i) {
      const Op &a = on.ops[i], &b = off.ops[i];
      CHECK(a.fwd.bytes == b.fwd.bytes);
      if (a.kind != OpKind::kLinear || a.shape[1] == 0) {
        CHECK(b.bwd_serial_bytes == a.bwd_serial_bytes);
        continue;
      }
      const int64_t w_numel = a.shape[1] * a.shape[2];  // this rank's weight shard, in x out
      CHECK(b.bwd_serial_bytes - a.bwd_serial_bytes == 10 * w_numel);
      CHECK(b.bwd_serial_kernels - a.bwd_serial_kernels == 1);
      // the unfused wgrad is a 16-bit gradient of its own in backward (the fused one is not)
      CHECK(b.bwd_accum_bytes > a.bwd_accum_bytes);
      ++linears;
      added += b.bwd_serial_bytes - a.bwd_serial_bytes;
    }
    CHECK(linears >= 4 * m.layers);  // qkv, proj, fc1, fc2 per block (and the lm head)
    // The step is longer by at least the added bytes at the device's achieved bandwidth.
    const Device d = fixtures::h100();
    const Result ron = fixtures::run(m, setup(true, tp), "none");
    const Result roff = fixtures::run(m, setup(false, tp), "none");
    CHECK(static_cast<double>(roff.step_time_ns - ron.step_time_ns) >=
          0.99e9 * static_cast<double>(added) / (d.hbm_bytes_per_s * d.memory_efficiency));
  }
}

TEST_CASE("--grad-accum-fusion off is Megatron's flag: refused under other implementations") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.grad_accum_fusion = false;
  CHECK_FALSE(resolve_setup(m, t).grad_accum_fusion);
  for (Impl impl : {Impl::kTorchtitan, Impl::kHf}) {
    t.impl = impl;
    CHECK_THROWS_AS(resolve_setup(m, t), NotInCode);
    t.grad_accum_fusion = true;
    CHECK_NOTHROW(resolve_setup(m, t));
    t.grad_accum_fusion = false;
  }
}
