// Hand-built configs for core tests, so sim tests depend on nothing but sim. The figures are the
// published ones (REFERENCE.md); the shipped JSON files are tested separately in test_load.cpp.
#pragma once

#include <string>

#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace fixtures {

// Korthikanti et al. 2022 Table 5 / worked value: a=96, h=12288, L=96, s=2048, v=51200.
inline sim::ModelConfig gpt3_175b() {
  sim::ModelConfig m;
  m.name = m.source = "gpt3-175b";
  m.family = "megatron-gpt";
  m.layers = 96;
  m.hidden = 12288;
  m.heads = m.kv_heads = 96;
  m.head_dim = 128;
  m.ffn_hidden = 4 * 12288;
  m.vocab = 51200;
  m.max_positions = 2048;
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0.1;
  return m;
}

inline sim::ModelConfig gpt2_small() {
  sim::ModelConfig m;
  m.name = m.source = "gpt2-small";
  m.family = "gpt2";
  m.layers = 12;
  m.hidden = 768;
  m.heads = m.kv_heads = 12;
  m.head_dim = 64;
  m.ffn_hidden = 3072;
  m.vocab = 50257;
  m.max_positions = 1024;
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0.1;
  return m;
}

// A small Llama-style model: GQA, SwiGLU, RMSNorm, rotary, untied.
inline sim::ModelConfig tiny_llama() {
  sim::ModelConfig m;
  m.name = m.source = "tiny-llama";
  m.family = "llama";
  m.layers = 4;
  m.hidden = 256;
  m.heads = 8;
  m.kv_heads = 2;
  m.head_dim = 32;
  m.ffn_hidden = 688;
  m.vocab = 1000;
  m.max_positions = 2048;
  m.mlp = sim::MlpKind::kSwiglu;
  m.norm = sim::NormKind::kRmsNorm;
  m.positions = sim::PosEmbedding::kRope;
  m.tied_embeddings = false;
  m.qkv_bias = m.linear_bias = m.norm_bias = false;
  return m;
}

// polish: what mixtral_shaped and mla_shaped share: 4 Llama-style layers (SwiGLU, RMSNorm
// without bias, rotary positions, untied embeddings, no linear biases); the widths are theirs.
inline sim::ModelConfig swiglu_rope(const char* name, const char* family) {
  sim::ModelConfig m;
  m.name = m.source = name;
  m.family = family;
  m.layers = 4;
  m.mlp = sim::MlpKind::kSwiglu;
  m.norm = sim::NormKind::kRmsNorm;
  m.norm_bias = false;
  m.positions = sim::PosEmbedding::kRope;
  m.tied_embeddings = false;
  m.qkv_bias = m.linear_bias = false;
  return m;
}

// Mixtral-8x7B's shape (models/mixtral-8x7b.json): h 4096, 32 heads, 8 KV heads, 8 experts of
// SwiGLU width 14336, top-2, renormalized; 4 layers (the MoE tests' bytes are per layer). With
// moe = false, its dense twin.
inline sim::ModelConfig mixtral_shaped(bool moe = true) {
  sim::ModelConfig m = swiglu_rope("mixtral-shaped", "mixtral");
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  m.vocab = 32000;
  m.max_positions = 32768;
  if (moe) {
    m.experts = 8;
    m.experts_per_token = 2;
    m.expert_ffn = 14336;
    m.norm_topk = true;
  }
  return m;
}

// A small Megatron GPT (gpt2_small's layout, 4 layers of h 256, 8 heads of 32, f 1024, vocab
// 1000, 256 positions): test_te_norm, test_tece and test_implmt.
inline sim::ModelConfig megatron_gpt_small() {
  sim::ModelConfig m = gpt2_small();
  m.family = "megatron-gpt";
  m.layers = 4;
  m.hidden = 256;
  m.heads = m.kv_heads = 8;
  m.head_dim = 32;
  m.ffn_hidden = 1024;
  m.vocab = 1000;
  m.max_positions = 256;
  return m;
}

// DeepSeek-V2-Lite's attention (h 2048, 16 heads, qk 128 + 64 rope, v 128, kv latent 512, no q
// latent; q_lora > 0 gives DeepSeek-V2's q latent) with a dense SwiGLU, or a Llama attention of
// the same heads and head dim 192.
inline sim::ModelConfig mla_shaped(bool mla, int64_t q_lora = 0) {
  sim::ModelConfig m = swiglu_rope("mla-shaped", mla ? "deepseek_v2" : "llama");
  m.hidden = 2048;
  m.heads = m.kv_heads = 16;
  m.head_dim = 192;
  m.ffn_hidden = 10944;
  m.vocab = 102400;
  m.max_positions = 4096;
  if (mla) {
    m.kv_lora_rank = 512;
    m.qk_rope_dim = 64;
    m.v_head_dim = 128;
    m.q_lora_rank = q_lora;
  }
  return m;
}

// tiny_llama widened so that the GEMMs, not the host, set the step time (the fp8, MFU and LoRA
// timing tests): h 2048, 16 query and 4 K/V heads of 128, SwiGLU 5632.
inline sim::ModelConfig wide_llama() {
  sim::ModelConfig m = tiny_llama();
  m.hidden = 2048;
  m.heads = 16;
  m.kv_heads = 4;
  m.head_dim = 128;
  m.ffn_hidden = 5632;
  return m;
}

