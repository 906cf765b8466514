// HuggingFace config.json → ModelConfig (load_hf.cpp). Private to sim_io; parse_model
// (load_model.cpp) dispatches here for any file without "format".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "json_reader.hpp"
#include "sim/model.hpp"

namespace sim_io::detail {

// Readers every family's parser shares (load_hf.cpp). Errors name the HF key the user wrote.
[[noreturn]] void refuse(const ObjectReader& in, std::string_view key, const std::string& feature);
int64_t size(const ObjectReader& in, std::string_view key);  // required, positive
int64_t size_or(const ObjectReader& in, std::string_view key, int64_t fallback);  // positive
double probability(const ObjectReader& in, std::string_view key, double fallback);  // in [0, 1)
// hidden / heads, for configs without head_dim (refused when it does not divide).
int64_t head_dim(const ObjectReader& in, int64_t hidden, int64_t heads, std::string_view hidden_key,
                 std::string_view heads_key);
int64_t four_times(const ObjectReader& in, int64_t hidden, std::string_view hidden_key);

// Fills every ModelConfig field but name and source from an HF config (a reader in
// kNullIsAbsent mode). Throws sim::Unsupported for model types and features actsim does not
// model, and ConfigError naming the HF key for missing or ill-typed values. Does not validate.
sim::ModelConfig model_from_hf(const ObjectReader& config);

// --- famdec (issue 12): the decoder families of hf_decoders.cpp ---
// Whether `model_type` is one of GPT-NeoX, Falcon (falcon, RefinedWebModel, RefinedWeb),
// Gemma 1/2/3 (gemma3_text), Phi-3 or OLMo 2.
bool is_decoder_family(std::string_view model_type);
// Such a config as a ModelConfig (same contract as model_from_hf).
sim::ModelConfig decoder_from_hf(const ObjectReader& config, const std::string& model_type);
// famenc (hf_encdec.cpp): T5ForConditionalGeneration and ViTForImageClassification configs.
sim::ModelConfig t5_from_hf(const ObjectReader& config);
sim::ModelConfig vit_from_hf(const ObjectReader& config);

// LlamaConfig-like decoders (llama, mistral, qwen2; the base of the MoE families): rotary,
// RMSNorm, SwiGLU, optional GQA (load_hf.cpp).
sim::ModelConfig llama_like(const ObjectReader& in, const std::string& type);

// moe (issue 13): Mixtral, Qwen2-MoE and DeepSeek-V2 (hf_moe.cpp); nullopt for other types.
std::optional<sim::ModelConfig> model_from_hf_moe(const ObjectReader& in, const std::string& type);
// implhf (hf_heads.cpp): the head `architectures` names for this model_type (gpt2, llama,
// mistral, qwen2, bert), its num_labels (len(id2label)), loss and classifier dropout; without
// `architectures`, the family's LM head. Refuses an architecture not modeled, naming the key.
// Call after the family's dropout fields are read (BERT's classifier dropout defaults to them).
void read_head(const ObjectReader& config, sim::ModelConfig& model, std::string_view model_type);

}  // namespace sim_io::detail
