// hfds (issue 10): the persistent state of HF's Trainer under DeepSpeed with --bf16
// (Precision::kDeepspeedBf16), per ZeRO stage. docs/memory-model.md "HF Trainer + DeepSpeed"
// holds every buffer with its file and commit.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"

namespace sim::detail {

// Adds one persistent storage (bytes, category, role); add_persistent_state's own.
using AddPersistent = std::function<void(int64_t, Category, const char*)>;

// What DeepSpeed allocates around the optimizer step, beside the optimizer's own temporaries.
struct DeepspeedStep {
  int64_t with_optimizer = 0;  // alive during optimizer.step (the fp32 gradient partition)
  int64_t before_step = 0;     // alive between backward and the step, not with the optimizer's
};

// Sets g.weights_bytes and g.grads_bytes and adds the bf16 partitions, gathered parameters,
// gradient buffers and reduce buckets DeepSpeed v0.16.2 keeps per rank for s.zero (0-3) over
// s.dp ranks. `sharded` lists every parameter storage (the frozen ones too); `numel` counts the
// trainable parameters. Optimizer state (fp32 master and Adam's m, v, partitioned over dp at
// every stage) stays with add_persistent_state.
DeepspeedStep add_deepspeed_state(Graph& g, const ModelConfig& model, const TrainSetup& s,
                                  const std::vector<int32_t>& sharded, int64_t numel,
                                  const AddPersistent& add);

}  // namespace sim::detail
