// mla5 (issue 13): Megatron-core's MLA under the TE spec and Megatron's MoE load-balancing loss
// (--moe-aux-loss-coeff), each derived by hand (docs/memory-model.md "Megatron's MLA" and
// "Megatron's auxiliary loss") and asserted to the byte; bad input.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::mixtral_shaped;  // tests/fixtures.hpp

using fixtures::mla_shaped;  // tests/fixtures.hpp

TrainSetup megatron(int64_t s) { return fixtures::megatron_tp(1, s); }

using fixtures::layer_bytes;
const auto& where = fixtures::refused_flag;  // "(built)" when it builds

}  // namespace

TEST_SUITE("mla5 megatron mla") {
  TEST_CASE("MLASelfAttention under the TE spec, bf16-mixed: the hand derivation, to the byte") {
    // docs/memory-model.md "Megatron's MLA", N tokens, no q latent:
    //   the block's normalized input 2Nh (kept by q_proj's fused norm and kv down's TELinear);
    //   q_proj's fused RMSNorm: ln_out 2Nh, rsigma 4N;
    //   kv_combined [N, r + rope] 2N(r + rope) (the fused kv norm saves its kv_compressed view);
    //   the kv norm's ln_out 2Nr and rsigma 4N;
    //   the query (q_proj's output, rotated in place) 2Na qd; o_key 2Na qd; o_value 2Na v;
    //   TE fused attention's output 2Na v and softmax stats 4aN (fp32 [b, a, s]).
    // Megatron's Llama attention (linear_qkv, rope, flash): 2Nh + the fused qkv output 6Na qd
    // (v a view of it) + the rotated q and k 4Na qd + the output 2Na qd + 4aN.
    const int64_t N = 256, h = 2048, a = 16, qd = 192, rope = 64, v = 128, r = 512;
    const int64_t mla = 4 * N * h + 8 * N + 2 * N * (r + rope) + 2 * N * r + 4 * N * a * qd +
                        4 * N * a * v + 4 * a * N;
    const int64_t llama = 2 * N * h + 12 * N * a * qd + 4 * a * N;
    CHECK(mla == 7'915'520);
    const TrainSetup t = megatron(N);
    CHECK(layer_bytes(mla_shaped(true), t) - layer_bytes(mla_shaped(false), t) == mla - llama);
    // with DeepSeek-V2's q latent (1536): q down's TELinear saves the same input; the fused q
    // norm saves q_compressed 2N ql, its ln_out 2N ql and rsigma 4N (no h-wide norm)
    const int64_t ql = 1536;
    const int64_t mla_q = mla - 2 * N * h + 4 * N * ql;
    CHECK(layer_bytes(mla_shaped(true, ql), t) - layer_bytes(mla_shaped(false), t) ==
          mla_q - llama);
  }

  TEST_CASE("parameters: q_proj's fused RMSNorm adds h per layer without a q latent") {
    // mla_qk_norm_config.py @ d98e8a6 _resolve_mla_qk_layernorm: with --qk-layernorm and no
    // q_lora_rank, linear_q_proj becomes TELayerNormColumnParallelLinear (its own [h] weight)
    const TrainSetup t = megatron(128);
    const ModelConfig m = mla_shaped(true);
    CHECK(build_graph(m, t, fixtures::h100()).params_per_rank ==
          parameter_count(m) + m.layers * m.hidden);
    const ModelConfig q = mla_shaped(true, 1536);
    CHECK(build_graph(q, t, fixtures::h100()).params_per_rank == parameter_count(q));
    // the run still reports the model's parameter count
    CHECK(build_graph(m, t, fixtures::h100()).params == parameter_count(m));
  }

  TEST_CASE("TE's fused attention takes v's head dim: the implementation's kernel, stats unpadded") {
    const int64_t N = 100, a = 16;
    const Graph g = build_graph(mla_shaped(true), megatron(N), fixtures::h100());
    int attn = 0, rope_q = 0, rope_kv = 0;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::kFlashAttention) {
        ++attn;
        CHECK(op.kernel == KernelChoice::kCudnnAttention);
        CHECK(g.storages[g.idx[op.outputs.begin + 1]].bytes == 4 * a * N);
      }
      if (std::string(op.name) == "fused mla rope q (in place)") ++rope_q;
      if (std::string(op.name) == "fused mla rope kv split") ++rope_kv;
    }
    CHECK(attn == 4);
    CHECK(rope_q == 4);
    CHECK(rope_kv == 4);
  }

  TEST_CASE("selective recompute drops TE attention's stats only") {
    // q, k and v are the checkpoint's inputs (kept), the output is linear_proj's saved input:
    // the softmax stats 4aN are what core attention alone kept
    const int64_t N = 256, a = 16;
    const TrainSetup t = megatron(N);
    const int64_t none = layer_bytes(mla_shaped(true), t);
    const int64_t sel = layer_bytes(mla_shaped(true), t, "selective");
    CHECK(none - sel == 4 * a * N);
  }

  TEST_CASE("eager MLA stays refused under megatron, one line") {
    TrainSetup t = megatron(128);
    t.attention = AttentionKind::kStandard;
    CHECK(where(mla_shaped(true), t) == "--attention");
    // moetp (issue 13): MLA under --tp is built (tests/test_moetp.cpp)
    TrainSetup p = megatron(128);
    p.tp = 2;
    CHECK(where(mla_shaped(true), p) == "(built)");
  }

  TEST_CASE("mtmoe: a rope dim not a multiple of 4 is refused under megatron, one line") {
    // fusions/fused_mla_yarn_rope_apply.py @ d98e8a64ddf3: both fused MLA rope kernels
    // `assert emb_dim % 4 == 0`; HF's apply_rotary_emb takes any even rope dim
    ModelConfig m = mla_shaped(true);
    const int64_t nope = m.head_dim - m.qk_rope_dim;
    for (const int64_t rope : {2, 6, 66}) {
      m.qk_rope_dim = rope;
      m.head_dim = nope + rope;
      CHECK(where(m, megatron(128)) == "--impl");
      try {
        (void)build_graph(m, megatron(128), fixtures::h100());
      } catch (const ConfigError& e) {
        CHECK(e.field() == "qk_rope_head_dim");
        CHECK(std::string(e.what()).find('\n') == std::string::npos);
      }
      TrainSetup hf = megatron(128);
      hf.impl = Impl::kHf;
      CHECK(where(m, hf) == "(built)");
    }
    m.qk_rope_dim = 4, m.head_dim = nope + 4;
    CHECK(where(m, megatron(128)) == "(built)");
  }
}

