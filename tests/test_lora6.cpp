// lora6 (issue 13): PEFT's LoRA on the sites 5eb1f00 refused: MoE experts (one adapter per expert,
// active tokens only), T5's q/k/v/o/wi/wo, MLA's q_a/q_b/kv_a/kv_b, Phi-3's fused gate_up_proj
// (docs/memory-model.md "LoRA and QLoRA", "lora6"). Each new site's saved bytes are derived by
// hand in fp32 and asserted to the byte; the adapters' parameters likewise.
//
// In fp32 (no autocast) a frozen linear saves only its weight (persistent), so a linear's input is
// saved by nobody unless an adapter reads it: targeting a linear of n tokens, in_f inputs, rank r
// adds to the saved activations its input (4 n in_f B, once per tensor however many adapters read
// it: lora_A saves it) and lora_A's output [n, r] (4 n r B, saved by lora_B). lora_B's output, its
// scaled copy and the sum are saved by nothing.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim_io/load.hpp"

using namespace sim;

namespace {

const std::vector<std::filesystem::path> kDirs = {std::filesystem::path(ACTSIM_SOURCE_DIR) /
                                                  "models"};

// A Mixtral-shaped model, small: h 256, 4 experts of width 512, top-2, 4 layers.
ModelConfig small_mixtral() {
  ModelConfig m;
  m.name = m.source = "small-mixtral";
  m.family = "mixtral";
  m.layers = 4;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 64;
  m.ffn_hidden = 512;
  m.vocab = 1000;
  m.max_positions = 1024;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.norm_bias = false;
  m.positions = PosEmbedding::kRope;
  m.tied_embeddings = false;
  m.qkv_bias = m.linear_bias = false;
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn = 512;
  m.norm_topk = true;
  return m;
}

TrainSetup hf_lora(const char* targets, int64_t rank = 8, Precision p = Precision::kFp32) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.precision = p;
  t.micro_batch = 2;
  t.seq = 128;
  t.lora_rank = rank;
  t.lora_targets = *parse_lora_targets(targets);
  return t;
}

// Bytes of the distinct non-persistent storages some op saves for backward: the activations a
// step keeps, whatever the schedule.
int64_t saved_bytes(const Graph& g) {
  std::set<int32_t> persistent(g.persistent.begin(), g.persistent.end());
  std::set<int32_t> saved;
  for (const Op& op : g.ops)
    for (const int32_t* s = g.begin(op.saves); s != g.begin(op.saves) + op.saves.count; ++s)
      if (!persistent.count(*s)) saved.insert(*s);
  int64_t n = 0;
  for (int32_t s : saved) n += g.storages[static_cast<size_t>(s)].bytes;
  return n;
}

int64_t saved(const ModelConfig& m, const TrainSetup& t) {
  return saved_bytes(build_graph(m, t, fixtures::h100()));
}

int64_t expert_bytes(const Graph& g) {
  int64_t n = 0;
  for (const Storage& s : g.storages)
    if (s.expert) n += s.bytes;
  return n;
}

}  // namespace

