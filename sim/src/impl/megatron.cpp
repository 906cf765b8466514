// NVIDIA/Megatron-LM, Megatron-Core GPT: bf16 parameters with fp32 main grads, Transformer
// Engine layers by default, tensor/sequence/pipeline parallelism, reentrant recompute.
// Op rows: docs/memory-model.md, "megatron".
#include "rows.hpp"

namespace sim::impl_rows {

ImplSpec megatron() {
  ImplSpec s;
  s.id = Impl::kMegatron;
  s.name = "megatron";
  s.code = "NVIDIA/Megatron-LM";
  s.version = "Megatron-Core @ d98e8a64ddf3";
  s.families = "megatron-gpt gpt2 llama mistral qwen2";
  s.precision = Precision::kBf16Mixed;  // --bf16: bf16 params, fp32 main_grad (Float16Module)
  s.attention = AttentionKind::kFlash;  // TE DotProductAttention, attention_backend=auto
  s.dropout = DropoutDefault::kConfig;
  s.checkpoint = CheckpointApi::kReentrant;  // tensor_parallel/random.py CheckpointFunction
  s.qkv = QkvVariant::kFused;                // linear_qkv
  s.eager_matmul = EagerMatmul::kStrided;    // baddbmm on strided views of mixed_qkv
  s.tensor_parallel = true;
  s.pipeline = true;
  s.zero_means = "--zero 1: Megatron's distributed optimizer; DDP otherwise";
  s.not_modeled = "FP8, fused cross entropy";
  return s;
}

}  // namespace sim::impl_rows
