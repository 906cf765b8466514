// moe (issue 13): the expert-parallel and routing knobs checked against the model and the code
// base (sim/impl.hpp MoeDispatch).
#include <string>

#include "model_moe.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/setup.hpp"

namespace sim::detail {

// etp (issue 13): Megatron's expert grid. initialize_model_parallel (megatron/core/
// parallel_state.py @ d98e8a64ddf3) lays experts out as etp x ep x edp x pp over the world
// tp x cp x dp x pp and raises unless (etp x ep x pp) divides the world; TEGroupedMLP divides
// moe_ffn_hidden_size by etp (experts.py, `divide`); --etp unset is --tp (arguments.py line 587).
namespace {
void check_expert_grid(const ModelConfig& m, const TrainSetup& s) {
  const int64_t etp = resolved_etp(s);
  const int64_t ranks = s.tp * s.cp * s.dp;  // the world over pp
  const std::string tcd = "tp x cp x dp = " + std::to_string(ranks);
  if (m.expert_ffn % etp != 0)
    throw ConfigError(s.etp > 0 ? "--etp" : "--tp", s.etp > 0 ? "etp" : "tp",
                      std::to_string(etp) + " does not divide the experts' width " +
                          std::to_string(m.expert_ffn) + " (expert tensor parallelism)");
  if (ranks % etp != 0)
    throw ConfigError("--etp", "etp",
                      std::to_string(etp) + " does not divide the ranks of a pipeline stage (" +
                          tcd + "): Megatron's expert grid is etp x ep x edp x pp");
  if ((ranks / etp) % s.ep != 0)
    throw ConfigError("--ep", "ep",
                      std::to_string(s.ep) + " does not divide the data-parallel size of the "
                      "experts (" + tcd + " over etp " + std::to_string(etp) +
                          "): Megatron's expert grid is etp x ep x edp x pp");
}
}  // namespace

void check_moe_setup(const ModelConfig& m, const TrainSetup& s, const ImplSpec* impl) {
  const std::string E = std::to_string(m.experts);
  if (s.ep < 1) throw ConfigError("--ep", "ep", "must be a positive integer");
  if (!(s.moe_imbalance >= 1.0))
    throw ConfigError("--moe-imbalance", "moe_imbalance", "must be at least 1 (balanced)");
  // mla5: Megatron's --moe-aux-loss-coeff (its default 0)
  if (!(s.moe_aux_loss_coeff >= 0.0) || !(s.moe_aux_loss_coeff < 1e300))
    throw ConfigError("--moe-aux-loss-coeff", "moe_aux_loss_coeff", "must be a number at least 0");
  if (s.moe_capacity && !(*s.moe_capacity > 0.0))
    throw ConfigError("--moe-capacity", "moe_capacity", "must be positive");
  const bool moe = is_moe(m);
  if (s.etp < 0) throw ConfigError("--etp", "etp", "must be a positive integer");  // etp
  if (!moe) {
    if (s.ep > 1) throw ConfigError("--ep", "ep", m.name + " has no experts to divide");
    if (s.etp > 0 && s.etp != s.tp)  // etp: --etp equal to --tp (its default) changes nothing
      throw ConfigError("--etp", "etp", m.name + " has no experts to divide");
    if (s.moe_aux_loss_coeff > 0.0)  // mla5
      throw ConfigError("--moe-aux-loss-coeff", "moe_aux_loss_coeff",
                        m.name + " has no router to balance");
    if (s.moe_imbalance != 1.0 || s.moe_capacity)
      throw ConfigError(s.moe_capacity ? "--moe-capacity" : "--moe-imbalance", "moe",
                        m.name + " has no experts to route to");
  } else {
    if (m.experts % s.ep != 0)
      throw ConfigError("--ep", "ep",
                        std::to_string(s.ep) + " does not divide the " + E + " experts");
    if (impl && impl->moe == MoeDispatch::kAllToAll) {
      check_expert_grid(m, s);  // etp (issue 13): Megatron's rank-group arithmetic
    } else if (s.dp % s.ep != 0) {
      throw ConfigError("--ep", "ep",
                        std::to_string(s.ep) + " does not divide the data-parallel size --dp " +
                            std::to_string(s.dp) + " (expert-parallel ranks are data-parallel ranks)");
    }
    if (s.moe_imbalance > static_cast<double>(m.experts))
      throw ConfigError("--moe-imbalance", "moe_imbalance",
                        "at most the " + E + " experts (every token on one expert)");
  }
  if (!moe && !is_mla(m)) {
    if (s.moe_shared_expert_overlap)  // moetp
      throw ConfigError("--moe-shared-expert-overlap", "moe_shared_expert_overlap",
                        m.name + " has no shared experts to overlap");
    return;
  }
  if (!impl)
    throw Unsupported("--profile", "profile",
                      "mixture of experts and MLA under the paper profile (Korthikanti et al.'s "
                      "closed form is a dense GPT)");
  const std::string in = " under --impl " + std::string(impl->name);
  if (moe && impl->moe == MoeDispatch::kNone)
    throw NotInCode("--impl", "impl", "mixture of experts" + in);
  if (is_mla(m) && !impl->mla) throw NotInCode("--impl", "impl", "MLA attention" + in);
  // feat3: eager MLA (HF eager_attention_forward, qk head dim != v head dim) is modeled by
  // core_attention's eager path and held by the census (mla-eager-*)
  // mla5: Megatron's MLA runs under the TE spec's DotProductAttention; the local spec's eager
  // core attention with qk head dim != v head dim was not read
  if (is_mla(m) && impl->mla_ops == MlaOps::kMegatronTe && s.attention &&
      *s.attention == AttentionKind::kStandard)
    throw Unsupported("--attention", "attention", "eager MLA attention" + in +
                                                      " (modeled: TE's fused attention, --attention flash)");
  // mtmoe (issue 13): Megatron's fused MLA rope kernels (blocks_mla.cpp build_mla_megatron)
  // assert `emb_dim % 4 == 0` in both _FusedMLARoPEInplace.forward and
  // _FusedMLARoPEKVSplit.forward (fusions/fused_mla_yarn_rope_apply.py @ d98e8a64ddf3)
  if (is_mla(m) && impl->mla_ops == MlaOps::kMegatronTe && m.qk_rope_dim % 4 != 0)
    throw NotInCode("--impl", "qk_rope_head_dim",
                    std::to_string(m.qk_rope_dim) + in +
                        " (Megatron's fused MLA rope kernels assert a multiple of 4)");
  // etp (issue 13): tensor parallelism of MoE blocks is Megatron's alltoall dispatcher with
  // expert tensor parallelism (blocks_moe.cpp megatron_alltoall). moetp (issue 13): MLA under TP
  // is Megatron's (blocks_mla.cpp build_mla_megatron: duplicated down projections, column-
  // parallel up projections, k_pos_emb gathered); HF's DeepseekV2Attention has no TP here (the
  // code base check below refuses --tp outside megatron)
  if (s.tp > 1 && is_mla(m) && impl->mla_ops != MlaOps::kMegatronTe)
    throw NotInCode("--tp", "tp", "tensor parallelism of MLA attention" + in);
  if ((s.tp > 1 || resolved_etp(s) > 1) && impl->moe != MoeDispatch::kAllToAll)
    throw NotInCode(s.tp > 1 ? "--tp" : "--etp", s.tp > 1 ? "tp" : "etp",
                    "tensor parallelism of MoE blocks" + in);
  // moetp (issue 13): Megatron's SharedExpertMLP under TP (blocks_moetp.cpp): its
  // ColumnParallelLinear divides moe_shared_expert_intermediate_size by tp (utils.divide raises)
  if (moe && s.tp > 1 && m.shared_ffn % s.tp != 0)
    throw ConfigError("--tp", "tp",
                      std::to_string(s.tp) + " does not divide the shared experts' width " +
                          std::to_string(m.shared_ffn) + " (SharedExpertMLP is column-parallel)");
  if (s.moe_shared_expert_overlap) {
    // transformer_config.py @ d98e8a64: "moe_shared_expert_overlap only works with alltoall or
    // flex token dispatcher"; "Only effective when moe-shared-expert-intermediate-size is set"
    if (impl->moe != MoeDispatch::kAllToAll)
      throw NotInCode("--moe-shared-expert-overlap", "moe_shared_expert_overlap",
                      "overlapping the shared experts with the dispatcher" + in);
    if (!moe || m.shared_ffn == 0)
      throw ConfigError("--moe-shared-expert-overlap", "moe_shared_expert_overlap",
                        m.name + " has no shared experts to overlap");
  }
  if (moe && s.tp > 1 && !s.sp)
    // moe_layer.py @ d98e8a64 MoELayer.forward: "During training, performance may degrade if MoE
    // and tensor parallelism are enabled without also enabling sequence parallelism" (ValueError)
    throw ConfigError("--sp", "sp",
                      "--tp " + std::to_string(s.tp) + " with experts needs --sp on (Megatron's "
                      "MoELayer raises without sequence parallelism in training)");
  if (impl->moe == MoeDispatch::kHfLoop) {
    if (s.ep > 1) throw NotInCode("--ep", "ep", "expert parallelism" + in + " (HF has none)");
    if (s.moe_capacity)
      throw NotInCode("--moe-capacity", "moe_capacity",
                      "a capacity factor" + in + " (HF's loop is dropless)");
    // mla5: HF has no such knob: its loss follows the config (output_router_logits,
    // router_aux_loss_coef), which the loader reads
    if (s.moe_aux_loss_coeff > 0.0)
      throw NotInCode("--moe-aux-loss-coeff", "moe_aux_loss_coeff",
                      "a load-balancing loss coefficient" + in +
                          " (HF adds its loss when the config sets output_router_logits)");
    // moe2: output_router_logits adds HF's load_balancing_loss_func after the LM loss
    // (blocks_moe.cpp build_hf_aux_loss)
  }
}

}  // namespace sim::detail
