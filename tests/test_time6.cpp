// time6 (issue 11): a load-balanced context-parallel ring's steps after the first are non-causal
// flash calls (half a block's pairs each), timed at the kernel's non-causal rate
// (Op::noncausal_calls; sim/src/cp.cpp, sim/src/kernels.cpp attention_seconds).
#include <doctest/doctest.h>

#include <vector>

#include "../sim/src/kernels.hpp"
#include "fixtures.hpp"
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
