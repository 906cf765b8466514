// The CPU reference executor (DESIGN.md §6 step 3) against the simulator: for every strategy on
// eight small configurations (cases()) the measured peak equals the simulated one to the byte at the same
// event, and the parameter gradients are bitwise identical across strategies. Gradients match
// central finite differences on tiny fp32 models. A schedule with a free removed or moved early,
// and a graph whose op does not save what its backward reads, make the executor fail loudly.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "executor_configs.hpp"
#include "sim/error.hpp"
#include "numeric.hpp"
#include "sim/error.hpp"

using namespace sim;

namespace {

const char* const kStrategies[] = {"none",      "full",   "every:2", "sqrt",
                                   "block:1",   "selective", "sac:mm",
                                   "custom:none@0-0+full@1-2+sel@3-3+sac@4-4"};

using Case = fixtures::ExecCase;

std::vector<Case> cases() {
  // The defaults of the op lists the executor was written against: eager attention under
  // autocast (tiny_gpt: Megatron's op list, tiny_gqa_llama: HF's).
  const TrainSetup s = fixtures::executor_setup();
  TrainSetup flash = s;
  flash.attention = AttentionKind::kFlash;
  flash.dropout = 0.1;  // dropout inside the flash kernel, replayed by its backward
  TrainSetup fp16 = s;
  fp16.precision = Precision::kFp16Amp;
  return {{"gpt dropout bf16-amp", fixtures::tiny_gpt(), s},
          {"llama gqa swiglu rmsnorm bf16-amp", fixtures::tiny_gqa_llama(), s},
          {"llama flash dropout", fixtures::tiny_gqa_llama(), flash},
          {"gpt flash fp16-amp", fixtures::tiny_gpt(), [&] { TrainSetup f = fp16; f.attention = AttentionKind::kFlash; return f; }()},
          {"llama fp32", fixtures::tiny_gqa_llama(), [&] { TrainSetup f = s; f.precision = Precision::kFp32; return f; }()},
          {"gpt bf16-mixed", fixtures::tiny_gpt(), [&] { TrainSetup f = s; f.precision = Precision::kBf16Mixed; return f; }()},
          {"gpt paper profile (reentrant, bf16-mixed, vocab-parallel cross entropy)",
           fixtures::tiny_gpt(), fixtures::executor_paper()},
          {"bert-like post-norm encoder", [] {
             ModelConfig m = fixtures::tiny_gpt();
             m.name = m.source = "tiny-bert";
             m.family = "bert";
             m.post_norm = true;
             m.causal = false;
             m.type_vocab = 2;
             return m;
           }(), s}};
}

executor::StepResult execute(const Graph& g, const char* strategy,
                             const executor::StepOptions& o = {}) {
  const Plan plan = resolve(parse_strategy(strategy), g.n_blocks);
  const Schedule sched = build_schedule(g, plan, recompute_mode(g));
  return executor::run_cpu(g, plan, sched, o);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// exec10: a tiny Falcon-7B as sim/io/src/hf_decoders.cpp loads one (multi_query: K and V indexed
// out of the fused QKV, one K/V head broadcast by matmul or run by SDPA's math kernel; in-place
// scale and add; no attention dropout).
ModelConfig tiny_falcon(int64_t layers = 5, int64_t hidden = 16, int64_t heads = 4) {
  ModelConfig m = fixtures::tiny_gpt(layers);
  m.name = m.source = "tiny-falcon";
  m.family = "falcon";
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 1;
  m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden;
  m.positions = sim::PosEmbedding::kRope;
  m.residual = ModelConfig::Residual::kParallelOneNorm;
  m.fused_qkv = true;
  m.qkv_bias = m.linear_bias = false;
  m.attn_dropout = m.hidden_dropout = m.embd_dropout = 0.0;
  m.kv_index_split = true;
  m.no_attention_dropout = true;
  m.eager_inplace = true;
  return m;
}

// exec10: HF GPT-2 (GPT2LMHeadModel's shifted logits and labels copies, its per-layer bias
// buffer) and HF Llama (the eager 4-D additive mask), as sim/io/src/load_hf.cpp sets them.
ModelConfig hf_gpt2(ModelConfig m) {
  m.shift_logits_copy = true;
  m.causal_buffer_per_layer = true;
  return m;
}
ModelConfig hf_llama(ModelConfig m) {
  m.additive_causal_mask = true;
  return m;
}

}  // namespace

TEST_CASE("executor: 16-bit storage rounds to nearest even (IEEE 754 binary16, bfloat16)") {
  using namespace executor::detail;
  // bf16 keeps fp32's top 16 bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 -> even (1 + 2^-6).
  CHECK(to_bf16(1.0f) == 0x3f80);
  CHECK(to_bf16(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
  CHECK(to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);  // above halfway rounds up
  CHECK(from_bf16(to_bf16(-2.5f)) == -2.5f);
  // binary16: 1.0 = 0x3c00, largest finite 65504 = 0x7bff; 65520 is halfway to 65536 (which
  // does not exist) and rounds to infinity; subnormals in units of 2^-24, ties to even.
  CHECK(to_f16(1.0f) == 0x3c00);
  CHECK(to_f16(65504.0f) == 0x7bff);
  CHECK(to_f16(65520.0f) == 0x7c00);
  CHECK(to_f16(-0x1p-24f) == 0x8001);
  CHECK(to_f16(0x1p-25f) == 0x0000);
  CHECK(to_f16(3 * 0x1p-25f) == 0x0002);
  CHECK(to_f16(1.0f + 0x1p-11f) == 0x3c00);      // halfway between 1 and 1 + 2^-10 -> even
  CHECK(to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // halfway, odd below -> up
  for (float x : {0.0f, 1.0f, -3.25f, 0x1p-14f, 0x1p-24f, 1000.5f})
    CHECK(from_f16(to_f16(x)) == x);
  // The counter-based generator depends on its key only.
  CHECK(uniform(1, 2, 3, 4) == uniform(1, 2, 3, 4));
  CHECK(uniform(1, 2, 3, 4) != uniform(1, 2, 3, 5));
}

TEST_CASE("executor: measured peak equals the simulated peak, at the same event, for every strategy") {
  const Device dev = fixtures::executor_device();
  for (const Case& c : cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    for (const char* st : kStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const Result sim = simulate(c.model, c.setup, dev, parse_strategy(st));
      const executor::StepResult run = execute(g, st);
      CHECK(run.peak_bytes == sim.peak_requested_bytes);
      CHECK(run.peak_event_index == sim.peak_event_index);
      CHECK(run.peak_phase == sim.peak_phase);
      CHECK(run.baseline_bytes == sim.baseline_bytes);
      CHECK(run.end_bytes == run.baseline_bytes);
      CHECK(std::isfinite(run.loss));
    }
  }
}

TEST_CASE("executor: gradients are bitwise identical across strategies") {
  const Device dev = fixtures::executor_device();
  for (const Case& c : cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    const executor::StepResult ref = execute(g, "none");
    REQUIRE(ref.grad_bytes.size() == g.param_storages.size());
    bool nonzero = false;
    for (const auto& gr : ref.grads)
      for (double x : gr) nonzero = nonzero || x != 0.0;
    CHECK(nonzero);
    for (const char* st : kStrategies) {
      const std::string strategy = st;
      CAPTURE(strategy);
      const executor::StepResult run = execute(g, st);
      CHECK(run.loss == ref.loss);
      for (size_t p = 0; p < ref.grad_bytes.size(); ++p) {
        CAPTURE(p);
        CHECK(run.grad_bytes[p] == ref.grad_bytes[p]);
      }
    }
    // A different step draws different dropout masks: the equality above is not vacuous.
    if (c.setup.dropout.value_or(c.model.hidden_dropout) > 0) {
      executor::StepOptions o;
      o.step = 1;
      CHECK(execute(g, "none", o).grad_bytes != ref.grad_bytes);
    }
  }
}

TEST_CASE("executor: gradients match central finite differences (fp32)") {
  // Tiny fp32 models: every parameter element is perturbed and the stored loss differenced.
  // D(h) = (L(p + h) - L(p - h)) / 2h has error c2 h^2 + c4 h^4 + (rounding noise) / h; the
  // Richardson combination (4 D(h) - D(2h)) / 3 cancels the h^2 term. Measured on these models,
  // D(1e-2) alone is off by up to 2e-3 (curvature: c2 about 20), while the noise of the fp32
  // loss (about 2e-7 between runs) costs 3e-5 at h = 5e-3. Hence h = 5e-3 and the bound
  // |fd - analytic| <= 1e-4 + 1e-3 |analytic|.
  const Device dev = fixtures::executor_device();
  TrainSetup s;
  s.micro_batch = 2;
  s.seq = 4;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kStandard;
  ModelConfig gpt = fixtures::tiny_gpt(2);
  gpt.hidden = 8, gpt.heads = gpt.kv_heads = 2, gpt.head_dim = 4, gpt.ffn_hidden = 16;
  gpt.vocab = 11;
  ModelConfig llama = fixtures::tiny_gqa_llama(2);
  llama.hidden = 8, llama.heads = 4, llama.kv_heads = 2, llama.head_dim = 2, llama.ffn_hidden = 12;
  llama.vocab = 11;
  TrainSetup flash = s;
  flash.attention = AttentionKind::kFlash;
  flash.dropout = 0.1;
  // exec10: the kernels of HF's masks and shifted loss, Falcon's split, broadcast and SDPA math
  TrainSetup hf = s;
  hf.impl = Impl::kHf;
  TrainSetup hf_pad = hf;
  hf_pad.padding = true;
  TrainSetup hf_flash = hf;
  hf_flash.attention = AttentionKind::kFlash;
  const ModelConfig falcon = tiny_falcon(2, 8, 4);
  const std::vector<Case> tiny = {{"gpt fp32 dropout", gpt, s},
                                  {"llama fp32", llama, s},
                                  {"llama fp32 flash dropout", llama, flash},
                                  {"hf gpt2 fp32: shifted loss, extended mask", hf_gpt2(gpt), hf_pad},
                                  {"hf llama fp32: additive causal mask", hf_llama(llama), hf},
                                  {"hf llama fp32: causal+padding mask", hf_llama(llama), hf_pad},
                                  {"falcon fp32 eager: index split, broadcast K/V", falcon, hf},
                                  {"falcon fp32 SDPA math", falcon, hf_flash}};
  const double h = 5e-3;
  for (const Case& c : tiny) {
    const std::string name = c.name;
    CAPTURE(name);
    const Graph g = build_graph_exec(c.model, c.setup, dev);
    const executor::StepResult base = execute(g, "full");
    int64_t checked = 0;
    double worst = 0;
    for (size_t p = 0; p < g.param_storages.size(); ++p) {
      const int64_t n = static_cast<int64_t>(base.grads[p].size());
      for (int64_t i = 0; i < n; ++i) {
        auto diff = [&](double step) {
          executor::StepOptions up, down;
          up.perturb_param = down.perturb_param = static_cast<int32_t>(p);
          up.perturb_element = down.perturb_element = i;
          up.perturb_delta = step;
          down.perturb_delta = -step;
          const executor::StepResult a = execute(g, "none", up), b = execute(g, "none", down);
          return (a.loss - b.loss) / (a.perturbed_value - b.perturbed_value);
        };
        const double fd = (4 * diff(h) - diff(2 * h)) / 3;
        const double an = base.grads[p][i];
        worst = std::max(worst, std::abs(fd - an) - 1e-3 * std::abs(an));
        CAPTURE(p);
        CAPTURE(i);
        CHECK(std::abs(fd - an) <= 1e-4 + 1e-3 * std::abs(an));
        ++checked;
      }
    }
    MESSAGE(name << ": " << checked << " parameter elements, worst |fd - an| - 1e-3 |an| = "
                 << worst);
    CHECK(checked > 1000);
  }
}

TEST_CASE("executor: a schedule with a free removed or moved early fails loudly") {
  const Device dev = fixtures::executor_device();
  const Case c = cases()[0];
  const Graph g = build_graph_exec(c.model, c.setup, dev);
  const Plan plan = resolve(parse_strategy("full"), g.n_blocks);
  const Schedule good = build_schedule(g, plan, recompute_mode(g));
  CHECK_NOTHROW(executor::run_cpu(g, plan, good));
  // The first free after the forward pass's first few events, and one in the backward pass.
  std::vector<size_t> frees;
  for (size_t k = 0; k < good.events.size(); ++k)
    if (good.events[k].kind == EventKind::kFree && good.events[k - 1].kind != EventKind::kFree)
      frees.push_back(k);
  REQUIRE(frees.size() > 4);
  for (size_t k : {frees[2], frees[frees.size() / 2], frees[frees.size() - 2]}) {
    CAPTURE(k);
    Schedule removed = good;
    removed.events.erase(removed.events.begin() + static_cast<std::ptrdiff_t>(k));
    if (k < static_cast<size_t>(removed.forward_end)) --removed.forward_end;
    std::string msg;
    try {
      executor::run_cpu(g, plan, removed);
    } catch (const executor::ExecutionError& e) {
      msg = e.what();
    }
    CHECK(contains(msg, "does not free it here"));
    Schedule early = good;  // the free swapped with the event before it (its last use)
    std::swap(early.events[k], early.events[k - 1]);
    msg.clear();
    try {
      executor::run_cpu(g, plan, early);
    } catch (const executor::ExecutionError& e) {
      msg = e.what();
    }
    CHECK(contains(msg, "while the executor holds"));
  }
}

TEST_CASE("executor: a backward that reads a tensor its op did not save fails loudly") {
  const Device dev = fixtures::executor_device();
  const Case c = cases()[0];
  Graph g = build_graph_exec(c.model, c.setup, dev);
  // Drop what the softmax of block 2 saves (its output): the scheduler then frees it after the
  // forward use, and the softmax backward must not read it silently.
  int32_t victim = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i)
    if (g.ops[i].block == 2 && g.ops[i].kind == OpKind::kSoftmax) victim = i;
  REQUIRE(victim >= 0);
  REQUIRE(g.ops[victim].saves.count == 1);
  g.ops[victim].saves.count = 0;
  std::string msg;
  try {
    execute(g, "none");
  } catch (const executor::ExecutionError& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "which it did not save"));
  CHECK(contains(msg, "softmax"));
}

TEST_CASE("executor: a backward kernel reading what it did not declare fails loudly") {
  // The CPU backend alone, every storage allocated: op by op forward, then the backward of the
  // first linear with its declared reads, and again with none.
  const Device dev = fixtures::executor_device();
  const Case c = cases()[0];
  const Graph g = build_graph_exec(c.model, c.setup, dev);
  auto be = executor::make_cpu_backend(g, {});
  for (int32_t s = 0; s < static_cast<int32_t>(g.storages.size()); ++s)
    be->allocate(s, g.storages[s].bytes);
  be->initialize_persistent();
  int32_t linear = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(g.ops.size()); ++i) {
    be->forward(i);
    if (linear < 0 && g.ops[i].kind == OpKind::kLinear) linear = i;
  }
  REQUIRE(linear >= 0);
  CHECK_NOTHROW(be->backward(linear, executor::backward_reads(g, linear)));
  std::string msg;
  try {
    be->backward(linear, {});
  } catch (const executor::ExecutionError& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "did not declare"));
  // A released buffer cannot be read.
  const int32_t x = g.args[linear].in[0].storage;
  be->release(x);
  msg.clear();
  try {
    be->forward(linear);
  } catch (const executor::ExecutionError& e) {
    msg = e.what();
  }
  CHECK(contains(msg, "has been freed"));
}

