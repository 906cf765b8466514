// feat (issue 13): LoRA and QLoRA (sim/src/lora.cpp; docs/memory-model.md "LoRA and QLoRA"):
// frozen base weights, what frozen linears still save, the adapters' ops and state, PEFT's default
// targets, bitsandbytes NF4 weights, and the one-line refusals. s sequence, b micro-batch,
// h hidden, a heads, r rank; "sbh" = s*b*h elements.
#include <doctest/doctest.h>

#include <string>

#include "../sim/src/comm.hpp"  // ds3b: collective times, as the engine sums them
#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

// nanoGPT's GPTConfig (n_layer 4 unless given, n_head 4, n_embd 256, bias on) and its slow path
// with LoRA: tests/fixtures.hpp
using fixtures::nanogpt;
using fixtures::nanogpt_lora;
using fixtures::storage_bytes;

}  // namespace

TEST_CASE("lora targets parse and print as --lora-targets names them") {
  CHECK(parse_lora_targets("q,v") == (kLoraQ | kLoraV));
  CHECK(parse_lora_targets("all-linear") == kLoraAllLinear);
  CHECK(parse_lora_targets("q+v") == (kLoraQ | kLoraV));
  CHECK(lora_targets_name(kLoraQ | kLoraV) == "q+v");
  CHECK(lora_targets_name(*parse_lora_targets("down,up,gate")) == "gate+up+down");
  CHECK(lora_targets_name(kLoraAllLinear) == "all-linear");
  CHECK_FALSE(parse_lora_targets("q,x"));
  CHECK_FALSE(parse_lora_targets(""));
  CHECK_FALSE(parse_lora_targets("q,"));
}

TEST_CASE("lora on nanoGPT's c_attn, fp32: 40sbh + 4sbr + 4as^2b + s^2 + 16sb per layer") {
  // Full fine-tuning saves 64sbh + 4as^2b + s^2 + 16sb (tests/test_impl_nanogpt.cpp). Frozen
  // linears keep only their (persistent) weight (derivatives.yaml mm: self is saved for mat2's
  // gradient only): c_proj no longer saves the attention output y (4 sbh), c_fc not ln_2's
  // output (4), mlp.c_proj not the GeLU output (16): -24 sbh. c_attn's input stays saved, now by
  // lora_A; lora_A's [sb, r] output is saved by lora_B (4 sbr); lora_B's output, its scaled copy
  // and the sum are saved by nothing. LayerNorms save their input and statistics regardless.
  const int64_t b = 4, s = 256, h = 256, a = 4;
  for (int64_t r : {8, 16}) {
    CAPTURE(r);
    const Result x = fixtures::run(nanogpt(), nanogpt_lora(r, "q,k,v"), "none");
    CHECK(x.activation_bytes_per_layer ==
          40 * s * b * h + 4 * s * b * r + 4 * a * s * s * b + s * s + 16 * s * b);
    // adapters: A [r, h] and B [3h, r] per layer, the only trainable parameters
    const int64_t adapters = 4 * (r * h + 3 * h * r);
    CHECK(x.params_per_rank == adapters);
    CHECK(x.grads_bytes == 4 * adapters);
    CHECK(x.optimizer_bytes == 8 * adapters);
  }
  // every linear of the block targeted: y (4 sbh), ln_2 out (4) and the GeLU output (16) are
  // saved again (by the adapters' lora_A), and each adapter keeps its [sb, r] output
  const int64_t r = 8;
  const Result all = fixtures::run(nanogpt(), nanogpt_lora(r, "q,k,v,o,up,down"), "none");
  CHECK(all.activation_bytes_per_layer ==
        64 * s * b * h + 4 * 4 * s * b * r + 4 * a * s * s * b + s * s + 16 * s * b);
}

