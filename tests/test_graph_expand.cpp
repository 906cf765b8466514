// build_graph clones the middle block of a three-block graph; build_graph_direct builds every
// block op by op. They must be the same step: same storages (as a multiset) and, for every
// strategy, the same simulated figures and the same explanation of the peak.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "fixtures.hpp"

using namespace sim;

namespace {

std::vector<std::tuple<int64_t, int, int32_t, std::string, int32_t>> storage_multiset(const Graph& g) {
  std::vector<std::tuple<int64_t, int, int32_t, std::string, int32_t>> v;
  for (const Storage& s : g.storages)
    v.emplace_back(s.bytes, static_cast<int>(s.category), s.block, s.role,
                   s.producer >= 0 ? g.ops[s.producer].block : -2);
  std::sort(v.begin(), v.end());
  return v;
}

void same_results(const Graph& a, const Graph& b, const char* strategy) {
  CAPTURE(strategy);
  const Plan p = resolve(parse_strategy(strategy), a.n_blocks);
  const Device d = fixtures::h100();
  const Result ra = simulate_plan(a, p, d), rb = simulate_plan(b, p, d);
  CHECK(ra.peak_allocated_bytes == rb.peak_allocated_bytes);
  CHECK(ra.peak_breakdown == rb.peak_breakdown);
  CHECK(ra.peak_op == rb.peak_op);
  CHECK(ra.block_peak_bytes == rb.block_peak_bytes);
  CHECK(ra.activation_bytes_per_block == rb.activation_bytes_per_block);
  CHECK(ra.baseline_bytes == rb.baseline_bytes);
  CHECK(ra.fwd_flops == rb.fwd_flops);
  CHECK(ra.bwd_flops == rb.bwd_flops);
  CHECK(ra.recompute_flops == rb.recompute_flops);
  CHECK(ra.step_time_ns == rb.step_time_ns);
  CHECK(ra.recompute_time_ns == rb.recompute_time_ns);
  CHECK(ra.comm_time_ns == rb.comm_time_ns);
  CHECK(ra.params_per_rank == rb.params_per_rank);
  CHECK(ra.weights_bytes == rb.weights_bytes);
  const auto ea = explain_peak(a, p, ra, 12), eb = explain_peak(b, p, rb, 12);
  REQUIRE(ea.size() == eb.size());
  for (size_t i = 0; i < ea.size(); ++i) {
    CHECK(ea[i].bytes == eb[i].bytes);
    CHECK(ea[i].what == eb[i].what);
    CHECK(ea[i].why == eb[i].why);
  }
}

}  // namespace

TEST_CASE("cloned blocks equal blocks built one by one") {
  struct Case {
    const char* name;
    ModelConfig m;
    TrainSetup t;
    bool executable = true;  // moe: the executor has no kernels for MoE ops (refused by name)
  };
  std::vector<Case> cases;
  TrainSetup amp;
  amp.micro_batch = 2;
  amp.seq = 256;
  cases.push_back({"gpt2 bf16-amp", fixtures::gpt2_small(), amp});
  TrainSetup mixed = amp;
  mixed.precision = Precision::kBf16Mixed;
  mixed.tp = 2;
  mixed.sp = true;
  cases.push_back({"gpt2 bf16-mixed tp2 sp", fixtures::gpt2_small(), mixed});
  ModelConfig llama = fixtures::tiny_llama();
  llama.layers = 7;
  TrainSetup flash = amp;
  flash.attention = AttentionKind::kFlash;
  cases.push_back({"llama flash", llama, flash});
  cases.push_back({"llama standard amp", llama, amp});
  TrainSetup z3 = amp;
  z3.dp = 4;
  z3.zero = 3;
  z3.precision = Precision::kFp32;
  cases.push_back({"llama fp32 zero3", llama, z3});
  ModelConfig bert = fixtures::gpt2_small();
  bert.family = "bert";
  bert.post_norm = true;
  bert.causal = false;
  bert.type_vocab = 2;
  bert.layers = 6;
  cases.push_back({"bert-like", bert, amp});
  cases.push_back({"paper 175b", fixtures::gpt3_175b(), fixtures::paper(8, true)});
  {  // moe: a MoE llama (HF's loop over 4 experts; Megatron's alltoall over ep 2, imbalanced)
    ModelConfig moe = fixtures::tiny_llama();
    moe.layers = 7;
    moe.family = "mixtral";
    moe.experts = 4;
    moe.experts_per_token = 2;
    moe.expert_ffn = moe.ffn_hidden;
    moe.norm_topk = true;
    TrainSetup hf = flash;
    hf.impl = Impl::kHf;
    cases.push_back({"moe hf loop", moe, hf, false});
    TrainSetup mg = amp;
    mg.impl = Impl::kMegatron;
    mg.dp = 2;
    mg.ep = 2;
    mg.zero = 1;
    mg.moe_imbalance = 1.5;
    cases.push_back({"moe megatron alltoall ep2", moe, mg, false});
  }
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const Graph a = build_graph(c.m, c.t, fixtures::h100());
    const Graph b = build_graph_direct(c.m, c.t, fixtures::h100());
    CHECK(a.ops.size() == b.ops.size());
    CHECK(storage_multiset(a) == storage_multiset(b));
    CHECK(a.persistent.size() == b.persistent.size());
    CHECK(a.step_end_frees.size() == b.step_end_frees.size());
    CHECK(a.autocast_cached.size() == b.autocast_cached.size());
    for (const char* st : {"none", "full", "every:3", "sqrt", "selective", "sac:mm", "block:2"})
      same_results(a, b, st);
    if (!c.executable) continue;
    // The executor's graph (harness/executor) is the direct build plus Graph::args: the same
    // storages and ops, id for id; the simulator's graphs carry no args.
    const Graph e = build_graph_exec(c.m, c.t, fixtures::h100());
    CHECK(a.args.empty());
    CHECK(b.args.empty());
    REQUIRE(e.args.size() == e.ops.size());
    REQUIRE(e.ops.size() == b.ops.size());
    REQUIRE(e.storages.size() == b.storages.size());
    CHECK(e.idx == b.idx);
    CHECK(e.persistent == b.persistent);
    CHECK(e.step_end_frees == b.step_end_frees);
    for (size_t s = 0; s < e.storages.size(); ++s) {
      CHECK(e.storages[s].bytes == b.storages[s].bytes);
      CHECK(e.storages[s].producer == b.storages[s].producer);
    }
    for (size_t i = 0; i < e.ops.size(); ++i) {
      CHECK(e.ops[i].kind == b.ops[i].kind);
      CHECK(std::string(e.ops[i].name) == b.ops[i].name);
      CHECK(e.ops[i].bwd_accum_bytes == b.ops[i].bwd_accum_bytes);
      CHECK(e.args[i].exec != Exec::kNone);
      // Every operand the args name is one the op declares (outputs may be views of an input's
      // storage; inputs may add persistent parameters and buffers).
      const auto in_range = [&](IdxRange r, int32_t sid) {
        return std::find(e.begin(r), e.end(r), sid) != e.end(r);
      };
      for (int k = 0; k < e.args[i].n_out; ++k) {
        const int32_t sid = e.args[i].out[k].storage;
        CHECK((in_range(e.ops[i].outputs, sid) || e.args[i].out[k].cols > 0));
      }
      for (int k = 0; k < e.args[i].n_in; ++k) {
        const int32_t sid = e.args[i].in[k].storage;
        CHECK((in_range(e.ops[i].inputs, sid) ||
               std::find(e.persistent.begin(), e.persistent.end(), sid) != e.persistent.end()));
      }
    }
  }
}