TEST_SUITE("lora6") {
  TEST_CASE("lora on MoE experts: per-expert adapters, active tokens only, fp32, to the byte") {
    const ModelConfig m = small_mixtral();
    const int64_t L = 4, N = 2 * 128, h = 256, f = 512, E = 4, k = 2, r = 8;
    // Balanced routing: each expert gets kN/E tokens, sum kN. Per layer, per expert e:
    //   gate (w1) or up (w3): its input, the gathered tokens [n_e, h] (`hidden_states[None,
    //   top_x]`, saved by nothing else under a frozen base: the gather saves top_x), and lora_A's
    //   [n_e, r]; both w1 and w3: the one input, two [n_e, r];
    //   down (w2): its input, the product act(w1 x) * w3 x [n_e, f] (the mul saves its operands,
    //   not its output), and [n_e, r].
    const int64_t base = saved(m, hf_lora("o", r));
    CHECK(saved(m, hf_lora("o,gate", r)) - base == L * 4 * k * N * (h + r));
    CHECK(saved(m, hf_lora("o,up", r)) - base == L * 4 * k * N * (h + r));
    CHECK(saved(m, hf_lora("o,gate,up", r)) - base == L * 4 * k * N * (h + 2 * r));
    CHECK(saved(m, hf_lora("o,down", r)) - base == L * 4 * k * N * (f + r));
    // Parameters: one adapter per expert per targeted linear (PEFT wraps every expert's nn.Linear
    // w1, w3, w2: A [r, in], B [out, r]): E * 3 r (h + f) per layer, the only trainable ones.
    const Graph g = build_graph(m, hf_lora("gate,up,down", r), fixtures::h100());
    const int64_t adapters = L * E * 3 * r * (h + f);
    CHECK(g.params_per_rank == adapters);
    // Every expert's frozen fp32 base weights and its adapters are marked as the expert's where
    // they are made (the crash polish found: the mark went through the parameter list, which
    // holds no frozen weight).
    CHECK(expert_bytes(g) == L * E * 4 * (3 * h * f) + 4 * adapters);
    // Without LoRA the marks are the same expert weights as before.
    TrainSetup full = hf_lora("q");
    full.lora_rank = 0;
    full.lora_targets = 0;
    CHECK(expert_bytes(build_graph(m, full, fixtures::h100())) == L * E * 4 * (3 * h * f));
  }

  TEST_CASE("lora on MoE: all-linear adapts the routers (nn.Linear), the q/v default is PEFT's") {
    const ModelConfig m = small_mixtral();
    const int64_t L = 4, h = 256, f = 512, E = 4, r = 8, kv = 2 * 64;
    // all-linear: q [h, h], k and v [h, kv], o [h, h], the router [h, E] and every expert's
    // w1, w3, w2; not the lm head.
    const Graph g = build_graph(m, hf_lora("all-linear", r), fixtures::h100());
    const int64_t attn = r * (h + h) + 2 * r * (h + kv) + r * (h + h);
    CHECK(g.params_per_rank == L * (attn + r * (h + E) + E * 3 * r * (h + f)));
    // mixtral's PEFT default: q_proj, v_proj
    TrainSetup d = hf_lora("q");
    d.lora_targets = 0;
    CHECK(build_graph(m, d, fixtures::h100()).params_per_rank ==
          L * (r * (h + h) + r * (h + kv)));
  }

  TEST_CASE("qlora on MoE experts: every expert's linear 4-bit, bf16-amp") {
    const ModelConfig m = small_mixtral();
    TrainSetup t = hf_lora("gate,up,down", 8, Precision::kBf16Amp);
    t.qlora = true;
    const Graph g = build_graph(m, t, fixtures::h100());
    CHECK(g.params_per_rank == 4 * 4 * 3 * 8 * (256 + 512));
    // no fp32 expert weights left: 4-bit ones (Linear4bit per expert: bitsandbytes converts
    // every nn.Linear but the lm head) and the fp32 adapters
    int64_t nf4 = 0;
    for (const Storage& s : g.storages)
      if (s.expert && s.role == std::string("NF4 weight + quant state")) nf4 += 1;
    CHECK(nf4 == 4 * 4 * 3);
  }

  TEST_CASE("lora on T5: q, k, v, o in both stacks and the cross-attention, wi and wo, fp32") {
    const ModelConfig m = sim_io::load_model("t5-small", kDirs);
    TrainSetup t = hf_lora("q,v");  // t5-small's dropout_rate 0.1 (wo's input is its output)
    const int64_t L = 6, N = 2 * 128, h = 512, inner = 8 * 64, f = 2048, r = 8;
    const int64_t base = saved(m, t);
    // o (SelfAttention.o in 6 encoder and 6 decoder layers, EncDecAttention.o in the 6 decoder
    // layers): its input, the attention context [N, inner] (saved by nothing else when o is
    // frozen), and lora_A's [N, r]: 18 modules.
    t.lora_targets = *parse_lora_targets("q,v,o");
    CHECK(saved(m, t) - base == 3 * L * 4 * N * (inner + r));
    // wo: its input, the dropout's output [N, f] (the dropout saves its mask only), and [N, r];
    // wi: its input is the normed hidden state [N, h] (T5LayerFF's layer_norm output, saved by
    // nothing else), and [N, r]: 12 modules each (v1.0's DenseReluDense).
    t.lora_targets = *parse_lora_targets("q,v,down");
    CHECK(saved(m, t) - base == 2 * L * 4 * N * (f + r));
    t.lora_targets = *parse_lora_targets("q,v,up");
    CHECK(saved(m, t) - base == 2 * L * 4 * N * (h + r));
    // PEFT's t5 default q, v: A [r, h], B [inner, r] per module, 18 q and 18 v modules
    t.lora_targets = 0;
    CHECK(build_graph(m, t, fixtures::h100()).params_per_rank == 2 * 3 * L * r * (h + inner));
  }

  TEST_CASE("lora on MLA: q_a, q_b, kv_a, kv_b take adapters, fp32, to the byte") {
    ModelConfig m = sim_io::load_model("deepseek-v2-lite", kDirs);
    m.layers = 4;
    m.dense_layers = 4;  // dense MLPs only: the attention is what is asserted
    m.experts = 0;
    const int64_t L = 4, N = 2 * 128, h = m.hidden, rk = m.kv_lora_rank, r = 8;
    const int64_t a = m.heads, nope = m.head_dim - m.qk_rope_dim, vd = m.v_head_dim;
    const int64_t base = saved(m, hf_lora("o", r));
    // kv_a_proj_with_mqa: its input, the normed hidden state [N, h] (q_proj, also reading it, is
    // frozen; the RMSNorm's weight multiply keeps only its other operand), and [N, r]
    CHECK(saved(m, hf_lora("o,kv_a", r)) - base == L * 4 * N * (h + r));
    // kv_b_proj: its input, kv_a_layernorm's output [N, rk], and [N, r]
    CHECK(saved(m, hf_lora("o,kv_b", r)) - base == L * 4 * N * (rk + r));
    // q (q_proj when q_lora_rank is 0) and kv_a read the same normed hidden state: saved once
    CHECK(saved(m, hf_lora("o,q,kv_a", r)) - base == L * 4 * N * (h + 2 * r));
    // parameters: kv_a A [r, h] B [rk + rope, r]; kv_b A [r, rk] B [a (nope + v), r]
    CHECK(build_graph(m, hf_lora("kv_a,kv_b", r), fixtures::h100()).params_per_rank ==
          L * (r * (h + rk + m.qk_rope_dim) + r * (rk + a * (nope + vd))));
    // DeepSeek-V2's q latent: q_a reads the normed hidden state, q_b q_a_layernorm's output
    m.q_lora_rank = 384;
    const int64_t ql = 384;
    const int64_t base_q = saved(m, hf_lora("o", r));
    CHECK(saved(m, hf_lora("o,q_a", r)) - base_q == L * 4 * N * (h + r));
    CHECK(saved(m, hf_lora("o,q_b", r)) - base_q == L * 4 * N * (ql + r));
    CHECK_THROWS_WITH_AS(build_graph(m, hf_lora("q", r), fixtures::h100()),
                         doctest::Contains("q names no module in deepseek_v2"), ConfigError);
  }

  TEST_CASE("lora on Phi-3's fused gate_up_proj: one adapter over the whole module, fp32") {
    ModelConfig m = sim_io::load_model("phi-3-mini-4k", kDirs);
    m.layers = 4;
    m.hidden = 256;
    m.heads = m.kv_heads = 4;
    m.head_dim = 64;
    m.ffn_hidden = 512;
    m.vocab = 1000;
    const int64_t L = 4, N = 2 * 128, h = 256, f = 512, r = 8;
    // gate_up_proj's input, the normed hidden state [N, h], and [N, r]; A [r, h], B [2f, r]
    CHECK(saved(m, hf_lora("o,gate_up", r)) - saved(m, hf_lora("o", r)) == L * 4 * N * (h + r));
    CHECK(build_graph(m, hf_lora("gate_up", r), fixtures::h100()).params_per_rank ==
          L * r * (h + 2 * f));
    // the fused qkv_proj: q, k and v together are the one module (A [r, h], B [3h, r])
    CHECK(build_graph(m, hf_lora("q,k,v", r), fixtures::h100()).params_per_rank ==
          L * r * (h + 3 * h));
  }
}
