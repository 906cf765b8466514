// famdec (issue 12): the decoder families GPT-NeoX (Pythia), Falcon, Gemma 1/2/3, Phi-3 and
// OLMo 2 -- their HF configs as ModelConfig, the published parameter counts
// (shared hf-configs README: unique trainable parameters, tied weights once, no buffers), the
// refusals of fields that change the model and are not modeled, and the graphs they build.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

const std::vector<fs::path> kDirs = {fs::path(ACTSIM_SOURCE_DIR) / "models"};

using Residual = sim::ModelConfig::Residual;
using SubNorms = sim::ModelConfig::SubNorms;
using QkNorm = sim::ModelConfig::QkNorm;

sim::ModelConfig hf(const std::string& members) {
  return sim_io::parse_model("{" + members + "}", "hf", "hf/config.json");
}

// The one-line error of a config that must be refused.
std::string refusal(const std::string& members) {
  try {
    (void)hf(members);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  FAIL("expected a refusal");
  return "";
}

sim::TrainSetup setup(int64_t b, int64_t s, sim::AttentionKind att) {
  sim::TrainSetup t;
  t.micro_batch = b;
  t.seq = s;
  t.attention = att;
  return t;  // the hf implementation's defaults: bf16 autocast over fp32 weights
}

int count(const sim::Graph& g, std::string_view name, int32_t block = -2) {
  int n = 0;
  for (const sim::Op& op : g.ops)
    if (op.name == name && (block == -2 || op.block == block)) ++n;
  return n;
}

// Bytes the first op named `name` in `block` saves (distinct storages).
int64_t saved_bytes(const sim::Graph& g, std::string_view name, int32_t block) {
  for (const sim::Op& op : g.ops) {
    if (op.name != name || op.block != block) continue;
    int64_t total = 0;
    for (int32_t k = 0; k < op.saves.count; ++k) total += g.storages[g.idx[op.saves.begin + k]].bytes;
    return total;
  }
  FAIL("no op named " << name << " in block " << block);
  return 0;
}

const char* const kShipped[] = {"pythia-1b", "pythia-410m", "falcon-7b", "gemma-7b",
                                "gemma-2-9b", "phi-3-mini-4k", "olmo-2-7b"};

}  // namespace

