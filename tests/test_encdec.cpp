// famenc (issue 12): T5 (encoder-decoder) and ViT: the configs as loaded, their exact parameter
// counts, and what the simulator builds from them (blocks, sequence meaning, strategies).
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "sim/model.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

const std::vector<fs::path> kDirs = {fs::path(ACTSIM_SOURCE_DIR) / "models"};

sim::ModelConfig load(const char* name) { return sim_io::load_model(name, kDirs); }

std::string hf_error(const std::string& members) {
  try {
    sim_io::parse_model("{" + members + "}", "hf", "hf/config.json");
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("famenc: T5 and ViT configs") {
  TEST_CASE("t5-small: both stacks, no biases, relative bias, the published 60,506,624") {
    const sim::ModelConfig m = load("t5-small");
    CHECK(m.family == "t5");
    CHECK(m.layers == 12);
    CHECK(m.decoder_layers == 6);
    CHECK(sim::encoder_layers(m) == 6);
    CHECK(m.mlp == sim::MlpKind::kRelu);
    CHECK(m.norm == sim::NormKind::kRmsNorm);
    CHECK(m.positions == sim::PosEmbedding::kRelativeBias);
    CHECK(m.relative_buckets == 32);
    CHECK(m.tied_embeddings);
    CHECK(m.scale_tied_head);
    CHECK(!m.sdpa);
    CHECK(m.hidden_dropout == doctest::Approx(0.1));
    // ../shared/hf-configs/README.md: model presets, training logs
    CHECK(sim::parameter_count(m) == 60506624);
  }

  TEST_CASE("vit-base-patch16-224: 197 tokens, 1000 labels from id2label, 86,567,656") {
    const sim::ModelConfig m = load("vit-base-patch16-224");  // label2id repeats "crane"
    CHECK(m.family == "vit");
    CHECK(sim::is_vision(m));
    CHECK(m.max_positions == 197);  // (224 / 16)^2 patches + the class token
    CHECK(m.num_labels == 1000);    // id2label, not label2id's 999 distinct keys
    CHECK(m.layers == 12);
    CHECK(m.qkv_bias);
    // torchvision vit_b_16: same architecture and 1000-class head
    CHECK(sim::parameter_count(m) == 86567656);
  }

  TEST_CASE("t5 v1.1 gated-gelu and untied head; other variants refused by name") {
    const std::string base =
        R"("model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2,
           "num_decoder_layers": 3, "num_heads": 4, "vocab_size": 100)";
    const sim::ModelConfig g = sim_io::parse_model(
        "{" + base + R"(, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": false})", "g",
        "g.json");
    CHECK(g.mlp == sim::MlpKind::kGeglu);
    CHECK(g.activation == sim::Activation::kGeluNew);
    CHECK(!g.scale_tied_head);
    CHECK(g.layers == 5);
    CHECK(g.decoder_layers == 3);
    // by hand: shared 100*64, untied head 100*64, two bias tables 32*4, two final norms;
    // encoder block: 4*64*64 + 3*64*128 + 2*64; decoder block: that + 4*64*64 + 64
    const int64_t enc = 4 * 64 * 64 + 3 * 64 * 128 + 2 * 64;
    const int64_t dec = enc + 4 * 64 * 64 + 64;
    CHECK(sim::parameter_count(g) == 2 * 100 * 64 + 2 * 32 * 4 + 2 * 64 + 2 * enc + 3 * dec);
    CHECK(hf_error(base + R"(, "feed_forward_proj": "gated-silu")") ==
          "hf/config.json: feed_forward_proj: not supported yet: feed_forward_proj gated-silu "
          "(t5: relu and gated-gelu are modeled)");
    CHECK(hf_error(base + R"(, "architectures": ["T5EncoderModel"])") ==
          "hf/config.json: architectures: not supported yet: the T5EncoderModel head (t5: "
          "T5ForConditionalGeneration is modeled)");
  }

  TEST_CASE("vit: num_labels without id2label, bad image sizes named") {
    const std::string base =
        R"("model_type": "vit", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 128, "image_size": 32, "patch_size": 8)";
    const sim::ModelConfig m = sim_io::parse_model("{" + base + R"(, "num_labels": 10})", "v", "v.json");
    CHECK(m.num_labels == 10);
    CHECK(m.max_positions == 17);
    // conv 64*3*8*8 + 64, class token 64, positions 17*64, blocks, final norm, classifier
    const int64_t block = 4 * (64 * 64 + 64) + 2 * 64 * 128 + 128 + 64 + 4 * 64;
    CHECK(sim::parameter_count(m) ==
          64 * 3 * 64 + 64 + 64 + 17 * 64 + 2 * block + 2 * 64 + 64 * 10 + 10);
    CHECK(hf_error(base + R"(, "patch_size": 5)").find("duplicate key") != std::string::npos);
    const std::string bad = R"("model_type": "vit", "image_size": 30, "patch_size": 8)";
    CHECK(hf_error(bad) == "hf/config.json: image_size: must be a multiple of patch_size (8)");
    // a repeated key anywhere but label2id is still an error
    CHECK(hf_error(R"("model_type": "vit", "id2label": {"0": "a", "0": "b"})") ==
          "hf/config.json: 0: duplicate key in one object");
  }
}
