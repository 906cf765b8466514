// Parameter counts of MoE and MLA blocks (moe, issue 13), term by term as the HF modeling code
// creates the modules:
//   MixtralSparseMoeBlock (modeling_mixtral.py @ 00d4b3d2): gate Linear(h, E, bias=False), E
//     experts of w1, w3 (h -> f) and w2 (f -> h), no biases.
//   Qwen2MoeSparseMoeBlock (modeling_qwen2_moe.py): the same router and experts, a shared
//     Qwen2MoeMLP of shared_expert_intermediate_size and shared_expert_gate Linear(h, 1).
//   DeepseekV2MoE (modeling_deepseek_v2.py): the router's weight [E, h], routed experts of
//     moe_intermediate_size, shared experts as one MLP of moe_intermediate_size x n_shared_experts.
//   DeepseekV2Attention: q_proj (or q_a_proj, q_a_layernorm, q_b_proj), kv_a_proj_with_mqa
//     (h -> kv_lora_rank + qk_rope_head_dim), kv_a_layernorm, kv_b_proj (kv_lora_rank ->
//     heads x (qk_nope_head_dim + v_head_dim)), o_proj (heads x v_head_dim -> h).
// ../shared/hf-configs' published totals are asserted in tests/test_moe.cpp.
#include "model_moe.hpp"

#include <string>

#include "sim/error.hpp"
#include "sim/units.hpp"

namespace sim::detail {
namespace {

constexpr const char* kF = "params";

int64_t norm_params(const ModelConfig& m) { return m.norm_bias ? 2 * m.hidden : m.hidden; }

}  // namespace

void validate_moe(const ModelConfig& m) {
  auto positive = [&](int64_t v, const char* field) {
    if (v <= 0)
      throw ConfigError(m.source, field, "must be a positive integer, got " + std::to_string(v));
  };
  if (m.experts < 0) throw ConfigError(m.source, "experts", "must not be negative");
  if (m.experts > 0) {
    positive(m.experts_per_token, "experts_per_token");
    positive(m.expert_ffn, "expert_ffn");
    if (m.experts_per_token > m.experts)
      throw ConfigError(m.source, "experts_per_token",
                        std::to_string(m.experts_per_token) + " exceeds the " +
                            std::to_string(m.experts) + " routed experts");
    if (m.mlp != MlpKind::kSwiglu)
      throw ConfigError(m.source, "mlp", "experts are SwiGLU MLPs");
    if (m.dense_layers < 0 || m.dense_layers > m.layers)
      throw ConfigError(m.source, "dense_layers", "must be between 0 and the number of layers");
    if (m.shared_ffn < 0) throw ConfigError(m.source, "shared_ffn", "must not be negative");
  }
  if (m.kv_lora_rank < 0 || m.q_lora_rank < 0)
    throw ConfigError(m.source, "kv_lora_rank", "must not be negative");
  if (m.kv_lora_rank > 0) {
    positive(m.qk_rope_dim, "qk_rope_dim");
    positive(m.v_head_dim, "v_head_dim");
    if (m.qk_rope_dim >= m.head_dim || m.qk_rope_dim % 2 != 0)
      throw ConfigError(m.source, "qk_rope_dim",
                        "must be even and smaller than head_dim (qk_nope + qk_rope)");
    if (m.kv_heads != m.heads)
      throw ConfigError(m.source, "kv_heads", "MLA projects keys and values for every head");
  }
}

int64_t attention_parameter_count(const ModelConfig& m) {
  const int64_t h = m.hidden, a = m.heads, d = m.head_dim;
  if (!is_mla(m)) {
    const int64_t qkv_out = checked_mul(checked_add(a, 2 * m.kv_heads, kF), d, kF);
    int64_t p = checked_mul(h, qkv_out, kF);
    if (m.qkv_bias) p = checked_add(p, qkv_out, kF);
    p = checked_add(p, checked_mul(checked_mul(a, d, kF), h, kF), kF);
    if (m.linear_bias) p = checked_add(p, h, kF);
    return p;
  }
  const int64_t bias = m.qkv_bias ? 1 : 0;  // attention_bias: q_a_proj, kv_a, o_proj (not q_proj)
  const int64_t qn = checked_mul(a, d, kF), r = m.kv_lora_rank, rope = m.qk_rope_dim;
  const int64_t nope = d - rope, vd = m.v_head_dim;
  int64_t p = 0;
  if (m.q_lora_rank == 0) {
    p = checked_mul(h, qn, kF);  // q_proj: bias=False (modeling_deepseek_v2.py @ 0233e509)
  } else {
    const int64_t ql = m.q_lora_rank;
    p = checked_product({h, ql}, kF) + bias * ql + ql + checked_mul(ql, qn, kF);
  }
  p = checked_add(p, checked_mul(h, r + rope, kF) + bias * (r + rope), kF);  // kv_a_proj_with_mqa
  p = checked_add(p, r, kF);                                                // kv_a_layernorm
  p = checked_add(p, checked_product({r, a, nope + vd}, kF), kF);           // kv_b_proj
  p = checked_add(p, checked_product({a, vd, h}, kF) + bias * h, kF);       // o_proj
  return p;
}

int64_t mlp_parameter_count(const ModelConfig& m, bool moe_block) {
  const int64_t h = m.hidden;
  if (!moe_block) {
    const int64_t in = m.mlp == MlpKind::kSwiglu ? 2 : 1;
    int64_t p = checked_product({in + 1, h, m.ffn_hidden}, kF);
    if (m.linear_bias) p = checked_add(p, in * m.ffn_hidden + h, kF);
    return p;
  }
  int64_t p = checked_mul(m.experts, h, kF);                                      // router
  p = checked_add(p, checked_product({m.experts, 3, h, m.expert_ffn}, kF), kF);   // experts
  p = checked_add(p, checked_product({3, h, m.shared_ffn}, kF), kF);              // shared
  if (m.shared_gate) p = checked_add(p, h, kF);
  return p;
}

int64_t moe_blocks_parameter_count(const ModelConfig& m) {
  const int64_t block = checked_add(attention_parameter_count(m), 2 * norm_params(m), kF);
  const int64_t dense = is_moe(m) ? m.dense_layers : m.layers;
  int64_t total = checked_mul(checked_add(block, mlp_parameter_count(m, false), kF), dense, kF);
  if (is_moe(m))
    total = checked_add(total,
                        checked_mul(checked_add(block, mlp_parameter_count(m, true), kF),
                                    m.layers - dense, kF),
                        kF);
  return total;
}

int64_t moe_blocks_vector_count(const ModelConfig& m) {
  const int64_t h = m.hidden, a = m.heads, d = m.head_dim;
  int64_t block = 2 * norm_params(m);
  if (is_mla(m)) {
    block += m.kv_lora_rank + m.q_lora_rank;  // kv_a_layernorm, q_a_layernorm
    if (m.qkv_bias) block += (m.q_lora_rank > 0 ? m.q_lora_rank : 0) + m.kv_lora_rank +
                             m.qk_rope_dim + h;
  } else {
    if (m.qkv_bias) block += (a + 2 * m.kv_heads) * d;
    if (m.linear_bias) block += h;
  }
  const int64_t dense = is_moe(m) ? m.dense_layers : m.layers;
  const int64_t dense_mlp_bias =
      m.linear_bias ? (m.mlp == MlpKind::kSwiglu ? 2 : 1) * m.ffn_hidden + h : 0;
  return (block + dense_mlp_bias) * dense + block * (m.layers - dense);
}

}  // namespace sim::detail
