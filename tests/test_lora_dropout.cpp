// feat13 (issue 13): PEFT's lora_dropout (sim/src/lora.cpp; docs/memory-model.md "LoRA and
// QLoRA"). With P > 0 each adapter runs `lora_B(lora_A(dropout(x)))` with its own nn.Dropout
// (peft tuners/lora/layer.py @ 5d602fdb update_layer, Linear.forward): native_dropout keeps a
// 1-byte bool mask per element of the adapter's input (census "llama-lora-dropout-*") and makes
// the dropped copy, which lora_A saves in place of the input. s sequence, b micro-batch, h hidden,
// N = s b tokens.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::nanogpt;  // n_layer 4, n_head 4, n_embd 256, block_size 256, bias on
TrainSetup nanogpt_lora(const char* targets, double p) { return fixtures::nanogpt_lora(8, targets, p); }

TrainSetup llama_lora(std::optional<Precision> prec, double p) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.precision = prec;
  t.lora_rank = 4;  // PEFT's llama default: q_proj and v_proj
  t.lora_dropout = p;
  return t;
}

using fixtures::storage_bytes;

int count_ops(const Graph& g, const std::string& name) {
  int n = 0;
  for (const Op& op : g.ops)
    if (op.name == name) ++n;
  return n;
}

}  // namespace

TEST_CASE("lora dropout on nanoGPT's c_attn, fp32: one mask of sbh bytes more per layer") {
  // lora_dropout 0 (tests/test_lora.cpp): 40sbh + 4sbr + 4as^2b + s^2 + 16sb per layer, ln_1's
  // output (4 sbh) saved by lora_A. With P > 0, lora_A saves the dropped fp32 copy (4 sbh) instead
  // and nothing else keeps ln_1's output (LayerNorm saves its input; the frozen c_attn only its
  // weight); the dropout's bool mask adds sbh: 41sbh + 4sbr + 4as^2b + s^2 + 16sb.
  const int64_t b = 4, s = 256, h = 256, a = 4, r = 8;
  const Result off = fixtures::run(nanogpt(), nanogpt_lora("q,k,v", 0.0), "none");
  const Result on = fixtures::run(nanogpt(), nanogpt_lora("q,k,v", 0.1), "none");
  CHECK(off.activation_bytes_per_layer ==
        40 * s * b * h + 4 * s * b * r + 4 * a * s * s * b + s * s + 16 * s * b);
  CHECK(on.activation_bytes_per_layer ==
        41 * s * b * h + 4 * s * b * r + 4 * a * s * s * b + s * s + 16 * s * b);
  // the dropout changes no parameter, gradient or optimizer byte
  CHECK(on.params_per_rank == off.params_per_rank);
  CHECK(on.grads_bytes == off.grads_bytes);
  CHECK(on.optimizer_bytes == off.optimizer_bytes);
  // the ops: one nn.Dropout per adapted module per layer (nn.Identity at 0: no op)
  const Graph g_on = build_graph(nanogpt(), nanogpt_lora("q,k,v", 0.1), fixtures::h100());
  const Graph g_off = build_graph(nanogpt(), nanogpt_lora("q,k,v", 0.0), fixtures::h100());
  CHECK(count_ops(g_off, "lora dropout") == 0);
  CHECK(count_ops(g_on, "lora dropout") == g_on.n_blocks);
}

TEST_CASE("lora dropout on every nanoGPT linear, fp32: masks of the four adapter inputs, 7 sbh") {
  // c_attn, attn.c_proj, c_fc take h-wide inputs, mlp.c_proj the 4h-wide GeLU output: masks of
  // (1 + 1 + 1 + 4) sbh. Each input was saved only by its lora_A (the GeLU saves its input, not
  // its output), so each dropped copy replaces it byte for byte.
  const int64_t b = 4, s = 256, h = 256;
  const char* all = "q,k,v,o,up,down";
  for (double p : {0.05, 0.1, 0.5}) {
    CAPTURE(p);
    const Result off = fixtures::run(nanogpt(), nanogpt_lora(all, 0.0), "none");
    const Result on = fixtures::run(nanogpt(), nanogpt_lora(all, p), "none");
    CHECK(on.activation_bytes_per_layer - off.activation_bytes_per_layer == 7 * s * b * h);
  }
}

