// cptime (issue 11): torch's context-parallel ring under torch.compile. Traced into the compiled
// block, each functional collective is waited where it is issued (torch _functional_collectives.py
// `_maybe_wrap_tensor`), so the K, V all-gather and every backward step's dK, dV permute run
// exposed; in eager mode they overlap the ring's steps (sim/src/engine.cpp cp_torch_ns).
#include <doctest/doctest.h>

#include <cmath>

#include "../sim/src/comm.hpp"
#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

using namespace sim;

namespace {

int64_t ns(Collective c, int64_t bytes, CommGroup g, const Device& d) {
  return static_cast<int64_t>(collective_seconds(c, bytes, g, d) * 1e9 + 0.5);
}

}  // namespace

TEST_CASE("torch's CP ring under --compile on: the all-gather and every dK, dV permute exposed") {
  const ModelConfig m = fixtures::tiny_llama();
  const Device d = fixtures::h100();
  for (int64_t cp : {2, 4, 8}) {
    CAPTURE(cp);
    TrainSetup t;
    t.impl = Impl::kTorchtitan;
    t.seq = 64 * cp;
    t.cp = cp;
    t.zero = 3;  // FSDP2 over dp x cp
    t.compile = true;
    const Graph compiled = build_graph(m, t, d);
    REQUIRE(compiled.compiled);
    Graph eager = compiled;  // the same ops and bytes; only the engine's reading of `compiled`
    eager.compiled = false;
    const Plan none = resolve(parse_strategy("none"), compiled.n_blocks);
    const Result rc = simulate_plan(compiled, none, d), re = simulate_plan(eager, none, d);
    // Every collective on the critical path here is the ring's (tp 1): per flash op, forward one
    // all-gather, backward one all-gather and cp permutes of the fp32 dK, dV.
    const CommGroup g = comm_group(cp, 1, 8);
    int64_t expect = 0, flash = 0;
    for (const Op& op : compiled.ops) {
      if (op.kind != OpKind::kFlashAttention) continue;
      ++flash;
      REQUIRE(op.cp_gather_bytes == cp * op.cp_dkv_bytes / 2);  // cp chunks of 16-bit k, v
      const int64_t gather = ns(Collective::kAllGather, op.cp_gather_bytes, g, d);
      const int64_t dkv = ns(Collective::kSendRecv, op.cp_dkv_bytes, g, d);
      CHECK(gather > 0);
      CHECK(dkv > 0);
      expect += gather + gather + cp * dkv;
    }
    CHECK(flash == m.layers);
    CHECK(rc.comm_time_ns == expect);
    // Eager: the gather overlaps step 0 and each permute the next step; only what the steps do
    // not cover, and the last permute, is exposed: strictly less.
    CHECK(re.comm_time_ns < rc.comm_time_ns);
    // The step cannot shrink (this tiny model's steps are mostly host-bound, so the GPU's extra
    // wait can hide in the host lane's gaps; FSDP's overlap shifts with it).
    // time8: `compiled` also makes the engine issue only the fused kernels' host calls
    // (engine.cpp host_ops), which shortens this host-bound step; without the host lane the
    // collectives are the only difference.
    Device d0 = d;
    d0.host_dispatch_ns = 0;
    CHECK(simulate_plan(compiled, none, d0).step_time_ns >= simulate_plan(eager, none, d0).step_time_ns);
  }
}
