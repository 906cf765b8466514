// inductor (issue 10): torch.compile's min-cut partition (--compile on, sim/src/inductor.cpp)
// against what torch 1.13's own partitioner (min_cut_rematerialization_partition,
// compiler="inductor") saves for the same blocks, measured on the CPU by
// harness/inductor_partition.py into harness/inductor/partition.json (b 2, s 64, h 128, 4 heads).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../sim/src/inductor.hpp"
#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

// "partitioned_saved_bytes" of the case with this block and dtype in the JSON.
int64_t measured(const std::string& block, const std::string& dtype) {
  std::ifstream in(std::string(ACTSIM_SOURCE_DIR) + "/harness/inductor/partition.json");
  REQUIRE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases"))
    if (c.at("block") == block && c.at("dtype") == dtype) return c.at("partitioned_saved_bytes");
  FAIL("no case " << block << " " << dtype);
  return -1;
}

// The bytes a block's cut saves, beyond what it takes in (its input, parameters, tables, mask).
int64_t cut_bytes(const Graph& g, int32_t block,
                  detail::PartitionRules rules = detail::PartitionRules::kTorch113) {
  int64_t tot = 0;
  for (int32_t s : detail::inductor_block_partition(g, block, rules).saved) {
    const int32_t p = g.storages[s].producer;
    if (p >= 0 && g.ops[p].block == block) tot += g.storages[s].bytes;
  }
  return tot;
}

// The same, from the saves the compiled graph's ops hold (distinct storages made in the block).
int64_t held_bytes(const Graph& g, int32_t block) {
  std::vector<uint8_t> seen(g.storages.size(), 0);
  int64_t tot = 0;
  for (const Op& op : g.ops) {
    if (op.block != block) continue;
    for (const int32_t* s = g.begin(op.saves); s != g.end(op.saves); ++s) {
      const int32_t p = g.storages[*s].producer;
      if (!seen[*s] && p >= 0 && g.ops[p].block == block) seen[*s] = 1, tot += g.storages[*s].bytes;
    }
  }
  return tot;
}

ModelConfig probe_llama() {
  ModelConfig m = fixtures::tiny_llama();
  m.hidden = 128, m.heads = m.kv_heads = 4, m.head_dim = 32, m.ffn_hidden = 344, m.layers = 3;
  return m;
}

ModelConfig probe_gpt2() {
  ModelConfig m = fixtures::gpt2_small();
  m.hidden = 128, m.heads = m.kv_heads = 4, m.head_dim = 32, m.ffn_hidden = 512, m.layers = 3;
  m.vocab = 1000, m.max_positions = 64;
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0;
  return m;
}

TrainSetup probe_setup(Impl impl, Precision p, bool compile) {
  TrainSetup t;
  t.impl = impl;
  if (impl == Impl::kTorchtitan) t.impl_version = "9dec370";
  t.micro_batch = 2;
  t.seq = 64;
  t.compile = compile;
  t.precision = p;
  t.attention = AttentionKind::kStandard;
  return t;
}

}  // namespace

TEST_CASE("inductor: torchtitan's Llama block: the min-cut under torch 1.13's rules == torch 1.13") {
  for (auto [p, dt] : {std::pair{Precision::kFsdp2Bf16, "bf16"}, std::pair{Precision::kFp32, "fp32"}}) {
    CAPTURE(dt);
    const Graph eager = build_graph_direct(probe_llama(), probe_setup(Impl::kTorchtitan, p, false),
                                           fixtures::h100());
    CHECK(cut_bytes(eager, 1) == measured("llama", dt));
    // eager keeps more: the fp32 copies of RMSNorm's input, the rotated q and k, silu's output
    CHECK(held_bytes(eager, 1) > measured("llama", dt));
  }
}