TEST_CASE("lora: the frozen weights stay, with no gradient and no optimizer state") {
  const ModelConfig m = nanogpt();
  TrainSetup full = nanogpt_lora(8, "q,k,v");
  full.lora_rank = 0;
  full.lora_targets = 0;
  const Result f = fixtures::run(m, full, "none");
  const Result l = fixtures::run(m, nanogpt_lora(8, "q,k,v"), "none");
  const int64_t adapters = 4 * (8 * 256 + 3 * 256 * 8);
  CHECK(l.weights_bytes == f.weights_bytes + 4 * adapters);
  CHECK(l.params == f.params);  // the model's count, adapters aside
}

TEST_CASE("lora under autocast: every frozen linear saves its own 16-bit weight cast") {
  // autocast_mode.cpp cached_cast caches only leaf tensors that require grad: a frozen fp32
  // weight is cast at each use and the matmul saves the cast (mat2, for the input's gradient).
  // tiny_llama: per block q [256x256], k and v [256x64], o [256x256], gate, up, down [256x688];
  // the untied lm head [1000x256].
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.lora_rank = 4;
  const Graph g = build_graph(m, t, fixtures::h100());
  const int64_t per_block = 2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 688;
  CHECK(storage_bytes(g, "frozen weight cast") == 2 * (4 * per_block + 1000 * 256));
  // PEFT's llama default targets q_proj and v_proj: two adapters per block
  CHECK(g.params_per_rank == 4 * (4 * 256 + 256 * 4) + 4 * (4 * 256 + 64 * 4));
}

TEST_CASE("qlora: NF4 weights with double quantization, fp32 for the rest") {
  // bitsandbytes Linear4bit (compress_statistics=True, blocksize 64): n/2 packed bytes, one uint8
  // absmax per 64 values, an fp32 absmax per 256 of those, the fp32 offset and the 256-entry fp32
  // code; prepare_model_for_kbit_training casts every other parameter to fp32 (embeddings, norms,
  // the lm head that bitsandbytes leaves unquantized).
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.lora_rank = 4;
  t.qlora = true;
  const Result r = fixtures::run(m, t, "none");
  auto nf4 = [](int64_t n) {
    const int64_t blocks = (n + 63) / 64;
    return (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256) + 4 + 1024 + 64;
  };
  const int64_t per_block = 2 * nf4(256 * 256) + 2 * nf4(256 * 64) + 3 * nf4(256 * 688) +
                            4 * 2 * 256;  // two RMSNorm weights, fp32
  const int64_t adapters = 4 * (4 * 256 + 256 * 4) + 4 * (4 * 256 + 64 * 4);
  CHECK(r.weights_bytes == 4 * per_block + 4 * (2 * 1000 * 256 + 256) + 4 * adapters);
}

TEST_CASE("qlora: one 4096 x 4096 linear's bytes as docs/memory-model.md derives them") {
  // feat2 (issue 13): the hand derivation of docs/memory-model.md "LoRA and QLoRA" (QLoRA bytes
  // of one linear), bitsandbytes @ 95f9af30. n = 4096 * 4096 = 16,777,216 values:
  //   packed 8,388,608 + uint8 absmax 262,144 + fp32 absmax of those 4,096 + offset 4
  //   + second-level code 1,024 + NF4 code 64 = 8,655,940 B, persistent;
  //   forward transient: bf16 weight 33,554,432 + two fp32 absmax 2 x 1,048,576 = 35,651,584 B;
  //   backward transient: 33,554,432 + 1,048,576 = 34,603,008 B.
  ModelConfig m = fixtures::llama7b_width();
  m.layers = 3;
  TrainSetup t;
  t.impl = Impl::kHf;
  t.precision = Precision::kBf16Amp;
  t.seq = 2048;  // M = 2048 > 1536: dequant + F.linear (backends/cuda/ops.py)
  t.lora_rank = 8;
  t.qlora = true;
  const Graph g = build_graph(m, t, fixtures::h100());
  int found = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kLinear || std::string(op.name) != "q proj") continue;
    ++found;
    CHECK(op.fwd_transient_bytes == 35'651'584);
    CHECK(op.bwd_transient_bytes == 34'603'008);
  }
  CHECK(found == 3);
  int nf4 = 0;
  for (const Storage& st : g.storages)
    if (std::string(st.role) == "NF4 weight + quant state" && st.bytes == 8'655'940) ++nf4;
  CHECK(nf4 == 3 * 4);  // q, k, v and o proj of each block (all 4096 x 4096 under MHA)
}

