// feat14 (issue 13): Megatron's fused SwiGLU MLP (ImplSpec::fused_swiglu; sim/src/blocks_feat14.cpp).
// Megatron-core @ d98e8a64ddf3 mlp.py MLP.forward + fused_bias_swiglu.py SwiGLUFunction: one
// linear_fc1 of 2f / tp columns, whose [n, 2f] output SwiGLUFunction saves; linear_fc2 saves the
// [n, f] product. Against HF's gate/up/silu/mul: 3f saved per token instead of 4f, one SP
// all-gather of the MLP input instead of two.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"
#include "../sim/src/comm.hpp"

using namespace sim;

namespace {

ModelConfig llama_mha() {  // tiny_llama, MHA: h 256, 8 heads of 32, SwiGLU f 688
  ModelConfig m = fixtures::tiny_llama();
  m.kv_heads = m.heads;
  return m;
}

TrainSetup setup(Impl impl, int64_t b, int64_t s, int64_t tp = 1) {
  TrainSetup t;
  t.impl = impl;
  t.micro_batch = b;
  t.seq = s;
  t.tp = tp;
  t.sp = tp > 1;
  return t;
}

const Op* op_named(const Graph& g, std::string_view name, int32_t block = 0) {
  for (const Op& op : g.ops)
    if (std::string_view(op.name) == name && op.block == block) return &op;
  return nullptr;
}

int64_t saved_bytes(const Graph& g, const Op& op) {
  int64_t n = 0;
  for (const int32_t* id = g.begin(op.saves); id != g.end(op.saves); ++id)
    n += g.storages[static_cast<size_t>(*id)].bytes;
  return n;
}

}  // namespace