TEST_SUITE("famdec: decoder families") {
  TEST_CASE("published parameter counts, exactly") {
    struct Case {
      const char* name;
      const char* family;
      int64_t params;
    };
    for (const Case& c : {Case{"pythia-1b", "gpt_neox", 1'011'781'632},
                          Case{"pythia-410m", "gpt_neox", 405'334'016},
                          Case{"falcon-7b", "falcon", 6'921'720'704},
                          Case{"gemma-7b", "gemma", 8'537'680'896},
                          Case{"gemma-2-9b", "gemma2", 9'241'705'984},
                          Case{"phi-3-mini-4k", "phi3", 3'821'079'552},
                          Case{"olmo-2-7b", "olmo2", 7'298'617'344},
                          Case{"llama-3-8b", "llama", 8'030'261'248},
                          // fam12: Llama-3.1-8B's config (rope_scaling llama3), as published
                          Case{"llama-3.1-8b", "llama", 8'030'261'248}}) {
      CAPTURE(c.name);
      const sim::ModelConfig m = sim_io::load_model(c.name, kDirs);
      CHECK(m.family == c.family);
      CHECK(sim::parameter_count(m) == c.params);
    }
  }

  TEST_CASE("pythia-1b: parallel residual, a quarter of each head rotary, untied, biases") {
    const sim::ModelConfig m = sim_io::load_model("pythia-1b", kDirs);
    CHECK(m.residual == Residual::kParallel);
    CHECK(m.head_dim == 256);
    CHECK(m.rotary_dim == 64);
    CHECK(m.norm == sim::NormKind::kLayerNorm);
    CHECK(m.norm_bias);
    CHECK(m.qkv_bias);
    CHECK(m.linear_bias);
    CHECK(m.fused_qkv);
    CHECK_FALSE(m.tied_embeddings);
    CHECK(m.activation == sim::Activation::kGelu);
    // use_parallel_residual false: sequential blocks, the same parameters
    const sim::ModelConfig seq = hf(
        R"("model_type": "gpt_neox", "hidden_size": 2048, "num_hidden_layers": 16,
           "num_attention_heads": 8, "intermediate_size": 8192, "vocab_size": 50304,
           "use_parallel_residual": false)");
    CHECK(seq.residual == Residual::kSequential);
    CHECK(sim::parameter_count(seq) == 1'011'781'632);
  }

  TEST_CASE("falcon: MQA with one shared LayerNorm, both config generations") {
    const sim::ModelConfig m = sim_io::load_model("falcon-7b", kDirs);
    CHECK(m.kv_heads == 1);
    CHECK(m.heads == 71);
    CHECK(m.head_dim == 64);
    CHECK(m.residual == Residual::kParallelOneNorm);
    CHECK(m.tied_embeddings);
    CHECK_FALSE(m.qkv_bias);
    CHECK_FALSE(m.linear_bias);
    CHECK(m.ffn_hidden == 4 * 4544);
    // RWForCausalLM's config (model_type RefinedWebModel): n_embed, n_layer, n_head
    const sim::ModelConfig rw = hf(
        R"("model_type": "RefinedWebModel", "architectures": ["RWForCausalLM"], "n_embed": 4544,
           "n_layer": 32, "n_head": 71, "multi_query": true, "parallel_attn": true,
           "bias": false, "alibi": false, "vocab_size": 65024)");
    CHECK(rw.family == "falcon");
    CHECK(sim::parameter_count(rw) == 6'921'720'704);
    // Falcon-40B (RefinedWeb): new_decoder_architecture, 8 KV heads, ln_attn and ln_mlp
    const sim::ModelConfig f40 = hf(
        R"("model_type": "RefinedWeb", "n_embed": 8192, "n_layer": 60, "n_head": 128,
           "n_head_kv": 8, "new_decoder_architecture": true, "parallel_attn": true,
           "bias": false, "alibi": false, "vocab_size": 65024)");
    CHECK(f40.kv_heads == 8);
    CHECK(f40.residual == Residual::kParallel);
    // FalconDecoderLayer's modules (no published integer checked here): 60 blocks of
    // qkv 8192 x (128 + 16) x 64, dense 8192^2, 2 x 8192 x 32768, two LayerNorms; tied 65024 x 8192
    CHECK(sim::parameter_count(f40) ==
          60 * (8192LL * 144 * 64 + 8192LL * 8192 + 2 * 8192LL * 32768 + 4 * 8192) +
              65024LL * 8192 + 2 * 8192);
  }

  TEST_CASE("gemma: GeGLU, scaled embeddings, head_dim != h/a, gemma2: four norms, caps, windows") {
    const sim::ModelConfig g = sim_io::load_model("gemma-7b", kDirs);
    CHECK(g.gated_gelu);
    CHECK(g.mlp == sim::MlpKind::kSwiglu);
    CHECK(g.embed_scale);
    CHECK(g.norm_weight_fp32);
    CHECK(g.head_dim == 256);
    CHECK(g.heads * g.head_dim != g.hidden);
    CHECK(g.sub_norms == SubNorms::kPre);
    CHECK(g.tied_embeddings);
    const sim::ModelConfig g2 = sim_io::load_model("gemma-2-9b", kDirs);
    CHECK(g2.sub_norms == SubNorms::kPrePost);
    CHECK(g2.attn_softcap == 50.0);
    CHECK(g2.final_softcap == 30.0);
    CHECK(g2.sliding_window == 4096);
    CHECK(g2.global_every == 2);
    CHECK(g2.activation == sim::Activation::kGeluTanh);
    CHECK(g2.kv_heads == 8);
    // Gemma 3 (text): per-head q/k norms, 5 local : 1 global, no caps by default
    const sim::ModelConfig g3 = hf(
        R"("model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34,
           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
           "intermediate_size": 10240, "vocab_size": 262208, "sliding_window": 1024)");
    CHECK(g3.family == "gemma3");
    CHECK(g3.qk_norm == QkNorm::kPerHead);
    CHECK(g3.global_every == 6);
    CHECK(g3.attn_softcap == 0.0);
    CHECK(g3.local_rope_tables);
    // Gemma3DecoderLayer's modules (no published integer checked here): 34 blocks of
    // q 2560 x 2048, k and v 2560 x 1024, o 2048 x 2560, 3 x 2560 x 10240, four norms and two
    // head norms of 256; 262208 x 2560 tied; the final norm
    CHECK(sim::parameter_count(g3) ==
          34 * (2560LL * 4096 + 2048LL * 2560 + 3 * 2560LL * 10240 + 4 * 2560 + 2 * 256) +
              262208LL * 2560 + 2560);
  }

  TEST_CASE("phi3: fused qkv_proj and gate_up_proj, olmo2: q/k norms on the projections") {
    const sim::ModelConfig p = sim_io::load_model("phi-3-mini-4k", kDirs);
    CHECK(p.fused_qkv);
    CHECK(p.fused_gate_up);
    CHECK(p.head_dim == 96);
    CHECK(p.rotary_dim == 0);
    const sim::ModelConfig o = sim_io::load_model("olmo-2-7b", kDirs);
    CHECK(o.qk_norm == QkNorm::kFull);
    CHECK(o.sub_norms == SubNorms::kPost);
    CHECK(o.norm_weight_fp32);
    CHECK_FALSE(o.tied_embeddings);
  }

  TEST_CASE("fields that change the model and are not modeled: one line naming them") {
    CHECK(refusal(R"("model_type": "falcon", "alibi": true)") ==
          "hf/config.json: alibi: not supported yet: ALiBi position biases (falcon)");
    CHECK(refusal(R"("model_type": "falcon", "apply_residual_connection_post_layernorm": true)")
              .find("apply_residual_connection_post_layernorm: not supported yet") !=
          std::string::npos);
    CHECK(refusal(R"("model_type": "gpt_neox", "hidden_act": "relu")") ==
          "hf/config.json: hidden_act: not supported yet: hidden_act relu (gpt_neox)");
    CHECK(refusal(R"("model_type": "gemma2", "hidden_activation": "silu")") ==
          "hf/config.json: hidden_activation: not supported yet: hidden_activation silu (gemma2)");
    CHECK(refusal(R"("model_type": "olmo2", "attention_bias": true)") ==
          "hf/config.json: attention_bias: not supported yet: attention biases (olmo2)");
    CHECK(refusal(R"("model_type": "gpt_neox", "rotary_pct": 0)") ==
          "hf/config.json: rotary_pct: must be in (0, 1]");
    CHECK(refusal(R"("model_type": "phi3", "num_attention_heads": 32, "num_key_value_heads": 5)")
              .find("num_key_value_heads") != std::string::npos);
    // Fields that change neither memory nor time are ignored (rope bases, eps, scalings).
    CHECK_NOTHROW(hf(R"("model_type": "gemma2", "query_pre_attn_scalar": 144,
                        "rope_theta": 1e6, "rms_norm_eps": 1e-5, "cache_implementation": "hybrid")"));
  }

  TEST_CASE("the graphs hold exactly the loader's parameters, for every family") {
    const sim::Device dev = fixtures::h100();
    for (const char* name : kShipped) {
      CAPTURE(name);
      const sim::ModelConfig m = sim_io::load_model(name, kDirs);
      const sim::Graph g = sim::build_graph(m, setup(1, 128, sim::AttentionKind::kFlash), dev);
      CHECK(g.params_per_rank == sim::parameter_count(m));
      CHECK(g.n_blocks == m.layers);
    }
  }

  TEST_CASE("full checkpointing lowers the activations per layer, for every family and kernel") {
    const sim::Device dev = fixtures::h100();
    for (const char* name : kShipped) {
      for (const auto att : {sim::AttentionKind::kFlash, sim::AttentionKind::kStandard}) {
        CAPTURE(name);
        const sim::ModelConfig m = sim_io::load_model(name, kDirs);
        const sim::TrainSetup s = setup(1, 512, att);
        const sim::Result none = sim::simulate(m, s, dev, sim::parse_strategy("none"));
        const sim::Result full = sim::simulate(m, s, dev, sim::parse_strategy("full"));
        CHECK(full.activation_bytes_per_layer < none.activation_bytes_per_layer / 4);
        CHECK(full.peak_requested_bytes <= none.peak_requested_bytes);
        // what full keeps per layer: the block input, the fp32 residual stream [b*s, h]
        CHECK(full.activation_bytes_per_layer == 512 * m.hidden * 4);
      }
    }
  }

  TEST_CASE("parallel residual: NeoX's two norms and adds, Falcon's one shared LayerNorm") {
    const sim::Device dev = fixtures::h100();
    const sim::TrainSetup s = setup(1, 128, sim::AttentionKind::kFlash);
    const sim::ModelConfig p = sim_io::load_model("pythia-410m", kDirs);
    const sim::Graph gp = sim::build_graph(p, s, dev);
    CHECK(count(gp, "mlp + attention") == 24);
    CHECK(count(gp, "norm2") == 24);
    CHECK(count(gp, "residual 1") == 0);
    const sim::ModelConfig f = sim_io::load_model("falcon-7b", kDirs);
    const sim::Graph gf = sim::build_graph(f, s, dev);
    CHECK(count(gf, "attention + mlp") == 32);
    CHECK(count(gf, "norm1") == 32);
    CHECK(count(gf, "norm2") == 0);
  }

  TEST_CASE("partial rotary: tables rotary_dim wide, a slice and a cat per q and k") {
    const sim::Device dev = fixtures::h100();
    const sim::ModelConfig p = sim_io::load_model("pythia-1b", kDirs);
    const sim::Graph g = sim::build_graph(p, setup(2, 128, sim::AttentionKind::kFlash), dev);
    CHECK(count(g, "rotary cat") == 2 * 16);
    CHECK(count(g, "rotary slice") == 2 * 16);
    // the rope op saves cos and sin: fp32 (the residual's dtype under autocast) [b, s, 64] each
    CHECK(saved_bytes(g, "rope q", 0) == 2 * 2 * 128 * 64 * 4);
  }

  TEST_CASE("gemma 2: soft-capping saves its tanh, SDPA's masks, four norms per block") {
    const sim::Device dev = fixtures::h100();
    const sim::ModelConfig m = sim_io::load_model("gemma-2-9b", kDirs);
    const int64_t b = 1, s = 256;
    const sim::Graph eager = sim::build_graph(m, setup(b, s, sim::AttentionKind::kStandard), dev);
    // scores / 50, tanh, * 50: tanh saves its bf16 output [b, a, s, s]
    CHECK(saved_bytes(eager, "softcap tanh", 3) == b * 16 * s * s * 2);
    // the logits: tanh of [b*s, v] bf16
    CHECK(saved_bytes(eager, "softcap tanh", -1) == b * s * 256000 * 2);
    CHECK(count(eager, "post-attention norm") == 42);
    CHECK(count(eager, "pre-feedforward norm") == 42);
    CHECK(count(eager, "sliding window mask") == 0);  // eager: a transient, not modeled
    // SDPA: a 4-D additive mask (fp32, the embeddings' dtype) is passed, so the
    // memory-efficient kernel saves it; even (sliding) layers make and save their own.
    const sim::Graph sdpa = sim::build_graph(m, setup(b, s, sim::AttentionKind::kFlash), dev);
    CHECK(count(sdpa, "sliding window mask") == 21);
    CHECK(count(sdpa, "sliding window mask", 0) == 1);
    CHECK(count(sdpa, "sliding window mask", 1) == 0);
    CHECK(count(sdpa, "4-D causal mask") == 1);
    // hfimpl (issue 10): with a mask, sdpa_attention_forward repeats K and V to 16 heads
    // (use_gqa_in_sdpa is false), and autocast casts each layer's fp32 mask to a bf16
    // [b, 1, s, s] copy, which is what SDPA saves (blocks_hfmask.cpp)
    const int64_t qkvo = b * s * (16 + 16 + 16 + 16) * 256 * 2, lse = b * 16 * s * 4;
    CHECK(saved_bytes(sdpa, "sdpa attention (mask)", 0) == qkvo + lse + b * s * s * 2);
    CHECK(saved_bytes(sdpa, "sdpa attention (mask)", 1) == qkvo + lse + b * s * s * 2);
    // Gemma 1 runs flash (no mask: HF ignores the causal mask under SDPA without padding)
    const sim::ModelConfig g1 = sim_io::load_model("gemma-7b", kDirs);
    const sim::Graph f1 = sim::build_graph(g1, setup(b, s, sim::AttentionKind::kFlash), dev);
    CHECK(count(f1, "flash attention") == 28);
    CHECK(count(f1, "embedding * sqrt(h)") == 1);
  }

  TEST_CASE("phi-3: SDPA gets a mask from the sliding window on (seq >= 2047), flash below") {
    const sim::Device dev = fixtures::h100();
    const sim::ModelConfig m = sim_io::load_model("phi-3-mini-4k", kDirs);
    const sim::Graph below = sim::build_graph(m, setup(1, 2046, sim::AttentionKind::kFlash), dev);
    CHECK(count(below, "flash attention") == 32);
    const sim::Graph at = sim::build_graph(m, setup(1, 2047, sim::AttentionKind::kFlash), dev);
    CHECK(count(at, "sdpa attention (mask)") == 32);
    CHECK(count(at, "gate_up chunk") == 32);
  }

  TEST_CASE("olmo 2: q/k norms on the projections, norms after the sub-layers only") {
    const sim::Device dev = fixtures::h100();
    const sim::ModelConfig m = sim_io::load_model("olmo-2-7b", kDirs);
    const sim::Graph g = sim::build_graph(m, setup(1, 128, sim::AttentionKind::kFlash), dev);
    CHECK(count(g, "q norm") == 32);
    CHECK(count(g, "k norm") == 32);
    CHECK(count(g, "post-attention norm") == 32);
    CHECK(count(g, "input norm") == 0);
  }

  TEST_CASE("implementations without these families refuse them with one line") {
    const sim::Device dev = fixtures::h100();
    for (const char* name : kShipped) {
      CAPTURE(name);
      const sim::ModelConfig m = sim_io::load_model(name, kDirs);
      for (const sim::Impl impl : {sim::Impl::kMegatron, sim::Impl::kTorchtitan, sim::Impl::kNanogpt}) {
        sim::TrainSetup s = setup(1, 128, sim::AttentionKind::kFlash);
        s.impl = impl;
        CHECK_THROWS_WITH_AS(sim::build_graph(m, s, dev),
                             doctest::Contains("family under --impl"), sim::Unsupported);
      }
    }
  }
}
