// JSON output of one row (DESIGN.md §7). Keys come in a fixed order (ordered_json keeps insertion
// order): the key fields as the CSV names them, then every Result figure under its CSV name, the
// breakdown at the peak as an object by category, and the per-block activation vector. Numbers
// are written by nlohmann's shortest round-trip formatting, so output is byte-identical run to run.
#include <nlohmann/json.hpp>

#include "sim_io/output.hpp"

namespace sim_io {

std::string result_json(const Row& row) {
  using Json = nlohmann::ordered_json;
  const sim::TrainSetup& s = row.key.setup;
  Json j;
  j["schema_version"] = kSchemaVersion;
  j["source"] = row.source;
  j["row_index"] = row.row_index;
  j["model"] = row.key.model;
  j["device"] = row.key.device;
  j["strategy"] = row.key.strategy;
  j["profile"] = sim::name(s.profile);
  j["impl"] = s.impl ? Json(sim::name(*s.impl)) : Json(nullptr);
  j["precision"] = sim::name(sim::resolved_precision(s));
  j["attention"] = sim::name(sim::resolved_attention(s));
  j["dropout"] = s.dropout ? Json(*s.dropout) : Json(nullptr);
  j["batch"] = s.micro_batch;
  j["seq"] = s.seq;
  j["tp"] = s.tp;
  j["sp"] = s.sp;
  j["dp"] = s.dp;
  j["zero"] = s.zero;
  j["optimizer"] = sim::name(sim::resolved_optimizer(s));  // implver: the resolved kind
  j["allocator"] = sim::name(s.allocator);
  j["prefetch"] = s.prefetch;
  j["pp"] = s.pp;
  j["vpp"] = s.vpp;
  j["num_microbatches"] = s.microbatches;
  j["set_to_none"] = sim::resolved_set_to_none(s);  // exec10: the resolved value
  j["reentrant"] = s.reentrant ? Json(*s.reentrant) : Json(nullptr);
  j["target_seq"] = s.target_seq ? Json(*s.target_seq) : Json(nullptr);  // famenc
  j["ep"] = s.ep;  // moe
  j["moe_imbalance"] = s.moe_imbalance;
  j["moe_capacity"] = s.moe_capacity ? Json(*s.moe_capacity) : Json(nullptr);
  j["moe_aux_loss_coeff"] = s.moe_aux_loss_coeff;  // mla5
  j["etp"] = sim::resolved_etp(s);  // etp (issue 13): --etp, else --tp
  j["cross_entropy_loss_fusion"] = s.cross_entropy_loss_fusion;  // te_norm (issue 10)
  j["lora_rank"] = s.lora_rank;  // feat
  j["lora_targets"] = sim::lora_targets_name(s.lora_targets);
  j["qlora"] = s.qlora;
  j["lora_dropout"] = s.lora_dropout;  // feat13 (issue 13)
  j["padding"] = s.padding;  // hfimpl
  j["norm_kernel"] = std::string(sim::name(s.norm_kernel));  // time5 (issue 11)
  j["compile"] = s.compile;  // fp8sac (issue 10)
  // ds3 (issue 10): the DeepSpeed knobs the user set (null: the HF Trainer's "auto")
  auto ds = [](int64_t v) { return v >= 0 ? Json(v) : Json(nullptr); };
  j["ds_reduce_bucket"] = ds(s.ds_reduce_bucket);
  j["ds_prefetch_bucket"] = ds(s.ds_prefetch_bucket);
  j["ds_persistence_threshold"] = ds(s.ds_persistence_threshold);
  j["ds_max_live"] = ds(s.ds_max_live);
  j["ds_max_reuse_distance"] = ds(s.ds_max_reuse_distance);
  j["grad_accum_fusion"] = s.grad_accum_fusion;  // time6 (issue 11)
  j["deterministic"] = s.deterministic;  // time7 (issue 11)
  j["moe_shared_expert_overlap"] = s.moe_shared_expert_overlap;  // moetp (issue 13)
  // tece (issue 10): --transformer-impl, as the CSV column (null outside megatron)
  j["transformer_impl"] = s.impl != sim::Impl::kMegatron
                              ? Json(nullptr)
                              : Json(std::string(s.local_spec ? "local" : "transformer_engine"));
  j["cp"] = s.cp;
  j["fp8"] = std::string(sim::name(s.fp8));
  j["impl_version"] = s.impl ? Json(std::string(s.impl_version)) : Json(nullptr);  // implver

  if (row.result && row.error.empty()) {
    const sim::Result& r = *row.result;
    j["layers"] = r.layers;
    j["params"] = r.params;
    j["params_per_rank"] = r.params_per_rank;
    j["peak_allocated_bytes"] = r.peak_allocated_bytes;
    j["peak_requested_bytes"] = r.peak_requested_bytes;
    j["peak_reserved_bytes"] = r.peak_reserved_bytes;
    j["peak_time_ns"] = r.peak_t_ns;
    j["peak_phase"] = sim::phase_name(r.peak_phase);
    j["peak_op"] = r.peak_op;
    j["activation_bytes_per_layer"] = r.activation_bytes_per_layer;
    j["activation_peak_bytes"] = r.activation_peak_bytes;
    j["block_peak_bytes"] = r.block_peak_bytes;
    j["baseline_bytes"] = r.baseline_bytes;
    j["end_bytes"] = r.end_bytes;
    j["weights_bytes"] = r.weights_bytes;
    j["grads_bytes"] = r.grads_bytes;
    j["optimizer_bytes"] = r.optimizer_bytes;
    j["workspace_bytes"] = r.workspace_bytes;
    Json breakdown = Json::object();
    for (int i = 0; i < sim::kCategoryCount; ++i)
      breakdown[std::string(sim::category_name(static_cast<sim::Category>(i)))] =
          r.peak_breakdown[static_cast<std::size_t>(i)];
    j["peak_breakdown_bytes"] = std::move(breakdown);
    j["activation_bytes_per_block"] = r.activation_bytes_per_block;
    j["fwd_flops"] = r.fwd_flops;
    j["bwd_flops"] = r.bwd_flops;
    j["recompute_flops"] = r.recompute_flops;
    j["model_flops"] = r.model_flops;
    j["step_time_ns"] = r.step_time_ns;
    j["fwd_time_ns"] = r.fwd_time_ns;
    j["bwd_time_ns"] = r.bwd_time_ns;
    j["recompute_time_ns"] = r.recompute_time_ns;
    j["optimizer_time_ns"] = r.optimizer_time_ns;
    j["comm_time_ns"] = r.comm_time_ns;
    j["offload_stall_ns"] = r.offload_stall_ns;
    j["offload_bytes"] = r.offload_bytes;
    j["pinned_host_bytes"] = r.pinned_host_bytes;
    j["pp_stage"] = r.pp_stage;
    j["pp_in_flight"] = r.pp_in_flight;
    j["stash_bytes"] = r.stash_bytes;
    j["tokens_per_s"] = r.tokens_per_s;
    j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    j["host_wait_ns"] = r.host_wait_ns;
    j["dp_comm_ns"] = r.dp_comm_ns;
    j["comm_wait_ns"] = r.comm_wait_ns;
    j["mfu"] = r.mfu;
    j["hfu"] = r.hfu;
    j["mfu_peak_flops_per_s"] = r.mfu_peak_flops_per_s;  // cpfp8: the peak mfu/hfu divide by
    j["fp8_model_flops"] = r.fp8_model_flops;
    j["mfu_fp8_mixed"] = r.mfu_fp8_mixed;
    j["fits"] = r.fits;
    j["headroom_bytes"] = r.headroom_bytes;
    j["cuda_context_bytes"] = r.cuda_context_bytes;
    j["comm_buffer_bytes"] = r.comm_buffer_bytes;
    j["device_bytes"] = r.device_bytes;
    // DeepSpeed ZeRO-3 as replayed (ds3c; Result::ds3_*) and Megatron's TP all-reduce of the
    // replicated gradients (feat14); 0 where the set-up has none. JSON only: not CSV columns.
    j["ds3_gathered_peak_bytes"] = r.ds3_gathered_peak_bytes;
    j["ds3_gather_bytes"] = r.ds3_gather_bytes;
    j["ds3_recompute_gather_bytes"] = r.ds3_recompute_gather_bytes;
    j["tp_grad_allreduce_bytes"] = r.tp_grad_allreduce_bytes;
    j["tp_grad_allreduce_ns"] = r.tp_grad_allreduce_ns;
  }
  j["error"] = row.error.empty() ? Json(nullptr) : Json(row.error);
  return j.dump(2);
}

}  // namespace sim_io
