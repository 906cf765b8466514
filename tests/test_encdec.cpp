// famenc (issue 12): T5 (encoder-decoder) and ViT: the configs as loaded, their exact parameter
// counts, and what the simulator builds from them (blocks, sequence meaning, strategies).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/device.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/model.hpp"
#include "sim/setup.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"
#include "sim/valley.hpp"
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
    const sim::ModelConfig m =
        sim_io::parse_model("{" + base + R"(, "num_labels": 10})", "v", "v.json");
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

namespace {

sim::TrainSetup setup(int64_t b, int64_t s) {
  sim::TrainSetup t;
  t.micro_batch = b;
  t.seq = s;
  return t;
}

sim::Result run(const sim::ModelConfig& m, const sim::TrainSetup& t, const char* strategy) {
  const sim::Device d = sim_io::load_device("h100-sxm", kDirs);
  return sim::simulate(m, t, d, sim::parse_strategy(strategy));
}

const sim::Op* op_named(const sim::Graph& g, std::string_view name, int64_t block) {
  for (const sim::Op& op : g.ops)
    if (op.name == name && op.block == block) return &op;
  return nullptr;
}

}  // namespace

TEST_SUITE("famenc: T5 and ViT graphs") {
  TEST_CASE(
      "t5: encoder blocks then decoder blocks; --seq the encoder's, --target-seq the decoder's") {
    const sim::ModelConfig m = load("t5-small");
    sim::TrainSetup t = setup(2, 64);
    t.target_seq = 16;
    const sim::Device d = sim_io::load_device("h100-sxm", kDirs);
    const sim::Graph g = sim::build_graph(m, t, d);
    CHECK(g.n_blocks == 12);
    CHECK(g.params == 60506624);
    // the head runs on the decoder's tokens: 2 b t h v
    const sim::Op* head = op_named(g, "lm head", -1);
    REQUIRE(head != nullptr);
    CHECK(head->fwd.flops == 2 * 2 * 16 * 512 * 32128);
    // cross-attention in decoder blocks only: q from 16 decoder tokens, k and v from 64 encoder
    // tokens (the second "k" of block 6 is the cross-attention's)
    int ks = 0;
    for (const sim::Op& op : g.ops)
      if (op.name == std::string_view("k") && op.block == 6) {
        ++ks;
        if (ks == 2) CHECK(op.fwd.flops == 2 * 2 * 64 * 512 * 512);
      }
    CHECK(ks == 2);
    int k_enc = 0;
    for (const sim::Op& op : g.ops) k_enc += op.name == std::string_view("k") && op.block == 5;
    CHECK(k_enc == 1);
    // the relative bias table: one lookup per stack, in each stack's first block
    CHECK(op_named(g, "relative bias lookup", 0) != nullptr);
    CHECK(op_named(g, "relative bias lookup", 6) != nullptr);
    CHECK(op_named(g, "relative bias lookup", 1) == nullptr);
    // the decoder length defaults to --seq
    const sim::TrainSetup r = sim::resolve_setup(m, setup(2, 64));
    REQUIRE(r.target_seq.has_value());
    CHECK(*r.target_seq == 64);
  }

  // census12 (issue 12): M(m) = m*c + ceil(n/m)*A + baseline holds for n identical blocks; T5's
  // stacks differ (it gave a baseline of -479 MiB at batch 8, seq 512), so the closed form is
  // refused with its reason and only the simulated points stand.
  TEST_CASE("t5: the valley refuses Chen's closed form (blocks differ) and keeps the simulated peaks") {
    const sim::ModelConfig m = load("t5-small");
    const sim::Device d = sim_io::load_device("h100-sxm", kDirs);
    const sim::Graph g = sim::build_graph(m, setup(8, 512), d);
    const sim::Valley v = sim::compute_valley(g, d);
    CHECK_FALSE(v.closed_form);
    CHECK(v.why.find("differs from block 0") != std::string::npos);
    CHECK(v.baseline_bytes == 0);
    CHECK(v.m_star == 0);
    REQUIRE(v.points.size() == 12);
    int64_t least = INT64_MAX;
    for (const sim::ValleyPoint& p : v.points) {
      CHECK(p.model_bytes == 0);
      CHECK(p.simulated_bytes > 0);
      least = std::min(least, p.simulated_bytes);
    }
    CHECK(v.points[static_cast<size_t>(v.m_star_simulated - 1)].simulated_bytes == least);
    // a ViT's blocks are identical: the closed form stands, with a non-negative baseline
    const sim::ModelConfig vit = load("vit-base-patch16-224");
    const sim::Graph gv = sim::build_graph(vit, setup(8, 197), d);
    const sim::Valley vv = sim::valley_head(gv, d);
    CHECK(vv.closed_form);
    CHECK(vv.baseline_bytes >= 0);
    CHECK(vv.m_star >= 1);
  }

  TEST_CASE("t5: strategies over both stacks; selective recomputes each core attention only") {
    const sim::ModelConfig m = load("t5-small");
    sim::TrainSetup t = setup(1, 64);
    t.target_seq = 32;
    const sim::Result none = run(m, t, "none"), full = run(m, t, "full");
    const sim::Result sel = run(m, t, "selective");
    CHECK(full.activation_bytes_per_layer < none.activation_bytes_per_layer);
    {  // at a size where activations make the peak
      sim::TrainSetup big = setup(8, 512);
      const sim::Result n = run(m, big, "none"), f = run(m, big, "full"),
                        e = run(m, big, "every:2");
      CHECK(f.peak_allocated_bytes < n.peak_allocated_bytes);
      CHECK(e.peak_allocated_bytes < n.peak_allocated_bytes);
    }
    CHECK(full.recompute_flops == none.fwd_flops - 2 * 32 * 512 * 32128);  // all but the head
    // qk and av: 2 x 2 b sq sk (a d) per attention; 6 encoder self, 6 decoder self, 6 cross
    const int64_t inner = 8 * 64;
    const int64_t per = 2 * 2 * inner;
    CHECK(sel.recompute_flops == 6 * per * (64 * 64 + 32 * 32 + 32 * 64));
  }

  TEST_CASE("t5: eager only; --target-seq only for encoder-decoders") {
    const sim::ModelConfig m = load("t5-small");
    sim::TrainSetup t = setup(1, 64);
    t.attention = sim::AttentionKind::kFlash;
    CHECK_THROWS_AS(sim::resolve_setup(m, t), sim::NotInCode);  // feat13: the refusal is NotInCode since ce6cbe4
    const sim::ModelConfig gpt = load("gpt2-small");
    sim::TrainSetup g = setup(1, 64);
    g.target_seq = 8;
    const sim::Device d = sim_io::load_device("h100-sxm", kDirs);
    CHECK_THROWS_WITH_AS(sim::build_graph(gpt, g, d),
                         "--target-seq: only encoder-decoder models have a decoder "
                         "length (gpt2 has none)",
                         sim::ConfigError);
  }

  TEST_CASE("vit: --seq is the token count, from the config when not given") {
    const sim::ModelConfig m = load("vit-base-patch16-224");
    sim::TrainSetup t = setup(4, 1024);
    t.seq_default = true;
    CHECK(sim::resolve_setup(m, t).seq == 197);
    t.seq_default = false;
    const sim::Device d = sim_io::load_device("h100-sxm", kDirs);
    CHECK_THROWS_AS(sim::build_graph(m, t, d), sim::ConfigError);
    t.seq = 197;
    const sim::Graph g = sim::build_graph(m, t, d);  // cloned: ViT's blocks are alike
    const sim::Graph direct = sim::build_graph_direct(m, t, d);
    CHECK(g.ops.size() == direct.ops.size());
    CHECK(g.params == 86567656);
    const sim::Op* conv = op_named(g, "patch conv", -1);
    REQUIRE(conv != nullptr);
    CHECK(conv->fwd.flops == 2 * 4 * 196 * (3 * 16 * 16) * 768);
    CHECK(conv->bwd.flops == conv->fwd.flops);  // no gradient for the pixels
    const sim::Op* cls = op_named(g, "classifier", -1);
    REQUIRE(cls != nullptr);
    CHECK(cls->fwd.flops == 2 * 4 * 768 * 1000);  // the class token's row only
    sim::TrainSetup big = setup(64, 197);
    const sim::Result none = run(m, big, "none"), full = run(m, big, "full");
    CHECK(full.peak_allocated_bytes < none.peak_allocated_bytes);
    CHECK(full.activation_bytes_per_layer < none.activation_bytes_per_layer);
    const sim::Result rd =
        sim::simulate_plan(direct, sim::resolve(sim::parse_strategy("every:3"), 12), d);
    const sim::Result rc =
        sim::simulate_plan(g, sim::resolve(sim::parse_strategy("every:3"), 12), d);
    CHECK(rd.peak_allocated_bytes == rc.peak_allocated_bytes);
  }
}
