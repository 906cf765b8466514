// huggingface/transformers: the modeling code of each HF family as the Trainer runs it (CUDA
// autocast bf16 over fp32 weights; SDPA attention by default). Op rows with their upstream files
// and commits: docs/memory-model.md, "hf".
#include "rows.hpp"

#include "sim/graph.hpp"

namespace sim::impl_rows {

ImplSpec hf() {
  ImplSpec s;
  s.id = Impl::kHf;
  s.name = "hf";
  s.code = "huggingface/transformers";
  // modeling_gpt2.py @ c44b2d9976e8, modeling_llama.py @ 5dd4a63548857 (v4.48 era),
  // modeling_bert.py, integrations/sdpa_attention.py @ 00c238bd242b
  s.version = "transformers v4.48 (modeling_gpt2.py @ c44b2d99, modeling_llama.py @ 5dd4a635)";
  // famdec (issue 12): modeling_gpt_neox.py, modeling_falcon.py, modeling_gemma.py,
  // modeling_gemma2.py, modeling_gemma3.py (text), modeling_phi3.py, modeling_olmo2.py;
  // famenc: modeling_t5.py, modeling_vit.py (blocks_encdec.cpp);
  // moe (issue 13): modeling_mixtral.py, modeling_qwen2_moe.py, modeling_deepseek_v2.py
  s.families =
      "gpt2 llama mistral qwen2 bert gpt_neox falcon gemma gemma2 gemma3 phi3 olmo2 "
      "t5 vit mixtral qwen2_moe deepseek_v2";
  s.moe = MoeDispatch::kHfLoop;  // moe: docs/memory-model.md "Mixture of experts"
  s.mla = true;  // modeling_deepseek_v2.py @ 0233e509 DeepseekV2Attention under SDPA
  // The Trainer's --bf16: torch.autocast(bf16) over fp32 parameters (trainer.py autocast_smart_
  // context_manager); attn_implementation defaults to "sdpa" (modeling_utils.py
  // _autoset_attn_implementation), whose kernel is flash when no mask is passed.
  s.precision = Precision::kBf16Amp;
  s.attention = AttentionKind::kFlash;
  // time (issue 11): SDPA (integrations/sdpa_attention.py @ 00c238bd242b calls
  // F.scaled_dot_product_attention, is_causal without a padding mask): the flash backend, FA2.
  s.attention_kernel = KernelChoice::kFlashAttention2;
  s.dropout = DropoutDefault::kConfig;
  s.checkpoint = CheckpointApi::kNonReentrant;
  s.qkv = QkvVariant::kArchitecture;
  s.eager_matmul = EagerMatmul::kCopies;
  // modeling_bert.py @ 8ec58104, modeling_gpt2.py @ c44b2d99, modeling_llama.py @ 5dd4a635:
  // *ForCausalLM / GPT2LMHeadModel, BertForMaskedLM, *ForSequenceClassification,
  // *ForTokenClassification (sim_io hf_heads.cpp)
  s.heads = "causal-lm masked-lm sequence-classification token-classification";
  // Eager attention scales its scores with a separate op, a new [b, a, s, s] tensor that saves
  // only the scalar: modeling_gpt2.py @ c44b2d99 `attn_weights / torch.full([], d ** 0.5)` (a
  // 0-dim device tensor: DivBackward0 saves it, a few bytes, not modeled), modeling_llama.py
  // @ 5dd4a635 eager_attention_forward `matmul(q, k^T) * scaling`, modeling_bert.py @ 8ec58104
  // `attention_scores / math.sqrt(d)` (implhf)
  s.attn_scale = AttnScale::kMulScalar;
  s.gelu = GeluVariant::kConfig;  // modeling_gpt2.py GPT2MLP: ACT2FN[config.activation_function]
  // feat: PEFT (huggingface/peft tuners/lora/layer.py, bnb.py @ 5d602fdb) runs on this code.
  s.lora = true;
  // hfimpl: the tokenizer's attention_mask (--padding) and the modeling files' own masks
  // (GPT-2's per-layer `bias` buffer, Llama's 4-D additive mask): sim/src/blocks_hfmask.cpp
  s.model_masks = true;
  // hfimpl: GPT2LMHeadModel.forward's shift_logits copy, the logits returned in the ModelOutput
  s.model_losses = true;
  s.zero_means = "the Trainer with DeepSpeed ZeRO of that stage (FSDP would shard like ZeRO-3)";
  s.not_modeled = "torch.compile";
  return s;
}

}  // namespace sim::impl_rows
