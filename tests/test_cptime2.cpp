// cptime2 (issue 11): torch's context-parallel ring under torch.compile. Each step but the last of
// _templated_ring_attention(_backward) makes torch.cat([key.flatten(), value.flatten()]), and the
// all-gather rotater uses only the first; traced into the compiled block, the cats of steps
// 1 .. cp - 2 have no users and Inductor's dead-node elimination removes them (sim/src/cp.cpp
// cp_compiled_dead_cats).
#include <doctest/doctest.h>

#include <string_view>

#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

using namespace sim;

namespace {

const Op& flash_op(const Graph& g, int32_t block) {
  for (const Op& op : g.ops)
    if (op.kind == OpKind::kFlashAttention && op.block == block) return op;
  FAIL("no flash op in block " << block);
  return g.ops.front();
}

}  // namespace

TEST_CASE("torch's CP ring under --compile on: the dead torch.cat of k, v is not charged") {
  const ModelConfig m = fixtures::tiny_llama();
  const Device d = fixtures::h100();
  // 9dec370 (the rows' release) repeats k, v to every query head before SDPA; the default
  // release passes enable_gqa (2 K/V heads): kv = 2 q and q / 2 here. Float8 as the rows run.
  for (const char* version : {"", "9dec370"})
  for (Fp8Recipe fp8 : {Fp8Recipe::kOff, Fp8Recipe::kTorchaoTensorwise})
  for (int64_t cp : {2, 4, 8}) {
    CAPTURE(version);
    CAPTURE(static_cast<int>(fp8));
    CAPTURE(cp);
    TrainSetup t;
    t.impl = Impl::kTorchtitan;
    t.impl_version = version;
    t.fp8 = fp8;
    t.seq = 64 * cp;
    t.cp = cp;
    t.zero = 3;
    const Graph eager = build_graph(m, t, d);
    t.compile = true;
    const Graph compiled = build_graph(m, t, d);
    REQUIRE(compiled.compiled);
    REQUIRE_FALSE(eager.compiled);
    for (int32_t b = 0; b < m.layers; ++b) {
      CAPTURE(b);
      const Op& e = flash_op(eager, b);
      const Op& c = flash_op(compiled, b);
      // The cat reads k and v (the SDPA's inputs besides q; the graph may list them in any
      // order) and writes them into one buffer: 2 (k + v) bytes, one kernel. q has the
      // output's bytes ([b, s, heads, d] both).
      REQUIRE(e.inputs.count == 3);
      int64_t in_bytes = 0;
      for (const int32_t* s = eager.begin(e.inputs); s != eager.end(e.inputs); ++s)
        in_bytes += eager.storages[*s].bytes;
      const int64_t q = eager.storages[*eager.begin(e.outputs)].bytes;
      const int64_t kv = in_bytes - q;
      CHECK(kv == (std::string_view(version) == "9dec370" ? 2 * q : q / 2));
      const int64_t dead = cp - 2;  // steps 1 .. cp - 2; step 0's cat is the one gathered
      CHECK(e.fwd_serial_bytes - c.fwd_serial_bytes == dead * 2 * kv);
      CHECK(e.bwd_serial_bytes - c.bwd_serial_bytes == dead * 2 * kv);
      CHECK(e.fwd_serial_kernels - c.fwd_serial_kernels == dead);
      CHECK(e.bwd_serial_kernels - c.bwd_serial_kernels == dead);
      // what stays: step 0's cat, the merges, the contiguous k, v: still charged
      CHECK(c.fwd_serial_bytes > 2 * kv);
      CHECK(c.bwd_serial_bytes > 2 * kv);
    }
  }
}
