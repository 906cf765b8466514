// The common flags (DESIGN.md §7), written once for every front end: the text as typed, the CLI11
// binding, and the parsed axes. Only flags.cpp includes CLI11 (slow to compile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/setup.hpp"
#include "sim/strategy.hpp"

namespace CLI {
class App;
}

namespace cli_common {

// The flags' text as typed; the initial values are the documented defaults.
struct CommonFlags {
  std::string model = "gpt2-small";    // --model: names or paths, comma list
  std::string device = "h100-sxm";     // --device
  std::string strategy = "none";       // --strategy
  std::string profile = "pytorch";     // --profile
  std::string impl;                    // --impl; empty: the model's default implementation
  std::string precision;               // --precision; empty: the profile's default
  std::string attention;               // --attention; empty: the implementation's default
  std::string dropout;                 // --dropout; empty: the model config's probabilities
  std::string batch = "1";             // --batch (micro-batch size)
  std::string seq;                     // --seq; empty: 1024, or the model's own (ViT: its tokens)
  std::string tp = "1";                // --tp
  std::string sp = "off";              // --sp; given alone it is "" (on)
  std::string dp = "1";                // --dp
  std::string zero;                    // --zero (feat3: empty: not given, 0)
  std::string optimizer;               // --optimizer; empty: the implementation's (implver)
  std::string allocator = "exact";     // --allocator
  std::string prefetch = "1";          // --prefetch (polish: a list, swept)
  std::string pp = "1";                // --pp (one value)
  std::string vpp = "1";               // --vpp (one value)
  std::string microbatches = "1";      // --num-microbatches (one value)
  std::string gpus_per_node = "8";     // --gpus-per-node (one value)
  std::string set_to_none;             // --set-to-none on|off (one value; exec10: empty: the release's)
  std::string reentrant;               // --reentrant on|off (one value); empty: the impl's
  // moe (one value each)
  std::string ep = "1";                // --ep: expert-parallel ranks (a list)
  std::string moe_imbalance = "1";     // --moe-imbalance: hottest expert's tokens / mean
  std::string moe_capacity;            // --moe-capacity: capacity factor; empty: dropless
  std::string moe_aux_loss_coeff = "0";  // mla5: --moe-aux-loss-coeff (one value)
  std::string etp;                     // etp (issue 13): --etp (feat13: a list); empty: --tp
  // --- feat (issue 13) ---
  std::string lora_rank = "0";         // --lora-rank (a list); 0: full fine-tuning
  std::string lora_targets;            // --lora-targets (one value); empty: PEFT's default
  std::string qlora = "off";           // --qlora on|off; given alone it is "" (on)
  std::string cp = "1";                // --cp (a list): context-parallel ranks
  std::string fp8 = "off";             // --fp8 (a list): the FP8 linear recipe
  // --- end feat ---
  std::string padding = "off";         // hfimpl: --padding on|off (one value)
  std::string format;                  // --format; empty: the verb's default
  std::string output;                  // -o/--output; empty: stdout
  // --- famenc (issue 12) ---
  std::string target_seq;              // --target-seq (one value); empty: --seq (T5's decoder)
  std::string norm_kernel = "default"; // time5 (issue 11): --norm-kernel default|triton (one value)
  std::string compile = "off";  // fp8sac (issue 10): --compile on|off (one value)
  std::string grad_accum_fusion = "on"; // time6 (issue 11): --grad-accum-fusion on|off (one value)
  // te_norm (issue 10): --cross-entropy-loss-fusion on|off (one value)
  std::string cross_entropy_loss_fusion = "off";
  // --- ds3 (issue 10): DeepSpeed ZeRO knobs (ds3c: each a list); empty: the HF Trainer's "auto"
  std::string ds_reduce_bucket, ds_prefetch_bucket, ds_persistence_threshold, ds_max_live,
      ds_max_reuse_distance;
  // --- end ds3 ---
  std::string deterministic = "off";     // time7 (issue 11): --deterministic on|off (one value)
  std::string moe_shared_expert_overlap = "off";  // moetp (issue 13): one value
  std::string lora_dropout = "0";        // feat13 (issue 13): --lora-dropout (a list)
  std::string transformer_impl = "transformer_engine";  // tece (issue 10): one value
};

// Which of the common flags a verb takes.
struct FlagOptions {
  bool strategy = true;  // --strategy (valley varies the checkpoints itself)
  bool output = true;    // --format and -o/--output
  std::string formats = "table|csv|json";  // shown in --format's help
};

// Adds the common flags to `app`, bound to `flags`. Values are checked later by parse_axes, so
// that every flag reports errors the same way.
void add_common_flags(CLI::App& app, CommonFlags& flags, const FlagOptions& options = {});

// Every knob as the list of values it sweeps.
struct Axes {
  std::vector<std::string> models;
  std::vector<std::string> devices;
  std::vector<sim::Strategy> strategies;
  std::vector<sim::Profile> profiles;
  std::vector<std::optional<sim::ImplChoice>> impls;  // implver: with the release            // {nullopt}: the model's default
  std::vector<std::optional<sim::Precision>> precisions;  // {nullopt}: the profile's default
  std::vector<std::optional<sim::AttentionKind>> attentions;  // {nullopt}: the implementation's
  std::vector<std::optional<double>> dropouts;            // {nullopt}: the config's
  std::vector<int64_t> batches;
  std::vector<int64_t> seqs;
  std::vector<int64_t> tps;
  std::vector<bool> sps;
  std::vector<int64_t> dps;
  std::vector<int64_t> zeros;
  std::vector<std::optional<sim::Optimizer>> optimizers;  // {nullopt}: the implementation's
  std::vector<sim::AllocatorKind> allocators;
  int64_t pp = 1, vpp = 1, microbatches = 1;  // pipeline (one value each for the whole sweep)
  int64_t gpus_per_node = 8;  // topology: GPUs per node on NVLink (one value)
  std::optional<bool> set_to_none;  // --set-to-none (one value; exec10: unset: the release's)
  std::optional<bool> reentrant;  // --reentrant (one value); unset: the implementation's
  // --- famenc (issue 12) ---
  std::optional<int64_t> target_seq;  // --target-seq (one value); unset: --seq
  bool seq_default = false;
  bool zero_default = false;          // feat3: --zero not given (zeros = {0}; fsdp2-bf16 takes 3)           // --seq not given (seqs = {1024}; ViT takes its tokens)
  // moe (one value each for the whole sweep, but --ep: a list, feat2)
  std::vector<int64_t> eps{1};  // --ep (a list: swept, innermost set-up axes; feat2)
  double moe_imbalance = 1.0;
  std::optional<double> moe_capacity;
  double moe_aux_loss_coeff = 0.0;  // mla5: --moe-aux-loss-coeff
  // etp (issue 13): --etp; 0: --tp (Megatron's default). feat13: a list, swept with --ep
  std::vector<int64_t> etps{0};
  // --- feat (issue 13): --lora-rank, --cp and --fp8 are lists (swept, the innermost set-up
  // axes with --ep; feat2), the others one value each for the whole sweep ---
  std::vector<int64_t> lora_ranks{0};
  uint32_t lora_targets = 0;  // sim::LoraTarget bits; 0: PEFT's default
  bool qlora = false;
  std::vector<int64_t> cps{1};
  std::vector<sim::Fp8Recipe> fp8s{sim::Fp8Recipe::kOff};
  // --- end feat ---
  bool padding = false;  // hfimpl: --padding (one value for the whole sweep)
  sim::NormKernel norm_kernel = sim::NormKernel::kDefault;  // time5: --norm-kernel (one value)
  bool compile = false;  // fp8sac (issue 10): --compile (one value)
  bool grad_accum_fusion = true;  // time6 (issue 11): --grad-accum-fusion (one value)
  bool cross_entropy_loss_fusion = false;  // te_norm (issue 10): one value
  // --- ds3 (issue 10): --ds-* (sim::TrainSetup's ds_* fields; -1: "auto"). ds3c: sweep lists,
  // swept innermost after --lora-dropout (ds-reduce-bucket outermost of the five) ---
  std::vector<int64_t> ds_reduce_buckets{-1}, ds_prefetch_buckets{-1},
      ds_persistence_thresholds{-1}, ds_max_lives{-1}, ds_max_reuse_distances{-1};
  // --- end ds3 ---
  bool deterministic = false;     // time7 (issue 11): --deterministic (one value)
  bool moe_shared_expert_overlap = false;  // moetp (issue 13): one value
  std::vector<double> lora_dropouts{0.0};  // feat13 (issue 13): --lora-dropout (a list, swept)
  bool local_spec = false;        // tece (issue 10): --transformer-impl local
  // polish: --prefetch, offload's blocks copied back ahead; a list, swept (the fastest axis)
  std::vector<int64_t> prefetches{1};
};

// Parses every flag's text; throws sim::ConfigError naming the first bad flag.
Axes parse_axes(const CommonFlags& flags);

// The output format named by --format, checked against the verb's accepted list ("table|csv").
enum class Format : uint8_t { kTable, kCsv, kJson };
Format parse_format(const std::string& text, const std::string& accepted, Format fallback);

}  // namespace cli_common
