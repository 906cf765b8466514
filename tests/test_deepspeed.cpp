// hfds (issue 10): HF's Trainer under DeepSpeed with --bf16 (deepspeed-bf16; sim/src/deepspeed.cpp,
// docs/memory-model.md "HF Trainer + DeepSpeed"). Per-rank persistent bytes derived by hand for
// the tiny Llama at dp 4, stage by stage, and the regime's selection and refusals.
//
// tiny Llama (fixtures::tiny_llama): h 256, 8 heads / 2 KV heads of 32, SwiGLU 688, vocab 1000,
// 4 layers, untied. Per block: wq 65,536 + wk 16,384 + wv 16,384 + wo 65,536 + 3 x 176,128 +
// 2 norms x 256 = 692,736 parameters; outside the blocks 2 x 256,000 + 256 = 512,256. N =
// 4 x 692,736 + 512,256 = 3,283,200; every count divides by 4, so no partition is padded.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../sim/src/comm.hpp"  // ds3b: the collectives' time, as the engine sums them
#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

constexpr int64_t kN = 3'283'200;
constexpr int64_t kBucket = 2 * 256 * 256;  // "auto" reduce_bucket_size = h^2 bf16 elements
// ds3c: the most bf16 bytes of gathered parameters at once in the step the engine runs (the
// coordinator replayed over its schedule); before ds3c one storage held for the whole step
int64_t gathered(const ModelConfig& m, const TrainSetup& t, const char* strategy = "none") {
  return fixtures::run(m, t, strategy).ds3_gathered_peak_bytes;
}

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
int32_t storage_id(const Graph& g, const std::string& role) {
  for (size_t i = 0; i < g.storages.size(); ++i)
    if (g.storages[i].role == role) return static_cast<int32_t>(i);
  return -1;
}

using fixtures::storage_bytes;

TrainSetup hf_dp(int zero, int64_t dp = 4) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.dp = dp;
  t.zero = zero;
  return t;
}

}  // namespace

