// feat (issue 13): FP8 linears (docs/memory-model.md "FP8 linears"). One linear of the block under
// the recipe: its GEMMs on fp8 tensor cores (the engine's fp8 peak), and what the recipe keeps.
//
// Transformer Engine (te-delayed, te-current; Megatron-core's TE layers):
//   NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py @ d0067d0da6cb
//   (_Linear.forward): the input is quantized inside the module (own_quantized_input) and, for
//   the backward's wgrad, only its column-wise fp8 data is kept ("Discard row-wise data since it
//   is not needed in backward pass": update_usage(rowwise_usage=False, columnwise_usage=True)):
//   1 B per input element saved instead of the 16-bit input; the fp8 weight (row-wise for the
//   forward GEMM, column-wise for dgrad) is a workspace cached across micro-batches
//   (get_weight_workspace with is_first_microbatch, Megatron passes it): 2 B per weight element,
//   persistent.
//   Delayed scaling's state (feat2; transformer_engine/pytorch/quantization.py @ d0067d0da6cb
//   DelayedScalingRecipeState: `scale = torch.ones(num_quantizers)`, `amax_history =
//   torch.zeros(amax_history_len, num_quantizers)`, fp32; module/base.py set_meta_tensor:
//   num_quantizers = num_gemms * 3 forward (input, weight, output) and num_gemms * 2 backward
//   (grad output, grad input); common/recipe/__init__.py DelayedScaling: amax_history_len 1024):
//   per GEMM (1,024 + 1) x 5 x 4 = 20,500 B, persistent, counted per linear (LayerNormMLP's two
//   GEMMs hold the same as two linears). Current scaling keeps none (Float8CurrentScalingRecipe
//   State allocates no buffers). Each fp8 tensor's 4-byte scale_inv is not counted.
// torchao Float8Linear (torchao-tensorwise, torchao-rowwise; torchtitan's float8 converter):
//   pytorch/ao torchao/float8/float8_linear.py @ eab345c (the torchao of torchtitan's Dec 2024
//   tables, torchtitan 9dec370): tensorwise saves the fp8 input and the fp8 weight (FSDP2's fp8
//   all-gather output, enable_fsdp_float8_all_gather assumed on as torchtitan's docs/float8.md
//   recommends; its default at 9dec370 is off: the 16-bit gather with a saved fp8 cast is not
//   modeled); rowwise saves the high-precision ones and casts again in backward. torchtitan
//   applies it to every linear but the output layer (module_filter_fn skips "output").
#include <algorithm>
#include <string>

#include "inductor.hpp"
#include "ops.hpp"
#include "sim/setup.hpp"

namespace sim {

std::string_view name(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kOff: return "off";
    case Fp8Recipe::kTeDelayed: return "te-delayed";
    case Fp8Recipe::kTeCurrent: return "te-current";
    case Fp8Recipe::kTorchaoTensorwise: return "torchao-tensorwise";
    case Fp8Recipe::kTorchaoRowwise: return "torchao-rowwise";
  }
  return "?";
}

std::optional<Fp8Recipe> parse_fp8(std::string_view s) {
  for (Fp8Recipe r : {Fp8Recipe::kOff, Fp8Recipe::kTeDelayed, Fp8Recipe::kTeCurrent,
                      Fp8Recipe::kTorchaoTensorwise, Fp8Recipe::kTorchaoRowwise})
    if (name(r) == s) return r;
  return std::nullopt;
}

