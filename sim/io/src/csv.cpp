// CSV schema v1 (DESIGN.md §7). The column list below is the contract: columns are only ever
// appended, never renamed or reordered; sim_io::kSchemaVersion changes if that ever breaks.
//
// Value formats, chosen so that output is byte-identical run to run and locale-independent:
// integers in decimal; key knobs as their flags take them (sp "on"/"off", dropout empty when the
// config's probabilities are used, precision resolved to the regime actually simulated); fits as
// "true"/"false"; tokens_per_s with 3 decimals, mfu and hfu with 6 (fmt never uses the locale
// unless asked). A row with an error has its key columns and the error, and every result column
// empty.
#include <fmt/format.h>

#include "sim_io/output.hpp"

namespace sim_io {
namespace {

std::vector<std::string> make_columns() {
  std::vector<std::string> c = {
      "schema_version", "source", "row_index", "model", "device", "strategy", "profile",
      "precision", "attention", "dropout", "batch", "seq", "tp", "sp", "dp", "zero", "optimizer",
      "allocator",
      // Result: memory.
      "layers", "params", "params_per_rank", "peak_allocated_bytes", "peak_time_ns",
      "peak_phase", "activation_bytes_per_layer", "activation_peak_bytes", "weights_bytes",
      "grads_bytes", "optimizer_bytes", "workspace_bytes"};
  for (int i = 0; i < sim::kCategoryCount; ++i)
    c.push_back(fmt::format("peak_{}_bytes", sim::category_name(static_cast<sim::Category>(i))));
  for (const char* name :
       {"fwd_flops", "bwd_flops", "recompute_flops", "model_flops", "step_time_ns", "fwd_time_ns",
        "bwd_time_ns", "recompute_time_ns", "optimizer_time_ns", "comm_time_ns", "tokens_per_s",
        "mfu", "hfu", "fits", "headroom_bytes", "cuda_context_bytes", "comm_buffer_bytes",
        "device_bytes", "error",
        // Appended after `error` (columns only ever come at the end): the exact ledger's peak
        // and the caching allocator's reserved peak (both equal peak_allocated_bytes under exact).
        "peak_requested_bytes", "peak_reserved_bytes",
        // Offload (DESIGN.md §4): the --prefetch knob, bytes copied to the host, the peak of
        // pinned host memory, and compute's wait on copies back.
        "prefetch", "offload_bytes", "pinned_host_bytes", "offload_stall_ns",
        // Pipeline (sim/pipeline.hpp): the knobs, the stage the row describes (the worst) and
        // the micro-batches it holds in flight.
        "pp", "vpp", "num_microbatches", "pp_stage", "pp_in_flight",
        // Implementations (DESIGN.md §3): the code base simulated (a key column, appended);
        // empty under the paper profile.
        "impl",
        // Time model (DESIGN.md §5): tokens/s per GPU (a replica is tp x pp GPUs), the GPU's wait
        // on the host lane, data-parallel collectives on their stream and compute's wait on them.
        "tokens_per_s_per_gpu", "host_wait_ns", "dp_comm_ns", "comm_wait_ns",
        // Release knobs (key columns, appended): zero_grad's set_to_none (on/off) and the
        // checkpoint API's reentrancy (on/off; empty: the implementation's).
        "set_to_none", "reentrant",
        // famenc (issue 12, a key column, appended): an encoder-decoder model's decoder length
        // (--target-seq; resolved to --seq when not given); empty for other models.
        "target_seq",
        // moe (key columns, appended): expert-parallel ranks and the hottest expert's tokens
        // over the mean (1: balanced)
        "ep", "moe_imbalance",
        // feat (issue 13), key columns appended: LoRA rank (0: full fine-tuning), its targets as
        // --lora-targets names them (resolved: PEFT's default filled in), QLoRA on/off.
        "lora_rank", "lora_targets", "qlora",
        // feat (issue 13): context-parallel ranks (a key column, appended)
        "cp",
        // feat (issue 13): the FP8 linear recipe (a key column, appended; "off" without)
        "fp8",
        // implver (issue 10): the release of the implementation (--impl NAME@VERSION; a key
        // column, appended); empty under the paper profile.
        "impl_version",
        // hfimpl (issue 10): a padding attention mask (on/off; a key column, appended)
        "padding",
        // time5 (issue 11): the RMSNorm kernel (--norm-kernel default|triton; a key column,
        // appended)
        "norm_kernel",
        // fp8sac (issue 10): torch.compile of the blocks (on/off; a key column, appended)
        "compile",
        // time6 (issue 11): Megatron's gradient-accumulation fusion (--grad-accum-fusion on|off;
        // a key column, appended)
        "grad_accum_fusion",
        // polish (result columns, appended; sim/src/utilization.cpp): the peak mfu and hfu divide
        // by (the dense 16-bit peak, FLOP/s, whole number), the model FLOPs that ran on fp8
        // tensor cores, and MFU against the mixed fp8/16-bit peak (empty without fp8 GEMMs)
        "mfu_peak_flops_per_s", "fp8_model_flops", "mfu_fp8_mixed",
        // mla5 (issue 13): Megatron's MoE load-balancing loss coefficient
        // (--moe-aux-loss-coeff; a key column, appended; 0: none)
        "moe_aux_loss_coeff",
        // etp (issue 13): expert-tensor-parallel ranks (--etp, resolved: --tp when not given;
        // a key column, appended)
        "etp",
        // te_norm (issue 10): Megatron's --cross-entropy-loss-fusion (on/off; a key column,
        // appended)
        "cross_entropy_loss_fusion",
        // time7 (issue 11): Megatron's --deterministic-mode (--deterministic on|off; a key
        // column, appended)
        "deterministic",
        // moetp (issue 13): Megatron's --moe-shared-expert-overlap (on/off; a key column,
        // appended)
        "moe_shared_expert_overlap"})
    c.emplace_back(name);
  return c;
}

// Appends one field and its separator (',' before every field but the first).
class RowWriter {
 public:
  explicit RowWriter(fmt::memory_buffer& out) : out_(out) {}
  void text(std::string_view s) { sep(); append(csv_quote(s)); }
  void integer(int64_t v) { sep(); fmt::format_to(std::back_inserter(out_), "{}", v); }
  void fixed(double v, int digits) {
    sep();
    fmt::format_to(std::back_inserter(out_), "{:.{}f}", v, digits);
  }
  // mla5: the shortest decimal that reads back to v (fmt's "{}": 0, 0.01, 1e-05)
  void number(double v) { sep(); fmt::format_to(std::back_inserter(out_), "{}", v); }
  void empty(int count) {
    for (int i = 0; i < count; ++i) sep();
  }