TEST_CASE("deepspeed-bf16: hf under --dp takes it by default, autocast under --zero is refused") {
  const ModelConfig m = fixtures::tiny_llama();
  CHECK(resolve_setup(m, hf_dp(0)).precision == Precision::kDeepspeedBf16);
  CHECK(resolve_setup(m, hf_dp(3)).precision == Precision::kDeepspeedBf16);
  CHECK(resolve_setup(m, hf_dp(0, 1)).precision == Precision::kBf16Amp);  // one GPU: autocast
  // hf@4.16 (the Trainer of early 2022) keeps autocast under torch DDP
  TrainSetup old = hf_dp(0);
  old.impl_version = "4.16";
  CHECK(resolve_setup(m, old).precision == Precision::kBf16Amp);
  // --precision bf16-amp --dp 4 without ZeRO: the Trainer over torch DDP, autocast: allowed
  TrainSetup ddp = hf_dp(0);
  ddp.precision = Precision::kBf16Amp;
  CHECK(resolve_setup(m, ddp).precision == Precision::kBf16Amp);
  // with --zero the Trainer runs DeepSpeed, which has no autocast path
  TrainSetup z = hf_dp(2);
  z.precision = Precision::kBf16Amp;
  try {
    resolve_setup(m, z);
    FAIL("bf16-amp under --zero 2 was accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.where()) == "--precision");
    CHECK(std::string(e.what()).find("deepspeed-bf16") != std::string::npos);
  }
  // deepspeed-bf16 is HF's Trainer: other code bases refuse it
  TrainSetup tt = hf_dp(3);
  tt.impl = Impl::kTorchtitan;
  tt.precision = Precision::kDeepspeedBf16;
  CHECK_THROWS_AS(resolve_setup(m, tt), NotInCode);
}

TEST_CASE("deepspeed-bf16 stage 0 (BF16_Optimizer): bf16 module, fp32 gradients whole, master and Adam /dp") {
  const Graph g = build_graph(fixtures::tiny_llama(), hf_dp(0), fixtures::h100());
  CHECK(g.precision == Precision::kDeepspeedBf16);
  CHECK(g.weights_bytes == 2 * kN);  // 6,566,400: module.bfloat16(), every rank whole
  CHECK(storage_bytes(g, "BF16_Optimizer fp32 gradient accumulation buffer") == 4 * kN);
  CHECK(g.grads_bytes == 6 * kN);  // and the bf16 .grad backward makes, 2 N
  CHECK(g.optimizer_bytes == 12 * kN / 4);  // fp32 master + m + v of this rank's quarter: 9,849,600
  // the all-reduce's bf16 copy of the fp32 gradients (2 N) outweighs foreach AdamW's sqrt(v)
  // over the partition (4 N / 4) and the largest parameter's fp32 cast (4 x 256,000)
  CHECK(g.optimizer_transient_bytes == 2 * kN);
}

TEST_CASE("deepspeed-bf16 stages 1 and 2 (DeepSpeedZeroOptimizer): bf16 grads whole or partitioned") {
  const ModelConfig m = fixtures::tiny_llama();
  const Graph g1 = build_graph(m, hf_dp(1), fixtures::h100());
  CHECK(g1.weights_bytes == 2 * kN);
  CHECK(storage_bytes(g1, "ZeRO-1/2 IPG buffer (bf16, reduce_bucket_size)") == kBucket);
  CHECK(g1.grads_bytes == 2 * kN);  // every bf16 .grad until the step
  CHECK(g1.optimizer_bytes == 12 * kN / 4);
  // the fp32 gradient partition (4 N / 4) beside foreach AdamW's sqrt(v) (4 N / 4)
  CHECK(g1.optimizer_transient_bytes == 2 * kN);
  const Graph g2 = build_graph(m, hf_dp(2), fixtures::h100());
  CHECK(g2.weights_bytes == 2 * kN);
  CHECK(storage_bytes(g2, "grads_in_partition (bf16 partition)") == 2 * kN / 4);  // 1,641,600
  CHECK(g2.grads_bytes == 2 * kN / 4);
  CHECK(storage_bytes(g2, "ZeRO-1/2 IPG buffer (bf16, reduce_bucket_size)") == kBucket);
  CHECK(g2.optimizer_bytes == 12 * kN / 4);
  CHECK(g2.optimizer_transient_bytes == 2 * kN);
  // ds3: no buffer below stage 3 is persistent: the IPG buffer is allocated by
  // DeepSpeedZeroOptimizer.backward() and grads_in_partition by the first copy in backward
  CHECK(g1.comm_persistent_bytes == 0);
  CHECK(g2.comm_persistent_bytes == 0);
  for (const Graph* g : {&g1, &g2}) {
    const int32_t ipg = storage_id(*g, "ZeRO-1/2 IPG buffer (bf16, reduce_bucket_size)");
    REQUIRE(ipg >= 0);
    CHECK_FALSE(contains(g->persistent, ipg));
    CHECK(contains(g->step_end_frees, ipg));
    // allocated with the first backward node autograd runs (the highest op with a backward)
    int32_t first = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(g->ops.size()); ++i)
      if (g->ops[i].has_backward) first = i;
    const Op& op = g->ops[first];
    CHECK(std::find(g->begin(op.bwd_allocs), g->end(op.bwd_allocs), ipg) != g->end(op.bwd_allocs));
    // stage 2's epilogue releases it before the step; stage 1's .grad views keep it to the end
    CHECK(contains(g->backward_end_frees, ipg) == (g == &g2));
  }
  const int32_t gp = storage_id(g2, "grads_in_partition (bf16 partition)");
  REQUIRE(gp >= 0);
  CHECK_FALSE(contains(g2.persistent, gp));
  CHECK(contains(g2.step_end_frees, gp));
  CHECK_FALSE(contains(g2.backward_end_frees, gp));
}

TEST_CASE("deepspeed-bf16 stages 1 and 2: the IPG buffer and grads_in_partition are backward's") {
  // The forward-phase peak carries none of them: stage 2's forward peak is stage 0's minus
  // stage 0's persistent fp32 gradient buffer (4 N), its 2 N of bf16 weights being the same
  const ModelConfig m = fixtures::tiny_llama();
  const Result r0 = fixtures::run(m, hf_dp(0), "none");
  const Result r2 = fixtures::run(m, hf_dp(2), "none");
  const Result r1 = fixtures::run(m, hf_dp(1), "none");
  // stage 1 and 2 carry the same persistent state (weights, master and Adam /dp): baseline equal
  CHECK(r1.baseline_bytes == r2.baseline_bytes);
  CHECK(r0.baseline_bytes - r2.baseline_bytes == 4 * kN);
}

