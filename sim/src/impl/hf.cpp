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
  s.version = "v4.48";
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
  // modeling_utils.py gradient_checkpointing_enable: `if gradient_checkpointing_kwargs is None:
  // gradient_checkpointing_kwargs = {"use_reentrant": True}` from transformers PR #28538 (v4.38,
  // Jan 2024) until PR #43203 (Jan 2026, v5) switched it to False; the Trainer passes
  // args.gradient_checkpointing_kwargs, None unless set (PR #33208 removed its `{}`, which
  // reached torch's own default, also reentrant). So v4.48's checkpointing is reentrant.
  s.checkpoint = CheckpointApi::kReentrant;
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
  // fam12: eager_attention_forward's softmax(dtype=torch.float32).to(query.dtype)
  // (modeling_llama.py @ 5dd4a635 and its copies; ModelConfig::eager_softmax_fp32)
  s.model_softmax = true;
  s.zero_means =
      "the Trainer with DeepSpeed ZeRO of that stage, --bf16 (deepspeed-bf16: no autocast, bf16 "
      "module, fp32 master and Adam state partitioned; FSDP is not modeled)";
  // hfds (issue 10): under --dp the Trainer runs DeepSpeed, whose bf16 has no autocast:
  // accelerate accelerator.py @ v1.2.1 (403c2074) sets native_amp only when the distributed type
  // is not DEEPSPEED; integrations/deepspeed.py (trainer_config_process) maps --bf16 to
  // `bf16.enabled`, and DeepSpeedEngine._configure_distributed_model (engine.py @ v0.16.2,
  // b344c04d) calls self.module.bfloat16(). Buffers per stage: sim/src/deepspeed.cpp.
  s.dp_precision = Precision::kDeepspeedBf16;
  s.dp_precision_source =
      "the Trainer with DeepSpeed --bf16: no autocast (accelerate), module.bfloat16() "
      "(DeepSpeedEngine)";
  s.not_modeled = "torch.compile";
  // --- implver: this release's key and its Trainer's optimizer ---
  s.version_key = "4.48";
  s.loop_temporaries = 1;  // --optimizer adam-loop here means the Trainer's adamw_hf
  // The modeling file and commit read per family (docs/memory-model.md names each op row's);
  // Mistral and Qwen2 are modeled by Llama's op list; "unpinned": read in a copy not at a commit.
  s.family_sources =
      "gpt2=modeling_gpt2.py@c44b2d99 llama=modeling_llama.py@5dd4a635 "
      "mistral=modeling_llama.py@5dd4a635(Llama's) qwen2=modeling_llama.py@5dd4a635(Llama's) "
      "bert=modeling_bert.py@8ec58104 gpt_neox=modeling_gpt_neox.py@006bd23d "
      "falcon=modeling_falcon.py@00dcc6dd gemma=modeling_gemma.py@0125ac68 "
      "gemma2=modeling_gemma2.py@006e8693 gemma3=modeling_gemma3.py@953196a4 "
      "phi3=modeling_phi3.py(unpinned) olmo2=modeling_olmo2.py@000c33fd "
      "t5=modeling_t5.py@6b8b757d vit=modeling_vit.py@d8b2b23c "
      "mixtral=modeling_mixtral.py@00d4b3d2 qwen2_moe=modeling_qwen2_moe.py(unpinned) "
      "deepseek_v2=modeling_deepseek_v2.py@0233e509";
  // training_args.py (v4.4x) `default_optim = "adamw_torch"`: torch.optim.AdamW with foreach=None,
  // which torch >= 2.0 turns into foreach on CUDA (torch/optim/optimizer.py _default_to_fused_or_
  // foreach). Later releases default to adamw_torch_fused on torch >= 2.8 (not modeled here).
  s.optimizer = Optimizer::kAdamForeach;
  s.optimizer_eager = Optimizer::kAdamForeach;
  s.optimizer_source = "the Trainer's optim=adamw_torch, torch AdamW foreach";
  // exec10: trainer.py @ 000945a9 _inner_training_loop calls `model.zero_grad()` (no argument):
  // nn.Module.zero_grad's default, set_to_none=True since torch 2.0
  s.set_to_none = true;
  s.set_to_none_source = "the Trainer's model.zero_grad(), set_to_none=True on torch >= 2.0";
  // native (plan): TrainingArguments(gradient_checkpointing=True) makes the Trainer call
  // model.gradient_checkpointing_enable(), which turns checkpointing on for every layer of every
  // stack (modeling_utils.py PreTrainedModel.gradient_checkpointing_enable; each model's layer
  // loop checkpoints its layers when self.gradient_checkpointing). Nothing finer is a setting.
  static constexpr NativeAc kNativeAc[] = {
      {"none", "gradient_checkpointing=False (TrainingArguments, the default)"},
      {"full", "gradient_checkpointing=True (TrainingArguments)"}};
  s.native_ac = kNativeAc;
  return s;
}

// implver: the Trainer of early 2022 (transformers 4.15/4.16, torch 1.10), the release the HF
// docs' BERT-large table ran (validation/published/SOURCES.md). What it changes against 4.48:
ImplSpec hf_v4_16() {
  ImplSpec s = hf();
  s.version_key = "4.16";
  s.version = "v4.16 (the Trainer of early 2022)";
  // Only its Trainer defaults are modeled as of 4.16; the op lists are 4.48's eager ones.
  s.family_sources = "bert=modeling_bert.py@8ec58104(eager,as_4.48)";
  // training_args.py of 4.16: `optim` defaults to adamw_hf, transformers' own AdamW
  // (optimization.py AdamW.step: a Python loop over the parameters): actsim's adam-loop.
  s.optimizer = Optimizer::kAdamLoop;
  s.optimizer_eager = Optimizer::kAdamLoop;
  s.optimizer_source = "the Trainer's optim=adamw_hf, a per-parameter loop";
  // No SDPA in 2022: every family's attention is its eager modeling code.
  s.attention = AttentionKind::kStandard;
  // gradient_checkpointing_enable() of 4.16 wraps each layer in torch.utils.checkpoint, whose
  // use_reentrant defaulted to True (torch 1.10).
  s.checkpoint = CheckpointApi::kReentrant;
  // torch 1.x foreach AdamW (when --optimizer adam is asked for) adds eps out of place.
  s.foreach_eps = ForeachEps::kOutOfPlace;
  s.foreach_eps_eager = ForeachEps::kOutOfPlace;
  // exec10: the same `model.zero_grad()` call on torch 1.10, whose nn.Module.zero_grad defaults
  // to set_to_none=False: every .grad is zeroed and kept between steps (HF's BERT V100 table)
  s.set_to_none = false;
  s.set_to_none_source = "the Trainer's model.zero_grad(), set_to_none=False on torch 1.10";
  // hfds: DeepSpeed's bf16 optimizers of v0.16.2 are not those of early 2022: under --dp this
  // release keeps its autocast regime (the Trainer over torch DDP)
  s.dp_precision.reset();
  s.dp_precision_source = {};
  return s;
}

}  // namespace sim::impl_rows
