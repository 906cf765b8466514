// sim_io loaders: every shipped model and device, the HuggingFace families, and every error kind
// (each a sim::ConfigError naming the file and the field, with its message).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/device.hpp"
#include "sim/error.hpp"
#include "sim/model.hpp"
#include "sim_io/load.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kModels = fs::path(ACTSIM_SOURCE_DIR) / "models";
const std::vector<fs::path> kDirs = {kModels};

std::string shipped(std::string_view file) { return (kModels / file).string(); }

// The ConfigError that f throws; fails the test when it throws none.
template <typename F>
sim::ConfigError error_of(F&& f) {
  try {
    f();
  } catch (const sim::ConfigError& e) {
    return e;
  }
  FAIL("expected a sim::ConfigError");
  throw std::logic_error("unreachable");
}

template <typename F>
bool is_unsupported(F&& f) {
  try {
    f();
  } catch (const sim::Unsupported&) {
    return true;
  } catch (const sim::ConfigError&) {
    return false;
  }
  return false;
}

// A JSON object as (key, raw JSON value) pairs, to derive broken variants of a valid file.
struct JsonObject {
  std::vector<std::pair<std::string, std::string>> members;

  JsonObject with(const std::string& key, const std::string& raw) const {
    JsonObject copy = *this;
    for (auto& [k, v] : copy.members)
      if (k == key) {
        v = raw;
        return copy;
      }
    copy.members.emplace_back(key, raw);
    return copy;
  }
  JsonObject without(std::string_view key) const {
    JsonObject copy;
    for (const auto& m : members)
      if (m.first != key) copy.members.push_back(m);
    return copy;
  }
  std::string text() const {
    std::string s = "{\n";
    for (size_t i = 0; i < members.size(); ++i)
      s += "  \"" + members[i].first + "\": " + members[i].second +
           (i + 1 < members.size() ? ",\n" : "\n");
    return s + "}\n";
  }
};

const JsonObject kTinyModel{{{"format", "\"actsim-model-v1\""},
                             {"family", "\"test\""},
                             {"layers", "2"},
                             {"hidden", "64"},
                             {"heads", "4"},
                             {"vocab", "100"},
                             {"max_positions", "32"}}};

constexpr std::string_view kSrc = "dir/tiny.json";

sim::ModelConfig parse(const JsonObject& o) { return sim_io::parse_model(o.text(), "tiny", kSrc); }

sim::ConfigError model_error(const JsonObject& o) {
  return error_of([&] { parse(o); });
}

// Parameters of Megatron's GPT (Narayanan et al. 2021, Eq. for P): 12Lh²(1 + 13/(12h) +
// (V + s)/(12Lh)) = 12Lh² + 13Lh + (V + s)h, plus the final LayerNorm's 2h.
int64_t megatron_params(int64_t layers, int64_t h, int64_t v, int64_t s) {
  return 12 * layers * h * h + 13 * layers * h + (v + s) * h + 2 * h;
}

}  // namespace

