// HuggingFace config.json → ModelConfig (load_hf.cpp). Private to sim_io; parse_model
// (load_model.cpp) dispatches here for any file without "format".
#pragma once

#include "json_reader.hpp"
#include "sim/model.hpp"

namespace sim_io::detail {

// Fills every ModelConfig field but name and source from an HF config (a reader in
// kNullIsAbsent mode). Throws sim::Unsupported for model types and features actsim does not
// model, and ConfigError naming the HF key for missing or ill-typed values. Does not validate.
sim::ModelConfig model_from_hf(const ObjectReader& config);

// famenc (hf_encdec.cpp): T5ForConditionalGeneration and ViTForImageClassification configs.
sim::ModelConfig t5_from_hf(const ObjectReader& config);
sim::ModelConfig vit_from_hf(const ObjectReader& config);

}  // namespace sim_io::detail
