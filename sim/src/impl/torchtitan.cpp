// pytorch/torchtitan, Llama 3 as benchmarked: FSDP2 with bf16 parameters for compute and no
// autocast, SDPA (cuDNN, then flash). Op rows: docs/memory-model.md, "torchtitan".
#include "rows.hpp"

#include "sim/graph.hpp"

namespace sim::impl_rows {

ImplSpec torchtitan() {
  ImplSpec s;
  s.id = Impl::kTorchtitan;
  s.name = "torchtitan";
  s.code = "pytorch/torchtitan";
  s.version = "v0.2.2 (73a0e6979dd1)";
  s.families = "llama";
  // parallelize_llama.py apply_fsdp: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
  // over fp32 model parameters, no autocast (train.py @ 9dec370 / v0.2.2)
  s.precision = Precision::kFsdp2Bf16;
  s.attention = AttentionKind::kFlash;
  s.dropout = DropoutDefault::kZero;
  s.checkpoint = CheckpointApi::kNonReentrant;  // ptd_checkpoint_wrapper: NO_REENTRANT
  s.qkv = QkvVariant::kSeparate;                // wq, wk, wv
  s.eager_matmul = EagerMatmul::kCopies;
  // time (issue 11): FA2. At 9dec370 (its benchmark tables) the model calls plain
  // F.scaled_dot_product_attention(is_causal=True) (torchtitan/models/llama/model.py:209), and
  // torch of Dec 2024 tries the flash backend first (cuDNN attention was taken off the default
  // priority: pytorch/pytorch#141133, as torchtitan PR #1209 recounts). v0.2.2 asks for cuDNN
  // first (torchtitan/models/attention.py sdpa_backends); not modeled.
  s.attention_kernel = KernelChoice::kFlashAttention2;
  // time3: apply_rotary_emb through view_as_complex(x.float()) (torchtitan/models/llama/model.py,
  // the 2024 releases its benchmark tables ran)
  s.rope_kernels = RopeKernels::kComplexFp32;
  // feat: context parallelism (torchtitan's --parallelism.context_parallel_degree:
  // torch.distributed.tensor.experimental context_parallel, ring attention over SDPA).
  s.context_parallel = true;
  // feat2: torchtitan 9dec370 config_manager.py --experimental.context_parallel_rotate_method
  // default "allgather" (utils.py create_context_parallel_ctx: set_rotate_method)
  s.cp_ring = CpRing::kTorchAllGather;
  s.fp8_torchao = true;  // feat: --fp8 (sim/src/fp8.cpp)
  s.zero_means = "FSDP2 fully_shard over the data-parallel ranks (ZeRO 3)";
  // fp8sac: --compile models what a compiled SAC region keeps and torchao's fused amax only
  // inductor: --compile also solves the partitioner's min-cut per block (sim/src/inductor.cpp)
  // time8 (issue 11): Inductor's fusion is timed (sim/src/inductor.cpp fuse_block), coarser
  s.not_modeled =
      "torch.compile's horizontal fusion and split reductions (a fused group is timed as one "
      "kernel; its saves under --compile follow torch 2's min-cut)";
  // --- implver ---
  s.version_key = "v0.2.2";
  // torchtitan/config/job_config.py @ v0.2.2 Optimizer.implementation = "fused"
  // (components/optimizer.py:299-303 passes fused=True, foreach=False to torch AdamW).
  s.optimizer = Optimizer::kAdamFused;
  s.optimizer_eager = Optimizer::kAdamFused;
  s.optimizer_source = "optimizer.implementation = fused (config/job_config.py)";
  // exec10, pinned by fp8sac: torchtitan/train.py @ 73a0e6979dd1:550 `self.optimizers.zero_grad()`
  // -> components/optimizer.py:97-99 OptimizersContainer.zero_grad, torch.optim's zero_grad
  // (set_to_none=True by default on torch >= 2.0); 9dec370: train.py:266
  // `optimizers.zero_grad()` -> torchtitan/optimizer.py:52-54, the same call
  s.set_to_none = true;
  s.set_to_none_source = "train_step's optimizers.zero_grad(), set_to_none=True on torch >= 2.0";
  // fp8sac (issue 10): `training.compile` (config_manager.py @ 9dec370 `--training.compile`,
  // default off; parallelize_llama.py @ 9dec370 apply_compile: torch.compile(block,
  // fullgraph=True) per TransformerBlock, after apply_ac); the same at v0.2.2
  // (models/llama3/infra/parallelize.py apply_compile)
  s.compile_blocks = true;
  // native (plan): [activation_checkpoint] mode and selective_ac_option (config_manager.py /
  // config/job_config.py; parallelize_llama.py apply_ac: "full" wraps every block, "selective"
  // with "op" applies the op SAC policy to every block, with a number k checkpoints every k-th).
  static constexpr NativeAc kNativeAc[] = {
      {"none", "[activation_checkpoint] mode = \"none\""},
      {"full", "[activation_checkpoint] mode = \"full\""},
      {"sac:torchtitan", "[activation_checkpoint] mode = \"selective\", selective_ac_option = \"op\""},
      {"layer-sac:k", "[activation_checkpoint] mode = \"selective\", selective_ac_option = \"{k}\""}};
  s.native_ac = kNativeAc;
  return s;
}

// implver: the commit its 2024-12 benchmark tables ran (docs/performance.md @ 9dec370).
ImplSpec torchtitan_9dec370() {
  ImplSpec s = torchtitan();
  s.version_key = "9dec370";
  s.version = "9dec370 (2024-12 benchmark tables)";
  // config_manager.py @ 9dec370:194 `--optimizer.fused` store_true (default False);
  // optimizer.py:132-138 passes foreach = not fused: foreach AdamW.
  s.optimizer = Optimizer::kAdamForeach;
  s.optimizer_eager = Optimizer::kAdamForeach;
  s.optimizer_source = "--optimizer.fused off by default (config_manager.py): foreach AdamW";
  // torchtitan/models/llama/model.py @ 9dec370:201-202 repeats K and V to every query head
  // (repeat_kv: unsqueeze, expand, reshape: a copy) before F.scaled_dot_product_attention
  // (model.py:209), which then saves the repeated K and V; v0.2.2 passes enable_gqa instead
  // (models/llama3/model/model.py:201, 275).
  s.flash_repeat_kv = true;
  // time5 (issue 11): torchtitan/models/norms.py @ 9dec370 (and @ 04133643, its A100 tables'
  // commit: the same Triton kernels) builds FusedRMSNorm for norm_type = "fused_rmsnorm"
  // (config_manager.py `--model.norm_type`, default "rmsnorm"); v0.2.2 has no fused norm.
  s.triton_rmsnorm = true;
  return s;
}

}  // namespace sim::impl_rows
