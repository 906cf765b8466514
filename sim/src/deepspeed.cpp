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
constexpr int64_t kSubGroupSize = 1'000'000'000;

// ds3: the zero_optimization keys that size buffers, each the user's (TrainSetup::ds_*) or the
// HF Trainer's "auto" (transformers integrations/deepspeed.py trainer_config_finalize:
// reduce_bucket_size = h^2, stage3_prefetch_bucket_size = 0.9 h^2, stage3_param_persistence_
// threshold = 10 h) or DeepSpeed v0.16.2's default for the keys "auto" leaves alone
// (zero/config.py: stage3_max_live_parameters and stage3_max_reuse_distance 1e9).
struct DsKnobs {
  int64_t reduce_bucket, prefetch_bucket, persistence, max_live, reuse_distance;
};
DsKnobs ds3_knobs(const ModelConfig& model, const TrainSetup& s) {
  const int64_t h = model.hidden;
  auto pick = [](int64_t set, int64_t dflt) { return set >= 0 ? set : dflt; };
  return {pick(s.ds_reduce_bucket, checked_mul(h, h, "reduce_bucket_size")),
          pick(s.ds_prefetch_bucket,  // int(0.9 * hidden_size * hidden_size)
               static_cast<int64_t>(0.9 * static_cast<double>(h * h))),
          pick(s.ds_persistence_threshold, 10 * h), pick(s.ds_max_live, 1'000'000'000),
          pick(s.ds_max_reuse_distance, 1'000'000'000)};
}

// ds3: the coordinator's replay, DeepSpeed v0.16.2's partitioned_param_coordinator.py
// (PartitionedParameterCoordinator, b344c04d) over a module trace. ds3c: the trace is given (the
// engine's schedule, recompute included; add_deepspeed_state's forward-then-backward), and the
// replay says which parameters each step gathers and releases. The trace: every op that reads a
// parameter is one module step; g.ds3 holds each sharded parameter's whole elements and bytes.
//  - fetch_sub_module: the module's not-available parameters are all-gathered (counted in
//    __n_available_params); its own entries are popped off the parameter queue; then, with a
//    complete trace, the queue is popped while numel_prefetching < min(max_live_parameters -
//    __n_available_params, prefetch_bucket_size): every not-available parameter met is
//    gathered (the last one may overshoot the bucket), available ones are skipped.
//  - release_sub_module (__params_to_release): each non-persisted parameter of the module is
//    released unless a prefetch already claimed a later use of it (__most_recent_step_id_param_
//    fetched_for > step_id) or it is used again within max_reuse_distance elements of the
//    modules after this one (params_traversed, counted over every module's parameters).
// Persisted parameters (ds_persist) are gathered for good and not counted here (their whole
// storage stays in the graph). The peak is sampled once each module's gathers are issued.
// ds3b: per step, the all-gathers it issues (its own fetch, then, after waiting for its
// parameters, the prefetch) and the last gather it waits for, which engine.cpp times.
}  // namespace

bool ds3_is_step(const Graph& g, const Op& op) {
  if (g.ds3.param_of.empty()) return false;
  for (const int32_t* s = g.begin(op.persistent_reads); s != g.end(op.persistent_reads); ++s)
    if (g.ds3.param_of[static_cast<size_t>(*s)] >= 0) return true;
  return false;
}

void ds3_replay(const Graph& g, const std::vector<int32_t>& trace, Ds3Replay& out,
                const std::vector<uint8_t>* no_release) {
  const char* f = "persistent bytes";
  const Graph::Ds3Params& k = g.ds3;
  const std::vector<int64_t>& full_numel = k.numel;
  const std::vector<int64_t>& full_bytes = k.bytes;
  const size_t n_params = full_numel.size();
  // the trace: per step, the parameters it reads (sorted, unique, as record_parameters sorts by
  // ds_id), flattened into `order` (the parameter queue: __param_order)
  std::vector<int32_t> order, step_begin;
  std::vector<int32_t> scratch;
  for (int32_t id : trace) {
    const Op& op = g.ops[static_cast<size_t>(id)];
    scratch.clear();
    for (const int32_t* s = g.begin(op.persistent_reads); s != g.end(op.persistent_reads); ++s)
      if (k.param_of[static_cast<size_t>(*s)] >= 0) scratch.push_back(k.param_of[static_cast<size_t>(*s)]);
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    step_begin.push_back(static_cast<int32_t>(order.size()));
    order.insert(order.end(), scratch.begin(), scratch.end());
  }
  const int32_t steps = static_cast<int32_t>(step_begin.size());
  step_begin.push_back(static_cast<int32_t>(order.size()));
  std::vector<int32_t> step_of(order.size());
  for (int32_t t = 0; t < steps; ++t)
    for (int32_t e = step_begin[t]; e < step_begin[t + 1]; ++e) step_of[e] = t;
  // before[t]: the elements of the steps before t (params_traversed by prefix sums); next[e]:
  // the step of the parameter's next use after entry e's step (steps: none)
  std::vector<int64_t> before(static_cast<size_t>(steps) + 1, 0);
  for (int32_t t = 0; t < steps; ++t) {
    int64_t n = 0;
    for (int32_t e = step_begin[t]; e < step_begin[t + 1]; ++e) n += full_numel[order[e]];
    before[t + 1] = checked_add(before[t], n, f);
  }
  std::vector<int32_t> next(order.size(), steps), seen(n_params, steps);
  for (size_t e = order.size(); e-- > 0;) {
    next[e] = seen[order[e]];
    seen[order[e]] = step_of[e];
  }
  std::vector<char> avail(n_params, 0);
  std::vector<int64_t> recent(n_params, INT64_MIN);  // __most_recent_step_id_param_fetched_for
  int64_t n_avail = 0, live = 0, peak = 0;
  for (size_t i = 0; i < n_params; ++i)
    if (k.persist[i]) avail[i] = 1, n_avail += full_numel[i];
  size_t q = 0;  // the queue's front
  // ds3b: per parameter, the event that last gathered it (2t: step t's fetch, 2t + 1: its
  // prefetch); per step, the bytes each event gathers
  std::vector<int32_t> event_of(n_params, -1);
  out.steps.assign(static_cast<size_t>(steps), Graph::Ds3Step{});
  out.gathered.clear();
  out.released.clear();
  out.gathered_begin.assign(1, 0);
  out.released_begin.assign(1, 0);
  int64_t* gathered = nullptr;  // the bytes of the event being issued
  int32_t event = -1;
  auto gather = [&](int32_t p) {
    avail[p] = 1;
    n_avail = checked_add(n_avail, full_numel[p], f);
    live = checked_add(live, full_bytes[p], f);
    *gathered = checked_add(*gathered, full_bytes[p], f);  // ds3b
    event_of[p] = event;
    out.gathered.push_back(p);  // ds3c
  };
  for (int32_t t = 0; t < steps; ++t) {
    const int32_t b = step_begin[t], e_end = step_begin[t + 1];
    Graph::Ds3Step& ev = out.steps[static_cast<size_t>(t)];  // ds3b
    gathered = &ev.fetch_bytes;
    event = 2 * t;
    int64_t not_fetched = 0;
    for (int32_t e = b; e < e_end; ++e) {
      const int32_t p = order[e];
      if (!avail[p]) gather(p);
      if (recent[p] < t) ++not_fetched;
      if (!k.persist[p]) ev.wait_event = std::max(ev.wait_event, event_of[p]);  // ds3b
    }
    gathered = &ev.prefetch_bytes;  // ds3b: issued after the wait (fetch_sub_module)
    event = 2 * t + 1;
    for (int64_t popped = 0; q < order.size() && popped < not_fetched; ++popped, ++q)
      recent[order[q]] = step_of[q];
    if (k.prefetch_bucket > 0) {
      const int64_t most = std::min(k.max_live - n_avail, k.prefetch_bucket);
      int64_t prefetching = 0;
      while (q < order.size() && prefetching < most) {
        const int32_t p = order[q];
        const int64_t used_at = step_of[q++];
        recent[p] = std::max<int64_t>(recent[p], used_at);
        if (avail[p]) continue;  // available (or a duplicate in this prefetch): skipped
        prefetching += full_numel[p];
        gather(p);
      }
    }
    out.gathered_begin.push_back(static_cast<int32_t>(out.gathered.size()));
    peak = std::max(peak, live);
    // the module's post-forward (post-backward) hook, __step_id already t + 1. ds3c: none where
    // the recompute stopped inside the module: its parameters stay gathered (ds_active_sub_
    // modules still holds it) until its backward's post hook releases them
    const bool hook = !no_release || !(*no_release)[static_cast<size_t>(t)];
    for (int32_t e = b; hook && e < e_end; ++e) {
      const int32_t p = order[e];
      if (k.persist[p] || !avail[p]) continue;
      if (recent[p] > t + 1) continue;
      if (next[e] < steps && before[next[e]] - before[t + 1] < k.reuse_distance) continue;
      avail[p] = 0;
      n_avail -= full_numel[p];
      live -= full_bytes[p];
      out.released.push_back(p);  // ds3c
    }
    out.released_begin.push_back(static_cast<int32_t>(out.released.size()));
  }
  out.peak_bytes = peak;
}

namespace {

// ds3: a buffer allocated as backward starts (with the first backward node autograd runs: the
// highest op with a backward) and freed at the step's end, or, with `at_backward_end`, once the
// backward ends (before the optimizer). Not persistent: no forward sees it.
void add_backward_buffer(Graph& g, int64_t bytes, Category cat, const char* role,
                         bool at_backward_end) {
  if (bytes <= 0) return;
  int32_t first = -1;
  for (int32_t i = static_cast<int32_t>(g.ops.size()) - 1; i >= 0 && first < 0; --i)
    if (g.ops[static_cast<size_t>(i)].has_backward) first = i;
  if (first < 0) return;  // no backward: nothing to reduce
  Storage st;
  st.bytes = bytes;
  st.dtype = DType::kBF16;
  st.category = cat;
  st.role = role;
  st.producer = first;
  g.storages.push_back(st);
  g.initial_uses.push_back(0);
  const int32_t sid = static_cast<int32_t>(g.storages.size() - 1);
  // the op's bwd_allocs again at the end of idx, with the new storage last (ids stay ascending)
  Op& op = g.ops[static_cast<size_t>(first)];
  const int32_t begin = static_cast<int32_t>(g.idx.size());
  for (int32_t k = 0; k < op.bwd_allocs.count; ++k)
    g.idx.push_back(g.idx[static_cast<size_t>(op.bwd_allocs.begin + k)]);
  g.idx.push_back(sid);
  op.bwd_allocs = {begin, op.bwd_allocs.count + 1};
  g.step_end_frees.push_back(sid);
  if (at_backward_end) g.backward_end_frees.push_back(sid);
}

}  // namespace

DeepspeedStep add_deepspeed_state(Graph& g, const ModelConfig& model, const TrainSetup& s,
                                  const std::vector<int32_t>& sharded, int64_t numel,
                                  const AddPersistent& add) {
  const char* f = "persistent bytes";
  const int64_t d = s.dp;
  // reduce_bucket_size ("auto": hidden_size^2 elements, trainer_config_finalize), bf16
  // (stage_1_and_2.py and stage3.py allocate the buckets in self.dtype, the module's)
  const int64_t bucket_bytes = checked_mul(2, ds3_knobs(model, s).reduce_bucket, f);  // ds3
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
    const DsKnobs knobs = ds3_knobs(model, s);
    const int64_t persist = knobs.persistence;
    // ds3c: the coordinator's view of every parameter (whole, before partitioning), which the
    // engine replays over its own schedule (engine.cpp ds3_enter, ds3_release)
    Graph::Ds3Params& k = g.ds3;
    k.param_of.assign(g.storages.size(), -1);
    k.numel.clear();
    k.bytes.clear();
    k.persist.clear();
    k.prefetch_bucket = knobs.prefetch_bucket;
    k.max_live = knobs.max_live;
    k.reuse_distance = knobs.reuse_distance;
    int64_t persisted_parts = 0;
    for (int32_t sid : sharded) {
      Storage& st = g.storages[sid];
      const int64_t n = st.bytes / bytes_of(st.dtype);
      k.param_of[static_cast<size_t>(sid)] = static_cast<int32_t>(k.numel.size());
      k.numel.push_back(n);
      k.bytes.push_back(st.bytes);
      k.persist.push_back(n <= persist ? 1 : 0);
      const int64_t part = checked_mul(ceil_div(n, d), bytes_of(st.dtype), f);
      if (n <= persist) persisted_parts += part;  // stays whole: st.bytes unchanged
      else st.bytes = part;
    }
    add(persisted_parts, Category::kWeights, "ZeRO-3 partitions of persisted parameters (bf16)");
    // ds3b: the replay over the trace without recompute (forward, then autograd's backward), kept
    // in g.ds3_steps. ds3c: the gathered parameters are no longer one storage held for the whole
    // step: the engine replays the coordinator over its schedule and allocates each parameter as
    // it is gathered and frees it as it is released (engine.cpp), and step() releases them all
    // before the optimizer (stage3.py _partition_all_parameters -> release_and_reset_all).
    {
      std::vector<int32_t> trace;
      g.ds3_fwd_step.assign(g.ops.size(), -1);
      g.ds3_bwd_step.assign(g.ops.size(), -1);
      for (size_t i = 0; i < g.ops.size(); ++i)
        if (ds3_is_step(g, g.ops[i])) {
          g.ds3_fwd_step[i] = static_cast<int32_t>(trace.size());
          trace.push_back(static_cast<int32_t>(i));
        }
      for (size_t i = g.ops.size(); i-- > 0;)
        if (g.ops[i].has_backward && ds3_is_step(g, g.ops[i])) {
          g.ds3_bwd_step[i] = static_cast<int32_t>(trace.size());
          trace.push_back(static_cast<int32_t>(i));
        }
      Ds3Replay r;
      ds3_replay(g, trace, r);
      g.ds3_steps = std::move(r.steps);
    }
    // stage3.py: grad_partitions_flat_buffer, this rank's gradient partition in the
    // accumulation dtype (bf16), zeros for the whole run; the IPG bucket, one bf16 flat buffer
    // of reduce_bucket_size (contiguous_gradients, default True), allocated at init.
    g.grads_bytes = checked_mul(2, partition, f);
    add(g.grads_bytes, Category::kGrads, "grad_partitions_flat_buffer (bf16 partition)");
    add(bucket_bytes, Category::kComm, "ZeRO-3 IPG bucket (bf16, reduce_bucket_size)");
    // ds3b: stage3.py reduce_independent_p_g_buckets_and_remove_grads: each gradient, as
    // autograd makes it, joins the IPG bucket; one that would overflow a non-empty bucket first
    // reduce-scatters it (__reduce_and_partition_ipg_grads, on reduce_and_partition_stream:
    // overlap_comm is True at stage 3); the epilogue reduces the rest and synchronizes the stream
    g.ds3_reduce_bucket_bytes = std::max<int64_t>(bucket_bytes, 1);
    // _prepare_fp32_grad_for_sub_group: flatten(averaged_gradients).to(fp32), the optimizer's
    // .grad of the sub-group being stepped, freed after it (_release_sub_group)
    step.with_optimizer = checked_mul(4, std::min(partition, kSubGroupSize), f);
  } else if (s.zero >= 1) {
    // ds3: stage_1_and_2.py backward(): with contiguous_gradients (default True) one bf16 IPG
    // buffer of reduce_bucket_size (two with overlap_comm, whose default is False below stage 3)
    // is allocated as each backward starts, so no forward holds it. Stage 2 reduces in backward
    // (the gradient hooks) and its epilogue (independent_gradient_partition_epilogue ->
    // _release_ipg_buffers) drops the buffer before the step; stage 1 reduces after backward
    // (reduce_gradients), copying every .grad into the buffer and pointing .grad at it
    // (reduce_independent_p_g_buckets_and_remove_grads), so the .grad of the parameters outside
    // this rank's partition keep it until zero_grad after the step.
    add_backward_buffer(g, bucket_bytes, Category::kComm,
                        "ZeRO-1/2 IPG buffer (bf16, reduce_bucket_size)", s.zero == 2);
    if (s.zero == 2) {
      // copy_grads_in_partition: this rank's gradients in one bf16 buffer of its partition
      // (grads_in_partition, allocated at the first copy in backward), each parameter's .grad
      // freed once copied; the step's averaged_gradients and the partition's .grad view it
      // until the step ends (step(): averaged_gradients[i] = None; zero_grad)
      g.grads_bytes = checked_mul(2, partition, f);
      add_backward_buffer(g, g.grads_bytes, Category::kGrads,
                          "grads_in_partition (bf16 partition)", false);
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
  // (communication_data_type, engine.py: the bf16 model's dtype). Stage 3 (ds3b): the
  // coordinator's per-module gathers and the IPG reduce-scatters above (Graph::ds3_steps,
  // ds3_reduce_bucket_bytes; engine.cpp ds3_enter, ds3_reduce), overlapped.
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
