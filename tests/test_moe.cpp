// moe (issue 13): the MoE layer under each token dispatch, derived by hand (docs/memory-model.md
// "Mixture of experts: a Mixtral layer by hand") and asserted to the byte; --ep, --moe-imbalance
// and --moe-capacity; FLOPs of the active experts only; bad input.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

using fixtures::mixtral_shaped;  // tests/fixtures.hpp

TrainSetup setup(Impl impl, int64_t b, int64_t s) {
  TrainSetup t;
  t.impl = impl;
  t.micro_batch = b;
  t.seq = s;
  return t;
}

int64_t layer_bytes(const ModelConfig& m, const TrainSetup& t) {
  return fixtures::run(m, t, "none").activation_bytes_per_layer;
}

}  // namespace

TEST_SUITE("moe") {
  TEST_CASE("HF's expert loop, bf16-amp: the hand derivation, to the byte") {
    // docs/memory-model.md: N = b s tokens, k N routed. The MoE layer saves
    //   router: bf16 cast of x 2Nh, fp32 softmax 4NE, top-k indices 8Nk, the renormalization's
    //           sum 4N and pre-division weights 4Nk;
    //   per routed token: top_x 8 and slot 8 (int64), w1's and w3's bf16 input casts 2h + 2h,
    //           silu input, silu output, w3 output, product 2f each, the expert output 2h and its
    //           fp32 weight 4, the fp32 weighted output index_add_ saves 4h:
    //           20 + 10h + 8f bytes.
    // The dense SwiGLU MLP it replaces saves 4Nh + 8Nf (two input casts; four f-wide tensors).
    const int64_t b = 1, s = 1024, N = b * s, h = 4096, E = 8, k = 2, f = 14336;
    const int64_t moe = 2 * N * h + 4 * N * E + 8 * N * k + 4 * N + 4 * N * k +
                        k * N * (20 + 10 * h + 8 * f);
    const int64_t dense = 4 * N * h + 8 * N * f;
    CHECK(moe == 327'258'112);
    const TrainSetup t = setup(Impl::kHf, b, s);
    CHECK(layer_bytes(mixtral_shaped(true), t) - layer_bytes(mixtral_shaped(false), t) ==
          moe - dense);
  }

  TEST_CASE("Megatron's alltoall dispatcher with grouped GEMMs, bf16-mixed: to the byte") {
    // router: x 2Nh (the dense MLP's gate and up save the same x), top-k indices 8Nk, fp32 softmax
    // of the k scores 4Nk; the permute's int64 index storages (mtmoe, below); per received token
    // (T): fc1's input 2h, the fused weighted SwiGLU's input 4f and prob 2, fc2's input 2f.
    // Dense (feat14: Megatron's one fc1 and SwiGLUFunction, fc1 out 4f and fc2's input 2f):
    // 2Nh + 6Nf.
    // mtmoe (issue 13): the unfused permute (moe_utils.py permute @ d98e8a64ddf3; torch 1.13
    // saves both storages): dropless, the probs' `[flat_sorted]` (IndexBackward0) keeps the whole
    // argsort of the [E, N] map, 8EN, since flat_sorted[:num_out_tokens] is a view of it, and
    // index_select and scatter_add_ keep sorted_indices = flat_sorted % N, 8 sent; drop and pad,
    // sorted_indices and indices_1D, 8 sent each. Before: one 8 sent storage.
    const int64_t b = 1, s = 1024, N = b * s, h = 4096, E = 8, k = 2, f = 14336;
    auto moe = [&](int64_t T, int64_t index_bytes) {
      return 2 * N * h + 12 * N * k + index_bytes + T * (2 * h + 6 * f + 2);
    };
    const int64_t dense = 2 * N * h + 6 * N * f;
    // dropless: sent = T = kN = 2048: 8,388,608 + 24,576 + (65,536 + 16,384) + 2048 x 94,210
    const int64_t dropless = 8 * E * N + 8 * k * N;
    CHECK(moe(k * N, dropless) == 201'437'184);  // was 201,371,648 (8 sent only)
    TrainSetup t = setup(Impl::kMegatron, b, s);
    const int64_t base = layer_bytes(mixtral_shaped(false), t);
    CHECK(layer_bytes(mixtral_shaped(true), t) - base == moe(k * N, dropless) - dense);
    // Capacity factor 1.25, drop and pad: ceil(kN / E x 1.25) = 320 tokens per expert, E x 320
    // received and E x 320 sent: two int64 [sent] index storages.
    t.moe_capacity = 1.25;
    CHECK(moe(8 * 320, 16 * 8 * 320) == 249'631'744);  // was 249,611,264
    CHECK(layer_bytes(mixtral_shaped(true), t) - base == moe(8 * 320, 16 * 8 * 320) - dense);
    // --ep 2 (within --dp 2), the hottest expert at 2x the mean: mean = ep kN / E = 512, the hot
    // expert 1024, the other 7 share 3072 (439, 439, 439 on this rank): T = 2341; the rank's
    // routing map still spans all E experts (8EN) and it sends kN.
    t.moe_capacity.reset();
    t.ep = 2;
    t.dp = 2;
    t.moe_imbalance = 2.0;
    CHECK(moe(2341, dropless) == 229'040'714);  // was 228,975,178
    CHECK(layer_bytes(mixtral_shaped(true), t) - layer_bytes(mixtral_shaped(false), [&] {
            TrainSetup d = t;
            d.ep = 1;
            d.moe_imbalance = 1.0;
            return d;
          }()) == moe(2341, dropless) - dense);
  }

  TEST_CASE("activations scale with top-k, not with the number of experts, FLOPs with active ones") {
    const TrainSetup t = setup(Impl::kHf, 1, 256);
    ModelConfig m = mixtral_shaped(true);
    const Result r8 = fixtures::run(m, t, "none");
    m.experts = 16;
    const Result r16 = fixtures::run(m, t, "none");
    // only the router's [N, E] fp32 softmax grows (4 N x 8 more bytes)
    CHECK(r16.activation_bytes_per_layer - r8.activation_bytes_per_layer == 4 * 256 * 8);
    // FLOPs: the router's 2 N h E grows, the experts' stay (k active per token)
    const Graph g8 = build_graph(mixtral_shaped(true), t, fixtures::h100());
    const Graph g16 = build_graph(m, t, fixtures::h100());
    int64_t f8 = 0, f16 = 0;
    for (const Op& op : g8.ops) f8 += op.fwd.flops;
    for (const Op& op : g16.ops) f16 += op.fwd.flops;
    CHECK(f16 - f8 == 4 * 2 * 256 * 4096 * 8);  // 4 layers x 2 N h x 8 more experts
  }

  TEST_CASE("HF: imbalance moves tokens between experts, not the saved bytes") {
    TrainSetup t = setup(Impl::kHf, 1, 256);
    const int64_t balanced = layer_bytes(mixtral_shaped(true), t);
    t.moe_imbalance = 3.0;
    CHECK(layer_bytes(mixtral_shaped(true), t) == balanced);
  }

  TEST_CASE("--ep divides the expert weights and their optimizer state, the rest is replicated") {
    const ModelConfig m = mixtral_shaped(true);
    TrainSetup t = setup(Impl::kMegatron, 1, 256);
    t.dp = 4;
    t.zero = 1;
    const Graph g1 = build_graph(m, t, fixtures::h100());
    CHECK(g1.params_per_rank == parameter_count(m));
    t.ep = 4;
    const Graph g4 = build_graph(m, t, fixtures::h100());
    const int64_t experts = int64_t{4} * 8 * 3 * 4096 * 14336;  // layers x E x 3 h f
    CHECK(g1.params_per_rank - g4.params_per_rank == experts - experts / 4);
    // distributed optimizer: 12 B per parameter; the non-expert share over dp = 4, the experts'
    // (a quarter of them on this rank) over dp / ep = 1
    const int64_t rest = parameter_count(m) - experts;
    CHECK(g4.optimizer_bytes == 12 * rest / 4 + 12 * (experts / 4) / 1);
    CHECK(g4.ep == 4);
  }

  TEST_CASE("bad input: --ep not dividing the experts or --dp, HF knobs it lacks, dense models") {
    const ModelConfig m = mixtral_shaped(true);
    auto where = [&](const ModelConfig& model, TrainSetup t) {
      try {
        (void)build_graph(model, t, fixtures::h100());
      } catch (const ConfigError& e) {
        return e.where();
      }
      return std::string("(built)");
    };
    TrainSetup t = setup(Impl::kMegatron, 1, 128);
    t.ep = 3;
    t.dp = 3;
    CHECK(where(m, t) == "--ep");  // 3 does not divide 8 experts
    t.ep = 4;
    t.dp = 2;
    CHECK(where(m, t) == "--ep");  // nor the data-parallel size
    t.ep = 1;
    t.moe_imbalance = 9.0;
    CHECK(where(m, t) == "--moe-imbalance");  // more than every token on one expert
    t.moe_imbalance = 0.5;
    CHECK(where(m, t) == "--moe-imbalance");
    TrainSetup h = setup(Impl::kHf, 1, 128);
    h.ep = 2;
    h.dp = 2;
    CHECK(where(m, h) == "--ep");  // HF has no expert parallelism
    h.ep = 1;
    h.moe_capacity = 1.0;
    CHECK(where(m, h) == "--moe-capacity");  // HF's loop is dropless
    TrainSetup d = setup(Impl::kHf, 1, 128);
    d.ep = 2;
    d.dp = 2;
    CHECK(where(mixtral_shaped(false), d) == "--ep");  // a dense model has no experts
    TrainSetup n = setup(Impl::kNanogpt, 1, 128);
    CHECK(where(m, n) == "--impl");
  }
}

