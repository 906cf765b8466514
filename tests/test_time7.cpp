// time7 (issue 11): Megatron's --deterministic-mode (--deterministic on). torch's
// use_deterministic_algorithms(True) with fill_uninitialized_memory (its default) fills every
// tensor the dispatcher's empty allocates with NaN: one more memory-bound write of each output
// and gradient Transformer Engine allocates (sim/src/graph_builder.cpp, time7).
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

int64_t storage_bytes(const Graph& g, IdxRange r) {
  int64_t b = 0;
  for (int32_t k = 0; k < r.count; ++k) b += g.storages[g.idx[r.begin + k]].bytes;
  return b;
}

TrainSetup megatron_setup(bool deterministic, int64_t tp) {
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.micro_batch = 2;
  t.seq = 128;
  t.tp = tp;
  t.grad_accum_fusion = false;  // as the functional tests (their wgrads are TE allocations)
  t.deterministic = deterministic;
  return t;
}

}  // namespace

TEST_CASE("--deterministic on: TE's linears, attention and LayerNorms write each new tensor twice") {
  const ModelConfig m = fixtures::gpt2_small();
  for (int64_t tp : {1, 4}) {
    const Graph off = build_graph(m, megatron_setup(false, tp), fixtures::h100());
    const Graph on = build_graph(m, megatron_setup(true, tp), fixtures::h100());
    REQUIRE(on.ops.size() == off.ops.size());
    int filled = 0, linears = 0, lm_heads = 0;
    int64_t fwd_added = 0, bwd_added = 0;
    for (size_t i = 0; i < on.ops.size(); ++i) {
      const Op &a = off.ops[i], &b = on.ops[i];
      // what the op computes, moves and holds is the same
      CHECK(a.fwd.bytes == b.fwd.bytes);
      CHECK(a.bwd.bytes == b.bwd.bytes);
      CHECK(a.bwd_accum_bytes == b.bwd_accum_bytes);
      const bool lm_head = a.kind == OpKind::kLinear && a.site == LinearSite::kLmHead;
      lm_heads += lm_head;
      const bool te = (a.kind == OpKind::kLinear && !lm_head) ||
                      a.kind == OpKind::kFlashAttention || a.kind == OpKind::kLayerNorm;
      if (!te) {
        CHECK(b.fwd_serial_bytes == a.fwd_serial_bytes);
        CHECK(b.bwd_serial_bytes == a.bwd_serial_bytes);
        CHECK(b.fwd_serial_kernels == a.fwd_serial_kernels);
        continue;
      }
      ++filled;
      linears += a.kind == OpKind::kLinear;
      // forward: every storage the op allocates; backward: every gradient it makes
      const int64_t fwd = storage_bytes(off, a.outputs);
      const int64_t bwd = storage_bytes(off, a.bwd_allocs) + a.bwd_accum_bytes;
      CHECK(fwd > 0);
      CHECK(b.fwd_serial_bytes - a.fwd_serial_bytes == fwd);
      CHECK(b.fwd_serial_kernels - a.fwd_serial_kernels == a.outputs.count);
      CHECK(b.bwd_serial_bytes - a.bwd_serial_bytes == bwd);
      if (a.kind == OpKind::kLinear) {
        // the unfused wgrad (a 16-bit weight gradient, TE's own allocation) is among them
        CHECK(bwd >= 2 * a.shape[1] * a.shape[2]);
      }
      fwd_added += fwd;
      bwd_added += bwd;
    }
    CHECK(lm_heads == 1);
    CHECK(linears == 4 * m.layers);  // qkv, proj, fc1, fc2 per block; not the output layer
    CHECK(filled >= 7 * m.layers);   // + attention and the two LayerNorms per block
    // Peak memory is unchanged; the step is longer by at least the fills at the achieved
    // bandwidth (forward and backward once each under `none`).
    const Device d = fixtures::h100();
    const Result roff = fixtures::run(m, megatron_setup(false, tp), "none");
    const Result ron = fixtures::run(m, megatron_setup(true, tp), "none");
    CHECK(ron.peak_allocated_bytes == roff.peak_allocated_bytes);
    CHECK(static_cast<double>(ron.step_time_ns - roff.step_time_ns) >=
          0.99e9 * static_cast<double>(fwd_added + bwd_added) /
              (d.hbm_bytes_per_s * d.memory_efficiency));
  }
}

TEST_CASE("--deterministic on is Megatron's flag: refused under other implementations") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.deterministic = true;
  CHECK(resolve_setup(m, t).deterministic);
  for (Impl impl : {Impl::kTorchtitan, Impl::kHf}) {
    t.impl = impl;
    CHECK_THROWS_AS(resolve_setup(m, t), NotInCode);
    t.deterministic = false;
    CHECK_NOTHROW(resolve_setup(m, t));
    t.deterministic = true;
  }
}
