// Internal (moe, issue 13): the MoE layer and MLA attention of a block, built from ops.hpp's Ops.
#pragma once

#include <cstdint>

#include "ops.hpp"

namespace sim::detail {

// The MoE layer from its (normalized) input to its output (routed experts as the
// implementation dispatches them, plus the shared experts): blocks_moe.cpp.
int32_t build_moe(Builder& bld, const Dims& dm, int32_t mlp_in);

// moe2: HF's load-balancing auxiliary loss over every MoE layer's router logits, after the LM
// loss `loss` (output_router_logits); returns the total loss: blocks_moe.cpp.
int32_t build_hf_aux_loss(Builder& bld, const Dims& dm, int32_t loss);

// torch.split / chunk / slicing of `base` into views of the given bytes, as one op whose
// backward gathers the views' gradients into a new gradient of base (SplitBackward); *out[i]
// the views. Views must come out of an op for their gradients to reach base's producer.
inline void split_views(Builder& bld, const Dims& dm, int32_t base,
                        std::initializer_list<int64_t> part_bytes, int32_t* out,
                        const char* name) {
  Ops o(bld, dm);
  OpDraft d = o.draft(OpKind::kSplit, name);
  d.op.math16 = false;
  d.inputs.push_back({base, GradRule::kNew});
  const DType dt = bld.tensor(base).dtype;
  int i = 0;
  for (int64_t b : part_bytes) {
    out[i] = bld.view(base, b, dt);
    d.outputs.push_back(out[i++]);
  }
  bld.add_op(std::move(d));
}
// etp (issue 13): Megatron's TopKRouter from the gating logits [n, E] to the dense probs [n, E]
// the dispatcher permutes (the router options DeepSeek's configs take); *sel the int64 top-k
// indices: blocks_moe_router.cpp.
// The group-limited routing mask and `scores.masked_fill(mask, ...)` (HF's and Megatron's
// group_limited routing): a bool [N, E] mask made with `mask_temps` bytes of temporaries alive,
// the fp32 [N, E] masked scores with `fill_temps`; masked_fill saves the mask. Returns them.
int32_t group_masked_scores(Builder& bld, Ops& o, int32_t scores, int64_t n, int64_t e,
                            int64_t mask_temps, int64_t fill_temps);

int32_t megatron_router(Builder& bld, const Dims& dm, int32_t logits, int64_t n, int32_t* sel);

// moetp (issue 13): Megatron's SharedExpertMLP under --tp > 1 (and its gate) from the MoE
// layer's input; -1 without shared experts: blocks_moetp.cpp.
int32_t megatron_shared_experts(Builder& bld, const Dims& dm, int32_t x);

// MLA (DeepseekV2Attention) from the normalized block input to the input of o_proj, [tokens,
// heads x v_head_dim]: blocks_mla.cpp.
int32_t build_mla(Builder& bld, const Dims& dm, int32_t attn_in);

}  // namespace sim::detail
