// hfds (issue 10): HF's Trainer under DeepSpeed with --bf16, per ZeRO stage. Read at
// microsoft/DeepSpeed v0.16.2 (b344c04d, Dec 2024, the release beside transformers v4.48 and
// accelerate v1.2.1); the "auto" values as transformers' integrations/deepspeed.py
// (HfTrainerDeepSpeedConfig.trainer_config_finalize, stored copy 02348331) fills them.
//
// Which optimizer wraps the Trainer's AdamW (engine.py _do_optimizer_sanity_check, get_data_types):
// bf16 without ZeRO accumulates gradients in fp32 and takes BF16_Optimizer (bf16_optimizer.py);
// stages 1 and 2 take DeepSpeedZeroOptimizer (stage_1_and_2.py, partition_grads = stage 2),
// accumulating in bf16 (grad_accum_dtype = the model's under ZeRO); stage 3
// DeepSpeedZeroOptimizer_Stage3 (stage3.py, partition_parameters.py,
// partitioned_param_coordinator.py). Every one of them keeps an fp32 copy of this rank's
// 1/dp partition of the flat bf16 parameters (BF16_Optimizer too) and hands only that partition
// to AdamW, whose m and v are therefore 1/dp as well.
#include "deepspeed.hpp"

#include <algorithm>

#include "sim/error.hpp"

namespace sim::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// DeepSpeed zero/config.py defaults (v0.16.2) the Trainer leaves alone: stage3_max_reuse_distance
// 1e9 parameters, sub_group_size 1e9 (the fp32 partition is stepped in sub-groups this large).
constexpr int64_t kMaxReuseDistance = 1'000'000'000;
constexpr int64_t kSubGroupSize = 1'000'000'000;

}  // namespace

