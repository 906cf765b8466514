// Offload (DESIGN.md §4 offload, offload+full; §5 copy streams) on the hand-worked chain of
// tests/test_protocol.cpp: n one-op blocks, block i saves its B-byte input x(i). The test device
// runs an op in exactly its bytes at 1 byte/ns (no FLOPs, no launch overhead), so a forward op of
// F bytes takes F ns, a backward node T ns, and one copy of x(i) over the host link C = B / link ns.
//
// Hand derivation, blocks 0..n-2 offloaded, block n-1 stored, --prefetch 1:
//   x(i)'s copy out starts when block i has saved it, at (i+1)F, and ends C later; with C <= F the
//   device-to-host stream never falls behind. The backward starts at nF (the loss costs nothing):
//   block n-1's backward fetches block n-2, whose copy back starts at nF (its copy out ended at
//   (n-1)F + C <= nF) and arrives at nF + C. Block n-2's backward may start at nF + T: it waits
//   max(0, C - T). It fetches block n-3 at its start; the host-to-device stream is free from
//   nF + C, so each further block waits the same max(0, C - T). Total stall: (n-1) max(0, C - T),
//   the excess copy time per offloaded block, and none at all when C <= T.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "fixtures.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"

using namespace sim;

namespace {

constexpr int64_t kB = 1'000'000;  // bytes per block input
constexpr int64_t kF = 2'000'000;  // forward op: 2 ms
constexpr int64_t kT = 1'000'000;  // backward node: 1 ms

// The link that copies one block input in `c_ns`.
double link_for(int64_t c_ns) { return static_cast<double>(kB) * 1e9 / static_cast<double>(c_ns); }

Device unit_device(double link_bytes_per_s) {
  Device d = fixtures::h100();
  d.hbm_bytes_per_s = 1e9;  // 1 byte per ns
  d.memory_efficiency = 1.0;
  d.launch_overhead_ns = 0;
  d.host_link_bytes_per_s = link_bytes_per_s;
  return d;
}

Graph timed_chain(int64_t n, int64_t prefetch = 1) {
  Graph g = build_chain_graph(n, kB);
  g.prefetch = prefetch;
  for (Op& op : g.ops) {
    if (op.block < 0) continue;
    op.fwd.bytes = kF;
    op.bwd.bytes = kT;
  }
  return g;
}

Plan offload_all_but_last(int64_t n) {
  return resolve(parse_strategy("custom:offload@0-" + std::to_string(n - 2) + "+none@" +
                                std::to_string(n - 1)),
                 n);
}

}  // namespace

TEST_CASE("offload: no stall when the copy back hides behind a block's backward (C <= T)") {
  const int64_t n = 6;
  const Graph g = timed_chain(n);
  const Device d = unit_device(link_for(kT));  // C = T
  const Result none = simulate_plan(g, resolve(parse_strategy("none"), n), d);
  const Result off = simulate_plan(g, offload_all_but_last(n), d);
  CHECK(off.offload_stall_ns == 0);
  CHECK(off.step_time_ns == none.step_time_ns);
  CHECK(off.offload_bytes == (n - 1) * kB);   // x0..x(n-2), each once
  CHECK(off.pinned_host_bytes == (n - 1) * kB);  // all out before the first comes back
  CHECK(off.peak_allocated_bytes < none.peak_allocated_bytes);
  CHECK(off.end_bytes == off.baseline_bytes);
}

TEST_CASE("offload: a slow link stalls each offloaded block by its excess copy time") {
  const int64_t n = 6;
  const Graph g = timed_chain(n);
  for (int64_t c : {1'500'000, 2'000'000}) {  // C = 1.5 ms and 2 ms, both <= F
    CAPTURE(c);
    const Device d = unit_device(link_for(c));
    const Result none = simulate_plan(g, resolve(parse_strategy("none"), n), d);
    const Result off = simulate_plan(g, offload_all_but_last(n), d);
    CHECK(off.offload_stall_ns == (n - 1) * (c - kT));
    CHECK(off.step_time_ns == none.step_time_ns + (n - 1) * (c - kT));
  }
}