TEST_SUITE("mla5 megatron aux loss") {
  TEST_CASE("--moe-aux-loss-coeff > 0 saves 4NE + 8E + 4 bytes per MoE layer, to the byte") {
    // docs/memory-model.md "Megatron's auxiliary loss": the fp32 scores of the full softmax
    // 4NE, the int64 tokens per expert 8E (kept by the product), the 0-dim loss 4
    // (MoEAuxLossAutoScaler.save_for_backward).
    const int64_t N = 1024, E = 8;
    TrainSetup t = megatron(N);
    const int64_t base = layer_bytes(mixtral_shaped(), t);
    t.moe_aux_loss_coeff = 0.01;
    CHECK(layer_bytes(mixtral_shaped(), t) - base == 4 * N * E + 8 * E + 4);
    CHECK(4 * N * E + 8 * E + 4 == 32'836);
    // the coefficient scales the loss only: any value > 0 keeps the same tensors
    t.moe_aux_loss_coeff = 1.0;
    CHECK(layer_bytes(mixtral_shaped(), t) - base == 4 * N * E + 8 * E + 4);
  }

  TEST_CASE("bad --moe-aux-loss-coeff: one line naming the flag") {
    TrainSetup t = megatron(128);
    t.moe_aux_loss_coeff = -0.1;
    CHECK(where(mixtral_shaped(), t) == "--moe-aux-loss-coeff");
    t.moe_aux_loss_coeff = 0.01;
    CHECK(where(mla_shaped(false), t) == "--moe-aux-loss-coeff");  // dense: no router
    TrainSetup h = t;
    h.impl = Impl::kHf;  // HF's loss follows the config's output_router_logits
    CHECK(where(mixtral_shaped(), h) == "--moe-aux-loss-coeff");
    CHECK(where(mixtral_shaped(), t) == "(built)");
  }
}
