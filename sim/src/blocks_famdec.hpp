// Internal (famdec, issue 12): the ops of the decoder families GPT-NeoX, Falcon, Gemma 1/2/3,
// Phi-3 and OLMo 2 that the Llama/GPT-2 op lists lack, as HF's modeling code runs them. Called
// from graph_blocks.cpp at the sites named below; docs/memory-model.md ("famdec") has the rows.
#pragma once

#include <cstdint>

#include "builder.hpp"

namespace sim::detail {

// Whether the model's blocks need build_block_famdec (parallel residual, Gemma 2/3's pre and post
// norms, OLMo 2's post norms); other families build the common block with the hooks below.
bool famdec_block(const ModelConfig& m);
int32_t build_block_famdec(Builder& bld, const Dims& dm, int32_t x, int32_t block);

// Whether blocks differ from one another (alternating local/global layers whose ops differ):
// the graph is then built block by block, not cloned from block 1.
bool famdec_heterogeneous(const ModelConfig& m, const Dims& dm);

// Model-level tensors made once per forward beside the rotary tables: the 4-D additive causal
// mask HF passes to SDPA (Gemma 2/3 always, Phi-3 when the sequence reaches its window).
void famdec_model_tensors(Builder& bld, const Dims& dm);
// The rotary tables' width per head (partial rotary: NeoX rotary_pct), and their count (Gemma 3
// keeps global and local tables).
int64_t famdec_rotary_width(const Dims& dm);
int64_t famdec_rotary_tables(const ModelConfig& m);

// Gemma: embeddings * sqrt(hidden).
int32_t famdec_embed_scale(Builder& bld, const Dims& dm, int32_t x);
// RMSNorm whose weight is applied in fp32 before the cast back to the input dtype (Gemma's
// (1 + w), OLMo 2), over rows of `width`.
int32_t famdec_rms_norm(Builder& bld, const Dims& dm, int32_t x, int64_t width, const char* name);
// The MLP of Gemma (GeGLU) and Phi-3 (fused gate_up_proj, chunked into views).
bool famdec_mlp_variant(const ModelConfig& m);
int32_t famdec_mlp(Builder& bld, const Dims& dm, int32_t mlp_in);
// q/k norms after the projections (OLMo 2 on the whole projection, Gemma 3 per head).
int32_t famdec_qk_norm(Builder& bld, const Dims& dm, int32_t t, int64_t heads, const char* name);
// Partial rotary (NeoX rotary_pct, Phi-3 partial_rotary_factor): the rotated slice of each head
// of t (a view), and the concatenation of its rotation with the rest (a new tensor).
bool famdec_partial_rotary(const Dims& dm);
int32_t famdec_rotary_slice(Builder& bld, const Dims& dm, int32_t t);
int32_t famdec_rotary_cat(Builder& bld, const Dims& dm, int32_t rotated, int32_t t,
                          const char* name);
// cap * tanh(x / cap): Gemma 2's attention scores (eager) and final logits.
int32_t famdec_softcap(Builder& bld, const Dims& dm, int32_t x, const char* name);
// The additive mask SDPA takes in this block (the model's 4-D mask, or a sliding layer's own),
// or -1 when SDPA runs without one (flash).
int32_t famdec_sdpa_mask(Builder& bld, const Dims& dm);
// fam12: the cos/sin pair the block being built rotates with (Gemma 3's sliding layers: the local
// pair; every other layer and model: the one rope_tables() pair)
int32_t famdec_rope_tables(Builder& bld, const Dims& dm);

}  // namespace sim::detail