TEST_SUITE("load: shipped models") {
  TEST_CASE("the catalogue lists every shipped model, sorted") {
    std::vector<std::string> names;
    for (const auto& e : sim_io::list_models(kDirs)) {
      names.push_back(e.name);
      CHECK(e.path == kModels / (e.name + ".json"));
    }
    CHECK(names == std::vector<std::string>{
                       "bert-large", "deepseek-v2-lite", "falcon-7b", "gemma-2-9b",
                       "gemma-7b", "gpt2-large", "gpt2-medium", "gpt2-small", "gpt2-xl",
                       "korthikanti-175b", "korthikanti-1t", "korthikanti-22b", "korthikanti-530b",
                       "llama-2-13b", "llama-2-70b", "llama-2-7b", "llama-3-70b", "llama-3-8b",
                       "llama-3.1-8b",  // fam12
                       "mixtral-8x7b", "olmo-2-7b", "phi-3-mini-4k", "pythia-1b", "pythia-410m",
                       "qwen1.5-moe-a2.7b", "t5-small", "vit-base-patch16-224"});  // famdec, famenc, moe
  }

  TEST_CASE("every shipped model loads and validates") {
    for (const auto& e : sim_io::list_models(kDirs)) {
      CAPTURE(e.name);
      const sim::ModelConfig m = sim_io::load_model(e.name, kDirs);
      CHECK(m.name == e.name);
      CHECK(m.source == e.path.string());
      CHECK(sim::parameter_count(m) > 0);
    }
  }

  TEST_CASE("gpt2-small: the HF config of gpt2, 124,439,808 parameters") {
    const sim::ModelConfig m = sim_io::load_model("gpt2-small", kDirs);
    CHECK(m.family == "gpt2");
    CHECK(m.source == shipped("gpt2-small.json"));
    CHECK(m.layers == 12);
    CHECK(m.hidden == 768);
    CHECK(m.heads == 12);
    CHECK(m.kv_heads == 12);
    CHECK(m.head_dim == 64);
    CHECK(m.ffn_hidden == 3072);
    CHECK(m.vocab == 50257);
    CHECK(m.max_positions == 1024);
    CHECK(m.type_vocab == 0);
    CHECK(m.mlp == sim::MlpKind::kGelu);
    CHECK(m.norm == sim::NormKind::kLayerNorm);
    CHECK(m.positions == sim::PosEmbedding::kLearned);
    CHECK_FALSE(m.post_norm);
    CHECK(m.causal);
    CHECK(m.tied_embeddings);
    CHECK(m.qkv_bias);
    CHECK(m.linear_bias);
    CHECK(m.norm_bias);
    CHECK(m.attn_dropout == 0.1);
    CHECK(m.hidden_dropout == 0.1);
    CHECK(m.embd_dropout == 0.1);
    CHECK(sim::parameter_count(m) == 124'439'808);
  }

  TEST_CASE("the larger GPT-2s match HF's parameter counts") {
    struct Case {
      const char* name;
      int64_t layers, hidden, heads, params;
    };
    for (const Case& c : {Case{"gpt2-medium", 24, 1024, 16, 354'823'168},
                          Case{"gpt2-large", 36, 1280, 20, 774'030'080},
                          Case{"gpt2-xl", 48, 1600, 25, 1'557'611'200}}) {
      CAPTURE(c.name);
      const sim::ModelConfig m = sim_io::load_model(c.name, kDirs);
      CHECK(m.layers == c.layers);
      CHECK(m.hidden == c.hidden);
      CHECK(m.heads == c.heads);
      CHECK(m.head_dim == 64);
      CHECK(m.ffn_hidden == 4 * c.hidden);
      CHECK(sim::parameter_count(m) == c.params);
    }
  }

  TEST_CASE("Llama 2 and 3: SwiGLU, RMSNorm, rope, untied, no biases, HF's parameter counts") {
    struct Case {
      const char* name;
      int64_t layers, hidden, heads, kv_heads, ffn, vocab, positions, params;
    };
    for (const Case& c :
         {Case{"llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 6'738'415'616},
          Case{"llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 13'015'864'320},
          Case{"llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 68'976'648'192},
          Case{"llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8'030'261'248},
          Case{"llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 70'553'706'496}}) {
      CAPTURE(c.name);
      const sim::ModelConfig m = sim_io::load_model(c.name, kDirs);
      CHECK(m.family == "llama");
      CHECK(m.layers == c.layers);
      CHECK(m.hidden == c.hidden);
      CHECK(m.heads == c.heads);
      CHECK(m.kv_heads == c.kv_heads);
      CHECK(m.head_dim == 128);
      CHECK(m.ffn_hidden == c.ffn);
      CHECK(m.vocab == c.vocab);
      CHECK(m.max_positions == c.positions);
      CHECK(m.mlp == sim::MlpKind::kSwiglu);
      CHECK(m.norm == sim::NormKind::kRmsNorm);
      CHECK(m.positions == sim::PosEmbedding::kRope);
      CHECK(m.causal);
      CHECK_FALSE(m.post_norm);
      CHECK_FALSE(m.tied_embeddings);
      CHECK_FALSE(m.qkv_bias);
      CHECK_FALSE(m.linear_bias);
      CHECK_FALSE(m.norm_bias);
      CHECK(m.attn_dropout == 0.0);
      CHECK(m.hidden_dropout == 0.0);
      CHECK(m.embd_dropout == 0.0);
      CHECK(sim::parameter_count(m) == c.params);
    }
  }

  TEST_CASE("bert-large: post-norm encoder, 335,174,458 parameters as BertForMaskedLM") {
    const sim::ModelConfig m = sim_io::load_model("bert-large", kDirs);
    CHECK(m.family == "bert");
    CHECK(m.layers == 24);
    CHECK(m.hidden == 1024);
    CHECK(m.heads == 16);
    CHECK(m.head_dim == 64);
    CHECK(m.ffn_hidden == 4096);
    CHECK(m.vocab == 30522);
    CHECK(m.max_positions == 512);
    CHECK(m.type_vocab == 2);
    CHECK(m.post_norm);
    CHECK_FALSE(m.causal);
    CHECK(m.tied_embeddings);
    CHECK(m.norm == sim::NormKind::kLayerNorm);
    CHECK(m.norm_bias);
    CHECK(m.attn_dropout == 0.1);
    CHECK(m.hidden_dropout == 0.1);
    CHECK(m.embd_dropout == 0.1);
    // BertModel without its pooler (335,141,888 - 1,049,600) plus the MLM head's transform
    // (h² + h), LayerNorm (2h) and decoder bias (v).
    CHECK(sim::parameter_count(m) == 335'174'458);
  }

  TEST_CASE("Korthikanti Table 5 models: Megatron GPT with the paper's a, h, L, s and v") {
    struct Case {
      const char* name;
      int64_t heads, hidden, layers, params;
    };
    for (const Case& c : {Case{"korthikanti-22b", 64, 6144, 48, 22'074'273'792},
                          Case{"korthikanti-175b", 96, 12288, 96, 174'615'846'912},
                          Case{"korthikanti-530b", 128, 20480, 105, 529'600'819'200},
                          Case{"korthikanti-1t", 160, 25600, 128, 1'008'038'758'400}}) {
      CAPTURE(c.name);
      const sim::ModelConfig m = sim_io::load_model(c.name, kDirs);
      CHECK(m.family == "megatron-gpt");
      CHECK(m.heads == c.heads);
      CHECK(m.kv_heads == c.heads);
      CHECK(m.hidden == c.hidden);
      CHECK(m.layers == c.layers);
      CHECK(m.head_dim * m.heads == m.hidden);
      CHECK(m.ffn_hidden == 4 * c.hidden);
      CHECK(m.vocab == 51200);
      CHECK(m.max_positions == 2048);
      CHECK(m.mlp == sim::MlpKind::kGelu);
      CHECK(m.norm == sim::NormKind::kLayerNorm);
      CHECK(m.positions == sim::PosEmbedding::kLearned);
      CHECK(m.tied_embeddings);
      CHECK(m.qkv_bias);
      CHECK(m.linear_bias);
      CHECK(m.norm_bias);
      CHECK(m.attn_dropout == 0.1);
      CHECK(m.hidden_dropout == 0.1);
      CHECK(m.embd_dropout == 0.1);
      CHECK(sim::parameter_count(m) == megatron_params(c.layers, c.hidden, 51200, 2048));
      CHECK(sim::parameter_count(m) == c.params);
    }
  }

  TEST_CASE("a path loads as given, name is exactly what the user passed") {
    const std::string path = shipped("gpt2-small.json");
    const sim::ModelConfig m = sim_io::load_model(path, {});
    CHECK(m.name == path);
    CHECK(m.source == path);
    CHECK(m.hidden == 768);
  }
}

TEST_SUITE("load: shipped devices") {
  TEST_CASE("the catalogue lists every shipped device") {
    std::vector<std::string> names;
    for (const auto& e : sim_io::list_devices(kDirs)) {
      names.push_back(e.name);
      CHECK(e.path == kModels / "devices" / (e.name + ".json"));
    }
    CHECK(names == std::vector<std::string>{"a100-40gb", "a100-80gb", "h100-96gb", "h100-pcie",
                                            "h100-sxm", "h200", "v100-16gb"});
  }

  TEST_CASE("device figures: exact bytes, FLOP/s, bytes/s, one-direction links") {
    struct Case {
      const char* name;
      int sm_arch;
      int64_t hbm_mib, cublas_workspace;
      double bf16, tf32, fp32, hbm_bw, host, nvlink;
    };
    const int64_t mib = 1024 * 1024;
    for (const Case& c :
         {Case{"a100-40gb", 80, 40960, 8'519'680, 312e12, 156e12, 19.5e12, 1555e9, 25e9, 300e9},
          Case{"a100-80gb", 80, 81920, 8'519'680, 312e12, 156e12, 19.5e12, 2039e9, 25e9, 300e9},
          Case{"h100-sxm", 90, 81559, 32 * mib, 989e12, 495e12, 67e12, 3350e9, 50e9, 450e9},
          Case{"h200", 90, 143771, 32 * mib, 989e12, 495e12, 67e12, 4800e9, 50e9, 450e9}}) {
      CAPTURE(c.name);
      const sim::Device d = sim_io::load_device(c.name, kDirs);
      CHECK(d.name == c.name);
      CHECK(d.source == (kModels / "devices" / (std::string(c.name) + ".json")).string());
      CHECK_FALSE(d.label.empty());
      CHECK(d.sm_arch == c.sm_arch);
      CHECK(d.hbm_bytes == c.hbm_mib * mib);
      CHECK(d.cublas_workspace_bytes == c.cublas_workspace);
      CHECK(d.cuda_context_bytes == 500 * mib);
      CHECK(d.nccl_buffer_bytes == 1024 * mib);
      CHECK(d.peak_bf16_flops_per_s == c.bf16);
      CHECK(d.peak_tf32_flops_per_s == c.tf32);
      CHECK(d.peak_fp32_flops_per_s == c.fp32);
      CHECK(d.hbm_bytes_per_s == c.hbm_bw);
      CHECK(d.host_link_bytes_per_s == c.host);
      CHECK(d.nvlink_bytes_per_s == c.nvlink);
      CHECK(d.compute_efficiency == 0.8);
      CHECK(d.memory_efficiency == 0.9);
      CHECK(d.launch_overhead_ns == 3000);
    }
  }


  // The devices the published measurements ran on (validation/published/README.md): each figure as
  // its cited source gives it (the provenance lines of the files).
  TEST_CASE("v100-16gb: HF docs' V100-SXM2 16GB, as its datasheet and nvidia-smi say") {
    const int64_t mib = 1024 * 1024;
    const sim::Device d = sim_io::load_device("v100-16gb", kDirs);
    CHECK(d.sm_arch == 70);                                // Volta, compute capability 7.0
    CHECK(d.hbm_bytes == 16160 * mib);                     // nvidia-smi total in the docs' printout
    CHECK(d.cuda_context_bytes == 1343 * mib);             // the docs' "kernels alone" figure
    CHECK(d.peak_bf16_flops_per_s == 125e12);              // fp16 tensor cores: Volta has no bf16
    CHECK(d.peak_tf32_flops_per_s == d.peak_fp32_flops_per_s);  // no TF32 before Ampere
    CHECK(d.peak_fp32_flops_per_s == 15.7e12);
    CHECK(d.hbm_bytes_per_s == 900e9);
    CHECK(d.nvlink_bytes_per_s == 150e9);                  // 300 GB/s both directions
    CHECK(d.cublas_workspace_bytes == 8'519'680);          // :4096:2:16:8 before sm90
  }

  TEST_CASE("h100-96gb: torchtitan's 96 GB HBM2e, 500 W H100 (2.4 TB/s)") {
    const int64_t mib = 1024 * 1024;
    const sim::Device d = sim_io::load_device("h100-96gb", kDirs);
    const sim::Device sxm = sim_io::load_device("h100-sxm", kDirs);
    CHECK(d.sm_arch == 90);
    CHECK(d.hbm_bytes == 97871 * mib);  // 98,304 MiB nominal scaled as the 80 GB part's total
    CHECK(d.hbm_bytes > sxm.hbm_bytes);
    CHECK(d.hbm_bytes_per_s == 2.4e12);  // the benchmark page's figure, below the SXM's 3.35 TB/s
    CHECK(d.hbm_bytes_per_s < sxm.hbm_bytes_per_s);
    // Power-limited (500 W): between the NVL's 835.5 and the SXM's 989 dense TFLOPS, by power.
    CHECK(d.peak_bf16_flops_per_s == 887e12);
    CHECK(d.peak_bf16_flops_per_s < sxm.peak_bf16_flops_per_s);
    CHECK(d.peak_fp8_flops_per_s == 1773e12);
    CHECK(d.cublas_workspace_bytes == 32 * mib);
  }

  TEST_CASE("fp8 peaks (issue 11, time): dense FP8 where the GPU has FP8 tensor cores") {
    CHECK(sim_io::load_device("h100-sxm", kDirs).peak_fp8_flops_per_s == 1979e12);
    CHECK(sim_io::load_device("h200", kDirs).peak_fp8_flops_per_s == 1979e12);
    CHECK(sim_io::load_device("h100-pcie", kDirs).peak_fp8_flops_per_s == 1513e12);
    CHECK(sim_io::load_device("a100-80gb", kDirs).peak_fp8_flops_per_s == 0);  // no FP8 on Ampere
    CHECK(sim_io::load_device("v100-16gb", kDirs).peak_fp8_flops_per_s == 0);
  }

  TEST_CASE("h100-pcie: 114 SMs, 2 TB/s HBM2e, PCIe between more than two cards") {
    const sim::Device d = sim_io::load_device("h100-pcie", kDirs);
    CHECK(d.sm_count == 114);
    CHECK(d.peak_bf16_flops_per_s == 756.5e12);
    CHECK(d.hbm_bytes_per_s == 2e12);
    CHECK(d.nvlink_bytes_per_s == d.host_link_bytes_per_s);
  }
}  // TEST_SUITE("load: shipped devices")

TEST_SUITE("load: HuggingFace variants") {
  TEST_CASE("gpt2: n_ctx alone, n_inner, untied, defaults for absent dropouts") {
    const std::string base =
        R"("model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100)";
    const auto m =
        sim_io::parse_model("{" + base + R"(, "n_ctx": 128, "n_inner": null})", "g", "g.json");
    CHECK(m.max_positions == 128);
    CHECK(m.ffn_hidden == 256);
    CHECK(m.attn_dropout == 0.1);
    CHECK(m.hidden_dropout == 0.1);
    CHECK(m.embd_dropout == 0.1);
    CHECK(m.tied_embeddings);

    const auto m2 = sim_io::parse_model(
        "{" + base +
            R"(, "n_positions": 64, "n_ctx": 128, "n_inner": 100, "tie_word_embeddings": false,
                "activation_function": "gelu_pytorch_tanh", "attn_pdrop": 0.0, "resid_pdrop": 0.2,
                "embd_pdrop": 0})",
        "g", "g.json");
    CHECK(m2.max_positions == 64);  // n_positions wins over n_ctx
    CHECK(m2.ffn_hidden == 100);
    CHECK_FALSE(m2.tied_embeddings);
    CHECK(m2.attn_dropout == 0.0);
    CHECK(m2.hidden_dropout == 0.2);
    CHECK(m2.embd_dropout == 0.0);
  }

  TEST_CASE("mistral: GQA, Mistral-7B-v0.1's 7,241,732,096 parameters") {
    const auto m = sim_io::parse_model(
        R"({"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
            "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
            "tie_word_embeddings": false, "vocab_size": 32000})",
        "mistral", "mistral.json");
    CHECK(m.family == "mistral");
    CHECK(m.kv_heads == 8);
    CHECK(m.head_dim == 128);
    CHECK(m.mlp == sim::MlpKind::kSwiglu);
    CHECK(sim::parameter_count(m) == 7'241'732'096);
  }

  TEST_CASE("qwen2: bias on q/k/v, Qwen2-7B's 7,615,616,512 parameters") {
    const auto m = sim_io::parse_model(
        R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu",
            "hidden_size": 3584, "intermediate_size": 18944, "max_position_embeddings": 131072,
            "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
            "num_key_value_heads": 4, "rope_theta": 1000000.0, "sliding_window": 131072,
            "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 152064})",
        "qwen2", "qwen2.json");
    CHECK(m.family == "qwen2");
    CHECK(m.qkv_bias);
    CHECK_FALSE(m.linear_bias);
    CHECK(m.kv_heads == 4);
    CHECK(sim::parameter_count(m) == 7'615'616'512);
  }

  TEST_CASE("llama: explicit head_dim, kv heads defaulting to heads, biases, tied") {
    const auto m = sim_io::parse_model(
        R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "head_dim": 32, "intermediate_size": 96, "vocab_size": 100,
            "max_position_embeddings": 256, "attention_bias": true, "mlp_bias": true,
            "tie_word_embeddings": true, "attention_dropout": 0.25, "num_key_value_heads": null})",
        "l", "l.json");
    CHECK(m.head_dim == 32);
    CHECK(m.kv_heads == 4);
    CHECK(m.qkv_bias);
    CHECK(m.linear_bias);
    CHECK(m.tied_embeddings);
    CHECK(m.attn_dropout == 0.25);
    CHECK(m.hidden_dropout == 0.0);
  }

  TEST_CASE("bert: bert-base-uncased's 109,514,298 parameters as BertForMaskedLM") {
    const auto m = sim_io::parse_model(
        R"({"architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
            "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
            "intermediate_size": 3072, "max_position_embeddings": 512, "model_type": "bert",
            "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 2,
            "vocab_size": 30522})",
        "bert-base", "bert-base.json");
    CHECK(m.post_norm);
    CHECK_FALSE(m.causal);
    CHECK(sim::parameter_count(m) == 109'514'298);
  }

  TEST_CASE("actsim format: defaults and explicit values") {
    const auto m = parse(kTinyModel);
    CHECK(m.name == "tiny");
    CHECK(m.source == kSrc);
    CHECK(m.kv_heads == 4);
    CHECK(m.head_dim == 16);
    CHECK(m.ffn_hidden == 256);
    CHECK(m.type_vocab == 0);
    CHECK(m.norm_bias);

    const auto r = parse(kTinyModel.with("norm", "\"rmsnorm\"")
                             .with("mlp", "\"swiglu\"")
                             .with("positions", "\"rope\"")
                             .with("heads", "5")
                             .with("head_dim", "16")
                             .with("kv_heads", "1")
                             .with("ffn_hidden", "100")
                             .with("description", "\"a test\"")
                             .with("provenance", "\"made up\"")
                             .without("max_positions"));
    CHECK(r.norm == sim::NormKind::kRmsNorm);
    CHECK_FALSE(r.norm_bias);  // RMSNorm defaults to no bias
    CHECK(r.mlp == sim::MlpKind::kSwiglu);
    CHECK(r.positions == sim::PosEmbedding::kRope);
    CHECK(r.head_dim == 16);
    CHECK(r.kv_heads == 1);
    CHECK(r.ffn_hidden == 100);
  }
}

TEST_SUITE("load: model errors") {
  TEST_CASE("missing required fields name the field") {
    for (const char* key : {"family", "layers", "hidden", "heads", "vocab"}) {
      CAPTURE(key);
      const auto e = model_error(kTinyModel.without(key));
      CHECK(e.where() == kSrc);
      CHECK(e.field() == key);
      CHECK(std::string(e.what()) == std::string(kSrc) + ": " + key + ": missing (required)");
    }
    const auto e = model_error(kTinyModel.without("max_positions"));
    CHECK(e.field() == "max_positions");
    CHECK(std::string(e.what()) ==
          "dir/tiny.json: max_positions: missing (required with learned positions)");
  }

  TEST_CASE("wrong JSON types name the field and say what was found") {
    struct Case {
      const char* key;
      const char* raw;
      const char* message;
    };
    for (const Case& c : {
             Case{"layers", "\"12\"", "expected an integer, got string"},
             Case{"layers", "12.5", "expected an integer, got 12.5"},
             Case{"layers", "12.0", "expected an integer, got 12.0"},
             Case{"hidden", "9223372036854775808",
                  "integer 9223372036854775808 does not fit in 64-bit signed"},
             Case{"hidden", "1e30", "integer 1e+30 does not fit in 64-bit signed"},
             Case{"vocab", "null", "expected an integer, got null"},
             Case{"heads", "[4]", "expected an integer, got array"},
             Case{"causal", "1", "expected true or false, got number"},
             Case{"attn_dropout", "\"0.1\"", "expected a number, got string"},
             Case{"family", "7", "expected a string, got number"},
             Case{"description", "{}", "expected a string, got object"},
             Case{"mlp", "\"relu\"", "expected one of \"gelu\", \"swiglu\", got \"relu\""},
             Case{"norm", "\"batchnorm\"",
                  "expected one of \"layernorm\", \"rmsnorm\", got \"batchnorm\""},
             Case{"positions", "\"alibi\"", "expected one of \"learned\", \"rope\", got \"alibi\""},
             Case{"format", "\"actsim-model-v2\"",
                  "unknown format \"actsim-model-v2\"; expected \"actsim-model-v1\""},
             Case{"family", "\"\"", "must not be empty"},
         }) {
      CAPTURE(c.key);
      CAPTURE(c.raw);
      const auto e = model_error(kTinyModel.with(c.key, c.raw));
      CHECK(e.where() == kSrc);
      CHECK(e.field() == c.key);
      CHECK(std::string(e.what()) == std::string(kSrc) + ": " + c.key + ": " + c.message);
    }
  }

  TEST_CASE("unknown keys in the actsim format are errors, with a suggestion for typos") {
    auto e = model_error(kTinyModel.with("hiden", "64"));
    CHECK(e.field() == "hiden");
    CHECK(std::string(e.what()) == "dir/tiny.json: hiden: unknown key (did you mean \"hidden\"?)");
    e = model_error(kTinyModel.with("kv_head", "2"));
    CHECK(std::string(e.what()) ==
          "dir/tiny.json: kv_head: unknown key (did you mean \"kv_heads\"?)");
    e = model_error(kTinyModel.with("colour", "\"red\""));
    CHECK(e.field() == "colour");
    CHECK(std::string(e.what()) == "dir/tiny.json: colour: unknown key");
  }

  TEST_CASE("a key given twice is an error, not a silent override") {
    const auto e = error_of([] {
      sim_io::parse_model(R"({"format": "actsim-model-v1", "layers": 2, "layers": 3})", "t",
                          "t.json");
    });
    CHECK(e.where() == "t.json");
    CHECK(e.field() == "layers");
    CHECK(std::string(e.what()) == "t.json: layers: duplicate key in one object");
  }

  TEST_CASE("heads that do not divide hidden need head_dim, and the error names heads") {
    const auto e = model_error(kTinyModel.with("hidden", "65"));
    CHECK(e.where() == kSrc);
    CHECK(e.field() == "heads");
    CHECK(std::string(e.what()) ==
          "dir/tiny.json: heads: hidden (65) is not divisible by heads (4); give head_dim "
          "explicitly");
    CHECK(parse(kTinyModel.with("hidden", "65").with("head_dim", "16")).head_dim == 16);
  }

  TEST_CASE("zero or negative sizes and bad probabilities are rejected by validation") {
    struct Case {
      const char* key;
      const char* raw;
      const char* message;
    };
    for (const Case& c : {
             Case{"layers", "-2", "must be a positive integer, got -2"},
             Case{"hidden", "0", "must be a positive integer, got 0"},
             Case{"vocab", "-1", "must be a positive integer, got -1"},
             Case{"ffn_hidden", "-3", "must be a positive integer, got -3"},
             Case{"max_positions", "0", "must be a positive integer, got 0"},
             Case{"type_vocab", "-1", "must not be negative"},
             Case{"attn_dropout", "1.0", "dropout probability must be in [0, 1)"},
             Case{"embd_dropout", "-0.1", "dropout probability must be in [0, 1)"},
         }) {
      CAPTURE(c.key);
      const auto e = model_error(kTinyModel.with(c.key, c.raw));
      CHECK(e.where() == kSrc);
      CHECK(e.field() == c.key);
      CHECK(std::string(e.what()) == std::string(kSrc) + ": " + c.key + ": " + c.message);
    }
    const auto e = model_error(kTinyModel.with("heads", "-4"));
    CHECK(e.field() == "heads");
    CHECK(std::string(e.what()) == "dir/tiny.json: heads: must be a positive integer, got -4");
    const auto kv = model_error(kTinyModel.with("kv_heads", "3"));
    CHECK(kv.field() == "kv_heads");
  }

  TEST_CASE("sizes whose parameter count overflows 64 bits name the file") {
    const auto e = model_error(kTinyModel
                                   .with("hidden", "4398046511104")  // 2^42
                                   .with("heads", "1")
                                   .with("ffn_hidden", "1")
                                   .with("vocab", "1"));
    CHECK(e.where() == kSrc);
    CHECK(e.field() == "params");
    CHECK(std::string(e.what()).find("overflows 64 bits") != std::string::npos);
  }
}

TEST_SUITE("load: HuggingFace errors") {
  const std::string kGpt2 =
      R"("model_type": "gpt2", "n_layer": 2, "n_head": 4, "vocab_size": 100, "n_positions": 32)";

  auto hf_error(const std::string& members) {
    return error_of([&] { sim_io::parse_model("{" + members + "}", "hf", "hf/config.json"); });
  }

  TEST_CASE("HF keys are named as the file writes them") {
    struct Case {
      std::string members;
      const char* field;
      const char* message;
    };
    for (
        const Case& c : {
            Case{kGpt2 + R"(, "n_embd": 66)", "n_head",
                 "n_embd (66) is not divisible by n_head (4)"},
            Case{kGpt2 + R"(, "n_embd": 0)", "n_embd", "must be a positive integer, got 0"},
            Case{kGpt2 + R"(, "n_embd": "64")", "n_embd", "expected an integer, got string"},
            Case{kGpt2 + R"(, "n_embd": 64, "attn_pdrop": 1.5)", "attn_pdrop",
                 "dropout probability must be in [0, 1)"},
            Case{R"("model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4,
                     "vocab_size": 100)",
                 "n_positions", "missing (required, or n_ctx)"},
            Case{R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 96,
                     "vocab_size": 100, "max_position_embeddings": 64)",
                 "num_key_value_heads",
                 "num_attention_heads (4) must be a multiple of num_key_value_heads (3)"},
            Case{R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64)",
                 "intermediate_size", "missing (required)"},
            Case{R"("model_type": 7)", "model_type", "expected a string, got number"},
            Case{R"("model_type": "")", "model_type", "must not be empty"},
            Case{R"("n_embd": 64, "n_layer": 2)", "model_type",
                 "missing: a HuggingFace config.json names its model_type (an actsim model file "
                 "starts with \"format\": \"actsim-model-v1\")"},
        }) {
      CAPTURE(c.members);
      const auto e = hf_error(c.members);
      CHECK(e.where() == "hf/config.json");
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == std::string("hf/config.json: ") + c.field + ": " + c.message);
    }
  }

  TEST_CASE("a missing model_type is a config error, not an unsupported feature") {
    CHECK_FALSE(is_unsupported([] { sim_io::parse_model(R"({"n_embd": 64})", "hf", "c.json"); }));
  }

  TEST_CASE("unknown model types are refused as not supported") {
    const auto e = hf_error(R"("model_type": "mamba", "hidden_size": 64)");
    CHECK(e.where() == "hf/config.json");
    CHECK(e.field() == "model_type");
    CHECK(std::string(e.what()) ==
          "hf/config.json: model_type: not supported yet: model_type mamba");
    CHECK(is_unsupported(
        [] { sim_io::parse_model(R"({"model_type": "mamba"})", "hf", "hf/config.json"); }));
  }

  TEST_CASE("each refused family names its feature") {
    struct Case {
      const char* model_type;
      const char* feature;
    };
    for (const Case& c : {
             Case{"mt5", "encoder-decoder"},
             Case{"bart", "encoder-decoder"},
             Case{"mbart", "encoder-decoder"},
             Case{"pegasus", "encoder-decoder"},
             Case{"marian", "encoder-decoder"},
             Case{"whisper", "encoder-decoder"},
             Case{"qwen3_moe", "mixture of experts"},
             Case{"deepseek_v3", "mixture of experts"},
             Case{"dbrx", "mixture of experts"},
             Case{"jamba", "mixture of experts"},
             Case{"deit", "vision or multimodal"},
             Case{"clip", "vision or multimodal"},
             Case{"siglip", "vision or multimodal"},
             Case{"llava", "vision or multimodal"},
             Case{"gptj", "parallel residual"},
             Case{"phi", "parallel residual"},
             Case{"qwen3", "per-head q/k norms"},
             Case{"gemma3", "vision or multimodal"},  // Gemma3ForConditionalGeneration
             Case{"recurrent_gemma", "recurrent blocks"},
         }) {
      CAPTURE(c.model_type);
      const std::string members = std::string(R"("model_type": ")") + c.model_type + "\"";
      CHECK(is_unsupported(
          [&] { sim_io::parse_model("{" + members + "}", "hf", "hf/config.json"); }));
      const auto e = hf_error(members);
      CHECK(e.where() == "hf/config.json");
      CHECK(e.field() == "model_type");
      CHECK(std::string(e.what()) ==
            std::string("hf/config.json: model_type: not supported yet: ") + c.feature + " (" +
                c.model_type + ")");
    }
  }

  TEST_CASE("MoE by expert count, encoder-decoder by flag, whatever the model_type") {
    auto e = hf_error(R"("model_type": "llama", "num_local_experts": 8)");
    CHECK(e.field() == "num_local_experts");
    CHECK(std::string(e.what()) ==
          "hf/config.json: num_local_experts: not supported yet: mixture of experts (llama with "
          "num_local_experts 8)");
    e = hf_error(R"("model_type": "qwen2", "num_experts": 64)");
    CHECK(e.field() == "num_experts");
    e = hf_error(R"("model_type": "bert", "is_encoder_decoder": true)");
    CHECK(e.field() == "is_encoder_decoder");
    CHECK(std::string(e.what()) ==
          "hf/config.json: is_encoder_decoder: not supported yet: encoder-decoder (bert)");
    // One expert is a dense model.
    CHECK_NOTHROW(
        sim_io::parse_model("{" + kGpt2 + R"(, "n_embd": 64, "num_experts": 1})", "g", "g"));
  }

  TEST_CASE("features outside the families' allow-lists are refused, naming the key") {
    struct Case {
      std::string members;
      const char* field;
      const char* message;
    };
    const std::string llama =
        R"("model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
           "max_position_embeddings": 64)";
    const std::string bert =
        R"("model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
           "max_position_embeddings": 64)";
    for (const Case& c : {
             Case{kGpt2 + R"(, "n_embd": 64, "activation_function": "relu")", "activation_function",
                  "not supported yet: activation relu (gpt2)"},
             Case{kGpt2 + R"(, "n_embd": 64, "add_cross_attention": true)", "add_cross_attention",
                  "not supported yet: cross-attention (gpt2)"},
             Case{llama + R"(, "hidden_act": "gelu")", "hidden_act",
                  "not supported yet: hidden_act gelu (llama)"},
             Case{bert + R"(, "hidden_act": "relu")", "hidden_act",
                  "not supported yet: hidden_act relu (bert)"},
             Case{bert + R"(, "position_embedding_type": "relative_key")",
                  "position_embedding_type",
                  "not supported yet: relative position embeddings relative_key (bert)"},
             Case{bert + R"(, "is_decoder": true)", "is_decoder",
                  "not supported yet: BERT as a decoder (bert)"},
         }) {
      CAPTURE(c.members);
      CHECK(is_unsupported([&] { sim_io::parse_model("{" + c.members + "}", "hf", "h.json"); }));
      const auto e = error_of([&] { sim_io::parse_model("{" + c.members + "}", "hf", "h.json"); });
      CHECK(e.where() == "h.json");
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == std::string("h.json: ") + c.field + ": " + c.message);
    }
  }
}

