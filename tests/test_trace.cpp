// The Chrome / Perfetto trace (sim_io/trace.hpp), parsed back: spans, tracks and the memory
// counter against the Result it was written from.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "sim_io/trace.hpp"

namespace {

// Microseconds (three decimals in the file) back to integer nanoseconds.
int64_t ns_of(const nlohmann::json& v) { return std::llround(v.get<double>() * 1000.0); }

void check_trace(sim::AllocatorKind allocator, const char* strategy) {
  sim::TrainSetup t;
  t.allocator = allocator;
  t.tp = 2;  // a collective track too
  const sim::Device dev = fixtures::h100();
  const sim::Graph g = sim::build_graph(fixtures::gpt2_small(), t, dev);
  sim::SimOptions o;
  o.record_timeline = true;
  const sim::Result r =
      sim::simulate_plan(g, sim::resolve(sim::parse_strategy(strategy), g.n_blocks), dev, o);
  const std::string text = sim_io::trace_json(g, r, "gpt2-small test");
  CHECK(text == sim_io::trace_json(g, r, "gpt2-small test"));  // deterministic

  const auto j = nlohmann::json::parse(text);
  const auto& events = j.at("traceEvents");
  REQUIRE(events.is_array());
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> tracks;  // tid -> (start, end)
  int64_t spans = 0, counters = 0, max_allocated = 0, max_reserved = 0;
  for (const auto& e : events) {
    const std::string ph = e.at("ph");
    if (ph == "X") {
      ++spans;
      const int64_t ts = ns_of(e.at("ts")), dur = ns_of(e.at("dur"));
      CHECK(dur >= 0);
      tracks[e.at("tid").get<int>()].emplace_back(ts, ts + dur);
      const auto& args = e.at("args");
      CHECK(args.contains("layer"));
      CHECK(args.at("op").is_string());
      CHECK(args.at("phase").is_string());
      CHECK(args.at("flops").get<int64_t>() >= 0);
      CHECK(args.at("bytes").get<int64_t>() >= 0);
    } else if (ph == "C") {
      ++counters;
      max_allocated = std::max(max_allocated, e.at("args").at("allocated_bytes").get<int64_t>());
      if (allocator != sim::AllocatorKind::kExact)
        max_reserved = std::max(max_reserved, e.at("args").at("reserved_bytes").get<int64_t>());
    } else {
      CHECK(ph == "M");  // process and track names
    }
  }
  CHECK(spans == static_cast<int64_t>(r.spans.size()));
  CHECK(counters == static_cast<int64_t>(r.timeline.size()));
  CHECK(spans + counters + 7 == static_cast<int64_t>(events.size()));  // process + 6 track names
  // compute, collective and the host lane; offload adds the two copy streams
  CHECK(tracks.size() == (std::string(strategy).starts_with("offload") ? 5u : 3u));
  CHECK(tracks.count(4) == 1);  // the host lane (eager dispatch)
  // Spans on one track never overlap: sorted by start, each starts at or after the last end.
  for (auto& [tid, list] : tracks) {
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) CHECK(list[i].first >= list[i - 1].second);
  }
  CHECK(max_allocated == r.peak_allocated_bytes);
  if (allocator != sim::AllocatorKind::kExact) CHECK(max_reserved == r.peak_reserved_bytes);
}

}  // namespace

TEST_CASE("the trace parses back: spans per track, counter peak, event count") {
  for (const char* st : {"none", "full", "selective", "offload", "offload+full"}) {
    CAPTURE(st);
    check_trace(sim::AllocatorKind::kExact, st);
    check_trace(sim::AllocatorKind::kCaching, st);
  }
}

TEST_CASE("trace times are microseconds with three decimals") {
  sim::Result r;
  r.spans.push_back({1'234'567, 89, -1, 0, sim::Phase::kOptimizer});
  r.timeline.push_back({5, 42, 0, sim::Phase::kOptimizer, 42});
  const std::string text = sim_io::trace_json(sim::Graph{}, r, "t");
  CHECK(text.find("\"ts\":1234.567,\"dur\":0.089") != std::string::npos);
  CHECK(text.find("\"ts\":0.005") != std::string::npos);
}
