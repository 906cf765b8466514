// te_norm (issue 10): Megatron under the TE spec, what its norms and its loss save.
// - Transformer Engine's fused RMSNorm (LayerNormLinear's norm, TENorm; sim/src/norm_te.cpp):
//   one Llama layer derived by hand and asserted to the byte.
// - --cross-entropy-loss-fusion (Megatron's fused_cross_entropy.py under torch.compile): the same
//   saves as vocab_parallel_cross_entropy and one fp32 [n, v/t] clone in backward.
// Sources: docs/memory-model.md §8 "megatron" (rows "norms (TE spec)" and "loss, fused").
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"

using namespace sim;

namespace {

// tiny_llama with as many K/V heads as query heads (MHA): h 256, 8 heads of 32, SwiGLU 688
ModelConfig llama_mha() {
  ModelConfig m = fixtures::tiny_llama();
  m.kv_heads = m.heads;
  return m;
}

TrainSetup megatron(int64_t b, int64_t s) { return fixtures::megatron_tp(1, s, 0, b); }

const Op* op_named(const Graph& g, std::string_view name) {
  for (const Op& op : g.ops)
    if (std::string_view(op.name) == name) return &op;
  return nullptr;
}

}  // namespace

TEST_SUITE("te_norm") {
  TEST_CASE("megatron Llama layer with TE's fused RMSNorm, bf16-mixed: the hand derivation") {
    const int64_t b = 2, s = 128, N = b * s, h = 256, a = 8, d = 32, f = 688;
    // Per layer (bytes; N tokens, no dropout: Llama's configs have none):
    //   norm1 (fused into linear_qkv): the block input x 2Nh, rsigma fp32 4N;
    //   linear_qkv: ln_out 2Nh; its output 6Nad (v a view of it, kept whole); rotated q, k 4Nad;
    //   TE attention's output 2Nad (linear_proj's input) and fp32 softmax stats 4aN;
    //   norm2 (fused into linear_fc1): the residual 2Nh, rsigma 4N;
    //   linear_fc1: ln_out 2Nh; its [N, 2f] output 4Nf (SwiGLUFunction), the [N, f] product 2Nf
    //   (linear_fc2) (feat14: Megatron's fused SwiGLU; 8Nf as gate/up/silu/mul before).
    const int64_t layer = 2 * N * h + 4 * N + 2 * N * h + 12 * N * a * d + 4 * a * N +
                          2 * N * h + 4 * N + 2 * N * h + 6 * N * f;
    CHECK(layer == 2'377'728);
    const Result r = fixtures::run(llama_mha(), megatron(b, s), "none");
    CHECK(r.activation_bytes_per_layer == layer);
  }

  TEST_CASE("the TE norm op saves x, its weight and fp32 rsigma, ln_out is the linear's input") {
    const int64_t b = 1, s = 64, N = b * s, h = 256;
    const Graph g = build_graph(llama_mha(), megatron(b, s), fixtures::h100());
    const Op* norm = op_named(g, "norm1");
    REQUIRE(norm != nullptr);
    CHECK(norm->kind == OpKind::kRmsNorm);
    // the activations it keeps (a saved parameter is persistent and not listed among them)
    int64_t saved = 0;
    for (const int32_t* id = g.begin(norm->saves); id != g.end(norm->saves); ++id)
      saved += g.storages[static_cast<size_t>(*id)].bytes;
    CHECK(saved == 2 * N * h + 4 * N);  // x (bf16) + rsigma (fp32 per row)
    CHECK(norm->fwd.kernels == 1);
    CHECK(norm->bwd.kernels == 2);
    // the final norm is TENorm: the same op
    const Op* fin = op_named(g, "final norm");
    REQUIRE(fin != nullptr);
    CHECK(fin->kind == OpKind::kRmsNorm);
  }

  TEST_CASE("megatron GPT's LayerNorm already saves TE's storages: the local-spec figure holds") {
    // LayerNorm: input, weight and bias, fp32 mu and rsigma per row (layernorm_linear.py:526-536)
    // = Ops::layer_norm's; tests/test_implmt.cpp holds the layer at 34sbh + 5as^2b + 16sb.
    ModelConfig m = fixtures::megatron_gpt_small();
    TrainSetup t = megatron(2, 128);
    t.attention = AttentionKind::kStandard;
    const int64_t b = 2, s = 128, h = 256, a = 8;
    CHECK(fixtures::run(m, t, "none").activation_bytes_per_layer ==
          34 * s * b * h + 5 * a * s * s * b + 16 * s * b);
  }

  TEST_CASE("--cross-entropy-loss-fusion on: the same saves, one fp32 [n, v/t] clone in backward") {
    const int64_t b = 2, s = 128, N = b * s;
    const ModelConfig m = llama_mha();
    const int64_t vp = 1024;  // vocab 1000 padded to 128 x tp
    TrainSetup off = megatron(b, s), on = megatron(b, s);
    on.cross_entropy_loss_fusion = true;
    const Graph go = build_graph(m, off, fixtures::h100());
    const Graph gf = build_graph(m, on, fixtures::h100());
    const Op* eager = op_named(go, "cross entropy");
    const Op* fused = op_named(gf, "fused cross entropy");
    REQUIRE(eager != nullptr);
    REQUIRE(fused != nullptr);
    CHECK(op_named(gf, "cross entropy") == nullptr);
    CHECK(fused->bwd_transient_bytes - eager->bwd_transient_bytes == 4 * N * vp);
    CHECK(fused->fwd_transient_bytes == eager->fwd_transient_bytes);
    REQUIRE(fused->saves.count == eager->saves.count);
    for (int32_t i = 0; i < fused->saves.count; ++i)
      CHECK(gf.storages[static_cast<size_t>(gf.begin(fused->saves)[i])].bytes ==
            go.storages[static_cast<size_t>(go.begin(eager->saves)[i])].bytes);
    // the activations per layer are not the loss's
    CHECK(fixtures::run(m, on, "none").activation_bytes_per_layer ==
          fixtures::run(m, off, "none").activation_bytes_per_layer);
    // the clone sits at the loss's backward: the peak rises by it when the peak is there
    const Result ro = fixtures::run(m, off, "none"), rf = fixtures::run(m, on, "none");
    CHECK(rf.peak_allocated_bytes >= ro.peak_allocated_bytes);
    CHECK(rf.peak_allocated_bytes - ro.peak_allocated_bytes <= 4 * N * vp);
  }

  TEST_CASE("--cross-entropy-loss-fusion is Megatron's: refused under the others, one flag") {
    TrainSetup t = megatron(1, 64);
    t.cross_entropy_loss_fusion = true;
    CHECK(resolve_setup(llama_mha(), t).cross_entropy_loss_fusion);
    for (Impl impl : {Impl::kHf, Impl::kTorchtitan}) {
      t.impl = impl;
      try {
        (void)resolve_setup(llama_mha(), t);
        FAIL("not refused");
      } catch (const ConfigError& e) {
        CHECK(e.where() == "--cross-entropy-loss-fusion");
      }
    }
  }
}
