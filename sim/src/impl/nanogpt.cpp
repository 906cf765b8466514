// karpathy/nanoGPT model.py and train.py: GPT-2 with or without biases under CUDA autocast bf16
// over fp32 weights, SDPA (flash) where PyTorch has it. Op rows: docs/memory-model.md, "nanogpt".
#include "rows.hpp"

#include "sim/graph.hpp"

namespace sim::impl_rows {

ImplSpec nanogpt() {
  ImplSpec s;
  s.id = Impl::kNanogpt;
  s.name = "nanogpt";
  s.code = "karpathy/nanoGPT";
  s.version = "model.py @ 3adf61e154c3";
  s.families = "gpt2 megatron-gpt";
  // train.py:73-74 dtype 'bfloat16' under torch.amp.autocast (train.py:112); model.py:56-64
  // F.scaled_dot_product_attention(is_causal=True) when torch has it.
  s.precision = Precision::kBf16Amp;
  s.attention = AttentionKind::kFlash;
  // time (issue 11): F.scaled_dot_product_attention(is_causal=True): the flash backend, FA2.
  s.attention_kernel = KernelChoice::kFlashAttention2;
  s.dropout = DropoutDefault::kZero;  // train.py:55 dropout = 0.0
  s.checkpoint = CheckpointApi::kNonReentrant;
  s.qkv = QkvVariant::kFused;  // model.py:56 one c_attn
  s.eager_matmul = EagerMatmul::kCopies;  // model.py:67, 71 `@` on transposed views
  s.attn_scale = AttnScale::kMulScalar;    // model.py:67
  s.causal_mask = CausalMaskKind::kBlockF32Eq;  // model.py:49-50, 68
  s.logits = LogitsLifetime::kStep;        // train.py:299-314 keeps `logits`
  s.gelu = GeluVariant::kFused;            // model.py:83 nn.GELU()
  s.param_groups = ParamGroups::kDecayNoDecay;  // model.py configure_optimizers: dim >= 2 decays
  // model.py:45 takes the slow path exactly when torch lacks SDPA (torch < 2.0), whose foreach
  // AdamW adds eps out of place; with SDPA (torch >= 2.0) the modeled release is current torch.
  s.foreach_eps_eager = ForeachEps::kOutOfPlace;
  // feat: HF PEFT's LoRA wraps any nn.Linear by module name (LoraConfig target_modules), so it
  // runs on nanoGPT's model.py as is (validation/real-code/nanogpt-lora.csv).
  s.lora = true;
  s.zero_means = "DDP (train.py); ZeRO is not in nanoGPT: modeled as torch's ZeroRedundancyOptimizer";
  s.not_modeled = "torch.compile (train.py's default compile=True)";
  // --- implver ---
  s.version_key = "3adf61e";
  // model.py @ 3adf61e1 configure_optimizers:281-284: fused=True when torch.optim.AdamW takes
  // `fused` (torch >= 2.0) and the device is CUDA. The slow path (--attention standard) means
  // torch < 2.0 (no SDPA): its AdamW has no `fused` and foreach=None means False (torch 1.13
  // adamw.py `if foreach is None: foreach = False`): the single-tensor loop, adam-loop.
  s.optimizer = Optimizer::kAdamFused;
  s.optimizer_eager = Optimizer::kAdamLoop;
  s.optimizer_source =
      "configure_optimizers: fused AdamW on CUDA where torch >= 2.0 has it; the slow path's torch < "
      "2.0 AdamW loops";
  // exec10: train.py @ e2221318 "flush the gradients as soon as we can":
  // `optimizer.zero_grad(set_to_none=True)`, explicit on every torch
  s.set_to_none = true;
  s.set_to_none_source = "train.py's optimizer.zero_grad(set_to_none=True)";
  // native (plan): model.py has no activation checkpointing: every other strategy wraps blocks in
  // torch.utils.checkpoint by code of your own.
  static constexpr NativeAc kNativeAc[] = {{"none", "model.py as it is (no checkpointing)"}};
  s.native_ac = kNativeAc;
  return s;
}

}  // namespace sim::impl_rows