TEST_CASE("deepspeed-bf16 stage 3: bf16 partitions, persisted norms, reuse-distance gathers") {
  const ModelConfig m = fixtures::tiny_llama();
  const Graph g = build_graph(m, hf_dp(3), fixtures::h100());
  // 9 norms of 256 (<= "auto" stage3_param_persistence_threshold = 10 h = 2,560) stay whole
  // (4,608 B) beside their partitions (1,152 B); the other 3,280,896 parameters are partitioned:
  // 2 x 3,280,896 / 4 = 1,640,448 B
  CHECK(storage_bytes(g, "ZeRO-3 partitions of persisted parameters (bf16)") == 1'152);
  CHECK(g.weights_bytes == 1'640'448 + 4'608 + 1'152);
  // ds3: 3.3 M parameters are well within stage3_max_reuse_distance (1e9): no module's
  // parameters are released between its forward and its backward, so at the forward's end every
  // partitioned parameter is gathered, 2 x 3,280,896 B (the persisted norms are counted once,
  // whole, in the weights)
  CHECK(gathered(m, hf_dp(3)) == 2 * 3'280'896);
  CHECK(storage_bytes(g, "grad_partitions_flat_buffer (bf16 partition)") == 2 * kN / 4);
  CHECK(storage_bytes(g, "ZeRO-3 IPG bucket (bf16, reduce_bucket_size)") == kBucket);
  CHECK(g.grads_bytes == 2 * kN / 4);
  CHECK(g.optimizer_bytes == 12 * kN / 4);
  CHECK(g.optimizer_transient_bytes == 2 * kN);  // fp32 grad partition + sqrt(v): 4 N/4 each
  CHECK(g.comm_persistent_bytes == kBucket);  // ds3c: the gathered parameters come and go
}

TEST_CASE("deepspeed-bf16 stage 3: no prefetch and no reuse leave the running module alone") {
  // stage3_prefetch_bucket_size 0 and stage3_max_reuse_distance 0: each module's parameters are
  // gathered as it runs and released after it, so the most gathered at once is the largest
  // module: the embeddings or the lm_head, 1000 x 256 bf16 = 512,000 B
  TrainSetup t = hf_dp(3);
  t.ds_prefetch_bucket = 0;
  t.ds_max_reuse_distance = 0;
  CHECK(gathered(fixtures::tiny_llama(), t) == 512'000);
  // a persistence threshold of 1,000,000 elements keeps every parameter whole: none partitioned,
  // none gathered, the weights 2 N as without ZeRO-3
  TrainSetup p = hf_dp(3);
  p.ds_persistence_threshold = 1'000'000;
  const Graph gp = build_graph(fixtures::tiny_llama(), p, fixtures::h100());
  CHECK(gathered(fixtures::tiny_llama(), p) == 0);
  CHECK(gp.weights_bytes == 2 * kN + 2 * kN / 4);  // whole, and their (unused) partitions
  // reduce_bucket_size sizes the IPG bucket (bf16)
  TrainSetup r = hf_dp(3);
  r.ds_reduce_bucket = 1000;
  CHECK(storage_bytes(build_graph(fixtures::tiny_llama(), r, fixtures::h100()),
                      "ZeRO-3 IPG bucket (bf16, reduce_bucket_size)") == 2000);
}

TEST_CASE("deepspeed-bf16 stage 3 at Llama-2-7B's width: modules beyond the reuse distance are released") {
  // 4 blocks of ln 4,096 + q, k, v, o 4096^2 = 16,777,216 each + ln 4,096 + gate, up, down
  // 4096 x 11008 = 45,088,768 each (202,383,360 with the norms; 202,375,168 partitioned, the
  // norms persisted at <= 10 h); head: final norm + lm_head 1000 x 4,096 = 4,096,000.
  // Without prefetch (stage3_prefetch_bucket_size 0) only the releases decide: a module is
  // kept after its forward while the elements of the modules between it and its backward,
  // 2 x (those after it in forward, lm_head included), stay < 1e9: blocks 3 and 2 whole,
  // lm_head, and of block 1 gate, up and down (after gate: 90,177,536 + 2 x 202,383,360 +
  // 4,096 + 4,096,000 < 5e8; after post_attention_layernorm: 135,266,304 + ... > 5e8). At the
  // forward's end: 2 x 202,375,168 + 3 x 45,088,768 + 4,096,000 = 544,112,640 elements.
  const ModelConfig m = fixtures::llama7b_width();
  TrainSetup none = hf_dp(3, 8);
  none.ds_prefetch_bucket = 0;
  CHECK(gathered(m, none) == 2 * int64_t{544'112'640});
  // With the "auto" bucket (0.9 x 4096^2 = 15,099,494) each module's fetch prefetches up to a
  // bucket of NOT-available parameters beyond those already in flight, skipping available
  // ones: once the queue's front has passed into the backward, whose first modules are the kept
  // ones, each forward step from block 3 on gathers one more module of the backward
  // (block 1's o, v, k, q, then block 0's and the embeddings). By lm_head's backward all
  // 4 x 202,375,168 + 2 x 4,096,000 = 817,692,672 partitioned elements are gathered
  // (max_live_parameters, 1e9, does not bind).
  CHECK(gathered(m, hf_dp(3, 8)) == 2 * int64_t{817'692'672});
  // stage3_max_live_parameters caps the prefetch (not the releases): at 6e8 the kept
  // parameters alone pass it and the prefetch stops short of the whole model
  TrainSetup live = hf_dp(3, 8);
  live.ds_max_live = 600'000'000;
  const int64_t capped = gathered(m, live);
  CHECK(capped < 2 * int64_t{817'692'672});
  CHECK(capped >= 2 * int64_t{544'112'640});
}

TEST_CASE("deepspeed-bf16: the activations are bf16-mixed's (the module is bf16, no autocast)") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup mixed = hf_dp(0, 1);
  mixed.precision = Precision::kBf16Mixed;
  const Result a = fixtures::run(m, mixed, "none");
  const Result b = fixtures::run(m, hf_dp(3), "none");
  CHECK(a.activation_bytes_per_layer == b.activation_bytes_per_layer);
  // and the autocast regime saves more per layer (the fp32 residual stream, the casts)
  TrainSetup amp = hf_dp(0, 1);
  amp.precision = Precision::kBf16Amp;
  CHECK(fixtures::run(m, amp, "none").activation_bytes_per_layer > b.activation_bytes_per_layer);
}

TEST_CASE("deepspeed-bf16: gradients reduced in bf16, on the compute stream below stage 3") {
  // the same step under --zero 2: DeepSpeed's bf16 buckets block the compute stream
  // (overlap_comm off), so all their time is exposed; DDP's fp32 buckets mostly overlap
  const ModelConfig m = fixtures::llama7b_width();
  const Result ds = fixtures::run(m, hf_dp(2, 8), "none");
  TrainSetup ddp = hf_dp(0, 8);
  ddp.precision = Precision::kBf16Amp;
  const Result tdp = fixtures::run(m, ddp, "none");
  CHECK(ds.dp_comm_ns > 0);
  CHECK(ds.dp_comm_exposed_ns == ds.dp_comm_ns);
  CHECK(tdp.dp_comm_exposed_ns < tdp.dp_comm_ns);
}

// ds3b (issue 10/11): stage 3's communication as DeepSpeed v0.16.2 issues it
// (partitioned_param_coordinator.py fetch_sub_module; stage3.py
// reduce_independent_p_g_buckets_and_remove_grads), replayed per module step.
namespace {

int64_t gathered_in(const Graph& g, bool backward) {
  int64_t n = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const int32_t t = backward ? g.ds3_bwd_step[i] : g.ds3_fwd_step[i];
    if (t >= 0) n += g.ds3_steps[t].fetch_bytes + g.ds3_steps[t].prefetch_bytes;
  }
  return n;
}

}  // namespace