TEST_SUITE("moe mla") {
  // DeepSeek-V2-Lite's attention with a dense SwiGLU, against a Llama attention of the same
  // heads and head dim 192 (no q latent)
  using fixtures::mla_shaped;

  TEST_CASE("HF DeepseekV2Attention under SDPA, bf16-amp: the hand derivation, to the byte") {
    // MLA saves (docs/memory-model.md "MLA"): q_proj's and kv_a's input casts 2Nh each; the
    // latent's RMSNorm: its fp32 copy 4Nr, rstd 4N, the bf16 normalized 2Nr; kv_b's input cast
    // 2Nr; kv_b's output 2Na(nope + v) (SDPA saves v, a view of it); the query and key cats
    // 2Na qd each; the output 2Na v; the logsumexp 4aN.
    // Llama (three projections, flash): input casts 6Nh, q and k casts, v, the output 8Na qd,
    // the logsumexp 4aN.
    const int64_t N = 256, h = 2048, a = 16, qd = 192, nope = 128, v = 128, r = 512;
    const int64_t mla = 4 * N * h + 8 * N * r + 4 * N + 2 * N * a * (nope + v) + 4 * N * a * qd +
                        2 * N * a * v + 4 * a * N;
    const int64_t llama = 6 * N * h + 8 * N * a * qd + 4 * a * N;
    TrainSetup t;
    t.impl = Impl::kHf;
    t.seq = N;
    CHECK(fixtures::run(mla_shaped(true), t, "none").activation_bytes_per_layer -
              fixtures::run(mla_shaped(false), t, "none").activation_bytes_per_layer ==
          mla - llama);
    // the graph holds exactly the parameters the model counts
    CHECK(build_graph(mla_shaped(true), t, fixtures::h100()).params_per_rank ==
          parameter_count(mla_shaped(true)));
  }

  TEST_CASE("MLA's SDPA runs the memory-efficient kernel, eager MLA's outputs take v's head dim") {
    // feat3: flash needs one head dim for q, k and v (sdp_utils check_head_dim_size_flash);
    // qk 192 != v 128 leaves the memory-efficient kernel, its logsumexp padded to 32 rows.
    const int64_t N = 100, a = 16, qd = 192, v = 128;
    TrainSetup t;
    t.impl = Impl::kHf;
    t.seq = N;
    const Graph g = build_graph(mla_shaped(true), t, fixtures::h100());
    int sdpa = 0;
    for (const Op& op : g.ops) {
      if (op.kind != OpKind::kFlashAttention) continue;
      ++sdpa;
      CHECK(op.kernel == KernelChoice::kSdpaMemEfficient);
      CHECK(g.storages[g.idx[op.outputs.begin + 1]].bytes == 4 * a * 128);  // ceil(100/32)*32
    }
    CHECK(sdpa == 4);
    // eager (census mla-eager-*): qk makes [a, N, N] scores from the contiguous cats (no operand
    // copies), av and the output copy are [N, a * v], not [N, a * qd]
    t.attention = AttentionKind::kStandard;
    t.precision = Precision::kFp32;
    const Graph e = build_graph(mla_shaped(true), t, fixtures::h100());
    int qk = 0, av = 0;
    for (const Op& op : e.ops) {
      const std::string name = op.name;
      if (name == "qk") {
        ++qk;
        CHECK(op.outputs.count == 1);
        CHECK(e.storages[e.idx[op.outputs.begin]].bytes == 4 * a * N * N);
        CHECK(op.fwd.flops == 2 * N * N * a * qd);
      }
      if (name == "av") {
        ++av;
        CHECK(e.storages[e.idx[op.outputs.begin]].bytes == 4 * N * a * v);
        CHECK(op.fwd.flops == 2 * N * N * a * v);
      }
    }
    CHECK(qk == 4);
    CHECK(av == 4);
  }
}

