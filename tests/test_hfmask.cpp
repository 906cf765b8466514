// hfimpl (issue 10): --padding and the masks of HF's modeling code (sim/src/blocks_hfmask.cpp;
// docs/memory-model.md, "Masks and padding under --impl hf"). b micro-batch, s sequence,
// a query heads, g KV heads, d head dim.
#include <doctest/doctest.h>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/graph.hpp"
#include "sim/impl.hpp"

using namespace sim;

namespace {

TrainSetup hf(int64_t b, int64_t s, Precision p, AttentionKind att, bool padding) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.attention = att;
  t.micro_batch = b;
  t.seq = s;
  t.precision = p;
  t.padding = padding;
  return t;
}

}  // namespace

TEST_CASE("hf --padding: SDPA with a mask repeats K/V (GQA), saves the per-layer mask cast") {
  // integrations/sdpa_attention.py @ 00c238bd: with a mask, repeat_kv copies K and V to a heads
  // (SDPA saves the 16-bit copies: 2 (a - g) d more per token each than the g-head K/V); autocast
  // casts the fp32 [b, 1, s, s] mask to a bf16 copy per layer (2 b s^2) that the memory-efficient
  // kernel saves; its logsumexp is padded to 32 rows (s = 100 -> 128: 4 b a 28 more).
  ModelConfig m = fixtures::tiny_llama();
  m.additive_causal_mask = true;
  const int64_t b = 2, s = 100, a = m.heads, g = m.kv_heads, d = m.head_dim;
  const auto off = fixtures::run(m, hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, false), "none");
  const auto on = fixtures::run(m, hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, true), "none");
  const int64_t repeated = 2 * (2 * b * s * (a - g) * d);
  const int64_t mask_cast = 2 * b * s * s;
  const int64_t lse_pad = 4 * b * a * (128 - s);
  CHECK(on.activation_bytes_per_layer - off.activation_bytes_per_layer ==
        repeated + mask_cast + lse_pad);
  // bf16-mixed: no autocast, the bf16 mask itself is saved (model-level, not per layer)
  const auto mix_off = fixtures::run(m, hf(b, s, Precision::kBf16Mixed, AttentionKind::kFlash, false), "none");
  const auto mix_on = fixtures::run(m, hf(b, s, Precision::kBf16Mixed, AttentionKind::kFlash, true), "none");
  CHECK(mix_on.activation_bytes_per_layer - mix_off.activation_bytes_per_layer == repeated + lse_pad);
}

TEST_CASE("hf --padding without GQA: only the mask cast and the padded logsumexp") {
  const ModelConfig m = fixtures::gpt2_small();
  const int64_t b = 2, s = 128;  // s a multiple of 32: no logsumexp padding
  const auto off = fixtures::run(m, hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, false), "none");
  const auto on = fixtures::run(m, hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, true), "none");
  CHECK(on.activation_bytes_per_layer - off.activation_bytes_per_layer == 2 * b * s * s);
}

TEST_CASE("hf GPT-2: a bool [n_positions, n_positions] `bias` buffer per attention layer") {
  // modeling_gpt2.py @ c44b2d99 GPT2Attention.__init__ register_buffer("bias", ...): P^2 bytes
  // per layer under SDPA too (12 MiB for gpt2-small); nanoGPT's own code has none under SDPA.
  ModelConfig m = fixtures::gpt2_small();
  const TrainSetup t = hf(1, 128, Precision::kBf16Amp, AttentionKind::kFlash, false);
  const int64_t without = fixtures::run(m, t, "none").weights_bytes;
  m.causal_buffer_per_layer = true;
  const int64_t with = fixtures::run(m, t, "none").weights_bytes;
  CHECK(with - without == m.layers * m.max_positions * m.max_positions);
  CHECK(with - without == 12 * 1024 * 1024);
  TrainSetup nano = t;
  nano.impl = Impl::kNanogpt;
  m.causal_buffer_per_layer = true;
  m.linear_bias = m.qkv_bias = m.norm_bias = true;
  const ModelConfig plain = [&] { ModelConfig c = m; c.causal_buffer_per_layer = false; return c; }();
  CHECK(fixtures::run(m, nano, "none").weights_bytes == fixtures::run(plain, nano, "none").weights_bytes);
}

