// moe (issue 13): the MoE and MLA configs of models/ (copies of the published config.json files)
// load with their published parameter counts (../shared/hf-configs/README.md: safetensors index
// total_size / 2 for Mixtral, checkpoint metadata for DeepSeek-V2-Lite, model presets for
// Qwen1.5-MoE), and the keys that change the model and are not modeled are refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"
#include "sim/setup.hpp"
#include "sim/model.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kModels = fs::path(ACTSIM_SOURCE_DIR) / "models";

sim::ModelConfig load(const char* file) { return sim_io::load_model((kModels / file).string(), {}); }

}  // namespace

TEST_SUITE("moe load") {
  TEST_CASE("Mixtral-8x7B: 8 experts, top-2, 46,702,792,704 parameters") {
    const sim::ModelConfig m = load("mixtral-8x7b.json");
    CHECK(m.family == "mixtral");
    CHECK(m.experts == 8);
    CHECK(m.experts_per_token == 2);
    CHECK(m.expert_ffn == 14336);
    CHECK(m.shared_ffn == 0);
    CHECK(m.norm_topk);
    CHECK_FALSE(m.aux_loss);  // output_router_logits false in the published file
    CHECK(sim::parameter_count(m) == 46'702'792'704);
  }

  TEST_CASE("Qwen1.5-MoE-A2.7B: 60 experts, top-4, a gated shared expert, 14,315,784,192") {
    const sim::ModelConfig m = load("qwen1.5-moe-a2.7b.json");
    CHECK(m.family == "qwen2_moe");
    CHECK(m.experts == 60);
    CHECK(m.experts_per_token == 4);
    CHECK(m.expert_ffn == 1408);
    CHECK(m.shared_ffn == 5632);
    CHECK(m.shared_gate);
    CHECK(m.qkv_bias);
    CHECK(sim::parameter_count(m) == 14'315'784'192);
  }

  TEST_CASE("DeepSeek-V2-Lite: MLA, 2 shared experts, 1 dense layer, 15,706,484,224") {
    const sim::ModelConfig m = load("deepseek-v2-lite.json");
    CHECK(m.family == "deepseek_v2");
    CHECK(m.experts == 64);
    CHECK(m.experts_per_token == 6);
    CHECK(m.shared_ffn == 2 * 1408);
    CHECK(m.dense_layers == 1);
    CHECK(m.q_lora_rank == 0);
    CHECK(m.kv_lora_rank == 512);
    CHECK(m.head_dim == 192);
    CHECK(m.qk_rope_dim == 64);
    CHECK(m.v_head_dim == 128);
    CHECK(m.aux_loss);  // aux_loss_alpha 0.001
    CHECK(sim::parameter_count(m) == 15'706'484'224);
    CHECK_FALSE(sim::moe_block(m, 0));
    CHECK(sim::moe_block(m, 1));
  }

  TEST_CASE("the built graph holds exactly the published parameters, under each implementation") {
    const sim::Device dev = sim_io::load_device("h100-sxm", {kModels});
    struct Case {
      const char* file;
      int64_t params;
      std::vector<sim::Impl> impls;
    };
    for (const Case& c : {Case{"mixtral-8x7b.json", 46'702'792'704, {sim::Impl::kHf, sim::Impl::kMegatron}},
                          Case{"qwen1.5-moe-a2.7b.json", 14'315'784'192, {sim::Impl::kHf, sim::Impl::kMegatron}},
                          Case{"deepseek-v2-lite.json", 15'706'484'224, {sim::Impl::kHf}}}) {
      const sim::ModelConfig m = load(c.file);
      for (sim::Impl impl : c.impls) {
        CAPTURE(c.file);
        CAPTURE(static_cast<int>(impl));
        sim::TrainSetup t;
        t.impl = impl;
        t.seq = 64;
        const sim::Graph g = sim::build_graph(m, t, dev);
        CHECK(g.params_per_rank == c.params);
      }
    }
  }

  TEST_CASE("keys that change the model and are not modeled are refused naming the key") {
    auto field_of = [](const std::string& json) {
      try {
        sim_io::parse_model(json, "hf", "hf/config.json");
      } catch (const sim::ConfigError& e) {
        return e.field();
      }
      return std::string("(loaded)");
    };
    const std::string base =
        R"("hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 96, "vocab_size": 100, "max_position_embeddings": 256, )";
    CHECK(field_of("{" + base + R"("model_type": "mixtral", "num_local_experts": 4,
                   "num_experts_per_tok": 2, "router_jitter_noise": 0.1})") ==
          "router_jitter_noise");
    CHECK(field_of("{" + base + R"("model_type": "mixtral", "num_local_experts": 2,
                   "num_experts_per_tok": 3})") == "num_experts_per_tok");
    CHECK(field_of("{" + base + R"("model_type": "qwen2_moe", "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "decoder_sparse_step": 2})") == "decoder_sparse_step");
    CHECK(field_of("{" + base + R"("model_type": "qwen2_moe", "num_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "mlp_only_layers": [0]})") == "mlp_only_layers");
    CHECK(field_of("{" + base + R"("model_type": "deepseek_v2", "n_routed_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32, "kv_lora_rank": 16,
                   "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
                   "moe_layer_freq": 2})") == "moe_layer_freq");
    CHECK(field_of("{" + base + R"("model_type": "deepseek_v2", "n_routed_experts": 4,
                   "num_experts_per_tok": 2, "moe_intermediate_size": 32, "kv_lora_rank": 16,
                   "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
                   "scoring_func": "sigmoid"})") == "scoring_func");
  }

  // etp (issue 13): DeepSeek's router options, read for Megatron's router (blocks_moe_router.cpp)
  TEST_CASE("DeepSeek's group-limited routing and scaling factor are read, bad groups refused") {
    const std::string ds =
        R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 96, "vocab_size": 100, "max_position_embeddings": 256,
            "model_type": "deepseek_v2", "n_routed_experts": 8, "num_experts_per_tok": 4,
            "moe_intermediate_size": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 16, "routed_scaling_factor": 16.0, )";
    const sim::ModelConfig g = sim_io::parse_model(
        ds + R"("topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2})", "hf",
        "hf/config.json");
    CHECK(g.router_groups == 4);
    CHECK(g.router_group_topk == 2);
    CHECK(g.routed_scaling == 16.0);
    // greedy: the groups are not used
    const sim::ModelConfig p =
        sim_io::parse_model(ds + R"("topk_method": "greedy", "n_group": 4, "topk_group": 2})",
                            "hf", "hf/config.json");
    CHECK(p.router_groups == 0);
    // DeepSeek-V2-Lite: greedy, scaling 1.0
    const sim::ModelConfig lite = load("deepseek-v2-lite.json");
    CHECK(lite.router_groups == 0);
    CHECK(lite.routed_scaling == 1.0);
    auto field_of = [&](const std::string& tail) {
      try {
        sim_io::parse_model(ds + tail, "hf", "hf/config.json");
      } catch (const sim::ConfigError& e) {
        return e.field();
      }
      return std::string("(loaded)");
    };
    CHECK(field_of(R"("topk_method": "group_limited_greedy", "n_group": 3, "topk_group": 1})") ==
          "n_group");  // 3 does not divide 8 experts
    CHECK(field_of(R"("topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 3})") ==
          "topk_group");  // 3 does not divide top-4
    CHECK(field_of(R"("topk_method": "group_limited_greedy", "n_group": 2, "topk_group": 4})") ==
          "topk_group");  // more than the groups
    CHECK(field_of(R"("topk_method": "noaux_tc", "n_group": 4, "topk_group": 2})") ==
          "topk_method");  // DeepSeek-V3's: not in HF's deepseek_v2
  }
}