TEST_CASE("ds3b: no prefetch, no reuse: each module gathers its own parameters, in both passes") {
  // The tiny Llama's trace: embedding, 4 x (input norm, q, k, v, o, post norm, gate, up, down),
  // final norm, lm_head = 39 module steps forward and 39 backward. Released after every module,
  // each pass gathers the 3,280,896 partitioned parameters once, bf16: 6,561,792 B; the 9 norms
  // are persisted (nothing to gather or wait for).
  TrainSetup t = hf_dp(3);
  t.ds_prefetch_bucket = 0;
  t.ds_max_reuse_distance = 0;
  const Graph g = build_graph(fixtures::tiny_llama(), t, fixtures::h100());
  REQUIRE(g.ds3_steps.size() == 78);
  CHECK(gathered_in(g, false) == 2 * 3'280'896);
  CHECK(gathered_in(g, true) == 2 * 3'280'896);
  int waits_none = 0;
  for (size_t s = 0; s < g.ds3_steps.size(); ++s) {
    const Graph::Ds3Step& st = g.ds3_steps[s];
    CHECK(st.prefetch_bytes == 0);
    if (st.fetch_bytes > 0) {
      CHECK(st.wait_event == 2 * static_cast<int32_t>(s));  // its own gather
    } else {
      ++waits_none;
      CHECK(st.wait_event == -1);
    }
  }
  CHECK(waits_none == 18);
  CHECK(g.ds3_reduce_bucket_bytes == kBucket);
}

