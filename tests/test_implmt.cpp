// --impl megatron and --impl torchtitan: each op variant's bytes derived by hand and asserted to
// the byte; torchtitan's AC options parsed, round-tripped and refused elsewhere; the fsdp2-bf16
// regime's persistent state per parameter. Sources of each variant: docs/memory-model.md.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/impl.hpp"
#include "sim/simulate.hpp"
#include "sim/strategy.hpp"

using namespace sim;

namespace {

// A small Megatron GPT (actsim's megatron-gpt family): LayerNorm, GeLU 4h MLP with biases,
// learned positions, tied embeddings, dropout 0.1 at the three sites.
ModelConfig mcore_gpt() {
  ModelConfig m = fixtures::megatron_gpt_small();  // vocab 1000, padded to 1024 (128 x tp 1)
  m.name = m.source = "mcore-test";
  return m;
}

TrainSetup megatron(int64_t b, int64_t s) {
  TrainSetup t;
  t.micro_batch = b;
  t.seq = s;
  t.impl = Impl::kMegatron;
  t.attention = AttentionKind::kStandard;  // the local spec
  return t;
}

const Storage* storage_with_role(const Graph& g, std::string_view role) {
  for (const Storage& st : g.storages)
    if (st.role && std::string_view(st.role) == role) return &st;
  return nullptr;
}

bool has_op(const Graph& g, std::string_view name) {
  for (const Op& op : g.ops)
    if (std::string_view(op.name) == name) return true;
  return false;
}

}  // namespace

TEST_CASE("megatron: one layer of the local spec, bf16-mixed, to the byte") {
  const int64_t b = 2, s = 128, h = 256, a = 8;
  const Result r = fixtures::run(mcore_gpt(), megatron(b, s), "none");
  // Per layer, 2-byte units of sbh unless said: norm1 input 2 + LN stats (fp32 mean and rstd, 8
  // bytes a token); qkv input (LN out) 2; q, k, v views of the QKV storage 6; probabilities 2 a s
  // per token (FusedScaleMaskSoftmax, 16-bit, no masked copy); dropout mask 1 a s; dropout out 2
  // a s (av's operand); proj input 2 + mask 1; norm2 input 2 + stats; fc1 input 2; fc1 out 8
  // (gelu); gelu out 8 (fc2); mask 1. Korthikanti's 34 sbh + 5 a s^2 b, plus 16 sb of stats.
  CHECK(r.activation_bytes_per_layer == 34 * s * b * h + 5 * a * s * s * b + 16 * s * b);
}

TEST_CASE("megatron: vocab-parallel cross entropy at tp 1 on the padded vocabulary") {
  const int64_t b = 2, s = 128;
  const Graph g = build_graph(mcore_gpt(), megatron(b, s), fixtures::h100());
  CHECK(has_op(g, "cross entropy"));
  CHECK_FALSE(has_op(g, "log softmax"));
  CHECK_FALSE(has_op(g, "causal mask"));  // the fused softmax masks inside the kernel
  // logits.float() made into the softmax in place: one fp32 [b s, 1024] tensor
  const Storage* soft = storage_with_role(g, "softmax of logits");
  REQUIRE(soft != nullptr);
  CHECK(soft->bytes == 4 * b * s * 1024);
  // word embeddings of 1024 rows (make-vocab-size-divisible-by 128) on the one rank
  CHECK(g.params_per_rank == g.params + (1024 - 1000) * 256);
}