TEST_CASE("offload: prefetching two blocks ahead hides what one block ahead cannot") {
  // C = 1.5 ms > T = 1 ms: one block ahead stalls; two blocks ahead give each copy 2T.
  const int64_t n = 6;
  const Device d = unit_device(link_for(1'500'000));
  const Result one = simulate_plan(timed_chain(n, 1), offload_all_but_last(n), d);
  const Result two = simulate_plan(timed_chain(n, 2), offload_all_but_last(n), d);
  CHECK(one.offload_stall_ns > 0);
  CHECK(two.offload_stall_ns < one.offload_stall_ns);
  CHECK(two.peak_allocated_bytes >= one.peak_allocated_bytes);  // more back on the device at once
}

TEST_CASE("offload: a device buffer is not released before its copy to the host completes") {
  // A link so slow that no copy out completes during the step: every buffer stays on the device
  // until its backward takes it back as it is, so memory is exactly that of `none`.
  const int64_t n = 6;
  const Graph g = timed_chain(n);
  const Device d = unit_device(1.0);
  const Result none = simulate_plan(g, resolve(parse_strategy("none"), n), d);
  const Result off = simulate_plan(g, offload_all_but_last(n), d);
  CHECK(off.peak_allocated_bytes == none.peak_allocated_bytes);
  CHECK(off.offload_stall_ns == 0);
  // And with a fast link the same plan holds less: the buffers went to the host.
  const Result fast = simulate_plan(g, offload_all_but_last(n), unit_device(1e15));
  CHECK(fast.peak_allocated_bytes < none.peak_allocated_bytes);
  CHECK(fast.activation_bytes_per_block[0] == 0);  // x0 is on the host at the end of forward
}

TEST_CASE("offload+full: block inputs wait on the host, recompute as full") {
  const int64_t n = 6;
  const Graph g = timed_chain(n);
  const Device d = unit_device(1e15);
  const Result full = simulate_plan(g, resolve(parse_strategy("full"), n), d);
  const Result off = simulate_plan(g, resolve(parse_strategy("offload+full"), n), d);
  CHECK(off.recompute_time_ns == full.recompute_time_ns);
  CHECK(off.offload_bytes == n * kB);  // every block's checkpointed input
  for (int64_t b = 0; b + 1 < n; ++b) CHECK(off.activation_bytes_per_block[b] == 0);
  CHECK(full.activation_bytes_per_block[0] == kB);
  CHECK(off.peak_allocated_bytes <= full.peak_allocated_bytes);
}

TEST_CASE("offload on a GPT-2 block stack: less device memory, pinned host bytes reported") {
  TrainSetup s;
  s.micro_batch = 4;
  s.seq = 1024;
  const ModelConfig m = fixtures::gpt2_small();
  Device fast = fixtures::h100();
  fast.host_link_bytes_per_s = 1e15;
  auto run = [&](const char* st, const Device& d) { return simulate(m, s, d, parse_strategy(st)); };
  const Result none = run("none", fast);
  const Result off = run("offload", fast);
  const Result offf = run("offload+full", fast);
  const Result full = run("full", fast);
  CHECK(off.pinned_host_bytes > 0);
  CHECK(off.offload_bytes >= off.pinned_host_bytes);
  CHECK(off.activation_bytes_per_layer < none.activation_bytes_per_layer);
  CHECK(off.peak_allocated_bytes < none.peak_allocated_bytes);
  CHECK(off.fwd_flops == none.fwd_flops);
  CHECK(off.recompute_flops == 0);
  CHECK(offf.recompute_flops == full.recompute_flops);
  CHECK(offf.activation_bytes_per_layer < full.activation_bytes_per_layer);
  CHECK(off.end_bytes == off.baseline_bytes);
  // Over the H100's 50 GB/s a block's saved tensors take longer to copy than its backward runs:
  // compute stalls, and the last blocks' buffers are still on the device when forward ends.
  const Result slow = run("offload", fixtures::h100());
  CHECK(slow.offload_stall_ns > 0);
  CHECK(slow.step_time_ns == none.step_time_ns + slow.offload_stall_ns);
  CHECK(slow.activation_bytes_per_block.front() < none.activation_bytes_per_block.front());
  CHECK(slow.activation_bytes_per_block.back() == none.activation_bytes_per_block.back());
}