 private:
  void sep() {
    if (!first_) out_.push_back(',');
    first_ = false;
  }
  void append(std::string_view s) { out_.append(s.data(), s.data() + s.size()); }
  fmt::memory_buffer& out_;
  bool first_ = true;
};

}  // namespace

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> columns = make_columns();
  return columns;
}

std::string csv_header() {
  std::string line = fmt::format("{}", fmt::join(csv_columns(), ","));
  line += '\n';
  return line;
}

std::string csv_quote(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char ch : field) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}

std::string csv_row(const Row& row) {
  fmt::memory_buffer buf;
  RowWriter w(buf);
  const sim::TrainSetup& s = row.key.setup;
  w.integer(kSchemaVersion);
  w.text(row.source);
  w.integer(row.row_index);
  w.text(row.key.model);
  w.text(row.key.device);
  w.text(row.key.strategy);
  w.text(sim::name(s.profile));
  w.text(sim::name(sim::resolved_precision(s)));
  w.text(sim::name(sim::resolved_attention(s)));
  w.text(s.dropout ? fmt::format("{}", *s.dropout) : std::string());
  w.integer(s.micro_batch);
  w.integer(s.seq);
  w.integer(s.tp);
  w.text(s.sp ? "on" : "off");
  w.integer(s.dp);
  w.integer(s.zero);
  w.text(sim::name(sim::resolved_optimizer(s)));  // implver: the resolved kind
  w.text(sim::name(s.allocator));

  // Columns between the key and `error`, and after it.
  constexpr int kKeyColumns = 18;
  // famenc: target_seq; moe: ep, moe_imbalance; feat: lora_rank, lora_targets, qlora, cp, fp8;
  // implver: impl_version; hfimpl: padding; time5: norm_kernel; fp8sac: compile; time6:
  // grad_accum_fusion; polish: the three MFU columns; mla5: moe_aux_loss_coeff; etp: etp;
  // te_norm: cross_entropy_loss_fusion; time7: deterministic; moetp: moe_shared_expert_overlap
  constexpr int kAfterError = 39;
  const int result_columns =
      static_cast<int>(csv_columns().size()) - kKeyColumns - 1 - kAfterError;
  const bool failed = !row.result || !row.error.empty();
  if (failed) {
    w.empty(result_columns);
  } else if (row.peak_only) {
    const sim::Result& r = *row.result;
    w.integer(r.layers);
    w.integer(r.params);
    w.integer(r.params_per_rank);
    w.integer(r.peak_allocated_bytes);
    w.empty(1);  // peak_time_ns: not measured
    w.text(sim::phase_name(r.peak_phase));
    w.empty(result_columns - 6);
  } else {
    const sim::Result& r = *row.result;
    w.integer(r.layers);
    w.integer(r.params);
    w.integer(r.params_per_rank);
    w.integer(r.peak_allocated_bytes);
    w.integer(r.peak_t_ns);
    w.text(sim::phase_name(r.peak_phase));
    w.integer(r.activation_bytes_per_layer);
    w.integer(r.activation_peak_bytes);
    w.integer(r.weights_bytes);
    w.integer(r.grads_bytes);
    w.integer(r.optimizer_bytes);
    w.integer(r.workspace_bytes);
    for (int64_t bytes : r.peak_breakdown) w.integer(bytes);
    w.integer(r.fwd_flops);
    w.integer(r.bwd_flops);
    w.integer(r.recompute_flops);
    w.integer(r.model_flops);
    w.integer(r.step_time_ns);
    w.integer(r.fwd_time_ns);
    w.integer(r.bwd_time_ns);
    w.integer(r.recompute_time_ns);
    w.integer(r.optimizer_time_ns);
    w.integer(r.comm_time_ns);
    w.fixed(r.tokens_per_s, 3);
    w.fixed(r.mfu, 6);
    w.fixed(r.hfu, 6);
    w.text(r.fits ? "true" : "false");
    w.integer(r.headroom_bytes);
    w.integer(r.cuda_context_bytes);
    w.integer(r.comm_buffer_bytes);
    w.integer(r.device_bytes);
  }
  w.text(row.error);
  if (failed) {
    w.empty(2);
  } else {
    w.integer(row.result->peak_requested_bytes);
    w.integer(row.result->peak_reserved_bytes);
  }
  w.integer(s.prefetch);
  if (failed) {
    w.empty(3);
  } else {
    w.integer(row.result->offload_bytes);
    w.integer(row.result->pinned_host_bytes);
    w.integer(row.result->offload_stall_ns);
  }
  w.integer(s.pp);
  w.integer(s.vpp);
  w.integer(s.microbatches);
  if (failed) {
    w.empty(2);
  } else {
    w.integer(row.result->pp_stage);
    w.integer(row.result->pp_in_flight);
  }
  w.text(s.impl ? sim::name(*s.impl) : std::string_view());
  if (failed || row.peak_only) {
    w.empty(4);
  } else {
    w.fixed(row.result->tokens_per_s_per_gpu, 3);
    w.integer(row.result->host_wait_ns);
    w.integer(row.result->dp_comm_ns);
    w.integer(row.result->comm_wait_ns);
  }
  w.text(sim::resolved_set_to_none(s) ? "on" : "off");  // exec10: the release's when not given
  w.text(s.reentrant ? (*s.reentrant ? "on" : "off") : "");
  if (s.target_seq) w.integer(*s.target_seq);  // famenc
  else w.empty(1);
  w.integer(s.ep);  // moe
  w.fixed(s.moe_imbalance, 2);
  w.integer(s.lora_rank);  // feat
  w.text(sim::lora_targets_name(s.lora_targets));
  w.text(s.qlora ? "on" : "off");
  w.integer(s.cp);
  w.text(sim::name(s.fp8));
  w.text(s.impl ? s.impl_version : std::string_view());  // implver
  w.text(s.padding ? "on" : "off");  // hfimpl
  w.text(sim::name(s.norm_kernel));  // time5 (issue 11)
  w.text(s.compile ? "on" : "off");  // fp8sac (issue 10)
  w.text(s.grad_accum_fusion ? "on" : "off");  // time6 (issue 11)
  if (failed || row.peak_only) {  // polish: MFU's peaks
    w.empty(3);
  } else {
    const sim::Result& r = *row.result;
    w.fixed(r.mfu_peak_flops_per_s, 0);
    w.integer(r.fp8_model_flops);
    if (r.fp8_model_flops > 0) w.fixed(r.mfu_fp8_mixed, 6);
    else w.empty(1);
  }
  w.number(s.moe_aux_loss_coeff);    // mla5 (issue 13)
  w.integer(sim::resolved_etp(s));   // etp (issue 13)
  w.text(s.cross_entropy_loss_fusion ? "on" : "off");  // te_norm (issue 10)
  w.text(s.deterministic ? "on" : "off");  // time7 (issue 11)
  w.text(s.moe_shared_expert_overlap ? "on" : "off");  // moetp (issue 13)
  buf.push_back('\n');
  return fmt::to_string(buf);
}

}  // namespace sim_io
