// fp8sac (issue 10): torchtitan's op-level SAC with torchao Float8 linears, eager and under
// torch.compile (--compile on): what the region keeps per block, derived by hand from the
// sources named in sim/src/fp8.cpp and graph_builder.cpp (mark_torchtitan_sac).
#include <doctest/doctest.h>

#include <string_view>

#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

// tiny_llama (h 256, 8 heads of 32, 2 K/V heads, SwiGLU 688, 4 layers) under torchtitan@9dec370
// (fsdp2-bf16: bf16 activations), b 2, s 128: 256 tokens.
TrainSetup tt_setup(Fp8Recipe fp8, bool compile) {
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  t.impl_version = "9dec370";
  t.micro_batch = 2;
  t.seq = 128;
  t.fp8 = fp8;
  t.compile = compile;
  return t;
}

constexpr int64_t kTokens = 256, kH = 256, kF = 688;

int64_t middle_block(const Result& r) { return r.activation_bytes_per_block.at(1); }

const Op* find_op(const Graph& g, int32_t block, std::string_view name) {
  for (const Op& op : g.ops)
    if (op.block == block && std::string_view(op.name) == name) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("sac:torchtitan under --compile: the w2 output the backward never reads is not kept") {
  const ModelConfig m = fixtures::tiny_llama();
  const Device d = fixtures::h100();
  const Strategy sac = parse_strategy("sac:torchtitan");
  const Result eager = simulate(m, tt_setup(Fp8Recipe::kOff, false), d, sac);
  const Result comp = simulate(m, tt_setup(Fp8Recipe::kOff, true), d, sac);
  // Eager SAC caches w2's bf16 output (the 4th mm of the block: kept); the compiled region does
  // not (the residual add's backward reads nothing): tokens x h x 2 B less per block.
  CHECK(middle_block(eager) - middle_block(comp) == kTokens * kH * 2);
  // Nothing more is recomputed: w2's forward is not run again in either.
  CHECK(comp.recompute_flops == eager.recompute_flops);
  // The flags: w2 (down proj) keeps no output under compile; wq keeps its one.
  const Graph g = build_graph(m, tt_setup(Fp8Recipe::kOff, true), d);
  const Op* w2 = find_op(g, 1, "down proj");
  const Op* wq = find_op(g, 1, "q proj");
  REQUIRE(w2 != nullptr);
  REQUIRE(wq != nullptr);
  CHECK(w2->sac_save_torchtitan);
  CHECK(w2->sac_mm_outputs == 0);
  CHECK(wq->sac_save_torchtitan);
  CHECK(wq->sac_mm_outputs == -1);
}

TEST_CASE("sac:torchtitan with torchao Float8: mm outputs cached, fp8 inputs recomputed, abs") {
  const ModelConfig m = fixtures::tiny_llama();
  const Device d = fixtures::h100();
  const Strategy sac = parse_strategy("sac:torchtitan");
  const Result bf16c = simulate(m, tt_setup(Fp8Recipe::kOff, true), d, sac);
  const Result fp8c = simulate(m, tt_setup(Fp8Recipe::kTorchaoTensorwise, true), d, sac);
  const Result fp8e = simulate(m, tt_setup(Fp8Recipe::kTorchaoTensorwise, false), d, sac);
  // Compiled: the policy keeps the same 16-bit mm outputs with Float8 as without (it sees
  // aten.mm of two Float8Tensors); the fp8 inputs are recomputed, not kept.
  CHECK(middle_block(fp8c) == middle_block(bf16c));
  // Eager: + every linear's abs(input) (q, k, v each cast the norm output: 3h; o: h; gate, up:
  // 2h; down: f), bf16, and w2's output (kept in eager, dropped when compiled).
  CHECK(middle_block(fp8e) - middle_block(fp8c) ==
        kTokens * 2 * (3 * kH + kH + 2 * kH + kF) + kTokens * kH * 2);
  // The op's outputs: the mm output, the fp8 input, and (eager) abs, kept whatever the count
  const Graph ge = build_graph(m, tt_setup(Fp8Recipe::kTorchaoTensorwise, false), d);
  const Op* wk = find_op(ge, 1, "k proj");
  REQUIRE(wk != nullptr);
  CHECK(wk->outputs.count == 3);
  CHECK(wk->sac_mm_outputs == 1);
  CHECK(wk->sac_tt_always_output == 2);
  CHECK_FALSE(wk->sac_save_torchtitan);  // the 2nd mm of the block: recomputed
  CHECK(ge.storages[ge.idx[wk->outputs.begin + 2]].bytes == kTokens * kH * 2);
  CHECK(sac_cached_output(*wk, 2, false, true));   // abs: torchtitan's list
  CHECK_FALSE(sac_cached_output(*wk, 2, false, false));  // not under sac:mm
  CHECK_FALSE(sac_cached_output(*wk, 1, true, true));    // the fp8 input: never
  const Graph gc = build_graph(m, tt_setup(Fp8Recipe::kTorchaoTensorwise, true), d);
  const Op* wkc = find_op(gc, 1, "k proj");
  REQUIRE(wkc != nullptr);
  CHECK(wkc->outputs.count == 2);  // compiled: amax fused, no abs tensor
  CHECK(wkc->sac_tt_always_output == -1);
}