TEST_SUITE("load: device errors") {
  const char* const kNumeric[] = {"sm_arch",
                                  "hbm_bytes",
                                  "driver_reserved_bytes",
                                  "cuda_context_bytes",
                                  "nccl_buffer_bytes",
                                  "cublas_workspace_bytes",
                                  "launch_overhead_ns",
                                  "peak_bf16_flops_per_s",
                                  "peak_tf32_flops_per_s",
                                  "peak_fp32_flops_per_s",
                                  "hbm_bytes_per_s",
                                  "host_link_bytes_per_s",
                                  "nvlink_bytes_per_s",
                                  "compute_efficiency",
                                  "memory_efficiency",
                                  "sm_count",
                                  "host_dispatch_ns",
                                  "internode_bytes_per_s"};

  std::string provenance(std::string_view skip = "", const std::string& extra = "") {
    std::string s = "{";
    for (const char* key : kNumeric) {
      if (key == skip) continue;
      s += std::string(s.size() > 1 ? ", " : "") + "\"" + key + "\": \"datasheet\"";
    }
    return s + extra + "}";
  }

  const JsonObject kTinyDevice{{{"format", "\"actsim-device-v1\""},
                                {"label", "\"Test GPU\""},
                                {"sm_arch", "90"},
                                {"hbm_bytes", "1000000"},
                                {"driver_reserved_bytes", "0"},
                                {"cuda_context_bytes", "0"},
                                {"nccl_buffer_bytes", "0"},
                                {"cublas_workspace_bytes", "0"},
                                {"peak_bf16_flops_per_s", "1e12"},
                                {"peak_tf32_flops_per_s", "5e11"},
                                {"peak_fp32_flops_per_s", "1e11"},
                                {"hbm_bytes_per_s", "1e11"},
                                {"host_link_bytes_per_s", "1e10"},
                                {"nvlink_bytes_per_s", "1e10"},
                                {"compute_efficiency", "1"},
                                {"memory_efficiency", "0.5"},
                                {"launch_overhead_ns", "0"},
                                {"sm_count", "132"},
                                {"host_dispatch_ns", "0"},
                                {"internode_bytes_per_s", "1e10"},
                                {"provenance", provenance()}}};

  auto device_error(const JsonObject& o) {
    return error_of([&] { sim_io::parse_device(o.text(), "tiny", "d/tiny.json"); });
  }

  TEST_CASE("a complete device parses") {
    const sim::Device d = sim_io::parse_device(kTinyDevice.text(), "tiny", "d/tiny.json");
    CHECK(d.name == "tiny");
    CHECK(d.source == "d/tiny.json");
    CHECK(d.label == "Test GPU");
    CHECK(d.hbm_bytes == 1'000'000);
    CHECK(d.peak_bf16_flops_per_s == 1e12);
    CHECK(d.compute_efficiency == 1.0);
  }

  TEST_CASE("every numeric field needs a provenance line, naming the field") {
    for (const char* key : kNumeric) {
      CAPTURE(key);
      const auto e = device_error(kTinyDevice.with("provenance", provenance(key)));
      CHECK(e.where() == "d/tiny.json");
      CHECK(e.field() == key);
      CHECK(std::string(e.what()) == std::string("d/tiny.json: ") + key +
                                         ": no provenance: add a one-line source for it under "
                                         "\"provenance\"");
    }
  }

  TEST_CASE("peak_fp8_flops_per_s (issue 11, time): optional, with a provenance line when given") {
    CHECK(sim_io::parse_device(kTinyDevice.text(), "tiny", "d/tiny.json").peak_fp8_flops_per_s == 0);
    const JsonObject fp8 = kTinyDevice.with("peak_fp8_flops_per_s", "2e12");
    auto e = device_error(fp8);
    CHECK(std::string(e.what()) == "d/tiny.json: peak_fp8_flops_per_s: no provenance: add a "
                                   "one-line source for it under \"provenance\"");
    const JsonObject with_prov =
        fp8.with("provenance", provenance("", R"(, "peak_fp8_flops_per_s": "datasheet")"));
    CHECK(sim_io::parse_device(with_prov.text(), "tiny", "d/tiny.json").peak_fp8_flops_per_s ==
          2e12);
    e = device_error(with_prov.with("peak_fp8_flops_per_s", "-1"));
    CHECK(e.field() == "peak_fp8_flops_per_s");
  }

  TEST_CASE("provenance entries must be non-empty strings for numeric fields") {
    struct Case {
      std::string provenance;
      const char* field;
      const char* message;
    };
    for (const Case& c : {
             Case{provenance("", R"(, "hbm_byte": "typo")"), "provenance.hbm_byte",
                  "not a numeric field of the device"},
             Case{provenance("", R"(, "label": "the label")"), "provenance.label",
                  "not a numeric field of the device"},
             Case{provenance("hbm_bytes", R"(, "hbm_bytes": 5)"), "provenance.hbm_bytes",
                  "expected a string, got number"},
             Case{provenance("hbm_bytes", R"(, "hbm_bytes": "")"), "provenance.hbm_bytes",
                  "must not be empty"},
             Case{"\"datasheet\"", "provenance",
                  "expected an object mapping each numeric field to its source, got string"},
         }) {
      CAPTURE(c.provenance);
      const auto e = device_error(kTinyDevice.with("provenance", c.provenance));
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == std::string("d/tiny.json: ") + c.field + ": " + c.message);
    }
    const auto e = device_error(kTinyDevice.without("provenance"));
    CHECK(e.field() == "provenance");
    CHECK(std::string(e.what()) ==
          "d/tiny.json: provenance: missing: give a one-line source for every numeric field");
  }

  TEST_CASE("device fields: missing, mistyped, unknown, out of range") {
    struct Case {
      JsonObject device;
      const char* field;
      const char* message;
    };
    for (const Case& c : {
             Case{kTinyDevice.without("nvlink_bytes_per_s"), "nvlink_bytes_per_s",
                  "missing (required)"},
             Case{kTinyDevice.without("label"), "label", "missing (required)"},
             Case{kTinyDevice.with("hbm_bytes", "8.5e10"), "hbm_bytes",
                  "expected an integer, got 85000000000.0"},
             Case{kTinyDevice.with("peak_bf16_flops_per_s", "\"989 TFLOP/s\""),
                  "peak_bf16_flops_per_s", "expected a number, got string"},
             Case{kTinyDevice.with("hbm_gb", "80"), "hbm_gb", "unknown key"},
             Case{kTinyDevice.with("hbm_byte", "80"), "hbm_byte",
                  "unknown key (did you mean \"hbm_bytes\"?)"},
             Case{kTinyDevice.with("format", "\"actsim-model-v1\""), "format",
                  "unknown format \"actsim-model-v1\"; expected \"actsim-device-v1\""},
             Case{kTinyDevice.with("sm_arch", "0"), "sm_arch",
                  "must be a positive compute capability x10 (80, 90), got 0"},
             Case{kTinyDevice.with("hbm_bytes", "0"), "hbm_bytes", "must be a positive number"},
             Case{kTinyDevice.with("compute_efficiency", "1.5"), "compute_efficiency",
                  "must be <= 1"},
             Case{kTinyDevice.with("launch_overhead_ns", "-1"), "launch_overhead_ns",
                  "must be >= 0"},
             Case{kTinyDevice.without("sm_count"), "sm_count", "missing (required)"},
             Case{kTinyDevice.with("sm_count", "0"), "sm_count",
                  "must be a positive number of SMs"},
             Case{kTinyDevice.without("internode_bytes_per_s"), "internode_bytes_per_s",
                  "missing (required)"},
             Case{kTinyDevice.with("host_dispatch_ns", "-5"), "host_dispatch_ns", "must be >= 0"},
         }) {
      CAPTURE(c.field);
      const auto e = device_error(c.device);
      CHECK(e.where() == "d/tiny.json");
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == std::string("d/tiny.json: ") + c.field + ": " + c.message);
    }
  }
}

