#include "flags.hpp"

#include <CLI/CLI.hpp>

#include "axes.hpp"
#include "sim/error.hpp"

namespace cli_common {

void add_common_flags(CLI::App& app, CommonFlags& f, const FlagOptions& options) {
  // Plain string options: lists, ranges and names are parsed by parse_axes, not by CLI11, so
  // every flag's errors read the same ("actsim: error: --seq: 1k:x: ...").
  const auto add = [&app](const char* name, std::string& value, const std::string& help) {
    return app.add_option(name, value, help)->capture_default_str()->group("Model and setup");
  };
  add("--model", f.model, "model names (models/*.json) or paths to a config.json");
  add("--device", f.device, "GPU names (models/devices/*.json) or paths");
  if (options.strategy) {
    add("--strategy", f.strategy,
        "none, full, every:K, block:K, sqrt, selective, sac:mm, sac:torchtitan, layer-sac:K, offload, offload+full, "
        "custom:none@0-3+full@4-11+seg@12-23/4 (also sel@, sac@, offload@, offload-full@), "
        "budget:60GiB (the planner's plan)");
  }
  add("--profile", f.profile, "pytorch or paper (Korthikanti et al. exactly)");
  add("--impl", f.impl,
      "the code base simulated: " + sim::impl_names() +
          " (default: hf for HuggingFace configs, megatron for actsim GPT files); NAME@VERSION "
          "picks a release (the first of each is its default): " + [] {
            std::string r;  // implver: every row of the implementation table
            for (const sim::ImplSpec& s : sim::implementations())
              r += (r.empty() ? "" : ", ") + std::string(s.name) + "@" + std::string(s.version_key);
            return r;
          }());
  add("--precision", f.precision, "bf16-mixed, bf16-amp, fp16-amp, fp32, fsdp2-bf16, deepspeed-bf16 (default: the implementation's)");
  add("--attention", f.attention,
      "standard (eager) or flash (SDPA / fused kernels); default: the implementation's");
  add("--dropout", f.dropout, "dropout probability for all sites (default: the config's)");
  add("--batch", f.batch, "micro-batch size");
  add("--seq", f.seq,
      "sequence length (default 1024; ViT: its token count, (image/patch)^2 + 1; T5: the "
      "encoder's)");
  add("--target-seq", f.target_seq,
      "encoder-decoder models (T5): the decoder's length, one value (default: --seq)");
  add("--tp", f.tp, "tensor-parallel ranks");
  // Not add(): a captured default would be taken as the value of a bare "--sp".
  app.add_option("--sp", f.sp, "sequence parallelism: on or off; alone means on (default: off)")
      ->expected(0, 1)
      ->group("Model and setup");
  add("--dp", f.dp, "data-parallel ranks");
  add("--zero", f.zero, "ZeRO stage 0-3 over the data-parallel ranks");
  add("--optimizer", f.optimizer,
      "adam (foreach), adam-fused, adam-loop (per-parameter: HF adamw_hf, single-tensor), sgd "
      "(default: the implementation's)");
  add("--set-to-none", f.set_to_none,
      "on: zero_grad frees the gradients between steps (torch >= 2.0); off: zeroed and kept "
      "(torch < 2.0, HF's Trainer of early 2022); default: the release's");
  add("--reentrant", f.reentrant,
      "on|off: checkpoint with use_reentrant=True (the whole segment replayed, its output kept "
      "to its backward) or False (stops at the last save); default: the implementation's");
  // feat (issue 13): LoRA / QLoRA
  add("--lora-rank", f.lora_rank,
      "LoRA adapters of this rank (HF PEFT; base frozen); 0: full fine-tuning");
  add("--lora-targets", f.lora_targets,
      "LoRA target modules: q,k,v,o,gate,up,down, MLA's q_a,q_b,kv_a,kv_b, Phi-3's gate_up "
      "(joined by , or +) or all-linear (default: PEFT's for the family)");
  app.add_option("--qlora", f.qlora,
                 "QLoRA: frozen linears in 4-bit NF4 (bitsandbytes); on or off; alone means on")
      ->expected(0, 1)
      ->group("Model and setup");
  add("--lora-dropout", f.lora_dropout,  // feat13 (issue 13)
      "PEFT's lora_dropout: nn.Dropout(P) on each adapter's input (a 1-byte mask and the dropped "
      "copy kept per adapted linear); 0, PEFT's default: none");
  add("--cp", f.cp,
      "context-parallel ranks (ring attention: megatron, torchtitan); the sequence must divide "
      "into 2 x cp chunks when causal");
  add("--fp8", f.fp8,
      "FP8 linears: off, te-delayed, te-current (Transformer Engine: megatron, bf16-mixed), "
      "torchao-tensorwise, torchao-rowwise (Float8Linear: torchtitan, fsdp2-bf16); needs fp8 GPUs");
  // hfimpl (issue 10): a padding attention mask (HF only)
  add("--padding", f.padding,
      "on|off: the batch is padded and HF gets an attention mask (4-D additive mask; SDPA runs "
      "its memory-efficient kernel; GQA K/V repeated); off: no padding (default)");
  // time5 (issue 11): the RMSNorm kernel, a train-config setting (torchtitan's norm_type)
  add("--norm-kernel", f.norm_kernel,
      "default|triton: the RMSNorm kernel; triton: torchtitan's fused Triton RMSNorm (norm_type = "
      "fused_rmsnorm, torchtitan@9dec370); default: the implementation's own op list");
  // fp8sac (issue 10): torch.compile of each block (torchtitan's training.compile)
  add("--compile", f.compile,
      "on|off: the blocks run under torch.compile (torchtitan); modeled: what a selective-AC "
      "region keeps after AOTAutograd's partitioner, torchao's fused amax; default off");
  // time6 (issue 11): Megatron's gradient-accumulation fusion, a run setting
  add("--grad-accum-fusion", f.grad_accum_fusion,
      "on|off: Megatron's gradient-accumulation fusion (on, its default: the wgrad GEMM adds into "
      "the fp32 main_grad); off: --no-gradient-accumulation-fusion (a 16-bit wgrad, then an add)");
  // te_norm (issue 10): Megatron's fused cross entropy, a run setting
  add("--cross-entropy-loss-fusion", f.cross_entropy_loss_fusion,
      "on|off: Megatron's --cross-entropy-loss-fusion (its torch.compile'd vocab-parallel cross "
      "entropy, cross_entropy_fusion_impl native); default off, as Megatron's");
  // ds3 (issue 10): the HF Trainer's DeepSpeed ZeRO config (deepspeed-bf16), in elements
  add("--ds-reduce-bucket", f.ds_reduce_bucket,
      "DeepSpeed (hf under --dp, --zero >= 1): zero_optimization.reduce_bucket_size in elements, "
      "a list (default \"auto\": hidden^2)");
  add("--ds-prefetch-bucket", f.ds_prefetch_bucket,
      "DeepSpeed ZeRO-3: stage3_prefetch_bucket_size in elements, a list (default \"auto\": 0.9 hidden^2)");
  add("--ds-persistence-threshold", f.ds_persistence_threshold,
      "DeepSpeed ZeRO-3: stage3_param_persistence_threshold in elements, a list (default \"auto\": "
      "10 hidden)");
  add("--ds-max-live", f.ds_max_live,
      "DeepSpeed ZeRO-3: stage3_max_live_parameters, a list (default 1e9 = 1000000000)");
  add("--ds-max-reuse-distance", f.ds_max_reuse_distance,
      "DeepSpeed ZeRO-3: stage3_max_reuse_distance in elements, a list (default 1000000000)");
  // time7 (issue 11): Megatron's --deterministic-mode, a run setting
  add("--deterministic", f.deterministic,
      "on|off: Megatron's --deterministic-mode (on: torch.use_deterministic_algorithms(True), whose "
      "fill_uninitialized_memory writes NaN into each tensor Transformer Engine allocates; off, "
      "the default)");
  // moetp (issue 13): Megatron's --moe-shared-expert-overlap, a run setting
  add("--moe-shared-expert-overlap", f.moe_shared_expert_overlap,
      "on|off: MoE (megatron, shared experts): Megatron's --moe-shared-expert-overlap (the "
      "shared experts inside the alltoall dispatcher, their input gathered and kept whole); "
      "default off");
  // tece (issue 10): Megatron's --transformer-impl, a run setting
  add("--transformer-impl", f.transformer_impl,
      "transformer_engine|local: Megatron's --transformer-impl (transformer_engine, the default: "
      "TE's layer spec; local: Megatron's own linears, core attention and norms)");
  add("--allocator", f.allocator,
      "exact, caching, caching-expandable (PyTorch's CUDA caching allocator; default exact)");
  add("--prefetch", f.prefetch,
      "offload strategies: blocks whose saved tensors are copied back ahead of their backward "
      "(a list is swept)");
  add("--pp", f.pp, "pipeline stages (1F1B schedule; per-stage peaks, the worst in the summary)");
  add("--vpp", f.vpp, "model chunks per pipeline stage: the interleaved schedule when > 1");
  add("--num-microbatches", f.microbatches,
      "micro-batches per step (gradient accumulation; the pipeline's N)");
  add("--ep", f.ep,
      "expert-parallel ranks (MoE): routed experts divided over them, all-to-all dispatch; must "
      "divide the experts and --dp");
  add("--moe-imbalance", f.moe_imbalance,
      "MoE: the hottest expert receives F times the mean tokens (default 1: balanced)");
  add("--moe-capacity", f.moe_capacity,
      "MoE (megatron): capacity factor, tokens over it dropped and experts padded to it "
      "(default: dropless)");
  add("--moe-aux-loss-coeff", f.moe_aux_loss_coeff,  // mla5
      "MoE (megatron): the load-balancing loss coefficient, Megatron's --moe-aux-loss-coeff "
      "(default 0, Megatron's: no aux loss)");
  add("--etp", f.etp,  // etp (issue 13)
      "MoE (megatron): expert-tensor-parallel ranks, Megatron's --expert-tensor-parallel-size: "
      "each expert's width split over them (default: --tp, as Megatron); a list is swept");
  add("--gpus-per-node", f.gpus_per_node,
      "GPUs per node joined by NVLink; groups spanning nodes use the device's network bandwidth");
  if (options.output) {
    app.add_option("--format", f.format, options.formats)->group("Output");
    app.add_option("-o,--output", f.output, "write to this file (via FILE.partial) instead of stdout")
        ->group("Output");
  }
  app.footer(
      "Every model-and-setup flag takes a comma list; numeric ones also take inclusive ranges\n"
      "start:stop[:step] with an additive step or a multiplicative xN, and sizes take k = 1024\n"
      "and M = 1024^2: --seq 1k:32k:x2 is 1024, 2048, ..., 32768. Lists make the cartesian\n"
      "product: model outermost, then device, strategy, profile, impl, precision, attention, dropout,\n"
      "batch, seq, tp, sp, dp, zero, optimizer, allocator, ep, lora-rank, cp, fp8, etp, lora-dropout,\n"
      "ds-reduce-bucket, ds-prefetch-bucket, ds-persistence-threshold, ds-max-live,\n"
      "ds-max-reuse-distance, prefetch (fastest).");
}

Axes parse_axes(const CommonFlags& f) {
  Axes a;
  a.models = split_list(f.model, "--model");
  a.devices = split_list(f.device, "--device");
  a.strategies = parse_strategy_axis(f.strategy);
  a.profiles = parse_profile_axis(f.profile);
  if (f.precision.empty()) {
    a.precisions = {std::nullopt};
  } else {
    for (sim::Precision p : parse_precision_axis(f.precision)) a.precisions.emplace_back(p);
  }
  if (f.impl.empty()) {
    a.impls = {std::nullopt};
  } else {
    for (const sim::ImplChoice& i : parse_impl_axis(f.impl)) a.impls.emplace_back(i);
  }
  if (f.attention.empty()) {
    a.attentions = {std::nullopt};
  } else {
    for (sim::AttentionKind k : parse_attention_axis(f.attention)) a.attentions.emplace_back(k);
  }
  if (f.dropout.empty()) {
    a.dropouts = {std::nullopt};
  } else {
    for (double p : parse_real_axis(f.dropout, "--dropout")) {
      if (p < 0.0 || p >= 1.0)
        throw sim::ConfigError("--dropout", f.dropout, "every probability must be in [0, 1)");
      a.dropouts.emplace_back(p);
    }
  }
  a.batches = parse_int_axis(f.batch, "--batch", true, 1);
  a.seq_default = f.seq.empty();  // famenc: the model's own length where it has one
  a.seqs = parse_int_axis(a.seq_default ? std::string("1024") : f.seq, "--seq", true, 1);
  a.tps = parse_int_axis(f.tp, "--tp", false, 1);
  a.sps = parse_switch_axis(f.sp, "--sp");
  a.dps = parse_int_axis(f.dp, "--dp", false, 1);
  a.zero_default = f.zero.empty();  // feat3: fsdp2-bf16 then shards (resolve_setup)
  a.zeros = parse_int_axis(a.zero_default ? std::string("0") : f.zero, "--zero", false, 0, 3);
  if (f.optimizer.empty()) {  // implver: the implementation's default
    a.optimizers = {std::nullopt};
  } else {
    for (sim::Optimizer o : parse_optimizer_axis(f.optimizer)) a.optimizers.emplace_back(o);
  }
  a.allocators = parse_allocator_axis(f.allocator);
  const auto one = [](const std::string& text, const char* flag, int64_t min) {
    const std::vector<int64_t> v = parse_int_axis(text, flag, false, min);
    if (v.size() != 1) throw sim::ConfigError(flag, text, "takes one value, not a list");
    return v.front();
  };
  // on|off flags that take one value (not sweep axes)
  const auto one_switch = [](const std::string& text, const char* flag) {
    const std::vector<bool> v = parse_switch_axis(text, flag);
    if (v.size() != 1) throw sim::ConfigError(flag, text, "takes one value, not a list");
    return v.front();
  };
  a.prefetches = parse_int_axis(f.prefetch, "--prefetch", false, 0);  // polish: a list
  a.pp = one(f.pp, "--pp", 1);
  a.vpp = one(f.vpp, "--vpp", 1);
  a.microbatches = one(f.microbatches, "--num-microbatches", 1);
  a.gpus_per_node = one(f.gpus_per_node, "--gpus-per-node", 1);
  if (!f.set_to_none.empty()) {  // exec10: not given: the release's default
    const std::vector<bool> v = parse_switch_axis(f.set_to_none, "--set-to-none");
    if (v.size() != 1) throw sim::ConfigError("--set-to-none", f.set_to_none, "takes one value, not a list");
    a.set_to_none = v.front();
  }
  if (!f.target_seq.empty()) a.target_seq = one(f.target_seq, "--target-seq", 1);  // famenc
  {  // moe
    a.eps = parse_int_axis(f.ep, "--ep", false, 1);  // a list (feat2)
    const std::vector<double> im = parse_real_axis(f.moe_imbalance, "--moe-imbalance");
    if (im.size() != 1)
      throw sim::ConfigError("--moe-imbalance", f.moe_imbalance, "takes one value, not a list");
    a.moe_imbalance = im.front();
    if (!f.moe_capacity.empty()) {
      const std::vector<double> c = parse_real_axis(f.moe_capacity, "--moe-capacity");
      if (c.size() != 1)
        throw sim::ConfigError("--moe-capacity", f.moe_capacity, "takes one value, not a list");
      a.moe_capacity = c.front();
    }
    // mla5: --moe-aux-loss-coeff (one value)
    const std::vector<double> ac = parse_real_axis(f.moe_aux_loss_coeff, "--moe-aux-loss-coeff");
    if (ac.size() != 1)
      throw sim::ConfigError("--moe-aux-loss-coeff", f.moe_aux_loss_coeff, "takes one value, not a list");
    a.moe_aux_loss_coeff = ac.front();
    // etp (issue 13); feat13: a list (swept like --tp); not given: {0}, --tp per point
    if (!f.etp.empty()) a.etps = parse_int_axis(f.etp, "--etp", false, 1);
  }
  if (!f.reentrant.empty()) a.reentrant = one_switch(f.reentrant, "--reentrant");
  // feat (issue 13): context parallelism, LoRA / QLoRA
  // --cp, --fp8 and --lora-rank are lists (feat2)
  a.cps = parse_int_axis(f.cp, "--cp", false, 1);
  a.fp8s = parse_fp8_axis(f.fp8);
  a.lora_ranks = parse_int_axis(f.lora_rank, "--lora-rank", false, 0);
  if (!f.lora_targets.empty()) {
    const std::optional<uint32_t> t = sim::parse_lora_targets(f.lora_targets);
    if (!t)
      throw sim::ConfigError("--lora-targets", f.lora_targets,
                             "expected a comma list of q, k, v, o, gate, up, down, q_a, q_b, kv_a, "
                             "kv_b, gate_up, experts.gate_up_proj, experts.down_proj, or all-linear");
    a.lora_targets = *t;
  }
  a.qlora = one_switch(f.qlora, "--qlora");
  a.lora_dropouts = parse_real_axis(f.lora_dropout, "--lora-dropout");  // feat13: checked per row
  a.padding = one_switch(f.padding, "--padding");  // hfimpl
  {  // time5 (issue 11)
    const std::optional<sim::NormKernel> k = sim::parse_norm_kernel(f.norm_kernel);
    if (!k) throw sim::ConfigError("--norm-kernel", f.norm_kernel, "expected default or triton");
    a.norm_kernel = *k;
  }
  a.compile = one_switch(f.compile, "--compile");  // fp8sac (issue 10)
  // ds3 (issue 10): >= 0 each. ds3c: each a sweep list (like --tp 1,2,4); not given: "auto"
  if (!f.ds_reduce_bucket.empty())
    a.ds_reduce_buckets = parse_int_axis(f.ds_reduce_bucket, "--ds-reduce-bucket", false, 0);
  if (!f.ds_prefetch_bucket.empty())
    a.ds_prefetch_buckets = parse_int_axis(f.ds_prefetch_bucket, "--ds-prefetch-bucket", false, 0);
  if (!f.ds_persistence_threshold.empty())
    a.ds_persistence_thresholds =
        parse_int_axis(f.ds_persistence_threshold, "--ds-persistence-threshold", false, 0);
  if (!f.ds_max_live.empty()) a.ds_max_lives = parse_int_axis(f.ds_max_live, "--ds-max-live", false, 0);
  if (!f.ds_max_reuse_distance.empty())
    a.ds_max_reuse_distances =
        parse_int_axis(f.ds_max_reuse_distance, "--ds-max-reuse-distance", false, 0);
  a.grad_accum_fusion = one_switch(f.grad_accum_fusion, "--grad-accum-fusion");  // time6
  a.cross_entropy_loss_fusion =  // te_norm (issue 10)
      one_switch(f.cross_entropy_loss_fusion, "--cross-entropy-loss-fusion");
  a.deterministic = one_switch(f.deterministic, "--deterministic");  // time7 (issue 11)
  a.moe_shared_expert_overlap =  // moetp (issue 13)
      one_switch(f.moe_shared_expert_overlap, "--moe-shared-expert-overlap");
  // tece (issue 10): one value, Megatron's two names
  if (f.transformer_impl != "transformer_engine" && f.transformer_impl != "local")
    throw sim::ConfigError("--transformer-impl", "transformer_impl",
                           "'" + f.transformer_impl + "' is not transformer_engine or local");
  a.local_spec = f.transformer_impl == "local";
  return a;
}

Format parse_format(const std::string& text, const std::string& accepted, Format fallback) {
  if (text.empty()) return fallback;
  const std::string bounded = "|" + accepted + "|";
  if (bounded.find("|" + text + "|") == std::string::npos)
    throw sim::ConfigError("--format", text, "expected " + accepted);
  if (text == "csv") return Format::kCsv;
  if (text == "json") return Format::kJson;
  return Format::kTable;
}

}  // namespace cli_common