TEST_CASE("megatron: baddbmm's global memory buffer is a persistent workspace, not an activation") {
  const int64_t b = 2, s = 128, a = 8;
  const TrainSetup t = megatron(b, s);
  const Graph g = build_graph(mcore_gpt(), t, fixtures::h100());
  const Storage* buf = storage_with_role(g, "global memory buffer");
  REQUIRE(buf != nullptr);
  CHECK(buf->category == Category::kWorkspace);
  CHECK(buf->bytes == 2 * b * a * s * s);  // [b*np, s, s] bf16, one per rank
  const Result r = fixtures::run(mcore_gpt(), t, "none");
  // PyTorch's cuBLAS workspace, TE's own (tece: 32 MiB + 1 KiB on Hopper) and the buffer
  CHECK(r.workspace_bytes == 32LL * 1024 * 1024 + (32LL * 1024 * 1024 + 1024) + 2 * b * a * s * s);
  // flash (TE's fused attention) has no such buffer
  TrainSetup f = t;
  f.attention = AttentionKind::kFlash;
  CHECK(storage_with_role(build_graph(mcore_gpt(), f, fixtures::h100()), "global memory buffer") ==
        nullptr);
}

TEST_CASE("megatron: recompute honours the implementation's checkpoint API") {
  const Graph mg = build_graph(mcore_gpt(), megatron(1, 64), fixtures::h100());
  CHECK(recompute_mode(mg) == RecomputeMode::kReentrant);  // CheckpointFunction
  TrainSetup hf = megatron(1, 64);
  hf.impl = Impl::kNanogpt;
  CHECK(recompute_mode(build_graph(mcore_gpt(), hf, fixtures::h100())) ==
        RecomputeMode::kNonReentrant);
  // Reentrant full replays each whole block: past the non-reentrant early stop (the mlp
  // dropout, the last op that saves) to the residual add, one more replayed op per block.
  const Plan full = resolve(parse_strategy("full"), mg.n_blocks);
  auto replays = [&](RecomputeMode mode) {
    int64_t n = 0;
    for (const Event& e : build_schedule(mg, full, mode).events) n += e.kind == EventKind::kRecompute;
    return n;
  };
  CHECK(replays(recompute_mode(mg)) == replays(RecomputeMode::kNonReentrant) + mg.n_blocks);
  // and simulate() runs the reentrant schedule under --impl megatron
  const Result r = simulate_plan(mg, full, fixtures::h100());
  CHECK(r.recompute_flops > 0);
}

TEST_CASE("megatron: the distributed optimizer is 6 + 12/d bytes per parameter") {
  TrainSetup t = megatron(1, 64);
  t.dp = 4;
  t.zero = 1;
  const Result r = fixtures::run(mcore_gpt(), t, "none");
  const int64_t n = r.params_per_rank;
  CHECK(r.weights_bytes == 2 * n);      // bf16 parameters
  CHECK(r.grads_bytes == 4 * n);        // fp32 main_grad buffer, whole
  CHECK(r.optimizer_bytes == 12 * n / 4);  // fp32 master, m, v sharded over d = 4
}

TEST_CASE("torchtitan: fsdp2-bf16 is its default and shards fp32 state over --dp") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.micro_batch = 1;
  t.seq = 64;
  t.impl = Impl::kTorchtitan;
  t.dp = 4;
  t.zero = 3;
  CHECK(resolve_setup(m, t).precision == Precision::kFsdp2Bf16);
  const Graph g = build_graph(m, t, fixtures::h100());
  const Result r = fixtures::run(m, t, "none");
  const int64_t n = r.params_per_rank;  // every parameter count here divides by 4
  CHECK(n == r.params);
  CHECK(r.weights_bytes == 4 * n / 4);     // fp32 shards
  CHECK(r.grads_bytes == 4 * n / 4);       // fp32 reduce-scattered .grad of the shards
  CHECK(r.optimizer_bytes == 8 * n / 4);   // AdamW m and v of the shards, no master copy
  // bf16 all-gathered copies: root (embedding 1000 x 256, final norm 256, output 1000 x 256)
  // and two blocks (norms 2 x 256, wq 256^2, wk and wv 256 x 64, wo 256^2, w1, w3, w2 256 x 688)
  const int64_t block = 2 * 256 + 2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 688;
  const int64_t root = 2 * 1000 * 256 + 256;
  CHECK(g.comm_persistent_bytes == 2 * (2 * block + root));
  // activations are bf16: the residual stream and the norms' 16-bit outputs
  const Storage* resid = storage_with_role(g, "residual");
  REQUIRE(resid != nullptr);
  CHECK(resid->dtype == DType::kBF16);
}