TEST_SUITE("load: files and names") {
  // A fresh folder under the system temp dir, removed at the end of the test.
  struct TempDir {
    fs::path path;
    TempDir() {
      path = fs::temp_directory_path() /
             ("actsim-io-test-" + std::to_string(reinterpret_cast<uintptr_t>(this)) + "-" +
              std::to_string(std::rand()));
      fs::create_directories(path);
    }
    ~TempDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
    fs::path write(const fs::path& relative, const std::string& text) const {
      const fs::path file = path / relative;
      fs::create_directories(file.parent_path());
      std::ofstream(file, std::ios::binary) << text;
      return file;
    }
  };

  TEST_CASE("invalid JSON names the file, line and column") {
    const auto e = error_of([] {
      sim_io::parse_model("{\n  \"format\": \"actsim-model-v1\",\n  \"layers\": 2,,\n}", "bad",
                          "bad.json");
    });
    CHECK(e.where() == "bad.json");
    CHECK(e.field() == "json");
    const std::string what = e.what();
    CHECK(what.rfind("bad.json: json: invalid JSON at line 3 column 15: ", 0) == 0);
    CHECK(what.find("syntax error") != std::string::npos);

    const auto empty = error_of([] { sim_io::parse_device("", "e", "empty.json"); });
    CHECK(empty.field() == "json");
    CHECK(
        std::string(empty.what()).rfind("empty.json: json: invalid JSON at line 1 column 1: ", 0) ==
        0);

    const auto array = error_of([] { sim_io::parse_model("[1, 2]", "a", "a.json"); });
    CHECK(std::string(array.what()) ==
          "a.json: json: expected a JSON object at the top level, got array");
  }

  TEST_CASE("invalid JSON in a file loaded by name names the file") {
    TempDir dir;
    const fs::path file = dir.write("broken.json", "{\"model_type\": \"gpt2\"");
    const auto e = error_of([&] { sim_io::load_model("broken", {dir.path}); });
    CHECK(e.where() == file.string());
    CHECK(e.field() == "json");
    CHECK(std::string(e.what()).find("invalid JSON at line 1 column 22") != std::string::npos);
  }

  TEST_CASE("an unknown name lists the folders searched and the known names") {
    auto e = error_of([] { sim_io::load_model("gpt2-smal", kDirs); });
    CHECK(e.where() == "gpt2-smal");
    CHECK(e.field() == "model");
    std::string what = e.what();
    CHECK(what.rfind("gpt2-smal: model: no model of that name; searched " + kModels.string() +
                         "; known models: bert-large, ",
                     0) == 0);
    CHECK(what.find("gpt2-large, ") != std::string::npos);
    CHECK(what.find("vit-base-patch16-224 (or give a path to a .json file)") != std::string::npos);

    e = error_of([] { sim_io::load_device("h100", kDirs); });
    CHECK(e.where() == "h100");
    CHECK(e.field() == "device");
    CHECK(std::string(e.what()) == "h100: device: no device of that name; searched " +
                                       (kModels / "devices").string() +
                                       "; known devices: a100-40gb, a100-80gb, h100-96gb, "
                                       "h100-pcie, h100-sxm, h200, v100-16gb (or give a path to "
                                       "a .json file)");

    e = error_of([] { sim_io::load_model("nothing", {}); });
    CHECK(std::string(e.what()) ==
          "nothing: model: no model of that name; searched no folders (set ACTSIM_MODELS); known "
          "models: none (or give a path to a .json file)");
  }

  TEST_CASE("an unreadable path is an error naming the file") {
    auto e = error_of([] { sim_io::load_model("no/such/config.json", kDirs); });
    CHECK(e.where() == "no/such/config.json");
    CHECK(e.field() == "model");
    CHECK(std::string(e.what()) == "no/such/config.json: model: no such file");
    e = error_of([] { sim_io::load_device((kModels / "devices").string() + "/", kDirs); });
    CHECK(e.field() == "device");
    CHECK(std::string(e.what()).ends_with(": device: is a directory, not a JSON file"));
  }

  TEST_CASE("the first folder that has a name wins, for loading and for the catalogue") {
    TempDir first, second;
    first.write("shared.json", R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
                                   "vocab_size": 10, "n_positions": 8})");
    second.write("shared.json", R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 4,
                                    "vocab_size": 10, "n_positions": 8})");
    second.write("only-second.json", "{}");
    second.write("notes.txt", "not a model");
    first.write("devices/gpu.json", "{}");
    const std::vector<fs::path> dirs = {first.path, second.path};
    CHECK(sim_io::load_model("shared", dirs).hidden == 64);
    CHECK(sim_io::load_model("shared", {second.path, first.path}).hidden == 32);

    const auto models = sim_io::list_models(dirs);
    REQUIRE(models.size() == 2);
    CHECK(models[0].name == "only-second");
    CHECK(models[0].path == second.path / "only-second.json");
    CHECK(models[1].name == "shared");
    CHECK(models[1].path == first.path / "shared.json");

    const auto devices = sim_io::list_devices(dirs);
    REQUIRE(devices.size() == 1);
    CHECK(devices[0].name == "gpu");
  }

  TEST_CASE("search folders: ACTSIM_MODELS, then beside the executable, then share/") {
    const char* saved = std::getenv("ACTSIM_MODELS");
    const std::string saved_value = saved ? saved : "";
    ::setenv("ACTSIM_MODELS", "/a/models::/b/models", 1);
    CHECK(sim_io::model_search_dirs("/opt/actsim/bin/actsim") ==
          std::vector<fs::path>{"/a/models", "/b/models", "/opt/actsim/bin/models",
                                "/opt/actsim/share/actsim/models"});
    ::unsetenv("ACTSIM_MODELS");
    CHECK(sim_io::model_search_dirs("/opt/actsim/bin/actsim") ==
          std::vector<fs::path>{"/opt/actsim/bin/models", "/opt/actsim/share/actsim/models"});
    if (saved) ::setenv("ACTSIM_MODELS", saved_value.c_str(), 1);
  }
}

TEST_CASE("fuzz regressions: inputs that once crashed a loader are one-line config errors") {
  // Each file in tests/fuzz_regressions/ was found by fuzz/fuzz_config.
  const std::filesystem::path dir = std::filesystem::path(ACTSIM_SOURCE_DIR) / "tests/fuzz_regressions";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CAPTURE(entry.path().filename().string());
    ++files;
    CHECK_THROWS_AS(sim_io::parse_device(text, "x", "x.json"), sim::ConfigError);
    CHECK_THROWS_AS(sim_io::parse_model(text, "x", "x.json"), sim::ConfigError);
  }
  CHECK(files >= 1);
  CHECK_THROWS_WITH(sim_io::parse_device("{\"hbm_bytes\": 1.9e513}", "x", "x.json"),
                    doctest::Contains("x.json: json: invalid JSON: number overflow"));
}
