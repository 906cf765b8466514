// A sim::Workspace lends capacity, never contents: a sequence of different simulations through one
// workspace (large and small models, the direct and the cloned graph build, paper and pytorch
// profiles, exact and caching allocators, timelines on and off, a failing call in between) gives
// results identical, in their JSON and their timelines, to fresh calls without one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"
#include "sim_io/output.hpp"

namespace {

struct Case {
  sim::ModelConfig model;
  sim::TrainSetup setup;
  const char* strategy;
  bool timeline;
};

std::string as_json(const Case& c, const sim::Result& r) {
  sim_io::Row row;
  row.key.model = c.model.name;
  row.key.device = "h100-test";
  row.key.strategy = c.strategy;
  row.key.setup = c.setup;
  row.result = r;
  return sim_io::result_json(row);
}

bool same_timeline(const sim::Result& a, const sim::Result& b) {
  if (a.timeline.size() != b.timeline.size() || a.spans.size() != b.spans.size()) return false;
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    const auto &x = a.timeline[i], &y = b.timeline[i];
    if (x.t_ns != y.t_ns || x.allocated_bytes != y.allocated_bytes ||
        x.event_index != y.event_index || x.phase != y.phase || x.reserved_bytes != y.reserved_bytes)
      return false;
  }
  for (size_t i = 0; i < a.spans.size(); ++i) {
    const auto &x = a.spans[i], &y = b.spans[i];
    if (x.start_ns != y.start_ns || x.duration_ns != y.duration_ns || x.op != y.op ||
        x.stream != y.stream || x.phase != y.phase)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("workspace: results equal fresh simulations, in any order of configurations") {
  std::vector<Case> cases;
  sim::TrainSetup amp;
  amp.micro_batch = 2;
  amp.seq = 512;
  cases.push_back({fixtures::gpt3_175b(), fixtures::paper(8, true), "selective", false});
  cases.push_back({fixtures::gpt2_small(), amp, "full", true});
  cases.push_back({fixtures::tiny_llama(), amp, "none", false});  // 4 blocks: direct build
  sim::TrainSetup caching = amp;
  caching.allocator = sim::AllocatorKind::kCaching;
  cases.push_back({fixtures::gpt2_small(), caching, "sqrt", true});
  cases.push_back({fixtures::gpt3_175b(), fixtures::paper(8, false), "full", true});
  sim::TrainSetup flash = amp;
  flash.attention = sim::AttentionKind::kFlash;
  flash.seq = 1024;
  cases.push_back({fixtures::gpt2_small(), flash, "every:3", false});
  cases.push_back({fixtures::tiny_llama(), amp, "custom:none@0-1+full@2-3", true});
  cases.push_back({fixtures::gpt2_small(), amp, "sac:mm", false});

  sim::Workspace ws;
  const sim::Device d = fixtures::h100();
  for (int pass = 0; pass < 2; ++pass) {
    for (const Case& c : cases) {
      CAPTURE(c.model.name);
      CAPTURE(c.strategy);
      sim::SimOptions opt;
      opt.record_timeline = c.timeline;
      const sim::Strategy st = sim::parse_strategy(c.strategy);
      const sim::Result fresh = sim::simulate(c.model, c.setup, d, st, opt);
      const sim::Result reused = sim::simulate(c.model, c.setup, d, st, opt, ws);
      CHECK(as_json(c, reused) == as_json(c, fresh));
      CHECK(same_timeline(reused, fresh));
      if (c.timeline) CHECK(!reused.timeline.empty());
      // A call that fails half-way (the sequence length does not divide by t for SP) leaves
      // nothing behind that changes the next result.
      sim::TrainSetup bad = fixtures::paper(8, true);
      bad.seq = 2050;
      CHECK_THROWS_AS(sim::simulate(fixtures::gpt3_175b(), bad, d, st, opt, ws), sim::ConfigError);
    }
  }
}
