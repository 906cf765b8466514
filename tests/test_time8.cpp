// time8 (issue 11): Inductor's kernel fusion in time (sim/src/inductor.cpp fuse_block) and the
// time of torchao's tensorwise Float8 casts (sim/src/fp8.cpp), eager and compiled.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "../sim/src/inductor.hpp"
#include "fixtures.hpp"
#include "sim/graph.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

// test_inductor.cpp's probe: b 2, s 64 (128 tokens), h 128, 4 heads of 32, f 344
ModelConfig probe() {
  ModelConfig m = fixtures::tiny_llama();
  m.hidden = 128, m.heads = m.kv_heads = 4, m.head_dim = 32, m.ffn_hidden = 344, m.layers = 3;
  return m;
}
constexpr int64_t kTokens = 128, kH = 128, kF = 344;

TrainSetup setup(bool compile, Fp8Recipe fp8 = Fp8Recipe::kOff) {
  TrainSetup t;
  t.impl = Impl::kTorchtitan;
  t.impl_version = "9dec370";
  t.micro_batch = 2;
  t.seq = 64;
  t.compile = compile;
  t.precision = Precision::kFsdp2Bf16;
  t.attention = AttentionKind::kFlash;
  t.fp8 = fp8;
  return t;
}

bool starts(const char* s, const char* p) { return std::strncmp(s, p, std::strlen(p)) == 0; }

// The ops of `block` whose names start with `prefix`, from the first such op to the first op
// after it that does not match.
std::vector<const Op*> run_of(const Graph& g, int32_t block, const char* prefix) {
  std::vector<const Op*> out;
  for (const Op& op : g.ops) {
    if (op.block != block) continue;
    if (starts(op.name, prefix)) out.push_back(&op);
    else if (!out.empty()) break;
  }
  return out;
}

}  // namespace

TEST_CASE("time8: a compiled block's first RMSNorm is one kernel reading x and the weight once") {
  const Graph e = build_graph_direct(probe(), setup(false), fixtures::h100());
  const Graph c = build_graph_direct(probe(), setup(true), fixtures::h100());
  const std::vector<const Op*> ne = run_of(e, 1, "rmsnorm"), nc = run_of(c, 1, "rmsnorm");
  REQUIRE(ne.size() == 6);  // to fp32, pow+mean, rsqrt, scale, to input dtype, weight
  REQUIRE(nc.size() == 6);
  int64_t fe = 0, fc = 0, ke = 0, kc = 0, be = 0, bc = 0;
  for (const Op* op : ne) fe += op->fwd.bytes, ke += op->fwd.kernels, be += op->bwd.bytes;
  for (const Op* op : nc) fc += op->fwd.bytes, kc += op->fwd.kernels, bc += op->bwd.bytes;
  MESSAGE("eager fwd " << fe << " compiled " << fc << " bwd " << be << " " << bc);
  const int64_t w = kH * 2;  // the weight as FSDP2 gathers it (param_dtype bf16)
  // forward: x (bf16) and w read; the bf16 output (the q, k, v projections read it) and the fp32
  // rstd (the partition saves it, test_inductor.cpp) written
  CHECK(fc == 2 * kTokens * kH * 2 + w + 4 * kTokens);
  CHECK(ke >= 6);
  CHECK(kc == 1);
  CHECK(nc.front()->fwd.bytes == fc);  // charged on the group's first op
  // backward: the output's gradient and x (the fp32 copy is recomputed from it), rstd and w
  // read; x's gradient and w's written
  CHECK(bc == 3 * kTokens * kH * 2 + 4 * kTokens + 2 * w);
  CHECK(nc.back()->bwd.bytes == bc);  // charged on the group's last op (its backward runs first)
  CHECK(bc < be);
}

TEST_CASE("time8: SwiGLU's silu and product are one kernel: gate and up read, the product written") {
  const Graph e = build_graph_direct(probe(), setup(false), fixtures::h100());
  const Graph c = build_graph_direct(probe(), setup(true), fixtures::h100());
  const std::vector<const Op*> se = run_of(e, 1, "s"), sc = run_of(c, 1, "s");  // silu, swiglu mul
  REQUIRE(sc.size() == 2);
  REQUIRE(std::string(sc[0]->name) == "silu");
  const int64_t act = kTokens * kF * 2;
  CHECK(sc[0]->fwd.bytes + sc[1]->fwd.bytes == 3 * act);
  CHECK(sc[0]->fwd.kernels + sc[1]->fwd.kernels == 1);
  // eager: silu reads gate and writes its output, the product reads it and up and writes
  CHECK(se[0]->fwd.bytes + se[1]->fwd.bytes == 5 * act);
  // backward: the product's gradient, gate and up read (saved by the cut); gate's and up's
  // gradients written
  CHECK(sc[0]->bwd.bytes + sc[1]->bwd.bytes == 5 * act);
}

