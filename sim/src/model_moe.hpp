// Internal (moe, issue 13): the parameter counts and checks of mixture-of-experts and MLA models
// (sim::ModelConfig's moe block), for model.cpp.
#pragma once

#include <cstdint>

#include "sim/model.hpp"

namespace sim::detail {

// Throws ConfigError naming model.source and the field for inconsistent MoE or MLA sizes.
void validate_moe(const ModelConfig& m);
// Parameters of all blocks, and of their one-dimensional ones (norm weights, biases), of a model
// with experts or MLA (is_moe or is_mla), checked against overflow.
int64_t moe_blocks_parameter_count(const ModelConfig& m);
int64_t moe_blocks_vector_count(const ModelConfig& m);
// Of one block: the attention's parameters (MLA or not) and the MLP's (dense, or routed and
// shared experts with the router), as the builder creates them.
int64_t attention_parameter_count(const ModelConfig& m);
int64_t mlp_parameter_count(const ModelConfig& m, bool moe_block);

}  // namespace sim::detail

namespace sim {
struct TrainSetup;
struct ImplSpec;
}  // namespace sim

namespace sim::detail {

// The MoE knobs of a set-up against the model and the implementation (nullptr: the paper
// profile): --ep dividing the experts and the data-parallel ranks, --moe-imbalance in [1, E],
// --moe-capacity positive; families and knobs the implementation's code lacks refused with one
// line naming the implementation and the feature.
void check_moe_setup(const ModelConfig& m, const TrainSetup& s, const ImplSpec* impl);

}  // namespace sim::detail