// A model at Llama-2-7B's width (h 4096, 32 heads of 128, MHA, SwiGLU 11008), m's depth and
// everything else: QLoRA's 4096 x 4096 linears, bandwidth-bound collectives.
inline sim::ModelConfig llama7b_width(sim::ModelConfig m = tiny_llama()) {
  m.hidden = 4096;
  m.heads = m.kv_heads = 32;
  m.head_dim = 128;
  m.ffn_hidden = 11008;
  return m;
}

// H100 SXM figures of REFERENCE.md.
inline sim::Device h100() {
  sim::Device d;
  d.name = d.source = "h100-test";
  d.sm_arch = 90;
  d.hbm_bytes = 81559LL * 1024 * 1024;
  d.driver_reserved_bytes = 477LL * 1024 * 1024;
  d.cuda_context_bytes = 500LL * 1024 * 1024;
  d.nccl_buffer_bytes = 0;
  d.cublas_workspace_bytes = 32LL * 1024 * 1024;
  d.peak_bf16_flops_per_s = 989e12;
  d.peak_tf32_flops_per_s = 495e12;
  d.peak_fp32_flops_per_s = 67e12;
  d.hbm_bytes_per_s = 3.35e12;
  d.host_link_bytes_per_s = 50e9;
  d.nvlink_bytes_per_s = 450e9;
  d.compute_efficiency = 0.8;
  d.memory_efficiency = 0.9;
  d.launch_overhead_ns = 3000;
  d.sm_count = 132;
  d.host_dispatch_ns = 8000;
  d.internode_bytes_per_s = 50e9;
  return d;
}

inline sim::TrainSetup paper(int64_t t, bool sp) {
  sim::TrainSetup s;
  s.profile = sim::Profile::kPaper;
  s.micro_batch = 1;
  s.seq = 2048;
  s.tp = t;
  s.sp = sp;
  return s;
}

inline sim::Result run(const sim::ModelConfig& m, const sim::TrainSetup& s, const char* strategy) {
  return sim::simulate(m, s, h100(), sim::parse_strategy(strategy));
}

// polish: nanoGPT's GPTConfig with n_layer `layers`, n_head 4, n_embd 256, block_size 256, bias
// on or off (validation/real-code/models/nanogpt-l4-h256-bias.json): test_impl_nanogpt,
// test_lora, test_lora_dropout.
inline sim::ModelConfig nanogpt(int64_t layers = 4, bool bias = true) {
  sim::ModelConfig m = gpt2_small();
  m.name = m.source = "nanogpt";
  m.layers = layers;
  m.hidden = 256;
  m.heads = m.kv_heads = 4;
  m.head_dim = 64;
  m.ffn_hidden = 1024;
  m.vocab = 50304;
  m.max_positions = 256;
  m.qkv_bias = m.linear_bias = m.norm_bias = bias;
  return m;
}
// nanoGPT's slow path (eager attention, fp32), micro-batch 4, seq 256, PEFT LoRA of `rank` on
// `targets` (--lora-targets names) with lora_dropout `dropout`.
inline sim::TrainSetup nanogpt_lora(int64_t rank, const char* targets, double dropout = 0.0) {
  sim::TrainSetup t;
  t.impl = sim::Impl::kNanogpt;
  t.attention = sim::AttentionKind::kStandard;
  t.precision = sim::Precision::kFp32;
  t.micro_batch = 4;
  t.seq = 256;
  t.lora_rank = rank;
  t.lora_targets = *sim::parse_lora_targets(targets);
  t.lora_dropout = dropout;
  return t;
}
// The bytes of a graph's storages of one role.
inline int64_t storage_bytes(const sim::Graph& g, const std::string& role) {
  int64_t n = 0;
  for (const sim::Storage& s : g.storages)
    if (s.role == role) n += s.bytes;
  return n;
}

// polish: the MoE/MLA tests' shared set-ups (test_moetp, test_etp, test_mla5).
// Megatron at --tp (sequence parallel with it, as Megatron's MoE needs), micro-batch 1 unless given.
inline sim::TrainSetup megatron_tp(int64_t tp, int64_t seq = 1024, int64_t etp = 0,
                                   int64_t micro_batch = 1) {
  sim::TrainSetup t;
  t.impl = sim::Impl::kMegatron;
  t.micro_batch = micro_batch;
  t.seq = seq;
  t.tp = tp;
  t.sp = tp > 1;
  t.etp = etp;
  return t;
}
// One layer's activation bytes on the H100.
inline int64_t layer_bytes(const sim::ModelConfig& m, const sim::TrainSetup& t,
                           const char* strategy = "none") {
  return run(m, t, strategy).activation_bytes_per_layer;
}
// The flag whose one-line error refuses m under t, or "(built)" when its graph builds.
inline std::string refused_flag(const sim::ModelConfig& m, const sim::TrainSetup& t) {
  try {
    (void)sim::build_graph(m, t, h100());
  } catch (const sim::ConfigError& e) {
    return e.where();
  }
  return "(built)";
}

}  // namespace fixtures
