// famenc (issue 12): T5 (encoder-decoder) and ViT graphs, op by op (blocks_encdec.cpp).
#pragma once

#include <cstdint>

#include "builder.hpp"

namespace sim::detail {

// Whether the model is built here: an encoder-decoder (T5) or a vision transformer (ViT).
bool builds_encdec(const ModelConfig& m);
// The whole model's ops (batch, embeddings, every block, head and loss). `target_seq`: the
// decoder's length (T5; --target-seq, default --seq). T5's stacks differ block by block, so its
// graphs are built directly (never cloned); ViT's blocks are build_block's.
void build_encdec(Builder& bld, const Dims& dm, int64_t layers, int64_t target_seq);

}  // namespace sim::detail
