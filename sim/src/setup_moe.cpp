// moe (issue 13): the expert-parallel and routing knobs checked against the model and the code
// base (sim/impl.hpp MoeDispatch).
#include <string>

#include "model_moe.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/setup.hpp"

namespace sim::detail {

void check_moe_setup(const ModelConfig& m, const TrainSetup& s, const ImplSpec* impl) {
  const std::string E = std::to_string(m.experts);
  if (s.ep < 1) throw ConfigError("--ep", "ep", "must be a positive integer");
  if (!(s.moe_imbalance >= 1.0))
    throw ConfigError("--moe-imbalance", "moe_imbalance", "must be at least 1 (balanced)");
  if (s.moe_capacity && !(*s.moe_capacity > 0.0))
    throw ConfigError("--moe-capacity", "moe_capacity", "must be positive");
  const bool moe = is_moe(m);
  if (!moe) {
    if (s.ep > 1) throw ConfigError("--ep", "ep", m.name + " has no experts to divide");
    if (s.moe_imbalance != 1.0 || s.moe_capacity)
      throw ConfigError(s.moe_capacity ? "--moe-capacity" : "--moe-imbalance", "moe",
                        m.name + " has no experts to route to");
  } else {
    if (m.experts % s.ep != 0)
      throw ConfigError("--ep", "ep",
                        std::to_string(s.ep) + " does not divide the " + E + " experts");
    if (s.dp % s.ep != 0)
      throw ConfigError("--ep", "ep",
                        std::to_string(s.ep) + " does not divide the data-parallel size --dp " +
                            std::to_string(s.dp) + " (expert-parallel ranks are data-parallel ranks)");
    if (s.moe_imbalance > static_cast<double>(m.experts))
      throw ConfigError("--moe-imbalance", "moe_imbalance",
                        "at most the " + E + " experts (every token on one expert)");
  }
  if (!moe && !is_mla(m)) return;
  if (!impl)
    throw Unsupported("--profile", "profile",
                      "mixture of experts and MLA under the paper profile (Korthikanti et al.'s "
                      "closed form is a dense GPT)");
  const std::string in = " under --impl " + std::string(impl->name);
  if (moe && impl->moe == MoeDispatch::kNone)
    throw Unsupported("--impl", "impl", "mixture of experts" + in);
  if (is_mla(m) && !impl->mla) throw Unsupported("--impl", "impl", "MLA attention" + in);
  // feat3: eager MLA (HF eager_attention_forward, qk head dim != v head dim) is modeled by
  // core_attention's eager path and held by the census (mla-eager-*)
  if (s.tp > 1)
    throw Unsupported("--tp", "tp", "tensor parallelism of MoE and MLA blocks (expert tensor "
                                    "parallelism is not modeled yet)");
  if (impl->moe == MoeDispatch::kHfLoop) {
    if (s.ep > 1) throw Unsupported("--ep", "ep", "expert parallelism" + in + " (HF has none)");
    if (s.moe_capacity)
      throw Unsupported("--moe-capacity", "moe_capacity",
                        "a capacity factor" + in + " (HF's loop is dropless)");
    // moe2: output_router_logits adds HF's load_balancing_loss_func after the LM loss
    // (blocks_moe.cpp build_hf_aux_loss)
  }
}

}  // namespace sim::detail