// feat3 (issue 13): LoRA under ZeRO-3 and FSDP2, QLoRA under bf16-mixed (docs/memory-model.md
// "LoRA and QLoRA", the hand derivations of "Sharded LoRA" and "QLoRA without autocast").
// tiny_llama per block: q, o [256x256], k, v [256x64], gate, up, down [256x688], two RMSNorm
// weights: 692,736 frozen parameters; rank 4 on q and v: (4x256 + 4x256) + (4x256 + 4x64) =
// 3,328 adapter parameters; outside the blocks 2 x 1000 x 256 + 256 = 512,256 frozen.
TEST_CASE("lora under zero-3: the frozen base is sharded and gathered, only the adapters train") {
  // hfds: HF's Trainer under ZeRO-3 is DeepSpeed with --bf16 (deepspeed-bf16): a bf16 module,
  // adapters included (module.bfloat16() after get_peft_model), no autocast.
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.dp = 4;
  t.zero = 3;
  t.lora_rank = 4;
  const Graph g = build_graph(m, t, fixtures::h100());
  REQUIRE(g.precision == Precision::kDeepspeedBf16);
  // bf16 partitions of the 3,280,896 frozen parameters above the persistence threshold (10 h =
  // 2,560): 2 x 3,280,896 / 4 = 1,640,448; the 9 norms (2,304) and every adapter matrix (1,024
  // or 256 elements; 13,312 in all) are persisted: whole, 2 x (2,304 + 13,312) = 31,232, beside
  // their partitions, 2 x 2,304 / 4 + 4 x 2 x (3 x 256 + 64) = 1,152 + 6,656
  CHECK(g.weights_bytes == 1'640'448 + 31'232 + 1'152 + 6'656);
  // 3.3 M parameters are within stage3_max_reuse_distance: every partitioned parameter stays
  // gathered at the forward's end, 2 x 3,280,896 (ds3: the persisted norms and adapters are
  // counted once, whole, in the weights above)
  // (ds3c: the engine's figure, the gathered parameters coming and going in the step it runs)
  CHECK(fixtures::run(m, t, "none").ds3_gathered_peak_bytes == 2 * 3'280'896);
  CHECK(g.grads_bytes == 2 * 13'312 / 4);       // the adapters' bf16 gradient partition: 6,656
  CHECK(g.optimizer_bytes == 12 * 13'312 / 4);  // fp32 master + Adam's m and v: 39,936
  // no autocast: no cast of a frozen weight
  CHECK(storage_bytes(g, "frozen weight cast") == 0);
  // time (ds3b): the frozen base is all-gathered as DeepSpeed's coordinator replays the trace
  // (Graph::ds3_steps), but none of its gradients is reduce-scattered: the step's data-parallel
  // traffic is the replay's all-gathers plus one reduce-scatter of the adapters' bf16 gradients
  // (4 layers x q, v x (A 4 x 4096 + B 4096 x 4) = 262,144 elements at Llama-2-7B's width, each
  // matrix persisted, all within one h^2 bucket: sent by the backward's epilogue). Full fine-tuning adds the base's gradients, in many buckets.
  const ModelConfig wide = fixtures::llama7b_width(m);
  TrainSetup full = t;
  full.lora_rank = 0;
  full.lora_targets = 0;
  const Device d = fixtures::h100();
  const Graph gl = build_graph(wide, t, d);
  const Result rl = fixtures::run(wide, t, "none"), rf = fixtures::run(wide, full, "none");
  int64_t adapters = 0;
  for (int32_t sid : gl.param_storages) adapters += gl.storages[sid].bytes / 2;  // bf16, whole
  CHECK(adapters == 4 * 2 * (4 * 4096 + 4096 * 4));
  const CommGroup dp = comm_group(4, 1, 8);
  auto ns = [&](Collective c, int64_t bytes) {
    return static_cast<int64_t>(collective_seconds(c, bytes, dp, d) * 1e9 + 0.5);
  };
  int64_t want = ns(Collective::kReduceScatter, 2 * adapters);
  for (const Graph::Ds3Step& st : gl.ds3_steps) {
    if (st.fetch_bytes > 0) want += ns(Collective::kAllGather, st.fetch_bytes);
    if (st.prefetch_bytes > 0) want += ns(Collective::kAllGather, st.prefetch_bytes);
  }
  CHECK(rl.dp_buckets == 1);
  CHECK(rl.dp_comm_ns == want);
  CHECK(rf.dp_buckets > 4);
  CHECK(rf.dp_comm_ns > rl.dp_comm_ns);
}

TEST_CASE("lora under fsdp2-bf16: fp32 shards of base and adapters, bf16 gathers, bf16 adapters") {
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.precision = Precision::kFsdp2Bf16;
  t.seq = 128;
  t.dp = 4;
  t.zero = 3;
  t.lora_rank = 4;
  const Graph g = build_graph(m, t, fixtures::h100());
  // fp32 shards of every parameter: 4 (4 x (692,736 + 3,328) + 512,256) / 4
  CHECK(g.weights_bytes == 3'296'512);
  // bf16 gathers: the current and the prefetched block, 2 x 2 x (692,736 + 3,328), and the
  // root module (embedding, final norm, lm head) for the whole step, 2 x 512,256
  CHECK(storage_bytes(g, "FSDP2 all-gathered bf16 parameters (root, current and prefetched block)") ==
        3'808'768);
  CHECK(g.grads_bytes == 13'312);
  CHECK(g.optimizer_bytes == 26'624);
  // MixedPrecisionPolicy(param_dtype=bf16) casts the adapters too: no fp32 input copy, no
  // promoted sum cast back (as under bf16-mixed, where PEFT's fp32 adapters make both)
  int casts = 0, lora_a = 0;
  for (const Op& op : g.ops) {
    const std::string name = op.name;
    if (name == "lora input cast" || name == "lora result cast") ++casts;
    if (name == "lora_A") ++lora_a;
  }
  CHECK(casts == 0);
  CHECK(lora_a == 2 * 4);
  CHECK(storage_bytes(g, "frozen weight cast") == 0);  // no autocast: the gathered bf16 weight
}

TEST_CASE("qlora under bf16-mixed: fp32 everywhere but the 4-bit matmuls, which run in bf16") {
  // prepare_model_for_kbit_training casts every non-4-bit parameter to fp32; without autocast
  // every other op runs in fp32; Linear4bit casts x to bf16 (bnb_4bit_compute_dtype) and its
  // output back to x's dtype; bnb.py's LoRA layer converts nothing (x and the adapters are fp32).
  // Per 4096 x 4096 q_proj, seq 2048, b 1 (n = 2048 tokens):
  //   4-bit input cast: 2 x 2048 x 4096 = 16,777,216 B (bf16, not saved)
  //   the 4-bit matmul's transients as under autocast: 35,651,584 / 34,603,008 B
  //   its bf16 output 16,777,216 B, cast back to fp32: 33,554,432 B
  //   lora_A saves x itself (fp32, 33,554,432 B: no "lora input cast"), lora_B lora_A's fp32
  //   output 4 x 2048 x 8 = 65,536 B.
  ModelConfig m = fixtures::llama7b_width();
  m.layers = 3;
  TrainSetup t;
  t.impl = Impl::kHf;
  t.precision = Precision::kBf16Mixed;
  t.seq = 2048;
  t.lora_rank = 8;
  t.qlora = true;
  const Graph g = build_graph(m, t, fixtures::h100());
  int q = 0, in_cast = 0, out_cast = 0, lora_in = 0, a_saves = 0;
  for (const Op& op : g.ops) {
    const std::string name = op.name;
    auto out0 = [&] { return g.storages[g.idx[op.outputs.begin]]; };
    if (name == "q proj" && op.kind == OpKind::kLinear) {
      ++q;
      CHECK(op.fwd_transient_bytes == 35'651'584);
      CHECK(op.bwd_transient_bytes == 34'603'008);
      CHECK(out0().dtype == DType::kBF16);
      CHECK(out0().bytes == 16'777'216);
      CHECK(op.math16);
    }
    if (name == "4-bit input cast" && out0().bytes == 16'777'216 && out0().dtype == DType::kBF16)
      ++in_cast;
    if (name == "4-bit output cast" && out0().dtype == DType::kF32) ++out_cast;
    if (name == "lora input cast") ++lora_in;
    if (name == "lora_A") {
      int64_t saved = 0;
      for (int32_t k = 0; k < op.saves.count; ++k) {
        const Storage& st = g.storages[g.idx[op.saves.begin + k]];
        if (st.category != Category::kWeights) saved += st.bytes;
      }
      if (saved == 33'554'432) ++a_saves;
    }
    if (op.kind == OpKind::kRmsNorm) CHECK_FALSE(op.math16);
  }
  CHECK(q == 3);
  CHECK(in_cast == 3 * 6);   // q, k, v, o, gate, up: 4096 wide inputs (down's is 11008)
  CHECK(out_cast == 3 * 7);  // every 4-bit linear (the lm head is not quantized)
  CHECK(lora_in == 0);
  CHECK(a_saves == 3 * 2);   // q and v (PEFT's llama default), x in fp32 as the block gives it
  CHECK(g.optimizer_bytes == 8 * 3 * 2 * (8 * 4096 + 4096 * 8));  // fp32 adapters, no master copy
}

TEST_CASE("lora builds the same graph cloned and block by block") {
  const ModelConfig m = nanogpt(7);
  for (const char* targets : {"q,k,v", "q,k,v,o,up,down"}) {
    CAPTURE(targets);
    const TrainSetup t = nanogpt_lora(8, targets);
    const Graph a = build_graph(m, t, fixtures::h100());
    const Graph d = build_graph_direct(m, t, fixtures::h100());
    CHECK(a.storages.size() == d.storages.size());
    for (const char* strategy : {"none", "full", "every:2"}) {
      CAPTURE(strategy);
      const Plan p = resolve(parse_strategy(strategy), m.layers);
      const Result ra = simulate_plan(a, p, fixtures::h100()), rd = simulate_plan(d, p, fixtures::h100());
      CHECK(ra.peak_allocated_bytes == rd.peak_allocated_bytes);
      CHECK(ra.step_time_ns == rd.step_time_ns);
    }
  }
}

TEST_CASE("lora and qlora refusals: one line naming the flag") {
  const ModelConfig gpt = nanogpt();
  const ModelConfig llama = fixtures::tiny_llama();
  auto where = [](const ModelConfig& m, TrainSetup t) -> std::string {
    try {
      (void)fixtures::run(m, t, "none");
    } catch (const ConfigError& e) {
      return std::string(e.where());
    }
    return "";
  };
  TrainSetup t = nanogpt_lora(8, "q,v");  // c_attn is one module
  CHECK(where(gpt, t) == "--lora-targets");
  t.lora_targets = kLoraGate;  // GeLU MLP: no gate projection
  CHECK(where(gpt, t) == "--lora-targets");
  t.lora_targets = kLoraQ | kLoraK | kLoraV;
  t.impl = Impl::kMegatron;  // no PEFT in Megatron-LM
  CHECK(where(gpt, t) == "--lora-rank");
  TrainSetup h;
  h.impl = Impl::kHf;
  h.seq = 128;
  h.qlora = true;  // without a rank
  CHECK(where(llama, h) == "--qlora");
  h.lora_rank = 4;
  h.precision = Precision::kFp32;  // QLoRA computes in 16 bits
  CHECK(where(llama, h) == "--qlora");
  h.precision = Precision::kBf16Mixed;  // feat3: modeled (no autocast)
  CHECK(where(llama, h) == "");
  h.precision = Precision::kFsdp2Bf16;  // feat3: 4-bit weights under FSDP2 not modeled
  CHECK(where(llama, h) == "--qlora");
  h.precision.reset();  // hfds: under --dp, deepspeed-bf16 (QLoRA not modeled there)
  h.dp = 2;
  h.zero = 3;  // feat3: nor under ZeRO-3
  CHECK(where(llama, h) == "--qlora");
  h.qlora = false;
  CHECK(where(llama, h) == "");  // feat3: LoRA under ZeRO-3 is modeled
  h.dp = 1;
  h.zero = 0;
  h.precision.reset();
  h.lora_targets = 0;
  h.lora_rank = 0;
  h.lora_targets = kLoraQ;  // targets without a rank
  CHECK(where(llama, h) == "--lora-targets");
  TrainSetup p = fixtures::paper(1, false);
  p.lora_rank = 8;
  CHECK(where(gpt, p) == "--lora-rank");
}

TEST_CASE("lora under offload strategies: the kept input embeddings stay on the device") {
  // PEFT's hooked input embeddings are held to the step's end and saved by block 0's norm: the
  // schedule must not offload them (it did: "prefetch of a storage still on the device").
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  t.lora_rank = 4;
  for (const char* strategy : {"offload", "offload+full", "custom:offload@0-1+full@2-3"}) {
    CAPTURE(strategy);
    const Result r = fixtures::run(m, t, strategy);
    CHECK(r.peak_allocated_bytes > 0);
    CHECK(r.peak_allocated_bytes <= fixtures::run(m, t, "none").peak_allocated_bytes);
  }
}

TEST_CASE("context parallelism: local shapes, the ring's work and the dp x cp group") {
  // Megatron llama: every token-wise activation is the rank's s / cp share; the flash op does cp
  // times the local work; ZeRO-1 shards the optimizer state over dp x cp ranks.
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.seq = 1024;
  const Result one = fixtures::run(m, t, "none");
  t.cp = 4;
  const Result four = fixtures::run(m, t, "none");
  TrainSetup local = t;
  local.cp = 1;
  local.seq = 256;
  const Result l = fixtures::run(m, local, "none");
  CHECK(four.activation_bytes_per_layer == l.activation_bytes_per_layer);
  CHECK(four.activation_bytes_per_layer < one.activation_bytes_per_layer / 3);
  // attention FLOPs: 4 x the local flash call's; the linears' are the local ones
  CHECK(four.fwd_flops > l.fwd_flops);
  CHECK(four.fwd_flops < one.fwd_flops);
  t.dp = 2;
  t.zero = 1;
  const Result z = fixtures::run(m, t, "none");
  t.cp = 1;
  t.seq = 256;
  t.dp = 8;
  const Result z8 = fixtures::run(m, t, "none");
  CHECK(z.optimizer_bytes == z8.optimizer_bytes);
  // a sequence that does not divide into 2 cp chunks, and eager attention, are refused
  TrainSetup bad;
  bad.impl = Impl::kMegatron;
  bad.seq = 1000;
  bad.cp = 8;
  CHECK_THROWS_AS(fixtures::run(m, bad, "none"), ConfigError);
  bad.seq = 1024;
  bad.attention = AttentionKind::kStandard;
  CHECK_THROWS_AS(fixtures::run(m, bad, "none"), ConfigError);
  bad.attention.reset();
  bad.impl = Impl::kHf;
  CHECK_THROWS_AS(fixtures::run(m, bad, "none"), NotInCode);
}

TEST_CASE("context parallelism under torchtitan: torch's all-gather ring (feat2)") {
  // docs/memory-model.md "Context parallelism", torch's ring: tiny_llama, s 1024, cp 4 (local
  // 256), a 8, g 2, head dim 32, bf16: q = 8 x 256 x 32 x 2 = 131,072 B; the repeated k + v
  // kv = 2 x 131,072 = 262,144 B; lse = 8 x 256 x 4 = 8,192 B. The release of the CP table,
  // 9dec370, repeats k and v before SDPA (implver), so the ring carries a heads; v0.2.2 passes
  // enable_gqa and the ring carries the g = 2 heads: a quarter of the gathered bytes.
  const ModelConfig m = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  {
    TrainSetup v022 = t;
    v022.seq = 1024;
    v022.cp = 4;
    v022.zero = 3;
    const Graph g022 = build_graph(m, v022, fixtures::h100());
    int seen = 0;
    for (const Op& op : g022.ops) {
      if (op.kind != OpKind::kFlashAttention) continue;
      ++seen;
      CHECK(op.cp_gather_bytes == 4 * 65'536);
      CHECK(op.cp_dkv_bytes == 2 * 65'536);
    }
    CHECK(seen == 4);
  }
  t.impl_version = "9dec370";
  t.seq = 1024;
  t.cp = 4;
  t.zero = 3;  // FSDP2 over dp x cp
  const Graph g = build_graph(m, t, fixtures::h100());
  int found = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kFlashAttention) continue;
    ++found;
    CHECK(op.cp_gather_bytes == 4 * 262'144);
    CHECK(op.cp_dkv_bytes == 2 * 262'144);
    // forward: 3 x (19q + 18 lse + 2kv) + 6q; backward: 4 x (5q + 10.5kv) + 3 x 2kv + 5q + 5kv;
    // cpfp8: each + 2kv, the k, v made contiguous (torchtitan's are transposed views)
    CHECK(op.fwd_serial_bytes == 10'272'768 + 2 * 262'144);
    CHECK(op.bwd_serial_bytes == 17'170'432 + 2 * 262'144);
    CHECK(op.fwd.comm_kind == 0);  // not TE's send/recv ring
  }
  CHECK(found == 4);
  // the merges and the exposed last dK/dV send cost time; Megatron keeps TE's p2p ring
  const Result tt = fixtures::run(m, t, "none");
  CHECK(tt.comm_time_ns > 0);
  TrainSetup mg = t;
  mg.impl = Impl::kMegatron;
  mg.impl_version = {};  // Megatron's default release
  mg.zero = 0;
  for (const Op& op : build_graph(m, mg, fixtures::h100()).ops) {
    CHECK(op.cp_gather_bytes == 0);
    CHECK(op.fwd_serial_bytes == 0);
  }
}

TEST_CASE("fp8 linears: TE saves the column-wise fp8 input and caches fp8 weights, torchao saves as bf16") {
  // tiny_llama widened so that the GEMMs, not the host, set the step time
  ModelConfig m = fixtures::wide_llama();
  const int64_t h = 2048, kv = 4 * 128, f = 5632;
  TrainSetup t;
  t.impl = Impl::kMegatron;
  t.seq = 2048;
  const Result bf16 = fixtures::run(m, t, "none");
  t.fp8 = Fp8Recipe::kTeDelayed;
  const Result te = fixtures::run(m, t, "none");
  // Megatron's llama block (one fused qkv [h -> h + 2kv], proj, gate, up, down): the fp8
  // workspace is 2 B per block linear weight element; the lm head stays 16-bit
  const int64_t block_linears = h * (h + 2 * kv) + h * h + 3 * h * f;
  // plus, per TE module (qkv, proj, fc1 = gate + up, fc2), delayed scaling's fp32 scales and
  // amax histories: (1024 + 1) x (3 forward + 2 backward quantizers) x 4 B = 20,500 B (feat2)
  CHECK(te.weights_bytes == bf16.weights_bytes + 4 * 2 * block_linears + 4 * 4 * 20'500);
  t.fp8 = Fp8Recipe::kTeCurrent;  // current scaling keeps no state
  CHECK(fixtures::run(m, t, "none").weights_bytes == bf16.weights_bytes + 4 * 2 * block_linears);
  t.fp8 = Fp8Recipe::kTeDelayed;
  // every block linear keeps 1 B per input element instead of 2: the activations shrink
  CHECK(te.activation_bytes_per_layer < bf16.activation_bytes_per_layer);
  CHECK(te.fwd_flops == bf16.fwd_flops);
  CHECK(te.step_time_ns < bf16.step_time_ns);
  // torchao keeps the high-precision saves: the same activations as bf16 under torchtitan
  TrainSetup tt;
  tt.impl = Impl::kTorchtitan;
  tt.seq = 2048;
  const Result tb = fixtures::run(m, tt, "none");
  tt.fp8 = Fp8Recipe::kTorchaoRowwise;
  const Result ta = fixtures::run(m, tt, "none");
  CHECK(ta.activation_bytes_per_layer == tb.activation_bytes_per_layer);
  CHECK(ta.step_time_ns < tb.step_time_ns);
  // feat2: torchao tensorwise at eab345c (manual_float8_matmul_with_args_in_float8) saves each
  // block linear's own fp8 input, 1 B per element (and the fp8 all-gathered weight); the output
  // layer keeps its 16-bit input
  tt.fp8 = Fp8Recipe::kTorchaoTensorwise;
  const Graph g = build_graph(m, tt, fixtures::h100());
  int fp8_saves = 0, lm_head = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kLinear) continue;
    const Storage& x = g.storages[static_cast<std::size_t>(*g.begin(op.saves))];
    if (std::string(op.name) == "lm head") {
      ++lm_head;
      CHECK(x.dtype == DType::kBF16);
      continue;
    }
    CHECK(x.dtype == DType::kF8);
    CHECK(x.bytes == 2048 * op.shape[1]);  // tokens x in_features, 1 B each
    ++fp8_saves;
  }
  CHECK(lm_head == 1);
  CHECK(fp8_saves == 4 * 7);  // wq, wk, wv, wo, w1, w3, w2 in each of 4 blocks
  // refusals: the recipe under the other code base, another regime, a GPU without fp8
  TrainSetup bad = t;
  bad.impl = Impl::kTorchtitan;
  CHECK_THROWS_AS(fixtures::run(m, bad, "none"), NotInCode);
  bad = t;
  bad.precision = Precision::kBf16Amp;
  CHECK_THROWS_AS(fixtures::run(m, bad, "none"), ConfigError);
  Device a100 = fixtures::h100();
  a100.sm_arch = 80;
  try {
    (void)simulate(m, t, a100, parse_strategy("none"));
    CHECK(false);
  } catch (const ConfigError& e) {
    CHECK(e.where() == "--fp8");
  }
}

// polish: the builder tags each linear with its projection (Op::site) where it builds it; LoRA's
// targets and FP8's per-module state match on the tag, not on the op's name.
TEST_CASE("linear sites: every block linear carries its projection, under LoRA too") {
  auto sites = [](const Graph& g) {
    std::string out;
    for (const Op& op : g.ops) {
      if (op.block != 1 && op.site != LinearSite::kLmHead) continue;
      if (op.kind != OpKind::kLinear) {
        CHECK(op.site == LinearSite::kNone);
        continue;
      }
      out += std::to_string(static_cast<int>(op.site)) + " ";
    }
    return out;
  };
  // Llama (HF): q, k, v, o, gate, up, down, then the lm head
  const ModelConfig llama = fixtures::tiny_llama();
  TrainSetup t;
  t.impl = Impl::kHf;
  t.seq = 128;
  const Graph plain = build_graph(llama, t, fixtures::h100());
  CHECK(sites(plain) == "2 3 4 5 8 9 10 12 ");
  // under LoRA the frozen base linears keep their sites; the adapters' own are kNone (0)
  t.lora_rank = 8;
  t.lora_targets = kLoraQ;
  const Graph lora = build_graph(llama, t, fixtures::h100());
  CHECK(sites(lora) == "2 0 0 3 4 5 8 9 10 12 ");
  // nanoGPT: c_attn (qkv), c_proj, c_fc (fc1), c_proj (fc2)
  TrainSetup n = nanogpt_lora(0, "q");
  n.lora_targets = 0;
  const Graph gpt = build_graph(nanogpt(), n, fixtures::h100());
  CHECK(sites(gpt) == "1 5 6 7 12 ");
}