// Issue 6 properties at scale: 50 seeded random small configurations (family, widths, heads and
// KV heads, blocks, batch, sequence, precision, attention, dropout, optimizer, strategy); the
// executor's measured peak equals the simulator's to the byte at the same event on each.
TEST_CASE("executor: agrees with the simulator to the byte on 50 random small configurations") {
  const Device dev = fixtures::executor_device();
  uint64_t state = 0x9e3779b97f4a7c15ull;  // splitmix64, fixed seed: the same 50 every run
  auto next = [&state](uint64_t bound) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<int64_t>((z ^ (z >> 31)) % bound);
  };
  const char* const strategies[] = {"none", "full", "every:2", "sqrt", "block:1",
                                    "selective", "sac:mm"};
  const Precision precisions[] = {Precision::kBf16Amp, Precision::kFp16Amp, Precision::kFp32,
                                  Precision::kBf16Mixed};
  const Optimizer optimizers[] = {Optimizer::kAdamForeach, Optimizer::kAdamFused, Optimizer::kSgd};
  for (int i = 0; i < 50; ++i) {
    const bool llama = next(2) == 1;
    const int64_t layers = 2 + next(4);
    ModelConfig m = llama ? fixtures::tiny_gqa_llama(layers) : fixtures::tiny_gpt(layers);
    m.head_dim = 4 * (1 + next(2));
    m.heads = 2 * (1 + next(2));
    m.kv_heads = llama && next(2) == 1 ? m.heads / 2 : m.heads;
    m.hidden = m.heads * m.head_dim;
    m.ffn_hidden = 8 * (1 + next(4));
    TrainSetup s;
    s.micro_batch = 1 + next(3);
    s.seq = 4 * (1 + next(4));
    s.precision = precisions[next(4)];
    s.attention = next(2) == 1 ? AttentionKind::kFlash : AttentionKind::kStandard;
    if (next(2) == 1) s.dropout = 0.0;
    s.optimizer = optimizers[next(3)];
    const char* st = strategies[next(7)];
    const std::string what = std::string(m.name) + " L" + std::to_string(layers) + " h" +
                             std::to_string(m.hidden) + " a" + std::to_string(m.heads) + "/" +
                             std::to_string(m.kv_heads) + " b" + std::to_string(s.micro_batch) +
                             " s" + std::to_string(s.seq) + " " + std::string(name(*s.precision)) +
                             " " + std::string(name(sim::resolved_attention(s))) + " " + st;
    CAPTURE(what);
    const Graph g = build_graph_exec(m, s, dev);
    const Result sim = simulate(m, s, dev, parse_strategy(st));
    const executor::StepResult run = execute(g, st);
    CHECK(run.peak_bytes == sim.peak_requested_bytes);
    CHECK(run.peak_event_index == sim.peak_event_index);
    CHECK(run.end_bytes == run.baseline_bytes);
  }
}

