// Internal (hfimpl, issue 10): the masks of HF's modeling code -- the padding attention mask
// (--padding), GPT-2's per-layer causal buffer, Llama's 4-D additive eager mask -- and what SDPA
// does when it is given a mask. Called from graph_blocks.cpp; docs/memory-model.md ("Masks and
// padding under --impl hf") has the rows with their upstream files and commits.
#pragma once

#include <cstdint>

#include "builder.hpp"

namespace sim::detail {

// Model-level masks made once per forward (beside the rotary tables): the 4-D mask HF passes to
// SDPA when padding is on, Llama's additive eager mask, the [b, 1, 1, s] extended mask of
// GPT-2's and BERT's eager attention.
void hf_model_masks(Builder& bld, const Dims& dm);
// GPT-2's `bias` buffer of this attention layer (bool [n_positions, n_positions], persistent),
// or -1 when the model has none.
int32_t hf_causal_buffer(Builder& bld, const Dims& dm);
// The mask this layer's SDPA takes when padding is on (the model's 4-D mask), or -1.
int32_t hf_padding_sdpa_mask(Builder& bld, const Dims& dm);
// SDPA given a mask: autocast casts it (scaled_dot_product_attention is on autocast's
// lower-precision list; the mask is no leaf, so the cast is not cached: one per layer). Returns
// the operand SDPA saves.
int32_t hf_sdpa_mask_operand(Builder& bld, const Dims& dm, int32_t mask);
// repeat_kv (expand + reshape: a copy with a heads) of K or V before SDPA.
int32_t hf_repeat_kv(Builder& bld, const Dims& dm, int32_t t, const char* name);
// Eager attention: whether the additive 4-D mask carries the causal part (Llama: no bool where).
bool hf_eager_additive(const Dims& dm);
// Eager attention: `scores + mask` where HF adds one (a new tensor, promoted to the mask's dtype);
// returns `scores` when it adds none.
int32_t hf_eager_mask_add(Builder& bld, const Dims& dm, int32_t scores);

// The LM loss's input as HF's modeling file computes it: the logits are held by the forward until
// it returns (its ModelOutput holds them); GPT-2 copies the shifted logits (b (s - 1) rows, `rows`
// updated) and the shifted labels (exec10: `labels` updated). Returns the tensor the loss's fp32
// cast and log_softmax take.
int32_t hf_lm_loss_input(Builder& bld, const Dims& dm, int32_t logits, int64_t* rows,
                         int32_t* labels);

}  // namespace sim::detail
