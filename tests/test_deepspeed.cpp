// hfds (issue 10): HF's Trainer under DeepSpeed with --bf16 (deepspeed-bf16; sim/src/deepspeed.cpp,
// docs/memory-model.md "HF Trainer + DeepSpeed"). Per-rank persistent bytes derived by hand for
// the tiny Llama at dp 4, stage by stage, and the regime's selection and refusals.
//
// tiny Llama (fixtures::tiny_llama): h 256, 8 heads / 2 KV heads of 32, SwiGLU 688, vocab 1000,
// 4 layers, untied. Per block: wq 65,536 + wk 16,384 + wv 16,384 + wo 65,536 + 3 x 176,128 +
// 2 norms x 256 = 692,736 parameters; outside the blocks 2 x 256,000 + 256 = 512,256. N =
// 4 x 692,736 + 512,256 = 3,283,200; every count divides by 4, so no partition is padded.
#include <doctest/doctest.h>

#include <string>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

constexpr int64_t kN = 3'283'200;
constexpr int64_t kBucket = 2 * 256 * 256;  // "auto" reduce_bucket_size = h^2 bf16 elements

int64_t storage_bytes(const Graph& g, const std::string& role) {
  int64_t n = 0;
  for (const Storage& s : g.storages)
    if (s.role == role) n += s.bytes;
  return n;
}

TrainSetup hf_dp(int zero, int64_t dp = 4) {
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.dp = dp;
  t.zero = zero;
  return t;
}

}  // namespace

TEST_CASE("deepspeed-bf16: hf under --dp takes it by default; autocast under --zero is refused") {
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
  // the only communication buffer below stage 3 is the IPG bucket
  CHECK(g1.comm_persistent_bytes == kBucket);
}

TEST_CASE("deepspeed-bf16 stage 3: bf16 partitions, persisted norms, reuse-distance gathers") {
  const ModelConfig m = fixtures::tiny_llama();
  const Graph g = build_graph(m, hf_dp(3), fixtures::h100());
  // 9 norms of 256 (<= "auto" stage3_param_persistence_threshold = 10 h = 2,560) stay whole
  // (4,608 B) beside their partitions (1,152 B); the other 3,280,896 parameters are partitioned:
  // 2 x 3,280,896 / 4 = 1,640,448 B
  CHECK(storage_bytes(g, "ZeRO-3 partitions of persisted parameters (bf16)") == 1'152);
  CHECK(g.weights_bytes == 1'640'448 + 4'608 + 1'152);
  // 3.3 M parameters are well within stage3_max_reuse_distance (1e9): nothing is released
  // between a module's forward and its backward, so at the forward's end the whole bf16
  // model is gathered (2 N), more than the current and prefetched block (2 x 2 x 692,736)
  CHECK(storage_bytes(g, "ZeRO-3 gathered bf16 parameters (current and prefetched block; at the "
                         "forward's end the head and the blocks within stage3_max_reuse_distance)") ==
        2 * kN);
  CHECK(storage_bytes(g, "grad_partitions_flat_buffer (bf16 partition)") == 2 * kN / 4);
  CHECK(storage_bytes(g, "ZeRO-3 IPG bucket (bf16, reduce_bucket_size)") == kBucket);
  CHECK(g.grads_bytes == 2 * kN / 4);
  CHECK(g.optimizer_bytes == 12 * kN / 4);
  CHECK(g.optimizer_transient_bytes == 2 * kN);  // fp32 grad partition + sqrt(v): 4 N/4 each
  CHECK(g.comm_persistent_bytes == 2 * kN + kBucket);
}

TEST_CASE("deepspeed-bf16 stage 3 at Llama-2-7B's width: blocks beyond the reuse distance are released") {
  // 4 blocks of 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096 = 202,383,360 parameters; the head
  // (final norm + lm_head) 4,096 + 1000 x 4,096 = 4,100,096. Walking back from the head, block
  // j is kept while 2 x (the parameters after it) < 1e9: 2 x 4.1 M, 2 x 206.5 M and 2 x 408.9 M
  // keep blocks 3, 2 and 1; 2 x 611.3 M does not keep block 0 (nor the embeddings after it).
  const ModelConfig m = fixtures::llama7b_width();
  const Graph g = build_graph(m, hf_dp(3, 8), fixtures::h100());
  CHECK(storage_bytes(g, "ZeRO-3 gathered bf16 parameters (current and prefetched block; at the "
                         "forward's end the head and the blocks within stage3_max_reuse_distance)") ==
        2 * (4'100'096 + 3 * int64_t{202'383'360}));
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
