// etp (issue 13): Megatron's expert tensor parallelism (--etp, default --tp): one Mixtral-shaped
// layer at etp 2 derived by hand (docs/memory-model.md "Expert tensor parallelism") and asserted
// to the byte; the expert weights and optimizer state divided by etp x ep; the dispatcher's
// collectives over the expert-TP group; Megatron's rank-group arithmetic; bad input.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::mixtral_shaped;  // tests/fixtures.hpp

TrainSetup megatron(int64_t tp, int64_t etp) { return fixtures::megatron_tp(tp, 1024, etp); }

using fixtures::layer_bytes;
const auto& where = fixtures::refused_flag;  // "(built)" when it builds

}  // namespace

TEST_SUITE("etp") {
  TEST_CASE("one Mixtral-shaped layer at --tp 2 --sp --etp 2, bf16-mixed: to the byte") {
    // N = b s = 1024 tokens, t = 2: the MoE layer takes this rank's n = N / t = 512 tokens (SP).
    //   router: its input (the norm's output shard) 2nh, top-k indices 8nk, the fp32 softmax of
    //           the k scores 4nk; the permute's int64 indices (mtmoe: the argsort of the
    //           [E, n] map 8nE, kept whole by the probs' IndexBackward0, and sorted_indices 8nk;
    //           docs/memory-model.md; before, 8nk only);
    //   the all-to-all (--ep 1: new buffers, nothing saved) hands on nk rows, the expert-TP
    //   all-gather makes R = etp x nk rows; per row fc1's input 2h, the fused weighted SwiGLU's
    //   input 2 (2f / etp) and prob 2, fc2's input 2 (f / etp): 2h + 6f / etp + 2.
    // The dense SwiGLU MLP under TP + SP: its input shard 2nh, fc1's [N, 2f / t] output and
    // fc2's [N, f / t] input, 6 N f / t (feat14: Megatron's fused SwiGLU; 8 N f / t before).
    const int64_t N = 1024, t = 2, n = N / t, h = 4096, E = 8, k = 2, f = 14336;
    auto moe = [&](int64_t etp) {
      const int64_t R = etp * n * k;
      return 2 * n * h + 12 * n * k + 8 * n * E + 8 * n * k + R * (2 * h + 6 * f / etp + 2);
    };
    CHECK(moe(2) == 109'109'248);  // was 109,076,480 (without 8nE)
    CHECK(moe(1) == 100'718'592);  // was 100,685,824
    const int64_t dense = 2 * n * h + 6 * N * f / t;
    const int64_t base = layer_bytes(mixtral_shaped(false), megatron(t, 0));
    CHECK(layer_bytes(mixtral_shaped(true), megatron(t, 0)) - base == moe(2) - dense);  // etp = tp
    CHECK(layer_bytes(mixtral_shaped(true), megatron(t, 2)) - base == moe(2) - dense);
    CHECK(layer_bytes(mixtral_shaped(true), megatron(t, 1)) - base == moe(1) - dense);
  }

  TEST_CASE("expert weights and their optimizer state divided by etp x ep") {
    const ModelConfig m = mixtral_shaped(true);
    const int64_t experts = int64_t{4} * 8 * 3 * 4096 * 14336;  // layers x E x 3 h f
    TrainSetup t = megatron(2, 0);
    t.dp = 2;
    t.zero = 1;  // Megatron's distributed optimizer
    const Graph g = build_graph(m, t, fixtures::h100());
    CHECK(g.etp == 2);
    // every expert on this rank (ep 1), each at half its width
    TrainSetup t1 = t;
    t1.etp = 1;
    const Graph g1 = build_graph(m, t1, fixtures::h100());
    CHECK(g1.params_per_rank - g.params_per_rank == experts - experts / 2);
    // --etp 1 --ep 4 over tp 2 x dp 2: a quarter of the experts at full width
    t1.ep = 4;
    const Graph g4 = build_graph(m, t1, fixtures::h100());
    CHECK(g1.params_per_rank - g4.params_per_rank == experts - experts / 4);
    // distributed optimizer, 12 B per parameter: the rest over dp 2, the experts over their
    // expert-data-parallel group, edp = tp cp dp / (etp ep): 2 x 2 / 2 = 2 at etp 2, ep 1
    const int64_t rest = g.params_per_rank - experts / 2;
    CHECK(g.optimizer_bytes == 12 * rest / 2 + 12 * (experts / 2) / 2);
    // and edp = 4 / (1 x 4) = 1 at etp 1, ep 4
    const int64_t rest4 = g4.params_per_rank - experts / 4;
    CHECK(g4.optimizer_bytes == 12 * rest4 / 2 + 12 * (experts / 4) / 1);
  }

  TEST_CASE("the dispatcher's all-gather and reduce-scatter run over the expert-TP group") {
    const Graph g = build_graph(mixtral_shaped(true), megatron(2, 2), fixtures::h100());
    int gathers = 0, scatters = 0;
    int64_t gathered = 0;
    for (const Op& op : g.ops) {
      if (op.fwd.comm_group != 1) continue;
      CHECK(op.bwd.comm_group == 1);
      if (op.fwd.comm_kind == 2) ++gathers, gathered += op.fwd.comm_bytes;
      if (op.fwd.comm_kind == 3) {
        ++scatters;
        CHECK(op.bwd.comm_kind == 2);
        CHECK(op.fwd.comm_bytes == 2 * 2048 * 4096);  // the whole [R, h] partial sums
      }
    }
    // tokens and probs gathered, outputs reduce-scattered, in each of the 4 MoE layers
    CHECK(gathers == 8);
    CHECK(scatters == 4);
    CHECK(gathered == 4 * (2 * 2048 * 4096 + 2 * 2048));
    // --etp 1: no expert-TP collective
    const Graph g1 = build_graph(mixtral_shaped(true), megatron(2, 1), fixtures::h100());
    for (const Op& op : g1.ops) CHECK(op.fwd.comm_group == 0);
    // the time model prices them: --etp 2 takes longer in communication than --etp 1 on the
    // same tokens (the gathered rows, then their partial sums, cross the group)
    const Result r2 = fixtures::run(mixtral_shaped(true), megatron(2, 2), "none");
    const Result r1 = fixtures::run(mixtral_shaped(true), megatron(2, 1), "none");
    CHECK(r2.comm_time_ns > r1.comm_time_ns);
  }

  TEST_CASE("bad input: Megatron's rank groups, the experts' width, the code bases without ETP") {
    const ModelConfig m = mixtral_shaped(true);
    TrainSetup t = megatron(2, 4);  // etp 4 does not divide tp x cp x dp = 2
    CHECK(where(m, t) == "--etp");
    t.dp = 2;  // 4 ranks: etp 4 x ep 1 fits
    CHECK(where(m, t) == "(built)");
    t.ep = 2;  // etp 4 x ep 2 = 8 > 4 ranks
    CHECK(where(m, t) == "--ep");
    t = megatron(2, 1);
    t.ep = 2;  // --ep 2 over tp 2 x dp 1 with etp 1: Megatron's grid allows it (edp 1)
    CHECK(where(m, t) == "(built)");
    t = megatron(1, 3);  // 3 does not divide the experts' width 14336... nor the ranks
    t.dp = 3;
    CHECK(where(m, t) == "--etp");
    t = megatron(2, 0);
    t.sp = false;  // MoE with TP needs SP in Megatron's training
    CHECK(where(m, t) == "--sp");
    t = megatron(1, 2);  // --etp under HF: refused
    t.dp = 2;
    t.impl = Impl::kHf;
    CHECK(where(m, t) == "--etp");
    TrainSetup d = megatron(1, 2);  // a dense model has no experts to split
    d.dp = 2;
    CHECK(where(mixtral_shaped(false), d) == "--etp");
    d.etp = 1;  // --etp equal to --tp changes nothing on a dense model
    CHECK(where(mixtral_shaped(false), d) == "(built)");
    t = megatron(1, 0);
    t.etp = -1;
    CHECK(where(m, t) == "--etp");
  }

  TEST_CASE("Megatron's router options from the HF config: pre-softmax, group-limited, scaling") {
    // b 1, s 1024, --tp 1: n = N = 1024 tokens, E = 8, k = 2.
    const int64_t n = 1024, E = 8, k = 2;
    const TrainSetup t = megatron(1, 0);
    ModelConfig m = mixtral_shaped(true);
    const int64_t renorm = layer_bytes(m, t);  // top-k then softmax of the k scores: 4nk fp32
    // norm_topk false (Qwen2-MoE, DeepSeek-V2): --moe-router-pre-softmax, the fp32 softmax over
    // all E experts saved instead of the k scores'
    m.norm_topk = false;
    const int64_t pre = layer_bytes(m, t);
    CHECK(pre - renorm == 4 * n * E - 4 * n * k);
    // group-limited (DeepSeek-V2's topk_method group_limited_greedy, n_group 4, topk_group 2):
    // masked_fill keeps its bool [n, E] mask
    m.router_groups = 4;
    m.router_group_topk = 2;
    CHECK(layer_bytes(m, t) - pre == n * E);
    // routed_scaling_factor: a new fp32 [n, k] that nothing saves
    m.routed_scaling = 16.0;
    CHECK(layer_bytes(m, t) - pre == n * E);
  }
}
