// cpfp8 (issues 11/13): which peak MFU and HFU divide by.
//
// Convention (docs/time-model.md "MFU and HFU"): the device's dense 16-bit tensor-core peak
// (its fp32 peak under --precision fp32), whatever the linears run in. This is what
// torchtitan logs: torchtitan/utils.py @ 9dec370 get_peak_flops returns the BF16 dense figure of
// the GPU ("hardcoded BF16 type peak flops"), and train.py divides by it with or without
// Float8; its benchmark page (benchmarks/llama3_h100_202412_torchtitan.md) declines to report an
// MFU for Float8 runs because "both BFLOAT16 Tensor Core and FP8 Tensor Core are involved ...
// the definition of MFU under such scenario is not well-defined". Megatron-LM logs no MFU, only
// "throughput per GPU (TFLOP/s/GPU)" (the model FLOPs per second), whose ratio to the 16-bit
// peak is this MFU. So mfu/hfu stay comparable between --fp8 off and on.
// Beside it, under --fp8, mfu_fp8_mixed: the model FLOPs over the step time at the mixed peak,
// i.e. the ideal time with every fp8 GEMM FLOP at the dense fp8 peak and every other FLOP at the
// 16-bit peak, divided by the step time; it is at most 1 and is what a run could still gain.
#include "utilization.hpp"

namespace sim::detail {

void set_utilization(Result& r, double step_s, double gpus, const Device& d, Precision prec) {
  const double peak =
      prec == Precision::kFp32 ? d.peak_fp32_flops_per_s : d.peak_bf16_flops_per_s;
  r.mfu_peak_flops_per_s = peak;
  r.mfu = static_cast<double>(r.model_flops) / (step_s * peak * gpus);
  // Summed in double: the int64 sum may not exist.
  r.hfu = (static_cast<double>(r.model_flops) + static_cast<double>(r.recompute_flops)) /
          (step_s * peak * gpus);
  r.mfu_fp8_mixed = 0;
  if (r.fp8_model_flops > 0 && d.peak_fp8_flops_per_s > 0) {
    const double f8 = static_cast<double>(r.fp8_model_flops);
    const double rest = static_cast<double>(r.model_flops) - f8;
    const double ideal_s = (f8 / d.peak_fp8_flops_per_s + rest / peak) / gpus;
    r.mfu_fp8_mixed = ideal_s / step_s;
  }
}

}  // namespace sim::detail