// execreg: fsdp2-bf16 and deepspeed-bf16 now run at one rank (tests/test_exec_offload.cpp).

TEST_CASE("executor: --impl nanogpt with SDPA and its slow path run to the simulator's byte") {
  const Device dev = fixtures::executor_device();
  TrainSetup s;
  s.impl = Impl::kNanogpt;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kFlash;  // nanoGPT's path on torch >= 2.0: no op of its own
  const ModelConfig m = fixtures::tiny_gpt();
  const Graph g = build_graph_exec(m, s, dev);
  for (const char* st : {"none", "full", "every:2"}) {
    const std::string strategy = st;
    CAPTURE(strategy);
    const Result sim = simulate(m, s, dev, parse_strategy(st));
    const executor::StepResult run = execute(g, st);
    CHECK(run.peak_bytes == sim.peak_requested_bytes);
    CHECK(run.peak_event_index == sim.peak_event_index);
    CHECK(run.end_bytes == run.baseline_bytes);
  }
  // exec12: the slow path's `== 0` mask and masked_fill run too (test_exec12.cpp); its scale
  // multiply runs as the identity after the qk kernel's scaling.
  s.attention = AttentionKind::kStandard;
  const Graph slow = build_graph_exec(m, s, dev);
  const executor::StepResult run = execute(slow, "none");
  CHECK(run.peak_bytes == simulate(m, s, dev, parse_strategy("none")).peak_requested_bytes);
}