TEST_CASE("torchtitan: fsdp2-bf16 over several ranks needs --zero 3") {
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  t.dp = 2;
  t.zero = 1;
  t.precision = Precision::kFsdp2Bf16;
  CHECK_THROWS_AS(build_graph(fixtures::tiny_llama(), t, fixtures::h100()), ConfigError);
  // feat3: --zero not given: FSDP2 always shards, so resolve_setup takes ZeRO 3
  t.zero = 0;
  t.zero_default = true;
  CHECK(resolve_setup(fixtures::tiny_llama(), t).zero == 3);
  t.dp = 1;  // one rank: nothing to shard
  CHECK(resolve_setup(fixtures::tiny_llama(), t).zero == 0);
  t.dp = 2;
  t.zero_default = false;  // an explicit --zero 0 stays refused, naming --zero
  try {
    (void)build_graph(fixtures::tiny_llama(), t, fixtures::h100());
    FAIL("no refusal");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.where()) == "--zero");
  }
}

TEST_CASE("torchtitan: sac:torchtitan keeps every second mm's output fewer than sac:mm") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.micro_batch = 2;
  t.seq = 64;
  t.impl = Impl::kTorchtitan;
  const int64_t n = 2 * 64, h = 256, kv = 2 * 32, f = 688, a = 8;
  const Result op = fixtures::run(m, t, "sac:torchtitan");
  const Result mm = fixtures::run(m, t, "sac:mm");
  // Per token, bf16: block input 2h; kept by the policy: wq out 2h, wv out 2 kv, SDPA out 2h and
  // its fp32 logsumexp 4a, w1 out 2f, w2 out 2h. The mm counter (1..7 = wq wk wv wo w1 w3 w2)
  // recomputes wk, wo and w3, which sac:mm keeps: 2 kv + 2h + 2f more.
  CHECK(op.activation_bytes_per_layer == n * (2 * h + 2 * h + 2 * kv + 2 * h + 4 * a + 2 * f + 2 * h));
  CHECK(mm.activation_bytes_per_layer - op.activation_bytes_per_layer == n * (2 * kv + 2 * h + 2 * f));
}

TEST_CASE("torchtitan: layer-sac:k checkpoints every k-th block counting from 1") {
  const Plan p = resolve(parse_strategy("layer-sac:2"), 5);
  REQUIRE(p.segments.size() == 2);
  CHECK(p.segments[0] == Segment{1, 1});
  CHECK(p.segments[1] == Segment{3, 3});
  CHECK(p.mode[0] == BlockMode::kStore);
  CHECK(p.mode[4] == BlockMode::kStore);
  CHECK(resolve(parse_strategy("layer-sac:1"), 3).segments.size() == 3);
  CHECK_THROWS_AS(resolve(parse_strategy("layer-sac:6"), 5), ConfigError);
  CHECK_THROWS_AS(parse_strategy("layer-sac"), ConfigError);
  CHECK_THROWS_AS(parse_strategy("sac:titan"), ConfigError);
  for (const char* text : {"sac:torchtitan", "layer-sac:3", "sac:mm"})
    CHECK(parse_strategy(text).canonical() == text);
  CHECK(resolve(parse_strategy("sac:torchtitan"), 2).sac_torchtitan);
  CHECK_FALSE(resolve(parse_strategy("sac:mm"), 2).sac_torchtitan);
}

