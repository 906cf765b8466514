// census12 (issue 12): what the census cases of harness/census.py found in the decoder families,
// on the shipped configs: OLMo 2's RMSNorm weight, Falcon's multi_query split and broadcast,
// Falcon's MQA under SDPA (the math kernel), and what stays as it was (Gemma, Falcon's
// new_decoder_architecture).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

const std::vector<fs::path> kDirs = {fs::path(ACTSIM_SOURCE_DIR) / "models"};

sim::Graph graph(const sim::ModelConfig& m, int64_t b, int64_t s, sim::AttentionKind att,
                 double dropout = -1) {
  sim::TrainSetup t;
  t.micro_batch = b;
  t.seq = s;
  t.attention = att;
  if (dropout >= 0) t.dropout = dropout;
  return sim::build_graph(m, t, sim_io::load_device("h100-sxm", kDirs));
}

int count(const sim::Graph& g, std::string_view name) {
  int n = 0;
  for (const sim::Op& op : g.ops) n += op.name == name;
  return n;
}

// Bytes of the storages the ops of block `block` named `name` save.
int64_t saved(const sim::Graph& g, int32_t block, std::string_view name) {
  int64_t total = 0;
  for (const sim::Op& op : g.ops) {
    if (op.block != block || std::string_view(op.name) != name) continue;
    for (const int32_t* p = g.begin(op.saves); p != g.end(op.saves); ++p)
      total += g.storages[static_cast<size_t>(*p)].bytes;
  }
  return total;
}

}  // namespace

TEST_SUITE("census12: decoder families after the census") {
  TEST_CASE("OLMo 2's RMSNorm multiplies its weight in directly, Gemma's makes 1 + w") {
    const sim::ModelConfig olmo = sim_io::load_model("olmo-2-7b", kDirs);
    CHECK(olmo.norm_weight_plain);
    const sim::Graph g = graph(olmo, 1, 64, sim::AttentionKind::kStandard);
    CHECK(count(g, "rmsnorm weight term") == 0);
    CHECK(count(g, "rmsnorm weight") > 0);
    const sim::ModelConfig gemma = sim_io::load_model("gemma-2-9b", kDirs);
    CHECK_FALSE(gemma.norm_weight_plain);
    CHECK(count(graph(gemma, 1, 64, sim::AttentionKind::kStandard), "rmsnorm weight term") > 0);
  }

  TEST_CASE("Falcon multi_query, eager: K/V indexed, broadcast by matmul, no attention dropout") {
    const sim::ModelConfig m = sim_io::load_model("falcon-7b", kDirs);
    CHECK(m.kv_index_split);
    CHECK(m.kv_heads == 1);
    const sim::Graph g = graph(m, 1, 64, sim::AttentionKind::kStandard, 0.1);
    CHECK(count(g, "repeat k") == 0);
    CHECK(count(g, "attention dropout") == 0);  // even with --dropout 0.1
    CHECK(count(g, "dropout_add") == m.layers);  // the hidden dropout stays
    // qk saves q's bf16 copy (autocast) and the broadcast K, both [b, a, s, d] bf16:
    // 2 * (1 * 64 * 4544 * 2) bytes
    const int64_t qd = 1 * 64 * 4544 * 2;
    CHECK(saved(g, 0, "qk") == 2 * qd);
  }

  TEST_CASE("Falcon multi_query under SDPA runs the math kernel (one K/V head, no enable_gqa)") {
    const sim::ModelConfig m = sim_io::load_model("falcon-7b", kDirs);
    const int64_t b = 1, s = 128, a = 71, d = 64;
    const sim::Graph g = graph(m, b, s, sim::AttentionKind::kFlash);
    CHECK(count(g, "flash attention") == 0);
    CHECK(count(g, "sdpa math qk") == m.layers);
    // saved per block: the scaled q and the broadcast K (qk), the bf16 probabilities and the
    // broadcast V (av): 3 [b, s, a*d] bf16 tensors and one [b, a, s, s] bf16 tensor, the
    // probabilities saved by the softmax and av once each as one storage
    const int64_t tok = b * s * a * d * 2, probs = b * a * s * s * 2;
    CHECK(saved(g, 0, "sdpa math qk") == 2 * tok);
    CHECK(saved(g, 0, "sdpa math softmax") == probs);
    CHECK(saved(g, 0, "sdpa math av") == probs + tok);
    // new_decoder_architecture (Falcon-40B/180B): K/V broadcast to every head before SDPA, so
    // the heads match and flash runs
    sim::ModelConfig big = sim_io::parse_model(
        R"({"model_type": "falcon", "hidden_size": 512, "num_attention_heads": 8,
            "num_kv_heads": 2, "new_decoder_architecture": true, "num_hidden_layers": 2,
            "vocab_size": 1000})",
        "hf", "hf/config.json");
    CHECK_FALSE(big.kv_index_split);
    const sim::Graph gb = graph(big, 1, 128, sim::AttentionKind::kFlash);
    CHECK(count(gb, "sdpa math qk") == 0);
    CHECK(count(gb, "flash attention") == 2);
  }

  // Gemma 3 1B (google/gemma-3-1b-it, Gemma3ForCausalLM, text only): its config.json as published
  // (the same fields appear in public copies, e.g. the GEMMA3_CONFIG test fixtures of several
  // GitHub projects found through the code index; softcappings null there, left out here as
  // Gemma 3 has none). The published count, 999,885,952, is keras-team/keras-hub
  // keras_hub/src/models/gemma3/gemma3_presets.py ("gemma3_1b" and "gemma3_instruct_1b":
  // "params": 999885952; its gemma_7b_en reads 8,537,680,896, the count gemma-7b has here) and
  // the Hub's safetensors total for google/gemma-3-1b-it.
  TEST_CASE("Gemma 3 1B: the published config loads to the published 999,885,952 parameters") {
    const sim::ModelConfig m = sim_io::parse_model(
        R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
            "attention_dropout": 0.0, "bos_token_id": 2, "cache_implementation": "hybrid",
            "eos_token_id": [1, 106], "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
            "initializer_range": 0.02, "intermediate_size": 6912,
            "max_position_embeddings": 32768, "model_type": "gemma3_text",
            "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
            "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
            "rope_local_base_freq": 10000, "rope_theta": 1000000, "sliding_window": 512,
            "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
            "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})",
        "hf", "gemma-3-1b-it/config.json");
    CHECK(m.family == "gemma3");
    CHECK(sim::parameter_count(m) == 999'885'952);
    // five local layers to one global: blocks 5, 11, 17, 23 attend globally
    CHECK(m.global_every == 6);
    CHECK(m.sliding_window == 512);
    const sim::Graph g = graph(m, 1, 1024, sim::AttentionKind::kFlash);
    CHECK(g.n_blocks == 26);
    CHECK(count(g, "sliding window mask") == 26 - 4);
  }
}