TEST_CASE("offload+full, reentrant: a segment output replayed while its old buffer is copied") {
  // polish: Korthikanti's profile checkpoints reentrantly (Megatron's CheckpointFunction), so
  // segment i's backward replays its forward and makes its output x(i+1) again, after segment
  // i+1's backward freed the x(i+1) that offload+full sent to the host and brought back. On a
  // slow link that buffer's copy to the host has not ended: as in PyTorch (save_on_cpu packed
  // from the old tensor; the replay's output is a new tensor), both buffers are alive until the
  // copy stream lets the old one go. The engine stopped here ("storage allocated twice").
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup s = fixtures::paper(1, false);
  s.micro_batch = 2;
  s.seq = 128;
  Device slow = fixtures::h100();
  slow.host_link_bytes_per_s = 1e9;
  Device instant = slow;  // every copy ends as it starts: nothing outlives its kFree
  instant.host_link_bytes_per_s = 1e30;
  instant.launch_overhead_ns = 0;
  for (const AllocatorKind a : {AllocatorKind::kExact, AllocatorKind::kCaching}) {
    s.allocator = a;
    CAPTURE(static_cast<int>(a));
    const Graph g = build_graph(m, s, slow);
    REQUIRE(recompute_mode(g) == RecomputeMode::kReentrant);
    const Plan plan = resolve(parse_strategy("offload+full"), g.n_blocks);
    const Schedule sched = build_schedule(g, plan, recompute_mode(g));
    SimOptions o;
    o.record_timeline = true;
    const Result r = run_engine(g, sched, slow, o);
    const Result ref = run_engine(g, sched, instant, o);
    CHECK(r.end_bytes == r.baseline_bytes);
    CHECK(ref.copy_releases.empty());
    CHECK(r.offload_bytes == ref.offload_bytes);
    // Per event, the most the ledger held (the exact bytes; allocated under the caching model).
    auto most = [&](const Result& x) {
      std::vector<int64_t> v(sched.events.size() + 1, 0);
      for (const MemorySample& p : x.timeline)
        v[p.event_index] = std::max(v[p.event_index], p.allocated_bytes);
      return v;
    };
    const std::vector<int64_t> slow_most = most(r), ref_most = most(ref);
    // A slow copy only keeps buffers longer.
    for (size_t k = 0; k < slow_most.size(); ++k) {
      CAPTURE(k);
      CHECK(slow_most[k] >= ref_most[k]);
    }
    // The replays that make a storage again before its old buffer's copy ended: at each, the old
    // buffer is held beside the new one.
    int replays = 0;
    for (const Result::CopyRelease& c : r.copy_releases) {
      if (c.taken_back) continue;
      for (int32_t k = 0; k < c.event; ++k) {
        const Event& e = sched.events[k];
        if (e.kind != EventKind::kRecompute || k < sched.forward_end) continue;
        const IdxRange out = g.ops[e.id].outputs;
        if (std::find(g.begin(out), g.end(out), c.storage) == g.end(out)) continue;
        bool freed_before = false;  // the schedule freed the storage since its prefetch
        for (int32_t j = sched.forward_end; j < k; ++j)
          freed_before |= sched.events[j].kind == EventKind::kFree && sched.events[j].id == c.storage;
        if (!freed_before) continue;
        ++replays;
        CAPTURE(k);
        CHECK(slow_most[k] >= ref_most[k] + g.storages[c.storage].bytes);
      }
    }
    CHECK(replays > 0);
  }
}

TEST_CASE("offload strategies parse, print and resolve") {
  CHECK(parse_strategy("offload").canonical() == "offload");
  CHECK(parse_strategy("offload+full").canonical() == "offload+full");
  const Strategy c = parse_strategy("custom:offload@0-1+offload-full@2-3+none@4");
  CHECK(c.canonical() == "custom:offload@0-1+offload-full@2-3+none@4");
  const Plan p = resolve(c, 5);
  CHECK(p.mode[0] == BlockMode::kOffload);
  CHECK(p.mode[2] == BlockMode::kCheckpoint);
  REQUIRE(p.segments.size() == 2);
  CHECK(p.segments[0].offload_inputs);
  CHECK_THROWS_AS(parse_strategy("offload:2"), ConfigError);
}