TEST_CASE("torchtitan's AC options are refused under another implementation") {
  TrainSetup t = megatron(1, 64);
  for (const char* st : {"sac:torchtitan", "layer-sac:2"}) {
    CAPTURE(st);
    CHECK_THROWS_AS(fixtures::run(mcore_gpt(), t, st), Unsupported);
  }
  TrainSetup hf;
  hf.seq = 64;
  hf.impl = Impl::kHf;
  CHECK_THROWS_AS(fixtures::run(fixtures::tiny_llama(), hf, "sac:torchtitan"), Unsupported);
  // and torchtitan runs only Llama
  TrainSetup tt;
  tt.seq = 64;
  tt.impl = Impl::kTorchtitan;
  CHECK_THROWS_AS(fixtures::run(fixtures::gpt2_small(), tt, "none"), Unsupported);
}

// time3 (issue 11): torchtitan's apply_rotary_emb runs x.float(), a complex64 multiply and
// .type_as(x): three kernels that move x (bf16), the tables and the output, plus four passes over
// the fp32 copy (16 bytes per element). HF's rotary keeps its one-pass timing.
TEST_CASE("torchtitan: the complex rotary moves its fp32 copy through three kernels") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.micro_batch = 1;
  t.seq = 64;
  t.impl = Impl::kTorchtitan;
  const Graph g = build_graph(m, t, fixtures::h100());
  const int64_t table = 2 * 1 * 64 * 32 * 2;  // cos and sin, [b, s, d] bf16 each
  int found = 0;
  for (const Op& op : g.ops) {
    const std::string_view name(op.name);
    if (name != "rope q" && name != "rope k") continue;
    const int64_t n = 64 * (name == "rope q" ? 8 : 2) * 32;  // s x heads x head_dim elements
    CHECK(op.fwd.bytes == 2 * n + table + 2 * n + 16 * n);
    CHECK(op.fwd.kernels == 3);
    CHECK(op.bwd.kernels == 3);
    CHECK(op.bwd.bytes >= 16 * n + 2 * 2 * n);
    ++found;
  }
  CHECK(found == 2 * m.layers);
  TrainSetup h = t;
  h.impl = Impl::kHf;
  for (const Op& op : build_graph(m, h, fixtures::h100()).ops)
    if (std::string_view(op.name) == "rope q") CHECK(op.fwd.kernels == 1);
}

// time3 (issue 11): eager RMSNorm's x.pow(2).mean(-1) is two kernels forward (the fp32 square
// written and read back) and four backward (MeanBackward1's div, PowBackward0's pow, mul, mul;
// torch 1.13's CPU profiler lists them), under HF and torchtitan alike.
TEST_CASE("rmsnorm pow+mean moves its fp32 square through its own kernels") {
  const ModelConfig m = fixtures::tiny_llama();
  for (Impl impl : {Impl::kHf, Impl::kTorchtitan}) {
    TrainSetup t;
    t.micro_batch = 2;
    t.seq = 64;
    t.impl = impl;
    const int64_t n = 2 * 64, h = 256;
    int found = 0;
    for (const Op& op : build_graph(m, t, fixtures::h100()).ops) {
      if (std::string_view(op.name) != "rmsnorm pow+mean") continue;
      CHECK(op.fwd.bytes == 4 * n * h + 4 * n + 8 * n * h);  // x fp32, the variance, the square
      CHECK(op.bwd.bytes >= 20 * n * h);
      CHECK(op.fwd.kernels == 2);
      CHECK(op.bwd.kernels == 4);
      ++found;
    }
    CHECK(found == 2 * m.layers + 1);  // two per block and the final norm
    // the broadcast multiplies (x * rstd, weight * x̂) reduce a full product for the small
    // operand's gradient: mul, mul, sum
    for (const Op& op : build_graph(m, t, fixtures::h100()).ops) {
      const std::string_view name(op.name);
      if (name == "rmsnorm scale" || name == "rmsnorm weight") CHECK(op.bwd.kernels == 3);
      if (name == "rmsnorm scale") CHECK(op.bwd.bytes >= 8 * n * h + 4 * n * h);
    }
  }
}
