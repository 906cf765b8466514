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
//   persistent. Scales and amax histories (a few floats per tensor) are not counted.
// torchao Float8Linear (torchao-tensorwise, torchao-rowwise; torchtitan's float8 converter):
//   pytorch/ao torchao/float8/float8_linear.py matmul_with_hp_or_float8_args: saves the
//   high-precision input and weight (ctx.save_for_backward(input_hp, weight_hp_t)) and casts
//   again in backward: no saved bytes change; the fp8 casts are transients (input and weight
//   forward; grad output, input and weight backward). torchtitan applies it to every linear but
//   the output layer (module_filter_fn skips "output").
#include <string>

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

void fp8_linear(Builder& bld, const Dims& dm, OpDraft& d, int32_t x16, int64_t in_f, int64_t out_f,
                const char* name) {
  // The output layer stays 16-bit (Megatron's output_layer is not a TE layer; torchtitan's filter)
  if (std::string_view(name) == "lm head") return;
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
    // forward: the row-wise fp8 input for the GEMM, freed inside the op
    d.op.fwd_transient_bytes += n_in;
    // backward: the fp8 grad output (row-wise and column-wise)
    d.op.bwd_transient_bytes += mul(2, mul(rows_full, out_f));
  } else {
    // torchao: casts of the input and weight in forward; of grad output, input and weight in
    // backward (1 B each element), around the saved high-precision tensors
    d.op.fwd_transient_bytes += n_in + nw;
    d.op.bwd_transient_bytes += mul(rows_full, out_f) + n_in + nw;
  }
}

}  // namespace detail
}  // namespace sim