TEST_CASE("executor: a token-classification head runs to the simulator's byte, the pooler is refused") {
  // implhf (sim/src/blocks_heads.cpp): dropout, classifier h -> num_labels, cross entropy over
  // b*s rows of num_labels classes (kBatch draws the labels below num_labels: dim[2]).
  const Device dev = fixtures::executor_device();
  TrainSetup s;
  s.impl = Impl::kHf;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kFlash;
  ModelConfig m = fixtures::tiny_gpt();
  m.head = Head::kTokenClassification;
  m.num_labels = 3;
  m.classifier_dropout = 0.1;
  const Graph g = build_graph_exec(m, s, dev);
  for (const char* st : {"none", "full"}) {
    const std::string strategy = st;
    CAPTURE(strategy);
    const Result sim = simulate(m, s, dev, parse_strategy(st));
    const executor::StepResult run = execute(g, st);
    CHECK(run.peak_bytes == sim.peak_requested_bytes);
    CHECK(run.peak_event_index == sim.peak_event_index);
    CHECK(run.end_bytes == run.baseline_bytes);
  }
  // BertPooler's tanh and the last-token index have no kernel: refused by name
  m.head = Head::kSequenceClassification;
  m.seq_pool = SeqPool::kFirstTokenPooler;
  const Graph pooled = build_graph_exec(m, s, dev);
  CHECK_THROWS_WITH_AS(execute(pooled, "none"), doctest::Contains("executing op \"first token\""),
                       Unsupported);
}

