// famdec (issue 12): the decoder families GPT-NeoX (Pythia), Falcon, Gemma 1/2/3, Phi-3 and
// OLMo 2 -- their HF configs as ModelConfig, the published parameter counts
// (shared hf-configs README: unique trainable parameters, tied weights once, no buffers), the
// refusals of fields that change the model and are not modeled, and the graphs they build.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "sim/model.hpp"
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
                          Case{"llama-3-8b", "llama", 8'030'261'248}}) {
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

  TEST_CASE("falcon: MQA with one shared LayerNorm; both config generations") {
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

  TEST_CASE("gemma: GeGLU, scaled embeddings, head_dim != h/a; gemma2: four norms, caps, windows") {
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

  TEST_CASE("phi3: fused qkv_proj and gate_up_proj; olmo2: q/k norms on the projections") {
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
}
