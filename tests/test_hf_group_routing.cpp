// feat13 (issue 13): HF's group-limited routing (DeepseekV2Moe.route_tokens_to_experts with
// topk_method "group_limited_greedy", transformers modeling_deepseek_v2.py @ 0233e509531a;
// sim/src/blocks_moe.cpp hf_group_limited). On DeepSeek-V2-Lite's published config made
// group-limited as DeepSeek-V2 (236B) routes: n_group 8, topk_group 3 (its config.json).
// N tokens, E experts, G groups, T groups kept.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "sim/graph.hpp"
#include "sim/result.hpp"
#include "sim/setup.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

sim::ModelConfig lite() {
  return sim_io::load_model((fs::path(ACTSIM_SOURCE_DIR) / "models" / "deepseek-v2-lite.json").string(),
                            {});
}

sim::TrainSetup hf_setup(int64_t seq) {
  sim::TrainSetup t;
  t.impl = sim::Impl::kHf;
  t.seq = seq;
  t.micro_batch = 1;
  return t;
}

sim::Device h100() {
  return sim_io::load_device((fs::path(ACTSIM_SOURCE_DIR) / "models" / "devices" / "h100-sxm.json").string(),
                             {});
}

const sim::Op* find_op(const sim::Graph& g, const char* name, int nth = 0) {
  for (const sim::Op& op : g.ops)
    if (std::strcmp(op.name, name) == 0 && nth-- == 0) return &op;
  return nullptr;
}

int count_ops(const sim::Graph& g, const char* name) {
  int n = 0;
  for (const sim::Op& op : g.ops) n += std::strcmp(op.name, name) == 0;
  return n;
}

}  // namespace

TEST_SUITE("hf group-limited routing") {
  TEST_CASE("DeepSeek-V2-Lite under hf, n_group 8, topk_group 3: the bool mask N E saved") {
    const int64_t N = 256, E = 64, G = 8, T = 3;
    sim::ModelConfig greedy = lite();
    REQUIRE(greedy.experts == E);
    REQUIRE(greedy.router_groups == 0);  // its published topk_method is greedy
    sim::ModelConfig grouped = greedy;
    grouped.router_groups = G;
    grouped.router_group_topk = T;
    const sim::Device dev = h100();
    const sim::Graph gg = sim::build_graph(greedy, hf_setup(N), dev);
    const sim::Graph gl = sim::build_graph(grouped, hf_setup(N), dev);
    // greedy has no group ops; grouped one mask and one masked_fill per routed layer's router
    CHECK(count_ops(gg, "router group mask") == 0);
    CHECK(count_ops(gl, "router group mask") == count_ops(gl, "router topk"));
    CHECK(count_ops(gl, "router masked_fill") == count_ops(gl, "router topk"));
    CHECK(count_ops(gl, "router topk") > 0);
    // the mask op: output the ~ mask (N E bool); at its peak the locals of
    // route_tokens_to_experts: group_scores 4NG, the max's indices 8NG, group_idx 8NT,
    // group_mask 4NG, score_mask 4NE, its .bool() NE
    const sim::Op* mask = find_op(gl, "router group mask");
    REQUIRE(mask != nullptr);
    CHECK(mask->fwd_transient_bytes == 4 * N * G + 8 * N * G + 8 * N * T + 4 * N * G + 4 * N * E +
                                           N * E);
    CHECK(mask->saves.count == 0);
    // masked_fill saves its mask (MaskedFillBackward0), and with the top-k runs while the other
    // locals (16NG + 8NT + 4NE) are still alive
    const sim::Op* fill = find_op(gl, "router masked_fill");
    REQUIRE(fill != nullptr);
    REQUIRE(fill->saves.count == 1);
    const sim::Storage& saved = gl.storages[static_cast<size_t>(gl.idx[static_cast<size_t>(fill->saves.begin)])];
    CHECK(saved.bytes == N * E);
    CHECK(saved.dtype == sim::DType::kBool);
    CHECK(fill->fwd_transient_bytes == 16 * N * G + 8 * N * T + 4 * N * E);
    const sim::Op* topk_l = find_op(gl, "router topk");
    const sim::Op* topk_g = find_op(gg, "router topk");
    REQUIRE(topk_l != nullptr);
    REQUIRE(topk_g != nullptr);
    CHECK(topk_l->fwd_transient_bytes == 16 * N * G + 8 * N * T + 4 * N * E);
    CHECK(topk_g->fwd_transient_bytes == 0);
    // per routed layer the saved activations grow by the mask alone: N E bytes
    const sim::Result rg = sim::simulate(greedy, hf_setup(N), dev, sim::parse_strategy("none"));
    const sim::Result rl = sim::simulate(grouped, hf_setup(N), dev, sim::parse_strategy("none"));
    CHECK(rl.activation_bytes_per_layer - rg.activation_bytes_per_layer == N * E);
  }
}
