// moetp (issue 13): Megatron's shared experts and MLA under tensor parallelism, each derived by
// hand (docs/memory-model.md "Shared experts under tensor parallelism" and "Megatron's MLA under
// tensor parallelism") and asserted to the byte; --moe-shared-expert-overlap; the experts'
// gradients reduced over the expert-data-parallel group; bad input.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::mixtral_shaped;  // tests/fixtures.hpp
using fixtures::mla_shaped;

TrainSetup megatron(int64_t tp, int64_t seq = 1024) { return fixtures::megatron_tp(tp, seq); }

// Mixtral's shape with a Qwen2-MoE-style shared expert of width fs (and its sigmoid gate)
ModelConfig with_shared(int64_t fs, bool gate) {
  ModelConfig m = mixtral_shaped(true);
  m.shared_ffn = fs;
  m.shared_gate = gate;
  return m;
}

using fixtures::layer_bytes;
const auto& where = fixtures::refused_flag;  // "(built)" when it builds

}  // namespace

TEST_SUITE("moetp shared experts") {
  TEST_CASE("SharedExpertMLP at --tp 2 --sp, bf16-mixed: the hand derivation, to the byte") {
    // N = b s = 1024 tokens, t = 2, the MoE layer's input is the n = N / t = 512-token shard.
    // SharedExpertMLP is Megatron's MLP of width fs over the TP group (column-parallel fc1,
    // row-parallel fc2, SP): fc1 saves the input shard (the router's saved input already); feat14:
    // fc1's [N, 2 fs / t] output (SwiGLUFunction saves it) and fc2's [N, fs / t] input, 16-bit:
    // 6 N fs / t (8 N fs / t as gate/up/silu/mul before). The gate: sigmoid's output [n, 1] 2n, and `output * gate_score` keeps the
    // reduce-scattered output [n, h] 2nh (and the score).
    const int64_t N = 1024, t = 2, n = N / t, h = 4096, fs = 5632;
    const int64_t mlp = 6 * N * fs / t;
    const int64_t gate = 2 * n + 2 * n * h;
    CHECK(mlp == 17'301'504);
    CHECK(gate == 4'195'328);
    const TrainSetup s = megatron(t);
    const int64_t routed = layer_bytes(mixtral_shaped(true), s);
    CHECK(layer_bytes(with_shared(fs, false), s) - routed == mlp);
    CHECK(layer_bytes(with_shared(fs, true), s) - routed == mlp + gate);
    // the same width at --tp 4: the tensors at fs / 4, the gate on N / 4 tokens
    const TrainSetup s4 = megatron(4);
    const int64_t n4 = N / 4;
    CHECK(layer_bytes(with_shared(fs, true), s4) - layer_bytes(mixtral_shaped(true), s4) ==
          6 * N * fs / 4 + 2 * n4 + 2 * n4 * h);
  }

  TEST_CASE("--moe-shared-expert-overlap keeps the gathered [N, h] input fc1 saves") {
    // parallel_mode None on both linears: pre_forward_comm all-gathers the input (a new [N, h]
    // buffer) that fc1, a plain linear now, saves whole: 2Nh more than the TP linear's shard
    const int64_t N = 1024, h = 4096, fs = 5632;
    TrainSetup s = megatron(2);
    const int64_t base = layer_bytes(with_shared(fs, true), s);
    s.moe_shared_expert_overlap = true;
    CHECK(layer_bytes(with_shared(fs, true), s) - base == 2 * N * h);
    // its collectives are explicit ops on the TP group: one all-gather and one reduce-scatter
    // of [N, h] per MoE layer, as the TP linears' were
    const Graph g = build_graph(with_shared(fs, true), s, fixtures::h100());
    int gathers = 0, scatters = 0;
    for (const Op& op : g.ops) {
      const std::string name = op.name;
      if (name == "shared expert all-gather (overlap)") {
        ++gathers;
        CHECK(op.fwd.comm_kind == 2);
        CHECK(op.fwd.comm_bytes == 2 * N * h);
      }
      if (name == "shared expert reduce-scatter (overlap)") {
        ++scatters;
        CHECK(op.fwd.comm_kind == 3);
        CHECK(op.fwd.comm_bytes == 2 * N * h);
      }
      if (name == "gate proj" || name == "down proj") CHECK(op.fwd.comm_kind == 0);
    }
    CHECK(gathers == 4);
    CHECK(scatters == 4);
  }

  TEST_CASE("--moe-shared-expert-overlap in time: the all-to-all hides behind the shared experts") {
    // tp 2, dp 2: the same shared-expert ops at --ep 1 (no all-to-all traffic) and --ep 2. The
    // overlap changes the shared experts' own collectives the same way at both (one explicit
    // gather instead of the TP linears'); only at --ep 2 does critical-path communication drop
    // further, by the all-to-all time the shared experts' work covers.
    auto run = [](int64_t ep, bool on) {
      TrainSetup s = megatron(2);
      s.dp = 2;
      s.ep = ep;
      s.moe_shared_expert_overlap = on;
      return fixtures::run(with_shared(5632, true), s, "none");
    };
    const Result off1 = run(1, false), on1 = run(1, true), off2 = run(2, false), on2 = run(2, true);
    const int64_t own = off1.comm_time_ns - on1.comm_time_ns;  // the gathers alone
    const int64_t hidden = off2.comm_time_ns - on2.comm_time_ns - own;
    CHECK(hidden > 0);
    CHECK(on2.step_time_ns < off2.step_time_ns);
    // at most the all-to-all's own time: ep 2's extra communication over ep 1's (balanced
    // routing: the expert-TP collectives move as many rows at both)
    CHECK(hidden <= off2.comm_time_ns - off1.comm_time_ns);
  }

  TEST_CASE("parameters per rank: the shared expert's linears divided by tp, the gate whole") {
    const int64_t h = 4096, fs = 5632, L = 4;
    const TrainSetup s = megatron(2);
    const Graph with = build_graph(with_shared(fs, true), s, fixtures::h100());
    const Graph without = build_graph(mixtral_shaped(true), s, fixtures::h100());
    CHECK(with.params_per_rank - without.params_per_rank == L * (3 * h * fs / 2 + h));
  }

  TEST_CASE("bad input: the width, the code base, a model without shared experts") {
    TrainSetup s = megatron(2);
    CHECK(where(with_shared(5632, true), s) == "(built)");
    CHECK(where(with_shared(5633, true), s) == "--tp");  // 2 does not divide 5633
    s.moe_shared_expert_overlap = true;
    CHECK(where(mixtral_shaped(true), s) == "--moe-shared-expert-overlap");
    CHECK(where(mixtral_shaped(false), s) == "--moe-shared-expert-overlap");
    TrainSetup h;
    h.impl = Impl::kHf;
    h.seq = 128;
    h.moe_shared_expert_overlap = true;
    try {
      (void)build_graph(with_shared(5632, true), h, fixtures::h100());
      FAIL("built");
    } catch (const NotInCode& e) {
      CHECK(e.where() == "--moe-shared-expert-overlap");
    }
  }
}