TEST_CASE("lora dropout on Llama's q_proj and v_proj, by precision") {
  // tiny_llama: h 256, N = s b = 128 tokens. q_proj and v_proj read the same RMSNorm output x;
  // each adapter has its own nn.Dropout.
  const ModelConfig m = fixtures::tiny_llama();
  const int64_t N = 128, h = 256;
  const auto delta = [&](std::optional<Precision> prec) {
    const Result off = fixtures::run(m, llama_lora(prec, 0.0), "none");
    const Result on = fixtures::run(m, llama_lora(prec, 0.1), "none");
    return on.activation_bytes_per_layer - off.activation_bytes_per_layer;
  };
  // fp32: without dropout both lora_A save x itself, once (4Nh; _cast_input_dtype copies
  // nothing). With it: two fp32 dropped copies and two masks, and x is kept by nobody (the
  // frozen RMSNorm weight's mul keeps the weight, not x): 2 (4 + 1) Nh - 4Nh = 6Nh.
  CHECK(delta(Precision::kFp32) == 6 * N * h);
  // bf16-mixed (a bf16 base, fp32 adapters): each adapter casts x to fp32 (4Nh) and saved that;
  // with dropout the cast is a transient and the dropped fp32 copy is saved instead, plus the
  // mask: Nh per adapter, 2Nh.
  CHECK(delta(Precision::kBf16Mixed) == 2 * N * h);
  // bf16-amp: x is fp32, so is the adapter: dropout on x, and lora_A's autocast cast of the
  // dropped copy is saved (2Nh, as the cast of x was); the fp32 copy is a transient: the mask
  // alone, Nh per adapter.
  CHECK(delta(Precision::kBf16Amp) == 2 * N * h);
  // the masks themselves: one bool per element of each adapter's input, per layer
  const Graph g = build_graph(m, llama_lora(Precision::kBf16Mixed, 0.1), fixtures::h100());
  CHECK(storage_bytes(g, "dropout mask") == g.n_blocks * 2 * N * h);
}

TEST_CASE("lora dropout refusals: one line naming --lora-dropout") {
  const ModelConfig m = fixtures::tiny_llama();
  auto where = [&](TrainSetup t) -> std::string {
    try {
      (void)fixtures::run(m, t, "none");
    } catch (const ConfigError& e) {
      return std::string(e.where());
    }
    return "";
  };
  CHECK(where(llama_lora(std::nullopt, 0.1)) == "");
  CHECK(where(llama_lora(std::nullopt, 1.0)) == "--lora-dropout");
  CHECK(where(llama_lora(std::nullopt, -0.1)) == "--lora-dropout");
  TrainSetup t = llama_lora(std::nullopt, 0.1);
  t.lora_rank = 0;  // dropout without adapters
  CHECK(where(t) == "--lora-dropout");
}

TEST_CASE("PEFT target_parameters: parsed and printed, refused where no 3-D experts exist") {
  // experts.gate_up_proj / experts.down_proj: DeepseekV2Experts' 3-D parameters (refused under
  // deepseek_v2 as not modeled yet: tests/cli.cmake feat13_target_parameters); all-linear never
  // includes them
  const std::optional<uint32_t> t = parse_lora_targets("q,experts.gate_up_proj+experts.down_proj");
  REQUIRE(t.has_value());
  CHECK((*t & kLoraAllLinear) == kLoraQ);
  CHECK(lora_targets_name(*t) == "q+experts.gate_up_proj+experts.down_proj");
  CHECK_FALSE(parse_lora_targets("experts.up_proj"));
  const ModelConfig llama = fixtures::tiny_llama();
  TrainSetup s = llama_lora(std::nullopt, 0.0);
  s.lora_targets = *parse_lora_targets("experts.down_proj");
  try {
    (void)fixtures::run(llama, s, "none");
    FAIL("a dense model has no expert parameters");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.where()) == "--lora-targets");
    CHECK(std::string(e.what()).find("experts.down_proj names no parameter in llama") !=
          std::string::npos);
  }
}
