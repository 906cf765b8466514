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

// --- ds3c (issue 10): DeepSpeed v0.16.2's PartitionedParameterCoordinator replayed over one
// module order (g.ds3, filled by add_deepspeed_state at stage 3). `trace` lists, per module step,
// the op whose persistent_reads are the module's parameters, in the order the step runs them:
// the engine passes its schedule's forward, recompute and backward events (the trace DeepSpeed
// records in its first steps is that order: a checkpointed layer's recompute re-runs the module
// forward hooks inside backward), add_deepspeed_state the forward then the backward.
struct Ds3Replay {
  std::vector<Graph::Ds3Step> steps;                // per trace step (events 2t, 2t + 1)
  std::vector<int32_t> gathered, gathered_begin;  // per step: parameters its fetch + prefetch gather
  std::vector<int32_t> released, released_begin;  // per step: those its post hook partitions again
  int64_t peak_bytes = 0;  // the most bf16 bytes gathered at once (sampled after each step's gathers)
};
// Whether the op reads a parameter the coordinator tracks (a step of the trace).
bool ds3_is_step(const Graph& g, const Op& op);
// `no_release` (optional, per trace step): the module's post hook does not run (the op at which
// torch's non-reentrant checkpoint stops its recompute, raising _StopRecomputationError inside it)
void ds3_replay(const Graph& g, const std::vector<int32_t>& trace, Ds3Replay& out,
                const std::vector<uint8_t>* no_release = nullptr);
// --- end ds3c ---

}  // namespace sim::detail