TEST_CASE("ds3b: default knobs: every parameter gathered once, by the forward's prefetches") {
  // 3.3 M parameters are within stage3_max_reuse_distance (1e9): nothing is released between a
  // module's forward and its backward, so the backward gathers nothing; the forward's fetches
  // and prefetches bring each partitioned parameter exactly once.
  const Graph g = build_graph(fixtures::tiny_llama(), hf_dp(3), fixtures::h100());
  CHECK(gathered_in(g, false) == 2 * 3'280'896);
  CHECK(gathered_in(g, true) == 0);
  int64_t prefetched = 0;
  for (const Graph::Ds3Step& st : g.ds3_steps) prefetched += st.prefetch_bytes;
  CHECK(prefetched > 0);
  // the first module (the embeddings) cannot have been prefetched: fetched, and waited for
  int32_t first = -1;  // the op of step 0
  for (size_t i = 0; i < g.ops.size() && first < 0; ++i)
    if (g.ds3_fwd_step[i] == 0) first = static_cast<int32_t>(i);
  REQUIRE(first >= 0);
  CHECK(std::string(g.ops[first].name).find("embed") != std::string::npos);
  CHECK(g.ds3_steps[0].fetch_bytes == 2 * 256'000);
  CHECK(g.ds3_steps[0].wait_event == 0);
}

TEST_CASE("ds3b: the step's data-parallel traffic is the replay's all-gathers and the buckets") {
  // reduce_bucket_size 1e9: all 3,283,200 bf16 gradients in one reduce-scatter at the
  // backward's end (the epilogue); every gather event timed on its own, as issued
  const ModelConfig m = fixtures::tiny_llama();
  const Device d = fixtures::h100();
  TrainSetup t = hf_dp(3);
  t.ds_reduce_bucket = 1'000'000'000;
  const Graph g = build_graph(m, t, d);
  const Result r = simulate(m, t, d, parse_strategy("none"));
  const CommGroup dp = comm_group(4, 1, 8);
  auto ns = [&](Collective c, int64_t bytes) {
    return static_cast<int64_t>(collective_seconds(c, bytes, dp, d) * 1e9 + 0.5);
  };
  int64_t want = ns(Collective::kReduceScatter, 2 * kN);
  for (const Graph::Ds3Step& st : g.ds3_steps) {
    if (st.fetch_bytes > 0) want += ns(Collective::kAllGather, st.fetch_bytes);
    if (st.prefetch_bytes > 0) want += ns(Collective::kAllGather, st.prefetch_bytes);
  }
  CHECK(r.dp_comm_ns == want);
  CHECK(r.dp_buckets == 1);
}

TEST_CASE("ds3b: gradients reduce-scattered in reduce_bucket_size buckets, as stage3.py fills them") {
  // Backward order of the gradients (elements): lm_head 256,000, final norm 256, then per block
  // down, up, gate 176,128 each, post norm 256, o 65,536, v 16,384, k 16,384, q 65,536, input
  // norm 256, and the embeddings 256,000. A gradient that would overflow a non-empty bucket of
  // h^2 = 65,536 elements sends it first: lm_head | norm | down | up | gate | post norm | o |
  // v k | q | input norm | (x 4 blocks) ... | embeddings, flushed by the epilogue:
  // 1 + 4 x 8 + 1 + 1 = 35 reduce-scatters.
  const ModelConfig m = fixtures::tiny_llama();
  CHECK(fixtures::run(m, hf_dp(3), "none").dp_buckets == 35);
  // a bucket of one element: one reduce-scatter per module with gradients, 2 + 4 x 9 + 1 = 39
  TrainSetup one = hf_dp(3);
  one.ds_reduce_bucket = 1;
  CHECK(fixtures::run(m, one, "none").dp_buckets == 39);
}

TEST_CASE("ds3b: the prefetch hides the all-gathers that fetching on demand exposes") {
  // at sequence 4096 a module's matmul outlasts its gather: fetched ahead, nothing waits
  const ModelConfig m = fixtures::llama7b_width();
  TrainSetup t = hf_dp(3, 8);
  t.seq = 4096;
  TrainSetup none = t;
  none.ds_prefetch_bucket = 0;
  const Result demand = fixtures::run(m, none, "none");
  const Result ahead = fixtures::run(m, t, "none");
  REQUIRE(demand.comm_wait_ns > 0);
  // on demand, every module waits for its own gather (the whole forward's traffic at least)
  CHECK(demand.comm_wait_ns > demand.dp_comm_ns / 3);
  CHECK(ahead.comm_wait_ns < demand.comm_wait_ns / 10);  // 7.4 ms -> 0.1 ms when written
  CHECK(ahead.step_time_ns < demand.step_time_ns);
}

// ds3c (issue 10): the coordinator replayed over the step's own module order. Under activation
// checkpointing the recompute re-runs the module forward hooks inside backward (HF wraps each
// layer's __call__ in torch.utils.checkpoint), so the trace DeepSpeed records, and replays every
// step after, holds each checkpointed layer's modules three times: forward, recompute, backward.
namespace {

// no prefetch, no reuse: every module gathers its own parameters and releases them after it
TrainSetup on_demand() {
  TrainSetup t = hf_dp(3);
  t.ds_prefetch_bucket = 0;
  t.ds_max_reuse_distance = 0;
  return t;
}

}  // namespace

TEST_CASE("ds3c: recompute fetches each checkpointed layer's parameters again") {
  // tiny Llama, `full` (every layer checkpointed). Per block 692,736 parameters, of which the two
  // norms (512) are persisted: 692,224 gathered, bf16. Outside the blocks the embeddings and
  // lm_head (256,000 each) and the final norm (persisted).
  const ModelConfig m = fixtures::tiny_llama();
  constexpr int64_t kAll = 2 * 3'280'896;       // every partitioned parameter, bf16
  constexpr int64_t kBlocks = 2 * 4 * 692'224;  // the 4 checkpointed blocks' partitioned ones
  constexpr int64_t kDown = 2 * 4 * 176'128;    // the blocks' down_proj
  // Reentrant (the whole layer re-run, every hook returns): forward, recompute, backward.
  TrainSetup re = on_demand();
  re.reentrant = true;
  const Result r = fixtures::run(m, re, "full");
  CHECK(r.ds3_recompute_gather_bytes == kBlocks);
  CHECK(r.ds3_gather_bytes == kAll + kBlocks + kAll);
  // Non-reentrant (gradient_checkpointing_kwargs={"use_reentrant": False}, with early stop): the
  // recompute stops inside down_proj, the last op that saves a tensor, so down_proj's
  // post-forward hook never runs and its weight stays gathered into its backward, which then
  // fetches nothing for it.
  TrainSetup nre = on_demand();
  nre.reentrant = false;
  const Result n = fixtures::run(m, nre, "full");
  CHECK(n.ds3_recompute_gather_bytes == kBlocks);
  CHECK(n.ds3_gather_bytes == kAll + kBlocks + kAll - kDown);
  // the most at once is still one module, the embeddings or lm_head (1000 x 256 bf16): the kept
  // down_proj (2 x 176,128 B) is released by its own backward, the block's first with parameters
  CHECK(r.ds3_gathered_peak_bytes == 512'000);
  CHECK(n.ds3_gathered_peak_bytes == 512'000);
  // without checkpointing no recompute gathers
  const Result none = fixtures::run(m, on_demand(), "none");
  CHECK(none.ds3_recompute_gather_bytes == 0);
  CHECK(none.ds3_gather_bytes == 2 * kAll);
  // and the recompute's all-gathers are time on the data-parallel streams
  CHECK(r.dp_comm_ns > none.dp_comm_ns);
}

TEST_CASE("ds3c: with the default reuse distance the recompute finds its parameters gathered") {
  // 3.3 M parameters are within stage3_max_reuse_distance (1e9): nothing is released between a
  // module's forward, its recompute and its backward, so the recompute gathers nothing and the
  // step's gathers are the forward's, as without checkpointing
  const ModelConfig m = fixtures::tiny_llama();
  const Result full = fixtures::run(m, hf_dp(3), "full");
  CHECK(full.ds3_recompute_gather_bytes == 0);
  CHECK(full.ds3_gather_bytes == 2 * 3'280'896);
  CHECK(full.ds3_gathered_peak_bytes == 2 * 3'280'896);
}

TEST_CASE("ds3c: step() releases every gathered parameter before the optimizer") {
  // stage3.py step() -> _partition_all_parameters -> release_and_reset_all: at the optimizer
  // step the comm bytes are the IPG bucket alone (h^2 bf16), not the gathered parameters
  const ModelConfig m = fixtures::tiny_llama();
  SimOptions o;
  o.record_timeline = true;
  const Result r = simulate(m, hf_dp(3), fixtures::h100(), parse_strategy("none"), o);
  REQUIRE(r.timeline.size() == r.timeline_breakdown.size());
  bool seen_opt = false, seen_full = false;
  for (size_t i = 0; i < r.timeline.size(); ++i) {
    const int64_t comm = r.timeline_breakdown[i][static_cast<int>(Category::kComm)];
    if (r.timeline[i].phase == Phase::kOptimizer) {
      seen_opt = true;
      CHECK(comm == kBucket);
    } else if (comm == kBucket + 2 * 3'280'896) {
      seen_full = true;  // every partitioned parameter gathered, before the step
    }
  }
  CHECK(seen_opt);
  CHECK(seen_full);
}

TEST_CASE("ds3c: the all-gathers and the reduce-scatters run on two NCCL streams at once") {
  // On demand with a one-element reduce bucket: in backward each module's gather is issued while
  // the reduce-scatter of the previous module's gradients may still run. The all-gathers use
  // the world group and the reduce-scatters the optimizer's clone of it: two communicators,
  // two streams. Some all-gather therefore starts before a reduce-scatter issued earlier ends,
  // and one that overlaps takes longer than alone (the links shared).
  const ModelConfig m = fixtures::llama7b_width();
  TrainSetup t = hf_dp(3, 8);
  t.ds_prefetch_bucket = 0;
  t.ds_max_reuse_distance = 0;
  t.ds_reduce_bucket = 1;
  SimOptions o;
  o.record_timeline = true;
  const Device d = fixtures::h100();
  const Result r = simulate(m, t, d, parse_strategy("none"), o);
  std::vector<OpSpan> ag, rs;
  for (const OpSpan& s : r.spans)
    if (s.stream == 5) (s.storage == 2 ? ag : rs).push_back(s);
  REQUIRE(!ag.empty());
  REQUIRE(!rs.empty());
  // on one stream (before ds3c) no all-gather could start while a reduce-scatter ran
  int overlapping = 0;
  for (const OpSpan& a : ag)
    for (const OpSpan& x : rs)
      if (x.start_ns < a.start_ns && a.start_ns < x.start_ns + x.duration_ns) ++overlapping;
  CHECK(overlapping > 0);
  // sharing the links: a collective issued while the other stream is busy for w lasts ns + w/2
  // (2 ns when w >= 2 ns), so the spans add up to more than the collectives at the full rate
  int64_t total = 0;
  for (const OpSpan& s : r.spans)
    if (s.stream == 5) total += s.duration_ns;
  CHECK(total > r.dp_comm_ns);
}