DeepspeedStep add_deepspeed_state(Graph& g, const ModelConfig& model, const TrainSetup& s,
                                  const std::vector<int32_t>& sharded, int64_t numel,
                                  const AddPersistent& add) {
  const char* f = "persistent bytes";
  const int64_t d = s.dp;
  const int64_t h = model.hidden;
  // "auto" reduce_bucket_size = hidden_size^2 elements (trainer_config_finalize), bf16
  // (stage_1_and_2.py and stage3.py allocate the buckets in self.dtype, the module's)
  const int64_t bucket_bytes = checked_mul(2, checked_mul(h, h, f), f);
  // this rank's partition of the trainable parameters: ZeRO partitions pad each flat group (or,
  // at stage 3, each parameter: partition_parameters.py _aligned_size) to a multiple of dp
  int64_t partition = 0, largest = 0;
  for (int32_t sid : g.param_storages) {
    const Storage& st = g.storages[sid];
    const int64_t n = st.bytes / bytes_of(st.dtype);
    partition += s.zero >= 3 ? ceil_div(n, d) : 0;
    largest = std::max(largest, n);
  }
  if (s.zero < 3) partition = ceil_div(numel, d);
  DeepspeedStep step;

  if (s.zero >= 3) {
    // partition_parameters.py: each parameter's bf16 data is replaced by its 1/dp partition
    // (ds_tensor, padded); one of at most stage3_param_persistence_threshold elements ("auto":
    // 10 x hidden_size) is ds_persist: gathered once and kept whole, beside its partition.
    const int64_t persist = 10 * h;
    const int64_t nb = g.n_blocks;
    std::vector<int64_t> block_full(static_cast<size_t>(nb), 0), block_numel(block_full);
    int64_t persisted_parts = 0, root_full = 0, root_numel = 0;
    for (int32_t sid : sharded) {
      Storage& st = g.storages[sid];
      const int64_t n = st.bytes / bytes_of(st.dtype);
      const bool in_block = st.block >= 0 && st.block < nb;
      if (in_block) {
        block_full[static_cast<size_t>(st.block)] += st.bytes;
        block_numel[static_cast<size_t>(st.block)] += n;
      } else {
        root_full += st.bytes, root_numel += n;
      }
      const int64_t part = checked_mul(ceil_div(n, d), bytes_of(st.dtype), f);
      if (n <= persist) persisted_parts += part;  // stays whole: st.bytes unchanged
      else st.bytes = part;
    }
    add(persisted_parts, Category::kWeights, "ZeRO-3 partitions of persisted parameters (bf16)");
    // Gathered bf16 parameters. During the forward, the module being run and what the
    // coordinator prefetched: the current and the next block (the ZeRO-3 model of
    // engine.cpp). At the forward's end (partitioned_param_coordinator.py __params_to_release):
    // a module's parameters are not released if they are used again within
    // stage3_max_reuse_distance parameters of the trace. The head's are used again at once by
    // its backward; block j's after the rest of the forward and the backward down to it, 2 x
    // (the parameters after block j, the head's included).
    int64_t head_numel = 0;  // the parameters the ops after the last block read first
    int32_t last_block_op = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i)
      if (g.ops[static_cast<size_t>(i)].block >= 0) last_block_op = i;
    for (size_t i = static_cast<size_t>(last_block_op + 1); i < g.ops.size(); ++i)
      head_numel += g.ops[i].param_numel;
    // a tied head reads the word embeddings again: every root parameter is the head's
    const int64_t head_full =
        model.tied_embeddings ? root_full : std::min(root_full, checked_mul(2, head_numel, f));
    int64_t after = model.tied_embeddings ? root_numel : head_numel;
    int64_t retained = head_full, max_block = 0;
    bool all_blocks = true;
    for (int64_t j = nb - 1; j >= 0; --j) {
      max_block = std::max(max_block, block_full[static_cast<size_t>(j)]);
      if (all_blocks && 2 * after < kMaxReuseDistance) {
        retained += block_full[static_cast<size_t>(j)];
        after += block_numel[static_cast<size_t>(j)];
      } else {
        all_blocks = false;
      }
    }
    // the (untied) word embeddings, first in the trace, last in the backward
    if (all_blocks && !model.tied_embeddings && 2 * after < kMaxReuseDistance)
      retained += root_full - head_full;
    add(std::max(checked_mul(2, max_block, f), retained), Category::kComm,
        "ZeRO-3 gathered bf16 parameters (current and prefetched block; at the forward's end "
        "the head and the blocks within stage3_max_reuse_distance)");
    // stage3.py: grad_partitions_flat_buffer, this rank's gradient partition in the
    // accumulation dtype (bf16), zeros for the whole run; the IPG bucket, one bf16 flat buffer
    // of reduce_bucket_size (contiguous_gradients, default True), allocated at init.
    g.grads_bytes = checked_mul(2, partition, f);
    add(g.grads_bytes, Category::kGrads, "grad_partitions_flat_buffer (bf16 partition)");
    add(bucket_bytes, Category::kComm, "ZeRO-3 IPG bucket (bf16, reduce_bucket_size)");
    // _prepare_fp32_grad_for_sub_group: flatten(averaged_gradients).to(fp32), the optimizer's
    // .grad of the sub-group being stepped, freed after it (_release_sub_group)
    step.with_optimizer = checked_mul(4, std::min(partition, kSubGroupSize), f);
  } else if (s.zero >= 1) {
    // stage_1_and_2.py backward(): with contiguous_gradients (default True) one bf16 IPG buffer
    // of reduce_bucket_size (two with overlap_comm, whose default is False below stage 3),
    // allocated as backward starts and released at the step (_release_ipg_buffers). Counted
    // for the whole step: it is live at the forward/backward turn, where the peak usually is.
    add(bucket_bytes, Category::kComm, "ZeRO-1/2 IPG buffer (bf16, reduce_bucket_size)");
    if (s.zero == 2) {
      // copy_grads_in_partition: this rank's gradients in one bf16 buffer of its partition
      // (grads_in_partition), each parameter's .grad freed once copied; released at the step
      g.grads_bytes = checked_mul(2, partition, f);
      add(g.grads_bytes, Category::kGrads, "grads_in_partition (bf16 partition)");
    } else {
      // stage 1: every bf16 .grad lives until the step frees them (free_grad_in_param_list)
      g.grads_bytes = checked_mul(2, numel, f);
    }
    // step(): single_grad_partition = flatten(averaged_gradients).to(fp32), the fp32 master's
    // .grad while AdamW runs
    step.with_optimizer = checked_mul(4, partition, f);
  } else {
    // bf16_optimizer.py _setup_for_real_optimizer: fp32_groups_gradients_flat, zeros_like the
    // flat bf16 parameters in fp32 (grad_acc_dtype): every gradient accumulated in fp32, for
    // the whole run (clear_hp_grads zeroes it). The bf16 .grad that backward makes are freed by
    // the Trainer's model.zero_grad() after the step (engine.py zero_grad: param.grad = None).
    const int64_t fp32_grads = checked_mul(4, numel, f);
    add(fp32_grads, Category::kGrads, "BF16_Optimizer fp32 gradient accumulation buffer");
    g.grads_bytes = checked_add(fp32_grads, checked_mul(2, numel, f), f);
    // after backward: _update_hp_grad's lp.grad.to(fp32) per parameter (the largest one), then
    // engine.py allreduce_bucket casts the flat fp32 gradients to communication_data_type
    // (bf16 under bf16) for the all-reduce: one bf16 copy of them
    step.before_step = checked_mul(4, largest, f);
    if (d > 1) step.before_step = std::max(step.before_step, checked_mul(2, numel, f));
  }
  // Time (engine.cpp bucket_grads): below stage 3 overlap_comm defaults to False
  // (zero/config.py overlap_comm_valid), so every reduction runs on the compute stream. Stage 0:
  // after backward, engine.py buffered_allreduce_fallback all-reduces the flat gradients in
  // buckets of MEMORY_OPT_ALLREDUCE_SIZE = 5e8 elements, cast to bf16; stages 1 and 2 reduce
  // IPG buckets of reduce_bucket_size bf16 elements. Gradients travel in bf16
  // (communication_data_type, engine.py: the bf16 model's dtype).
  if (s.zero <= 2) {
    g.dp_reduce_blocking = true;
    g.dp_bucket_bytes = s.zero == 0 ? int64_t{2} * 500'000'000 : bucket_bytes;
  }
  int64_t weights = 0;
  for (int32_t sid : g.persistent)
    if (g.storages[sid].category == Category::kWeights) weights += g.storages[sid].bytes;
  g.weights_bytes = weights;
  return step;
}

}  // namespace sim::detail