TEST_CASE("hf eager: Llama's additive mask replaces the bool buffer, and padding is model-level") {
  // _update_causal_mask builds the 4-D mask once per forward (held by the model's forward, not
  // saved: no per-layer bytes change); the shared bool [s, s] buffer is gone.
  ModelConfig m = fixtures::tiny_llama();
  const int64_t b = 2, s = 64;
  const TrainSetup t = hf(b, s, Precision::kBf16Amp, AttentionKind::kStandard, false);
  const auto buf = fixtures::run(m, t, "none");
  m.additive_causal_mask = true;
  const auto add = fixtures::run(m, t, "none");
  CHECK(buf.weights_bytes - add.weights_bytes == s * s);
  CHECK(add.activation_bytes_per_layer == buf.activation_bytes_per_layer);
  TrainSetup p = t;
  p.padding = true;
  CHECK(fixtures::run(m, p, "none").activation_bytes_per_layer == add.activation_bytes_per_layer);
}

TEST_CASE("--padding is refused outside hf and under the paper profile, naming the flag") {
  const ModelConfig m = fixtures::gpt2_small();
  for (Impl impl : {Impl::kNanogpt, Impl::kMegatron, Impl::kTorchtitan}) {
    TrainSetup t = hf(1, 128, Precision::kBf16Amp, AttentionKind::kFlash, true);
    t.impl = impl;
    ModelConfig mm = impl == Impl::kTorchtitan ? fixtures::tiny_llama() : m;
    CHECK_THROWS_WITH_AS(resolve_setup(mm, t), doctest::Contains("--padding"), NotInCode);
  }
  TrainSetup paper;
  paper.profile = Profile::kPaper;
  paper.padding = true;
  CHECK_THROWS_WITH_AS(resolve_setup(m, paper), doctest::Contains("--padding"), ConfigError);
}

TEST_CASE("hf LM loss: the forward holds the logits until it returns (not nanoGPT's loop)") {
  // LlamaForCausalLM / GPT2LMHeadModel return the logits in their ModelOutput: held until the
  // forward ends (Graph::forward_held); log_softmax saves b s v fp32.
  const ModelConfig m = fixtures::gpt2_small();
  const int64_t b = 2, s = 64, v = m.vocab;
  const TrainSetup t = hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, false);
  const Graph g = build_graph(m, t, fixtures::h100());
  REQUIRE(g.forward_held.size() == 1);
  CHECK(g.storages[g.forward_held[0]].bytes == 2 * b * s * v);  // the bf16 logits
  TrainSetup nano = t;
  nano.impl = Impl::kNanogpt;
  CHECK(build_graph(m, nano, fixtures::h100()).forward_held.empty());
}

TEST_CASE("hf LM loss: GPT-2 copies the shifted logits and labels, no upcast outside autocast (exec10)") {
  // modeling_gpt2.py @ c44b2d9976e8 GPT2LMHeadModel.forward: shift_logits = lm_logits[..., :-1,
  // :].contiguous() (b (s - 1) v in the logits' dtype), shift_labels = labels[..., 1:]
  // .contiguous() (int64 b (s - 1), saved by nll_loss), CrossEntropyLoss without .float().
  ModelConfig m = fixtures::gpt2_small();
  const int64_t b = 2, s = 64, v = m.vocab;
  auto output_bytes = [](const Graph& g, std::string_view name) -> int64_t {
    for (const Op& op : g.ops)
      if (op.name == name) return g.storages[g.idx[op.outputs.begin]].bytes;
    return -1;
  };
  auto has = [](const Graph& g, std::string_view name) {
    for (const Op& op : g.ops)
      if (op.name == name) return true;
    return false;
  };
  const TrainSetup amp = hf(b, s, Precision::kBf16Amp, AttentionKind::kFlash, false);
  const Graph plain = build_graph(m, amp, fixtures::h100());
  CHECK(output_bytes(plain, "shift logits copy") == -1);
  CHECK(output_bytes(plain, "log softmax") == 4 * b * s * v);
  m.shift_logits_copy = true;  // as sim/io/src/load_hf.cpp gpt2() sets it
  const Graph shifted = build_graph(m, amp, fixtures::h100());
  CHECK(output_bytes(shifted, "shift logits copy") == 2 * b * (s - 1) * v);
  CHECK(output_bytes(shifted, "shift labels copy") == 8 * b * (s - 1));
  CHECK(has(shifted, "logits to fp32"));  // autocast's fp32 list casts for cross_entropy
  CHECK(output_bytes(shifted, "log softmax") == 4 * b * (s - 1) * v);
  // bf16-mixed: no autocast and no .float(): log_softmax and nll_loss in bf16
  const Graph mixed = build_graph(m, hf(b, s, Precision::kBf16Mixed, AttentionKind::kFlash, false),
                                  fixtures::h100());
  CHECK_FALSE(has(mixed, "logits to fp32"));
  CHECK(output_bytes(mixed, "log softmax") == 2 * b * (s - 1) * v);
  CHECK(output_bytes(mixed, "nll loss") == 2);
}