TEST_CASE("time8: torchao tensorwise casts are timed: 33 B per element eager, 5 compiled, once per input") {
  const Graph e = build_graph_direct(probe(), setup(false, Fp8Recipe::kTorchaoTensorwise), fixtures::h100());
  const Graph c = build_graph_direct(probe(), setup(true, Fp8Recipe::kTorchaoTensorwise), fixtures::h100());
  auto op = [](const Graph& g, const char* name) -> const Op& {
    for (const Op& o : g.ops)
      if (o.block == 1 && std::string(o.name) == name) return o;
    FAIL("no op " << name);
    return g.ops.front();
  };
  const int64_t x = kTokens * kH;  // the projections' input elements
  for (const char* n : {"q proj", "k proj", "v proj"}) {
    CAPTURE(n);
    CHECK(op(e, n).fwd_serial_bytes == 33 * x);
    CHECK(op(e, n).fwd_serial_kernels == 10);
  }
  // compiled: the reduction and the cast kernel, once for the three (fx_graph_cse)
  CHECK(op(c, "q proj").fwd_serial_bytes == 5 * x);
  CHECK(op(c, "q proj").fwd_serial_kernels == 2);
  CHECK(op(c, "k proj").fwd_serial_bytes == 0);
  CHECK(op(c, "v proj").fwd_serial_bytes == 0);
  CHECK(op(c, "gate proj").fwd_serial_bytes == 5 * x);
  CHECK(op(c, "up proj").fwd_serial_bytes == 0);
  // backward: the grad output's cast and preprocess_addmm's three 1-byte layout copies
  const int64_t w = kH * kH;
  CHECK(op(c, "q proj").bwd_serial_bytes == 5 * x + 2 * (w + x + x));
  CHECK(op(e, "q proj").bwd_serial_bytes == 33 * x + 2 * (w + x + x));
  const int64_t go = kTokens * kF;
  CHECK(op(c, "down proj").bwd_serial_bytes == 5 * kTokens * kH + 2 * (kF * kH + kTokens * kH + go));
  // eager's ten kernels per cast cost more than the compiled two
  const Strategy none = parse_strategy("none");
  const ModelConfig m = probe();
  TrainSetup no_cast = setup(false, Fp8Recipe::kTorchaoTensorwise);
  CHECK(simulate(m, no_cast, fixtures::h100(), none).step_time_ns >
        simulate(m, setup(true, Fp8Recipe::kTorchaoTensorwise), fixtures::h100(), none).step_time_ns);
}

TEST_CASE("time8: a compiled step (fused kernels, their host calls only) is shorter than eager") {
  const ModelConfig m = fixtures::wide_llama();
  const Strategy none = parse_strategy("none");
  TrainSetup e = setup(false), c = setup(true);
  e.seq = c.seq = 512;
  const auto re = simulate(m, e, fixtures::h100(), none);
  const auto rc = simulate(m, c, fixtures::h100(), none);
  CHECK(rc.step_time_ns < re.step_time_ns);
  CHECK(rc.fwd_time_ns < re.fwd_time_ns);
}

TEST_CASE("time8: a host-bound compiled step issues only its kernels' host calls") {
  // 128 tokens: the host lane (8 us an op on the test device) sets the step
  const Strategy none = parse_strategy("none");
  const Device d = fixtures::h100();
  REQUIRE(d.host_dispatch_ns > 0);
  const auto re = simulate(probe(), setup(false), d, none);
  const auto rc = simulate(probe(), setup(true), d, none);
  const Graph gc = build_graph_direct(probe(), setup(true), d);
  int64_t silent = 0;  // block ops fused into another's kernel: no host call either way
  for (const Op& op : gc.ops)
    if (op.block >= 0 && op.fwd.kernels == 0) ++silent;
  REQUIRE(silent > 0);
  CHECK(re.host_wait_ns > 0);
  // at least the forward's silent ops' host calls are gone
  CHECK(re.step_time_ns - rc.step_time_ns >= silent * d.host_dispatch_ns);
}