// moe2: HF's load-balancing auxiliary loss (output_router_logits; docs/memory-model.md "Mixture of
// experts"), after the LM loss: its saves derived by hand over the L MoE layers' N tokens.
TEST_CASE("moe: HF's load_balancing_loss_func over every layer's router logits, to the byte") {
  const int64_t b = 2, s = 512, N = b * s, L = 4, E = 8, k = 2;
  ModelConfig with = mixtral_shaped(true), without = mixtral_shaped(true);
  with.aux_loss = true;
  const TrainSetup t = setup(Impl::kHf, b, s);  // bf16-amp
  const Graph g = build_graph(with, t, fixtures::h100());
  const Graph g0 = build_graph(without, t, fixtures::h100());
  int64_t saved = 0, aux_ops = 0;
  bool cat = false;
  for (const Op& op : g.ops) {
    const std::string name(op.name);
    if (name.rfind("aux ", 0) != 0) continue;
    ++aux_ops;
    CHECK(op.block < 0);  // after the blocks, with the loss
    cat = cat || name == "aux router logits cat";
    for (const int32_t* p = g.begin(op.saves); p != g.end(op.saves); ++p) saved += g.storages[*p].bytes;
  }
  for (const Op& op : g0.ops) CHECK(std::string(op.name).rfind("aux ", 0) != 0);
  CHECK(cat);
  CHECK(aux_ops == 6);
  // the fp32 softmax of [L N, E] (autocast's fp32 softmax), the int64 [L N, E] attention mask
  // the product saves and its int64 [E] sum the division saves, tokens_per_expert [k, E] fp32
  // saved by the last product
  CHECK(saved == 4 * L * N * E + 8 * L * N * E + 8 * E + 4 * k * E);
  // the loss is the sum: the last op is the loss's add, and backward still runs every block
  CHECK(std::string(g.ops.back().name) == "loss + coef * aux");
  const Result r = fixtures::run(with, t, "none"), r0 = fixtures::run(without, t, "none");
  CHECK(r.activation_bytes_per_layer == r0.activation_bytes_per_layer);
  CHECK(r.peak_allocated_bytes >= r0.peak_allocated_bytes);
  CHECK(r.step_time_ns >= r0.step_time_ns);
}
