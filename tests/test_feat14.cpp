// feat14 (issue 13): Megatron's fused SwiGLU MLP (ImplSpec::fused_swiglu; sim/src/blocks_feat14.cpp).
// Megatron-core @ d98e8a64ddf3 mlp.py MLP.forward + fused_bias_swiglu.py SwiGLUFunction: one
// linear_fc1 of 2f / tp columns, whose [n, 2f] output SwiGLUFunction saves; linear_fc2 saves the
// [n, f] product. Against HF's gate/up/silu/mul: 3f saved per token instead of 4f, one SP
// all-gather of the MLP input instead of two.
#include <doctest/doctest.h>

#include <string_view>

#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"

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
}
