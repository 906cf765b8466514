// NVIDIA/Megatron-LM, Megatron-Core GPT: bf16 parameters with fp32 main grads, Transformer
// Engine layers by default, tensor/sequence/pipeline parallelism, reentrant recompute.
// Op rows: docs/memory-model.md, "megatron".
#include "rows.hpp"

#include "sim/graph.hpp"

namespace sim::impl_rows {

ImplSpec megatron() {
  ImplSpec s;
  s.id = Impl::kMegatron;
  s.name = "megatron";
  s.code = "NVIDIA/Megatron-LM";
  s.version = "Megatron-Core @ d98e8a64ddf3";
  s.families = "megatron-gpt gpt2 llama mistral qwen2 mixtral qwen2_moe deepseek_v2";  // mla5: deepseek_v2
  s.moe = MoeDispatch::kAllToAll;  // moe: --moe-token-dispatcher-type alltoall, grouped GEMM
  s.precision = Precision::kBf16Mixed;  // --bf16: bf16 params, fp32 main_grad (Float16Module)
  s.attention = AttentionKind::kFlash;  // TE DotProductAttention, attention_backend=auto
  s.dropout = DropoutDefault::kConfig;
  s.checkpoint = CheckpointApi::kReentrant;  // tensor_parallel/random.py CheckpointFunction
  s.qkv = QkvVariant::kFused;                // linear_qkv
  s.eager_matmul = EagerMatmul::kStrided;    // baddbmm on strided views of mixed_qkv
  // implmt: language_module.py compute_language_model_loss -> tensor_parallel.
  // vocab_parallel_cross_entropy at every tp (no --cross-entropy-loss-fusion);
  // dot_product_attention.py (local spec) FusedScaleMaskSoftmax and the global memory buffer;
  // training/vocab_utils.py:58 (multiple = make_vocab_size_divisible_by * tp).
  s.loss = LossVariant::kVocabParallel;
  s.eager_softmax = EagerSoftmax::kMegatronFused;
  s.vocab_multiple = 128;
  s.qk_global_buffer = true;
  s.tensor_parallel = true;
  s.pipeline = true;
  // time (issue 11): TE DotProductAttention picks FusedAttention (cuDNN) over FlashAttention on
  // Hopper and later "for performance reasons" (NVIDIA/TransformerEngine
  // transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend @
  // a0b36d0cd3b7); before Hopper actsim has no cuDNN table and times FA2 (kernels.cpp).
  s.attention_kernel = KernelChoice::kCudnnAttention;
  // feat: context parallelism (Megatron-core's --context-parallel-size: Transformer Engine's
  // AttnFuncWithCPAndKVP2P, transformer_engine/pytorch/attention/dot_product_attention/
  // context_parallel.py @ d0067d0d).
  s.context_parallel = true;
  s.fp8_te = true;  // feat: --fp8 (sim/src/fp8.cpp)
  s.zero_means = "Megatron's distributed optimizer at ZeRO 1, DDP at ZeRO 0";
  s.not_modeled = "FP8, --attention-softmax-in-fp32 above s = 4096";
  // --- implver ---
  s.version_key = "d98e8a6";
  // megatron/core/optimizer/__init__.py @ d98e8a64ddf3:14-21 imports Transformer Engine's
  // FusedAdam (else apex's FusedAdam) as Adam: one multi-tensor kernel, no temporaries beyond the
  // state; under --zero 1 it runs inside DistributedOptimizer (__init__.py:658) on the shard.
  s.optimizer = Optimizer::kAdamFused;
  s.optimizer_eager = Optimizer::kAdamFused;
  s.optimizer_source = "Transformer Engine's FusedAdam, megatron/core/optimizer/__init__.py";
  // exec10: the training loop zeroes the DDP wrapper's contiguous grad buffers in place
  // (zero_grad_buffer) and calls optimizer.zero_grad() (set_to_none=True by default); the fp32
  // main_grad buffers are persistent under bf16-mixed whichever this is
  s.set_to_none = true;
  s.set_to_none_source = "";  // the knob changes nothing the main_grad buffers hold
  // --- mla5 (issue 13): MLASelfAttention under the TE layer spec (gpt_layer_specs.py
  // get_gpt_layer_with_transformer_engine_spec, multi_latent_attention=True, --qk-layernorm, no
  // --mla-down-proj-fusion), the fused YaRN rope (--no-rope-fusion unset: arguments.py:2902;
  // MLATransformerConfig.rope_type "yarn"); sim/src/blocks_mla.cpp build_mla_megatron ---
  s.mla = true;
  s.mla_ops = MlaOps::kMegatronTe;
  // native (plan): megatron/training/arguments.py --recompute-granularity (full|selective),
  // --recompute-method (uniform: groups of --recompute-num-layers blocks checkpointed as one;
  // block: the first --recompute-num-layers blocks of each pipeline stage checkpointed, the rest
  // kept), as transformer_block.py _checkpointed_forward runs them; selective recomputes core
  // attention (Korthikanti et al. 2022 §5).
  static constexpr NativeAc kNativeAc[] = {
      {"none", "no --recompute-granularity"},
      {"selective", "--recompute-granularity selective"},
      {"full", "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"},
      {"every:k", "--recompute-granularity full --recompute-method uniform --recompute-num-layers {k}"},
      {"block:k", "--recompute-granularity full --recompute-method block --recompute-num-layers {k}"}};
  s.native_ac = kNativeAc;
  // --- te_norm (issue 10): TE's fused norms under the TE spec (gpt_layer_specs.py
  // get_gpt_layer_with_transformer_engine_spec: input_layernorm and pre_mlp_layernorm are
  // IdentityOp, the norms fused into linear_qkv / linear_fc1 as TELayerNormColumnParallelLinear;
  // the final norm TENorm), TransformerEngine @ d0067d0da6cb; --cross-entropy-loss-fusion
  // (language_module.py compute_language_model_loss:173-198) ---
  s.te_norms = true;
  s.ce_loss_fusion = true;
  // --- end te_norm ---
  // polish: training/arguments.py's --no-gradient-accumulation-fusion, --deterministic-mode and
  // --transformer-impl {transformer_engine,local} (registry.cpp resolve_setup)
  s.grad_accum_fusion_flag = true;
  s.deterministic_mode = true;
  s.local_spec = true;
  // --- feat14 (issue 13): --swiglu's MLP as Megatron-core runs it by default: one linear_fc1 of
  // 2f / tp columns and bias_swiglu_impl (arguments.py:2895 --no-bias-swiglu-fusion, store_false:
  // on unless given; argument_utils.py:317 bias_activation_fusion = args.bias_swiglu_fusion;
  // mlp.py MLP.forward; fusions/fused_bias_swiglu.py SwiGLUFunction @ d98e8a64ddf3) ---
  s.fused_swiglu = true;
  // finalize_model_grads.py @ d98e8a64ddf3 finalize_model_grads: finish_grad_sync (the DP
  // reduction), then _allreduce_non_tensor_model_parallel_grads: every parameter with the
  // `sequence_parallel` attribute under config.sequence_parallel (norms; router.py:85 the router
  // weight; shared_experts.py:143 the gate; transformer_engine.py:1316 TELinear
  // parallel_mode="duplicated", MLA's down projections), main_grads coalesced
  // (_flatten_dense_tensors), one torch.distributed.all_reduce over the TP group, copied back
  s.tp_replicated_grad_allreduce = true;
  // --- end feat14 ---
  return s;
}

}  // namespace sim::impl_rows