namespace detail {

// feat2: TE delayed scaling, per GEMM: 3 forward + 2 backward quantizers, each an fp32 scale and
// an fp32 amax history of amax_history_len = 1024 (header comment).
constexpr int64_t kTeAmaxHistoryLen = 1024;
constexpr int64_t kTeDelayedStateBytes = (kTeAmaxHistoryLen + 1) * (3 + 2) * 4;
static_assert(kTeDelayedStateBytes == 20'500);

void fp8_linear(Builder& bld, const Dims& dm, OpDraft& d, int32_t x16, int64_t in_f, int64_t out_f) {
  // The output layer stays 16-bit (Megatron's output_layer is not a TE layer; torchtitan's filter)
  if (d.op.site == LinearSite::kLmHead) return;
  d.op.fp8 = true;
  const int64_t n_in = numel_of(bld.tensor(x16));  // this rank's input elements (an SP shard)
  const int64_t nw = mul(in_f, out_f);
  const int64_t rows_full = n_in / in_f;
  const bool te = dm.fp8 == Fp8Recipe::kTeDelayed || dm.fp8 == Fp8Recipe::kTeCurrent;
  if (te) {
    // the column-wise fp8 input, made by the op and saved in place of the 16-bit input
    const int32_t x8 = bld.fresh(n_in, DType::kF8, "fp8 input (column-wise, saved)");
    d.outputs.push_back(x8);
    d.saves = {x8, d.saves[1]};
    // the fp8 weight workspace, row-wise and column-wise, cached across micro-batches
    (void)bld.buffer(mul(2, nw), DType::kF8, "fp8 weight cache (row-wise + column-wise)");
    // feat2: delayed scaling's scales and amax histories (header comment), per TE module
    // (feat14: Megatron's linear_fc1 is one op of 2 x ffn_hidden, blocks_feat14.cpp; an up
    // projection of its own, under no TE implementation, adds none)
    if (dm.fp8 == Fp8Recipe::kTeDelayed && d.op.site != LinearSite::kUp)
      (void)bld.buffer(kTeDelayedStateBytes, DType::kF32, "fp8 scales + amax history (1024)");
    // forward: the row-wise fp8 input for the GEMM, freed inside the op
    d.op.fwd_transient_bytes += n_in;
    // backward: the fp8 grad output (row-wise and column-wise)
    d.op.bwd_transient_bytes += mul(2, mul(rows_full, out_f));
  } else if (dm.fp8 == Fp8Recipe::kTorchaoTensorwise) {
    // feat2: torchao at the torchtitan table's version (eab345c, torchao/float8/float8_linear.py
    // Float8Linear.forward without axiswise scaling): input_fp8 = cast_input_to_float8(input),
    // weight_fp8_t = cast_weight_to_float8_t(weight), manual_float8_matmul_with_args_in_float8
    // `ctx.save_for_backward(input_fp8, weight_fp8_t)`: the fp8 input is saved (1 B each
    // element) in place of the 16-bit input. The fp8 weight is FSDP2's fp8 all-gather output
    // (enable_fsdp_float8_all_gather, assumed on: graph_builder.cpp; fsdp_utils.py
    // WeightWithDynamicFloat8CastTensor.fsdp_post_all_gather wraps the gathered bytes, and
    // cast_weight_to_float8_t returns `weight.t()` of an already-fp8 weight): saved as a view of
    // the gathered weight, freed at reshard and gathered again for backward. Backward: the grad
    // output cast once (cast_output_to_float8_in_bw); float8_ops.py preprocess_addmm's layout
    // copies: grad_input's B (weight_fp8_t.t(), row-major: `b.t().contiguous().t()`, nw), then
    // grad_weight's A (grad_output.t(): `.contiguous()`) and B (input_fp8, row-major). torchao
    // from 2025-01-13 (#1461 onward, matmul_with_hp_or_float8_args) saves the high-precision
    // tensors instead, as the rowwise branch below: not this version.
    const int64_t go = mul(rows_full, out_f);
    const int32_t x8 = bld.fresh(n_in, DType::kF8, "fp8 input (saved)");
    d.outputs.push_back(x8);
    d.saves = {x8, d.saves[1]};
    d.op.bwd_transient_bytes += go + std::max(nw, go + n_in);
    // time8 (issue 11): the casts' time, memory-bound kernels after the op's own (serial bytes).
    // hp_tensor_to_float8_dynamic @ eab345c (float8_scaling_utils.py:30-70): tensor_to_amax is
    // torch.max(torch.abs(x)) (float8_utils.py:100), amax_to_scale four scalar ops
    // (to(float64), clamp, div, to(float32)), ToFloat8ConstrFunc.forward
    // (float8_tensor.py:153-154) x.to(float32) * scale, then to_fp8_saturated's clamp and
    // .to(float8). Eager, per 16-bit tensor of n elements: abs 2n + 2n, max 2n, to(float32)
    // 2n + 4n, mul 4n + 4n, clamp 4n + 4n, to(float8) 4n + n = 33n bytes in 10 kernels (the
    // four scalar ones move nothing). Compiled (Inductor, inductor.cpp fuse_block's source):
    // abs and max fuse into one reduction kernel (2n) and the scale's scalar ops, the fp32
    // upcast, mul, clamp and fp8 conversion into one pointwise kernel (2n + n): 5n in 2. The
    // input is cast in forward; in backward NoopFwToFloat8BwDynamic.backward
    // (float8_scaling_utils.py:263-275) casts the grad output the same way, and preprocess_addmm
    // (float8_ops.py) makes the three layout copies counted in memory above, each a 1-byte read
    // and write: 2(nw + go + n_in) in 3 kernels. Under compile, a cast of an input another
    // Float8 linear of the block already cast (q, k, v; gate, up) is the same graph nodes,
    // merged by fx_graph_cse in min_cut_rematerialization_partition (torch 1.13.1
    // functorch/_src/partitioners.py:240, unconditional; torch 2 under `config.cse`): charged
    // once (inductor.cpp fuse_block). harness/fp8_cast_cse.py shows it on torch 1.13 (CPU):
    // three casts of one input, one abs and one max in the forward graph. Not timed: FSDP2's fp8 cast of each weight shard before the
    // all-gather (fsdp_utils.py fsdp_pre_all_gather; 5 B per shard element) and the step's
    // amax of the shards (precompute_float8_dynamic_scale_for_fsdp), 1/dp of a weight each.
    const int64_t per_elem = dm.compile ? kFp8CompiledCastBytesPerElem : 33;
    const int32_t cast_kernels = dm.compile ? kFp8CompiledCastKernels : 10;
    d.op.fwd_serial_bytes += mul(per_elem, n_in);
    d.op.fwd_serial_kernels += cast_kernels;
    d.op.bwd_serial_bytes += mul(per_elem, go) + mul(2, nw + go + n_in);
    d.op.bwd_serial_kernels += cast_kernels + 3;
    // fp8sac (issue 10): under selective AC. A policy that saves aten.mm sees the torch.mm of
    // two Float8Tensors (manual_float8_matmul_with_args_in_float8.forward: a TorchDispatchMode
    // runs before a tensor subclass's __torch_dispatch__, so the policy never sees the
    // _scaled_mm inside; checked on torch 1.13's dispatcher with a wrapper subclass) and caches
    // its 16-bit output; the fp8 input is made by the cast ops (mul, clamp, _to_copy in
    // hp_tensor_and_scale_to_float8), which no policy saves: recomputed, never cached.
    d.op.sac_mm_outputs = 1;
    if (!dm.compile) {
      // Eager: cast_input_to_float8 -> tensor_to_amax is torch.max(torch.abs(x))
      // (float8_utils.py @ eab345c:100): abs materializes an input-sized 16-bit tensor, and
      // torchtitan's _save_list at 9dec370 (parallelize_llama.py:219-222) names aten.abs, so
      // its SAC caches it whatever the mm count (the 0-dim amax, also listed, is not counted).
      // Under torch.compile the partitioner keeps a must-save output only where the backward
      // reads it: the saved amax makes abs unneeded (torchtitan #820: tensorwise, with and
      // without abs in the list, 47.77 GiB both), and Inductor fuses abs into the reduction.
      const Tensor& tx = bld.tensor(x16);
      const int32_t ax = bld.fresh(tx.bytes, tx.dtype, "abs(input) for the fp8 amax");
      d.op.sac_tt_always_output = static_cast<int8_t>(d.outputs.size());
      d.outputs.push_back(ax);
    }
  } else {
    // torchao rowwise (axiswise, eab345c manual_float8_matmul_with_args_in_hp): saves the
    // high-precision input and weight (`ctx.save_for_backward(input_hp, weight_hp_t)`), casts
    // the input and weight in forward; in backward the grad output twice (dim0 and dim1), the
    // weight and the input, all alive to the end, plus the layout copies of grad_weight's
    // operands (grad output and input; grad_input's weight copy is freed before); 1 B each
    // element, and the fp32 scales, one per row of each cast (feat2)
    const int64_t go = mul(rows_full, out_f);
    d.op.fwd_transient_bytes += n_in + nw + mul(4, rows_full + out_f);
    d.op.bwd_transient_bytes +=
        mul(3, go) + mul(2, n_in) + nw + mul(4, mul(2, rows_full) + out_f + in_f);
  }
}

}  // namespace detail
}  // namespace sim
