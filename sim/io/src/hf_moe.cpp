// moe (issue 13): HuggingFace configs of mixture-of-experts and MLA models. Keys and defaults
// follow the transformers configuration classes (configuration_mixtral.py,
// configuration_qwen2_moe.py, configuration_deepseek_v2.py); a key that changes the model and is
// not modeled is refused with one line naming it.
#include <string>

#include "hf_config.hpp"
#include "sim/error.hpp"

namespace sim_io::detail {
namespace {


// Router keys every family shares. output_router_logits adds HF's load_balancing_loss_func over
// every layer's logits (MixtralForCausalLM.forward): the auxiliary loss as the trainer computes it.
void router(const ObjectReader& in, sim::ModelConfig& m, std::string_view experts_key,
            const std::string& type) {
  m.experts = size(in, experts_key);
  m.experts_per_token = size(in, "num_experts_per_tok");
  if (m.experts_per_token > m.experts)
    in.fail("num_experts_per_tok", "exceeds " + std::string(experts_key) + " (" +
                                       std::to_string(m.experts) + ")");
  if (in.number_or("router_jitter_noise", 0.0) != 0.0)
    refuse(in, "router_jitter_noise", "router jitter noise (" + type + ")");
  m.aux_loss = in.boolean_or("output_router_logits", false);
}

// MixtralConfig: Mistral's attention, every MLP replaced by num_local_experts SwiGLU experts of
// intermediate_size, top-k weights renormalized (MixtralSparseMoeBlock).
sim::ModelConfig mixtral(const ObjectReader& in) {
  sim::ModelConfig m = llama_like(in, "mixtral");
  router(in, m, "num_local_experts", "mixtral");
  m.expert_ffn = m.ffn_hidden;
  m.norm_topk = true;
  return m;
}

// Qwen2MoeConfig: Qwen2's attention (q/k/v biases), routed experts of moe_intermediate_size, one
// shared expert of shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate(x)).
sim::ModelConfig qwen2_moe(const ObjectReader& in) {
  sim::ModelConfig m = llama_like(in, "qwen2_moe");
  m.qkv_bias = true;
  router(in, m, "num_experts", "qwen2_moe");
  m.expert_ffn = size(in, "moe_intermediate_size");
  m.shared_ffn = in.has("shared_expert_intermediate_size")
                     ? size(in, "shared_expert_intermediate_size")
                     : 0;
  m.shared_gate = m.shared_ffn > 0;
  m.norm_topk = in.boolean_or("norm_topk_prob", false);
  if (in.integer_or("decoder_sparse_step", 1) != 1)
    refuse(in, "decoder_sparse_step", "MoE on every k-th layer only (qwen2_moe)");
  if (in.has("mlp_only_layers") && !in.json().at("mlp_only_layers").empty())
    refuse(in, "mlp_only_layers", "dense MLPs on listed layers (qwen2_moe)");
  if (in.boolean_or("use_sliding_window", false))
    refuse(in, "use_sliding_window", "sliding-window attention (qwen2_moe)");
  return m;
}

// DeepseekV2Config: MLA attention, the first first_k_dense_replace layers dense (intermediate_
// size), the rest n_routed_experts of moe_intermediate_size and n_shared_experts shared ones as
// one MLP of n_shared_experts x moe_intermediate_size (DeepseekV2MoE).
sim::ModelConfig deepseek_v2(const ObjectReader& in) {
  sim::ModelConfig m = llama_like(in, "deepseek_v2");
  router(in, m, "n_routed_experts", "deepseek_v2");
  m.expert_ffn = size(in, "moe_intermediate_size");
  m.shared_ffn = m.expert_ffn * in.integer_or("n_shared_experts", 0);
  if (m.shared_ffn < 0) in.fail("n_shared_experts", "must not be negative");
  m.norm_topk = in.boolean_or("norm_topk_prob", false);
  m.dense_layers = in.integer_or("first_k_dense_replace", 0);
  if (m.dense_layers < 0 || m.dense_layers > m.layers)
    in.fail("first_k_dense_replace", "must be between 0 and num_hidden_layers");
  if (in.integer_or("moe_layer_freq", 1) != 1)
    refuse(in, "moe_layer_freq", "MoE on every k-th layer only (deepseek_v2)");
  const std::string scoring = in.string_or("scoring_func", "softmax");
  if (scoring != "softmax") refuse(in, "scoring_func", "router scoring " + scoring + " (deepseek_v2)");
  const std::string topk = in.string_or("topk_method", "greedy");
  if (topk != "greedy" && topk != "group_limited_greedy")
    refuse(in, "topk_method", "top-k method " + topk + " (deepseek_v2)");
  // etp (issue 13): group-limited routing and the routed scaling factor
  // (DeepseekV2MoEGate / route_tokens_to_experts; configuration_deepseek_v2.py defaults)
  if (topk == "group_limited_greedy") {
    m.router_groups = size(in, "n_group");
    m.router_group_topk = size(in, "topk_group");
    if (m.experts % m.router_groups != 0)
      in.fail("n_group", "does not divide n_routed_experts (" + std::to_string(m.experts) + ")");
    if (m.router_group_topk > m.router_groups)
      in.fail("topk_group", "exceeds n_group (" + std::to_string(m.router_groups) + ")");
    if (m.experts_per_token % m.router_group_topk != 0)
      in.fail("topk_group", "does not divide num_experts_per_tok (Megatron's group_limited_topk "
                            "takes topk / group_topk experts per group)");
  }
  m.routed_scaling = in.number_or("routed_scaling_factor", 1.0);
  if (!(m.routed_scaling > 0.0) || !(m.routed_scaling < 1e300))
    in.fail("routed_scaling_factor", "must be a positive number");
  // DeepSeek's sequence-wise auxiliary loss (MoEGate, aux_loss_alpha > 0 in training) is
  // computed from the router's saved fp32 scores: [b, E]-sized terms, modeled with the router.
  m.aux_loss = m.aux_loss || in.number_or("aux_loss_alpha", 0.0) > 0.0;
  // MLA
  m.q_lora_rank = in.integer_or("q_lora_rank", 0);
  if (m.q_lora_rank < 0) in.fail("q_lora_rank", "must not be negative");
  m.kv_lora_rank = size(in, "kv_lora_rank");
  const int64_t nope = size(in, "qk_nope_head_dim");
  m.qk_rope_dim = size(in, "qk_rope_head_dim");
  m.v_head_dim = size(in, "v_head_dim");
  m.head_dim = nope + m.qk_rope_dim;
  m.kv_heads = m.heads;
  return m;
}

}  // namespace

std::optional<sim::ModelConfig> model_from_hf_moe(const ObjectReader& in, const std::string& type) {
  if (type == "mixtral") return mixtral(in);
  if (type == "qwen2_moe") return qwen2_moe(in);
  if (type == "deepseek_v2") return deepseek_v2(in);
  return std::nullopt;
}

}  // namespace sim_io::detail
