// cpfp8 (issues 11/13): MFU and HFU, one convention for a single rank and for a pipeline.
#pragma once

#include "sim/device.hpp"
#include "sim/result.hpp"
#include "sim/setup.hpp"

namespace sim::detail {

// Sets r.mfu, r.hfu, r.mfu_peak_flops_per_s and r.mfu_fp8_mixed from r.model_flops,
// r.recompute_flops and r.fp8_model_flops (summed over `gpus` GPUs) and a step of step_s.
void set_utilization(Result& r, double step_s, double gpus, const Device& d, Precision prec);

}  // namespace sim::detail