TEST_SUITE("moetp mla") {
  TEST_CASE("MLASelfAttention at --tp 2 --sp under the TE spec: the hand derivation, to the byte") {
    // docs/memory-model.md "Megatron's MLA under tensor parallelism". N = 256 tokens, t = 2,
    // n = N / t = 128 (the sequence shard), a_t = a / t = 8 heads per rank, no q latent:
    //   the block's normalized input shard 2nh (kept by q_proj's fused norm and the duplicated
    //   kv down TELinear); q_proj's fused RMSNorm on the shard: ln_out 2nh (the column-parallel
    //   GEMM saves the shard and gathers it), rsigma 4n; kv_combined [n, r + rope] 2n(r + rope);
    //   the kv norm's ln_out 2nr and rsigma 4n; the query [N, a_t qd] 2N a_t qd; o_key
    //   2N a_t qd; o_value 2N a_t v; TE's attention output 2N a_t v and stats 4 a_t N. The
    //   gathered k_pos_emb [N, rope] is read by the fused rope, which saves only cos and sin.
    // Megatron's Llama attention at the same t: 2nh + 12 N a_t qd + 4 a_t N.
    const int64_t N = 256, t = 2, n = N / t, h = 2048, at = 16 / t, qd = 192, rope = 64,
                  v = 128, r = 512;
    const int64_t mla = 4 * n * h + 8 * n + 2 * n * (r + rope) + 2 * n * r + 4 * N * at * qd +
                        4 * N * at * v + 4 * at * N;
    const int64_t llama = 2 * n * h + 12 * N * at * qd + 4 * at * N;
    CHECK(mla == 3'957'760);
    const TrainSetup s = megatron(t, N);
    CHECK(layer_bytes(mla_shaped(true), s) - layer_bytes(mla_shaped(false), s) == mla - llama);
    // DeepSeek-V2's q latent (1536): q down's duplicated TELinear saves the same input shard; the
    // fused q norm saves q_compressed 2n ql, its ln_out 2n ql and rsigma 4n (no h-wide norm)
    const int64_t ql = 1536;
    const int64_t mla_q = mla - 2 * n * h + 4 * n * ql;
    CHECK(layer_bytes(mla_shaped(true, ql), s) - layer_bytes(mla_shaped(false), s) ==
          mla_q - llama);
  }

  TEST_CASE("MLA's TP collectives: k_pos_emb gathered, the up projections column-parallel") {
    const int64_t N = 256, rope = 64;
    const Graph g = build_graph(mla_shaped(true), megatron(2, N), fixtures::h100());
    int gathers = 0;
    for (const Op& op : g.ops) {
      const std::string name = op.name;
      if (name == "k_pos_emb all-gather") {
        ++gathers;
        CHECK(op.fwd.comm_kind == 2);
        CHECK(op.fwd.comm_bytes == 2 * N * rope);
        CHECK(op.bwd.comm_kind == 3);
      }
      if (name == "q proj" || name == "kv up proj") CHECK(op.fwd.comm_kind == 2);  // SP gather
      if (name == "kv down proj") CHECK(op.fwd.comm_kind == 0);  // duplicated
    }
    CHECK(gathers == 4);
  }

  TEST_CASE("DeepSeek-V2-Lite's shape at --tp 2: MLA, routed and shared experts, to the byte") {
    ModelConfig m = mla_shaped(true);
    m.experts = 64;
    m.experts_per_token = 6;
    m.expert_ffn = 1408;
    m.shared_ffn = 2 * 1408;
    m.dense_layers = 1;
    m.norm_topk = false;  // norm_topk_prob false: Megatron's --moe-router-pre-softmax
    TrainSetup s = megatron(2, 512);
    CHECK(where(m, s) == "(built)");
    // The MoE block against the same block with the dense MLP (10944), both at --tp 2 --sp,
    // N = 512, n = 256, etp = tp = 2, ep 1, k 6, E 64, expert width 1408, shared 2816:
    //   routed (docs "Expert tensor parallelism", pre-softmax router): the input shard 2nh,
    //   top-k indices 8nk, the fp32 softmax over E 4nE, the permute's int64 indices (mtmoe:
    //   the argsort of the [E, n] map 8nE, which the probs' IndexBackward0 keeps whole, and
    //   sorted_indices 8nk; before, 8nk only), and
    //   R = etp n k rows of 2h + 6 (1408 / etp) + 2;
    //   shared: 6 N 2816 / t; the dense MLP: 2nh + 6 N 10944 / t (feat14: the fused SwiGLU).
    const int64_t N = 512, n = 256, k = 6, E = 64, h = 2048, R = 2 * n * k;
    const int64_t moe = 2 * n * h + 16 * n * k + 12 * n * E + R * (2 * h + 6 * 1408 / 2 + 2) +
                        6 * N * 2816 / 2;
    const int64_t dense = 2 * n * h + 6 * N * 10944 / 2;
    CHECK(moe - dense == 13'301'760);  // 13,170,688 without mtmoe's 8nE; 9,140,224 before feat14's 6Nf
    CHECK(layer_bytes(m, s) - layer_bytes(mla_shaped(true), s) == moe - dense);
    s.sp = false;  // MoE with TP still needs SP (Megatron's MoELayer raises)
    CHECK(where(m, s) == "--sp");
    s = megatron(2, 512);
    s.impl = Impl::kHf;  // HF has no TP
    CHECK(where(m, s) == "--tp");
  }
}