TEST_SUITE("feat14") {
  TEST_CASE("megatron --swiglu: one fc1 of 2f, SwiGLUFunction saves its [n, 2f] input") {
    const int64_t b = 2, s = 128, N = b * s, h = 256, f = 688;
    const Graph g = build_graph(llama_mha(), setup(Impl::kMegatron, b, s), fixtures::h100());
    CHECK(op_named(g, "gate proj") == nullptr);
    CHECK(op_named(g, "up proj") == nullptr);
    CHECK(op_named(g, "swiglu mul") == nullptr);
    const Op* fc1 = op_named(g, "fc1 (gate+up)");
    const Op* act = op_named(g, "fused swiglu");
    const Op* fc2 = op_named(g, "fc2");
    REQUIRE(fc1 != nullptr);
    REQUIRE(act != nullptr);
    REQUIRE(fc2 != nullptr);
    CHECK(fc1->fwd.flops == 2 * N * h * 2 * f);  // the two projections' FLOPs, one GEMM
    CHECK(saved_bytes(g, *act) == N * 2 * f * 2);  // bf16 [N, 2f]
    // fc2 saves its [N, f] input (and its bf16 weight cast is not an activation here: the weight
    // is bf16 under Megatron's bf16-mixed, a parameter)
    const auto& in = g.storages[static_cast<size_t>(*g.begin(fc2->saves))];
    CHECK(in.bytes == N * f * 2);
    // the executor's kernel: one Exec::kSwiglu per layer, dim {rows, f}
    const Graph ge = build_graph_exec(llama_mha(), setup(Impl::kMegatron, b, s), fixtures::h100());
    int64_t swiglu = 0;
    for (const OpArgs& a : ge.args)
      if (a.exec == Exec::kSwiglu) {
        ++swiglu;
        CHECK(a.dim[0] == N);
        CHECK(a.dim[1] == f);
      }
    CHECK(swiglu == llama_mha().layers);
  }

  TEST_CASE("megatron saves 2Nf bytes per layer fewer than HF's unfused gate/up/silu/mul") {
    // The same model under megatron at both ends; the only difference between them is the MLP.
    // Per layer, bf16, N tokens: unfused gate out 2Nf (silu) + up out 2Nf + silu out 2Nf (mul) +
    // mul out 2Nf (down) = 8Nf; fused fc1 out 4Nf (SwiGLUFunction) + swiglu out 2Nf (fc2) = 6Nf.
    // tests/test_te_norm.cpp holds the whole TE-spec layer with the fused figure.
    const int64_t b = 2, s = 128, N = b * s, f = 688;
    ImplSpec unfused = spec(Impl::kMegatron);
    CHECK(unfused.fused_swiglu);
    const Result fused = fixtures::run(llama_mha(), setup(Impl::kMegatron, b, s), "none");
    // the TE-spec layer of test_te_norm with 6Nf: 8Nh + 8N + 12Nad + 4aN + 6Nf
    const int64_t h = 256, a = 8, d = 32;
    CHECK(fused.activation_bytes_per_layer ==
          8 * N * h + 8 * N + 12 * N * a * d + 4 * a * N + 6 * N * f);
  }

  TEST_CASE("megatron --tp 2 --sp: one all-gather of the MLP input, fc1 out [N, 2f / 2] saved") {
    const int64_t b = 2, s = 128, N = b * s, h = 256, f = 688, t = 2;
    const Graph g = build_graph(llama_mha(), setup(Impl::kMegatron, b, s, t), fixtures::h100());
    const Op* fc1 = op_named(g, "fc1 (gate+up)");
    const Op* act = op_named(g, "fused swiglu");
    REQUIRE(fc1 != nullptr);
    REQUIRE(act != nullptr);
    CHECK(fc1->fwd.comm_kind == 2);  // all-gather of the sequence shards
    CHECK(fc1->fwd.comm_bytes == N * h * 2);
    CHECK(fc1->bwd.comm_kind == 3);  // reduce-scatter of the input gradient
    CHECK(saved_bytes(g, *act) == N * (2 * f / t) * 2);
    // the MLP's all-gathers in block 0: fc1's only (norm2's output is gathered once)
    int gathers = 0;
    bool after_norm2 = false;
    for (const Op& op : g.ops) {
      if (op.block != 0) continue;
      if (std::string_view(op.name) == "fc1 (gate+up)") after_norm2 = true;
      if (after_norm2 && op.fwd.comm_kind == 2) ++gathers;
    }
    CHECK(gathers == 1);
  }

  TEST_CASE("hf and torchtitan keep gate/up/silu/mul (their code has two linears)") {
    for (Impl impl : {Impl::kHf, Impl::kTorchtitan}) {
      CAPTURE(static_cast<int>(impl));
      CHECK_FALSE(spec(impl).fused_swiglu);
    }
    const Graph g = build_graph(llama_mha(), setup(Impl::kHf, 2, 128), fixtures::h100());
    CHECK(op_named(g, "fc1 (gate+up)") == nullptr);
    CHECK(op_named(g, "gate proj") != nullptr);
    CHECK(op_named(g, "up proj") != nullptr);
  }

  // --- item 3: Megatron's TP all-reduce of the replicated parameters' gradients ---
  TEST_CASE("TP all-reduce of replicated grads: Llama's norms at --tp 2 --sp, none without SP") {
    // finalize_model_grads.py _allreduce_non_tensor_model_parallel_grads: under SP every norm
    // weight (TE's fused RMSNorms in linear_qkv and linear_fc1, TENorm) is summed over TP:
    // (2h per layer + the final norm's h) fp32 main_grads. tiny_llama: 4 layers of h 256.
    const int64_t h = 256, L = 4;
    const Graph g = build_graph(llama_mha(), setup(Impl::kMegatron, 2, 128, 2), fixtures::h100());
    CHECK(g.tp_replicated_grad_bytes == 4 * (2 * h * L + h));
    TrainSetup no_sp = setup(Impl::kMegatron, 2, 128, 2);
    no_sp.sp = false;
    CHECK(build_graph(llama_mha(), no_sp, fixtures::h100()).tp_replicated_grad_bytes == 0);
    CHECK(build_graph(llama_mha(), setup(Impl::kMegatron, 2, 128), fixtures::h100())
              .tp_replicated_grad_bytes == 0);
  }

  TEST_CASE("TP all-reduce of replicated grads: the MoE router and MLA's down projections") {
    // Mixtral-shaped under megatron, --tp 2 --sp: per layer the two norms 2h and the router
    // [E, h] (router.py:85), plus the final norm; the experts are not (their own expert grid).
    const int64_t h = 4096, E = 8, L = 4;
    TrainSetup t = setup(Impl::kMegatron, 1, 1024, 2);
    CHECK(build_graph(fixtures::mixtral_shaped(true), t, fixtures::h100())
              .tp_replicated_grad_bytes == 4 * (L * (2 * h + E * h) + h));
    // MLA (DeepSeek-V2-Lite's attention, no q latent) as mla5 builds it: per layer the two block
    // norms 2h, linear_q_proj's fused norm h, the kv latent's norm r and the duplicated TELinear
    // linear_kv_down_proj [r + rope, h] (multi_latent_attention.py:572-574 parallel_mode
    // 'duplicated'; transformer_engine.py:1316)
    const int64_t hm = 2048, r = 512, rope = 64;
    CHECK(build_graph(fixtures::mla_shaped(true), setup(Impl::kMegatron, 1, 256, 2),
                      fixtures::h100())
              .tp_replicated_grad_bytes == 4 * (L * (3 * hm + r + (r + rope) * hm) + hm));
  }

  TEST_CASE("TP all-reduce of replicated grads: timed on the comm stream, exposed before the step") {
    // The Mixtral-shaped case above at dp 1: no DP reduction, the TP all-reduce alone.
    const int64_t h = 4096, E = 8, L = 4;
    const int64_t bytes = 4 * (L * (2 * h + E * h) + h);
    TrainSetup t = setup(Impl::kMegatron, 1, 1024, 2);
    const Device dev = fixtures::h100();
    const Result r = simulate(fixtures::mixtral_shaped(true), t, dev, parse_strategy("none"));
    CHECK(r.tp_grad_allreduce_bytes == bytes);
    // one NCCL ring all-reduce of the coalesced buffer over the TP group (2 ranks, one node)
    const int64_t ns = static_cast<int64_t>(
        std::llround(collective_seconds(Collective::kAllReduce, bytes, comm_group(2, 1, 8), dev) * 1e9));
    CHECK(r.tp_grad_allreduce_ns > 0);
    CHECK(std::llabs(r.tp_grad_allreduce_ns - ns) <= 1);
    CHECK(r.dp_comm_exposed_ns >= r.tp_grad_allreduce_ns);
    // the dense twin: its norms only
    const Result d = simulate(fixtures::mixtral_shaped(false), t, dev, parse_strategy("none"));
    CHECK(d.tp_grad_allreduce_bytes == 4 * (L * 2 * h + h));
    CHECK(d.tp_grad_allreduce_ns > 0);
  }
}