// famdec (issue 12): Falcon's blocks are ops the executor has kernels for (LayerNorm, fused
// Q/K/V split into MQA views, rotary, attention, GeLU MLP, the parallel residual's adds): it runs
// them to the simulator's byte. The families with ops of their own (Gemma's fp32-weight RMSNorm
// and soft-capping, NeoX's partial rotary, Phi-3's chunked gate_up) are refused by op name.
// exec10: the model is Falcon-7B's layout as the loader gives it (census12's ops: K and V index
// copies, matmul's broadcast of the one K/V head, in-place scale and add, SDPA's math kernel),
// under every precision regime the executor runs.
TEST_CASE("executor: famdec -- a tiny Falcon runs to the simulator's byte, Gemma 2 is refused") {
  const Device dev = fixtures::executor_device();
  const ModelConfig m = tiny_falcon();
  for (const AttentionKind att : {AttentionKind::kStandard, AttentionKind::kFlash})
  for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
    TrainSetup s;
    s.micro_batch = 2;
    s.seq = 8;
    s.precision = pr;
    s.attention = att;
    const Graph g = build_graph_exec(m, s, dev);
    int split = 0, math = 0;
    for (const Op& op : g.ops) {
      split += std::string(op.name) == "qkv split";
      math += std::string(op.name) == "sdpa math qk";
    }
    CHECK(split == m.layers);
    CHECK(math == (att == AttentionKind::kFlash ? m.layers : 0));
    for (const char* st : {"none", "full", "every:2", "selective", "sac:mm"}) {
      const std::string strategy = st, precision(name(pr));
      CAPTURE(strategy);
      CAPTURE(precision);
      const Result sim = simulate(m, s, dev, parse_strategy(st));
      const executor::StepResult run = execute(g, st);
      CHECK(run.peak_bytes == sim.peak_requested_bytes);
      CHECK(run.peak_event_index == sim.peak_event_index);
      CHECK(run.end_bytes == run.baseline_bytes);
      CHECK(std::isfinite(run.loss));
    }
  }
  ModelConfig g2 = fixtures::tiny_gqa_llama();
  g2.family = "gemma2";
  g2.gated_gelu = true;
  g2.activation = sim::Activation::kGeluTanh;
  g2.embed_scale = true;
  g2.norm_weight_fp32 = true;
  g2.sub_norms = ModelConfig::SubNorms::kPrePost;
  g2.attn_softcap = 50.0;
  g2.final_softcap = 30.0;
  TrainSetup s;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kStandard;
  const Graph g = build_graph_exec(g2, s, dev);
  CHECK_THROWS_WITH_AS(execute(g, "none"), doctest::Contains("executing op \"embedding * sqrt(h)\""),
                       Unsupported);
}