TEST_SUITE("moetp expert gradients") {
  // Megatron's DDP reduces the experts' gradients over the expert-data-parallel group,
  // edp = tp cp dp / (etp ep), and the rest over dp. The old model reduced every gradient over
  // dp: each case below fails on it.
  const int64_t kExperts = int64_t{4} * 8 * 3 * 4096 * 14336;  // layers x E x 3 h f

  TEST_CASE("--tp 2 --etp 1 --dp 1: edp 2, the experts' gradients are reduced although dp is 1") {
    TrainSetup s = megatron(2);
    s.etp = 1;
    const Result r = fixtures::run(mixtral_shaped(true), s, "none");
    CHECK(r.grad_reduce_bytes == 0);
    CHECK(r.expert_grad_reduce_bytes == 4 * kExperts);  // fp32 main grads, every expert whole
    CHECK(r.dp_comm_ns > 0);
  }

  TEST_CASE("--dp 8 --ep 8: edp 1, the experts' gradients are not reduced") {
    TrainSetup s = megatron(1);
    s.dp = 8;
    s.ep = 8;
    const Graph g = build_graph(mixtral_shaped(true), s, fixtures::h100());
    const Result r = fixtures::run(mixtral_shaped(true), s, "none");
    CHECK(r.expert_grad_reduce_bytes == 0);
    CHECK(r.grad_reduce_bytes == 4 * (g.params_per_rank - kExperts / 8));
  }

  TEST_CASE("--dp 4 --ep 2: edp 2, the local experts' gradients over 2 ranks, the rest over 4") {
    TrainSetup s = megatron(1);
    s.dp = 4;
    s.ep = 2;
    s.zero = 1;
    const Graph g = build_graph(mixtral_shaped(true), s, fixtures::h100());
    const Result r = fixtures::run(mixtral_shaped(true), s, "none");
    CHECK(r.expert_grad_reduce_bytes == 4 * kExperts / 2);
    CHECK(r.grad_reduce_bytes == 4 * (g.params_per_rank - kExperts / 2));
    // where edp equals dp (--ep 1, etp = tp) one set of buckets reduces everything over dp
    s.ep = 1;
    const Graph g1 = build_graph(mixtral_shaped(true), s, fixtures::h100());
    const Result r1 = fixtures::run(mixtral_shaped(true), s, "none");
    CHECK(r1.expert_grad_reduce_bytes == 0);
    CHECK(r1.grad_reduce_bytes == 4 * g1.params_per_rank);
  }
}
