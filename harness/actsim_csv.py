"""actsim's CSV schema v1 as the Python harness writes it (torch_reference.py, measure_torch.py).

Standard library only. tests/torch_reference.cmake and tests/measure_torch.cmake hold COLUMNS
equal to `actsim run --format csv`'s header.
"""

SCHEMA_VERSION = 1

# sim/io/src/csv.cpp make_columns(), in order (the contract: columns are only ever appended).
CATEGORIES = ["weights", "grads", "optimizer", "activations", "recomputed", "activation_grads",
              "weight_casts", "transient", "workspace", "comm"]
COLUMNS = (["schema_version", "source", "row_index", "model", "device", "strategy", "profile",
            "precision", "attention", "dropout", "batch", "seq", "tp", "sp", "dp", "zero",
            "optimizer", "allocator", "layers", "params", "params_per_rank",
            "peak_allocated_bytes", "peak_time_ns", "peak_phase", "activation_bytes_per_layer",
            "activation_peak_bytes", "weights_bytes", "grads_bytes", "optimizer_bytes",
            "workspace_bytes"]
           + ["peak_%s_bytes" % c for c in CATEGORIES]
           + ["fwd_flops", "bwd_flops", "recompute_flops", "model_flops", "step_time_ns",
              "fwd_time_ns", "bwd_time_ns", "recompute_time_ns", "optimizer_time_ns",
              "comm_time_ns", "tokens_per_s", "mfu", "hfu", "fits", "headroom_bytes",
              "cuda_context_bytes", "comm_buffer_bytes", "device_bytes", "error",
              "peak_requested_bytes", "peak_reserved_bytes", "prefetch", "offload_bytes",
              "pinned_host_bytes", "offload_stall_ns", "pp", "vpp", "num_microbatches",
              "pp_stage", "pp_in_flight", "impl", "tokens_per_s_per_gpu", "host_wait_ns",
              "dp_comm_ns", "comm_wait_ns", "set_to_none", "reentrant",
              "target_seq",  # famenc: T5's decoder length (empty: not an encoder-decoder)
              "ep", "moe_imbalance",  # moe
              # feat (issue 13): LoRA key columns
              "lora_rank", "lora_targets", "qlora", "cp", "fp8",
              # implver (issue 10): the implementation's release (empty: its default)
              "impl_version",
              # hfimpl (issue 10): a padding attention mask (on/off)
              "padding",
              # time5 (issue 11): the RMSNorm kernel (--norm-kernel; the eager code: default)
              "norm_kernel",
              # fp8sac (issue 10): torch.compile of the blocks (on/off; the eager code: off)
              "compile",
              # time6 (issue 11): Megatron's gradient-accumulation fusion (on/off)
              "grad_accum_fusion",
              # polish: MFU's peak and the fp8 share (results: empty in measured rows)
              "mfu_peak_flops_per_s", "fp8_model_flops", "mfu_fp8_mixed",
              # mla5 (issue 13): Megatron's MoE aux loss coefficient (0: none)
              "moe_aux_loss_coeff",
              "etp",  # etp (issue 13): expert-tensor-parallel ranks (resolved: --tp)
              "cross_entropy_loss_fusion",  # te_norm (issue 10)
              # time7 (issue 11): Megatron's --deterministic-mode (on/off)
              "deterministic",
              # moetp (issue 13): Megatron's --moe-shared-expert-overlap (on/off)
              "moe_shared_expert_overlap"])


def csv_field(v):
    """One RFC 4180 field (quoted when it holds a comma, quote or line break)."""
    s = str(v)
    if any(c in s for c in ",\"\r\n"):
        s = '"' + s.replace('"', '""') + '"'
    return s