TEST_CASE("executor: MoE top-k below the expert count runs (exec13: the graph's counts forced)") {
  const Device dev = fixtures::executor_device();
  ModelConfig m = fixtures::tiny_llama();
  m.family = "mixtral";
  m.experts = 4;
  m.experts_per_token = 2;
  m.expert_ffn = m.ffn_hidden;
  TrainSetup s;
  s.impl = Impl::kHf;
  s.micro_batch = 1;
  s.seq = 8;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kFlash;
  const Graph g = build_graph_exec(m, s, dev);
  // exec12: HF's loop has kernels; exec13: top-2 of 4 experts runs with the counts the graph
  // sizes its loop for forced (executor.hpp forced_counts; test_exec13.cpp)
  const executor::StepResult r = execute(g, "none");
  CHECK(r.peak_bytes == simulate(m, s, dev, parse_strategy("none")).peak_requested_bytes);
}

// exec10 (issue 10): GPT2LMHeadModel's shifted logits and labels copies, HF Llama's eager 4-D
// additive mask, the causal+padding and extended masks and the eager mask add run in the
// executor (all-ones attention masks: the batch has no padding) to the simulator's byte.
TEST_CASE("executor: HF's additive masks and GPT-2's shifted loss run to the simulator's byte") {
  const Device dev = fixtures::executor_device();
  struct Hf {
    const char* name;
    ModelConfig model;
    const char* op;  // an op the graph must have
  };
  const Hf models[] = {{"hf gpt2", hf_gpt2(fixtures::tiny_gpt()), "shift logits copy"},
                       {"hf llama", hf_llama(fixtures::tiny_gqa_llama()), "4-D causal mask"}};
  for (const Hf& hm : models)
    for (const bool padding : {false, true})
      for (const Precision pr : {Precision::kFp32, Precision::kBf16Amp, Precision::kBf16Mixed}) {
        TrainSetup s;
        s.impl = Impl::kHf;
        s.micro_batch = 2;
        s.seq = 8;
        s.precision = pr;
        s.attention = AttentionKind::kStandard;
        s.padding = padding;
        const Graph g = build_graph_exec(hm.model, s, dev);
        int found = 0, adds = 0;
        for (const Op& op : g.ops) {
          found += std::string(op.name) == hm.op;
          adds += std::string(op.name) == "attention mask add";
        }
        const std::string model = hm.name, precision(name(pr));
        CAPTURE(model);
        CAPTURE(padding);
        CAPTURE(precision);
        CHECK(found == (std::string(hm.op) == "4-D causal mask" && padding ? 0 : 1));
        // GPT-2 adds a mask only with padding (its bias buffer's `where` is the causal part)
        CHECK(adds == (std::string(hm.name) == "hf gpt2" && !padding ? 0 : hm.model.layers));
        for (const char* st : {"none", "full", "every:2", "selective", "sac:mm"}) {
          const std::string strategy = st;
          CAPTURE(strategy);
          const Result sim = simulate(hm.model, s, dev, parse_strategy(st));
          const executor::StepResult run = execute(g, st);
          CHECK(run.peak_bytes == sim.peak_requested_bytes);
          CHECK(run.peak_event_index == sim.peak_event_index);
          CHECK(run.end_bytes == run.baseline_bytes);
          CHECK(std::isfinite(run.loss));
        }
      }
  // exec12: SDPA with a padding mask (repeat_kv, the mask cast, the memory-efficient kernel)
  // runs too (test_exec12.cpp)
  TrainSetup s;
  s.impl = Impl::kHf;
  s.micro_batch = 2;
  s.seq = 8;
  s.precision = Precision::kFp32;
  s.attention = AttentionKind::kFlash;
  s.padding = true;
  const ModelConfig llama = hf_llama(fixtures::tiny_gqa_llama());
  const Graph g = build_graph_exec(llama, s, dev);
  CHECK(execute(g, "none").peak_bytes ==
        simulate(llama, s, dev, parse_strategy("none")).peak_requested_bytes);
}

TEST_CASE("executor: refuses torch.compile's partitioned blocks with one line") {
  // inductor (issue 10): the blocks' saves are the min-cut's; a backward reads what it
  // recomputes, which the eager executor does not do. fp32 so no other refusal comes first.
  TrainSetup t;
  t.micro_batch = 1;
  t.seq = 16;
  t.impl = Impl::kTorchtitan;
  t.precision = Precision::kFp32;
  t.attention = AttentionKind::kStandard;
  t.compile = true;
  const Graph g = build_graph_exec(fixtures::tiny_gqa_llama(), t, fixtures::executor_device());
  CHECK(g.compiled);
  try {
    execute(g, "none");
    FAIL("the executor ran a compiled graph");
  } catch (const Unsupported& e) {
    const std::string what = e.what();
    CHECK(contains(what, "torch.compile"));
    CHECK(what.find('\n') == std::string::npos);
  }
}