TEST_CASE("inductor: --compile on holds the torch 2 partition, derived by hand for a flash block") {
  // torch 2's rules (partitioners.py @ c28ba8e5) on torchtitan's block with SDPA flash, bf16:
  // banned and saved are what a non-fusible backward reads (the linears' inputs: norm outputs,
  // flash's output; flash's q, k, v, lse; the SwiGLU product), the mm outputs silu and the
  // product recompute from (gate, up), both RMSNorms' rstd, and the first residual's output
  // (its add is used after the gate/up matmuls: banned as used far apart), from which the
  // second norm's fp32 input is recomputed; the block input is a primal (not counted).
  TrainSetup c = probe_setup(Impl::kTorchtitan, Precision::kFsdp2Bf16, true);
  c.attention = AttentionKind::kFlash;
  const Graph g = build_graph_direct(probe_llama(), c, fixtures::h100());
  const int64_t tokens = 128, h = 128, f = 344, heads = 4;
  const int64_t expect = 2 * tokens * 4           // rstd x 2 (fp32 [tokens])
                         + 7 * tokens * h * 2     // a, q, k (rotated), v, o, residual 1, m
                         + heads * tokens * 4     // flash lse (fp32 [b, heads, s])
                         + 3 * tokens * f * 2;    // gate, up, gate*up
  CHECK(held_bytes(g, 1) == expect);
  CHECK(cut_bytes(g, 1, detail::PartitionRules::kTorch2) == expect);
}

TEST_CASE("inductor: a GPT-2 block (nanoGPT, GELU) saves what torch 1.13's partition saves") {
  const Graph g = build_graph_direct(probe_gpt2(), probe_setup(Impl::kNanogpt, Precision::kFp32, false),
                                     fixtures::h100());
  CHECK(cut_bytes(g, 1) == measured("gpt2", "fp32"));
}

// time8 (issue 11): with Inductor's fusion timed (tests/test_time8.cpp) the compiled block moves
// fewer bytes both ways: the recomputation is fused into the backward's kernels.
TEST_CASE("inductor: recomputed pointwise ops are timed in the backward, fused") {
  const TrainSetup e = probe_setup(Impl::kTorchtitan, Precision::kFsdp2Bf16, false);
  const TrainSetup c = probe_setup(Impl::kTorchtitan, Precision::kFsdp2Bf16, true);
  const Graph ge = build_graph_direct(probe_llama(), e, fixtures::h100());
  const Graph gc = build_graph_direct(probe_llama(), c, fixtures::h100());
  REQUIRE(ge.ops.size() == gc.ops.size());
  int64_t fwd_e = 0, fwd_c = 0, bwd_e = 0, bwd_c = 0, recomputed = 0;
  for (size_t i = 0; i < ge.ops.size(); ++i) {
    if (ge.ops[i].block != 1) continue;
    fwd_e += ge.ops[i].fwd.bytes, fwd_c += gc.ops[i].fwd.bytes;
    bwd_e += ge.ops[i].bwd.bytes, bwd_c += gc.ops[i].bwd.bytes;
  }
  for (int32_t i : detail::inductor_block_partition(ge, 1, detail::PartitionRules::kTorch2).recomputed_ops) recomputed += ge.ops[i].fwd.bytes;
  CHECK(recomputed > 0);
  CHECK(fwd_c < fwd_e);
  CHECK(bwd_c < bwd_e);
}

TEST_CASE("inductor: the cloned build holds what the direct build holds under --compile on") {
  ModelConfig m = probe_llama();
  m.layers = 6;
  const TrainSetup c = probe_setup(Impl::kTorchtitan, Precision::kFsdp2Bf16, true);
  const Graph cl = build_graph(m, c, fixtures::h100());
  const Graph di = build_graph_direct(m, c, fixtures::h100());
  for (int32_t b = 0; b < 6; ++b) CHECK(held_bytes(cl, b) == held_bytes(di, b));
  const Strategy none = parse_strategy("none");
  CHECK(simulate(m, c, fixtures::h100(), none).peak_allocated_bytes <
        simulate(m, probe_setup(Impl::kTorchtitan, Precision::kFsdp2Bf16, false), fixtures::h100(),
                 none).peak_allocated_bytes);
}
