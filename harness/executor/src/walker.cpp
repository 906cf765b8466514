// The schedule walker: the executor's own account of one step, held against the schedule event by
// event (see executor.hpp). It derives the recompute regions from the plan as DESIGN.md §4 defines
// them (a second implementation beside sim/src/schedule.cpp, on purpose: the two must agree).
#include <algorithm>
#include <string>
#include <vector>

#include "executor/executor.hpp"
#include "sim/error.hpp"
#include "sim/simulate.hpp"

namespace executor {

using sim::Exec;
using sim::Graph;
using sim::Op;

std::vector<int32_t> backward_reads(const Graph& g, int32_t op) {
  const sim::OpArgs& a = g.args[op];
  std::vector<int32_t> r;
  auto in = [&](int k) { r.push_back(a.in[k].storage); };
  auto out = [&](int k) { r.push_back(a.out[k].storage); };
  switch (a.exec) {
    case Exec::kLinear:
      // exec11: x for the weight's gradient, the weight for x's (a frozen weight has none)
      if (a.in[1].mode != sim::GradMode::kNone) in(0);
      if (a.in[0].mode != sim::GradMode::kNone) in(1);
      break;
    case Exec::kQk: {
      int next = 1;
      if (a.dim[5] & 1) out(next++); else in(0);
      // exec10: a broadcast k copy is the last output (an autocast cast may come before it)
      if (a.dim[5] & 4) out(a.n_out - 1); else if (a.dim[5] & 2) out(next); else in(1);
      break;
    }
    case Exec::kAv:
      in(0);
      if (a.dim[5] & 4) out(a.n_out - 1); else if (a.dim[5] & 2) out(1); else in(1);
      break;
    case Exec::kMask: in(1); break;
    case Exec::kSoftmax: out(0); break;
    case Exec::kDropout: out(1); break;
    case Exec::kRope: in(1); break;
    case Exec::kFlash: in(0), in(1), in(2), out(0), out(1); break;
    case Exec::kLayerNorm:
      in(0), in(1);
      if (a.dim[3]) out(1);
      break;
    case Exec::kMeanSq: in(0); break;
    case Exec::kRsqrt: out(0); break;
    case Exec::kRowScale: case Exec::kColScale: case Exec::kMul:
      // exec11: each operand for the other's gradient (a frozen norm weight takes none)
      if (a.in[1].mode != sim::GradMode::kNone) in(0);
      if (a.in[0].mode != sim::GradMode::kNone) in(1);
      break;
    case Exec::kGelu: case Exec::kSilu: in(0); break;
    case Exec::kLogSoftmax: out(0); break;
    case Exec::kNll: in(1), out(1); break;
    case Exec::kVocabCe: out(0), in(1); break;
    case Exec::kEmbedding: in(0); break;
    case Exec::kIndexSplit: out(3); break;  // exec10: IndexBackward0 keeps its indices
    case Exec::kNone: case Exec::kBatch: case Exec::kRopeTables: case Exec::kCast:
    case Exec::kCopy: case Exec::kRepeatKv: case Exec::kSplit: case Exec::kAdd:
    case Exec::kScale: case Exec::kAdditiveMask: case Exec::kMaskAdd: case Exec::kShiftRows:
    case Exec::kHeld:
      break;
    case Exec::kNf4Linear: in(1); break;
    case Exec::kComplexRope: in(1); break;  // exec11: MulBackward0 keeps freqs_cis
    case Exec::kComplexRopeTables: case Exec::kCat: break;  // exec11: the packed weight (persistent), for x's gradient
    // exec12: pow keeps self, tanh its result, masked_fill its bool condition
    case Exec::kPow: in(0); break;
    case Exec::kTanh: out(0); break;
    case Exec::kMaskedFill: in(1); break;
    case Exec::kMemEfficient:  // q, k, v, out, lse and the attn_bias, as the kernel saves them
      in(0), in(1), in(2), out(0), out(1);
      if (a.n_in > 3) in(3);
      break;
    case Exec::kAddScalar: case Exec::kEqZero: break;
    // exec12: the MoE router and HF's loop over experts (what each backward node keeps)
    case Exec::kTopK: out(1); break;             // TopkBackward0: the indices
    case Exec::kDivInPlace: in(1), out(1); break;  // DivBackward0: other and the original self
    case Exec::kGatherRows: in(1); break;        // IndexBackward0: top_x
    case Exec::kGatherWeight: in(1), in(2); break;  // IndexBackward0: top_x and the slots
    case Exec::kIndexAdd: in(2); break;          // IndexAddBackward0: top_x
    case Exec::kRowSum: case Exec::kOneHot: case Exec::kWhere: break;
    // exec13: TE's rmsnorm_bwd reads x, gamma and the fp32 rsigma (save_for_backward)
    case Exec::kTeRmsNorm: in(0), in(1), out(1); break;
    case Exec::kSigmoid: out(0); break;  // SigmoidBackward0: its result
    case Exec::kGateMul:  // MulBackward0: each operand for the other's gradient
      if (a.in[1].mode != sim::GradMode::kNone) in(0);
      if (a.in[0].mode != sim::GradMode::kNone) in(1);
      break;
    // exec14: Megatron's fused MLA rope: both autograd functions save_for_backward(cos, sin) only
    case Exec::kMlaRopeTables: break;
    case Exec::kMlaRopeQ: in(1); break;
    case Exec::kMlaRopeKv: in(2); break;
    case Exec::kSwiglu: in(0); break;  // feat14: SwiGLUFunction saves its [n, 2f] input
  }
  return r;
}

std::vector<int64_t> forced_counts(const Graph& g, int32_t topk_op) {
  const sim::OpArgs& t = g.args[static_cast<size_t>(topk_op)];
  std::vector<int64_t> c(static_cast<size_t>(t.dim[1]), 0);
  for (size_t i = static_cast<size_t>(topk_op) + 1; i < g.args.size(); ++i) {
    const sim::OpArgs& a = g.args[i];
    if (a.exec == Exec::kTopK) break;
    if (a.exec == Exec::kWhere && a.dim[2] >= 0 && a.dim[2] < t.dim[1])
      c[static_cast<size_t>(a.dim[2])] = a.dim[3];
  }
  return c;
}

namespace {

enum class RegionKind : uint8_t { kCheckpoint, kSelective, kSac };

struct Region {
  RegionKind kind = RegionKind::kCheckpoint;
  int32_t first = 0, last = 0;
  int32_t stop = -1;             // last op replayed: the last that saves (non-reentrant) or all
  int32_t trigger = -1;          // the backward node before which the replay runs
  std::vector<int32_t> inputs;   // storages made before `first` and read inside
  bool reentrant = false;  // replays the whole region and keeps its output (sim schedule.cpp)
  bool offload_inputs = false;  // execreg: offload+full: the inputs wait on the host
};

std::string describe_storage(const Graph& g, int32_t s) {
  const sim::Storage& st = g.storages[s];
  std::string out = "storage " + std::to_string(s) + " (";
  if (st.block >= 0) out += "block " + std::to_string(st.block) + " ";
  return out + st.role + ", " + std::to_string(st.bytes) + " B)";
}

std::string describe_op(const Graph& g, int32_t i) {
  const Op& op = g.ops[i];
  std::string out = "op " + std::to_string(i) + " (";
  if (op.block >= 0) out += "block " + std::to_string(op.block) + " ";
  return out + op.name + ")";
}

std::string describe_event(const sim::Event& e) {
  switch (e.kind) {
    case sim::EventKind::kForward: return "forward of op " + std::to_string(e.id);
    case sim::EventKind::kRecompute: return "recompute of op " + std::to_string(e.id);
    case sim::EventKind::kBackward: return "backward of op " + std::to_string(e.id);
    case sim::EventKind::kFree: return "free of storage " + std::to_string(e.id);
    case sim::EventKind::kOptimizer: return "optimizer step";
    case sim::EventKind::kOffload: return "copy to host of storage " + std::to_string(e.id);
    case sim::EventKind::kPrefetch: return "copy to device of storage " + std::to_string(e.id);
  }
  return "?";
}

class Walker {
 public:
  Walker(const Graph& g, const sim::Plan& plan, const sim::Schedule& sched, Backend& b,
         const std::vector<sim::Result::CopyRelease>* copies)
      : g_(g), plan_(plan), sched_(sched), be_(b),
        reentrant_(sim::recompute_mode(g) == sim::RecomputeMode::kReentrant) {
    // execreg (issue 10): offload plans run with a host pool (plan_offload below); where the
    // copies to the host ended is the simulator's time model's (StepOptions::copy_releases).
    bool offloads = false;
    for (sim::BlockMode m : plan.mode) offloads |= m == sim::BlockMode::kOffload;
    for (const sim::Segment& sg : plan.segments) offloads |= sg.offload_inputs;
    if (offloads && copies == nullptr)
      throw sim::Unsupported("--strategy", "strategy",
                             "executing an offload plan without the simulator's copy ends "
                             "(StepOptions::copy_releases)");
    const size_t n = g.storages.size();
    refs_.assign(n, 0);
    live_.assign(n, 0);
    persistent_.assign(n, 0);
    pending_.assign(n, 0);
    autocast_.assign(n, 0);
    step_end_.assign(n, 0);
    slot_refs_.assign(n, 0);
    slots_.assign(n, 0);
    for (int32_t s : g.persistent) persistent_[s] = 1;
    for (int32_t s : g.autocast_cached) autocast_[s] = 1;
    for (int32_t s : g.forward_held) autocast_[s] = 1;  // hfimpl: the forward's returned logits
    for (int32_t s : g.step_end_frees) step_end_[s] = 1;
    // A gradient storage is referenced once by every tensor whose gradient slot it is (an
    // output of the op that made the tensor), and freed when the last of them is consumed.
    for (const sim::OpArgs& a : g.args)
      for (int k = 0; k < a.n_out; ++k)
        if (a.out[k].grad >= 0) ++slot_refs_[a.out[k].grad];
    saves_held_.assign(g.ops.size(), 0);
    sac_held_.assign(g.ops.size(), 0);
    make_regions();
    if (offloads) plan_offload(*copies);
  }

  StepResult run() {
    for (int32_t s : g_.persistent) {
      be_.allocate(s, g_.storages[s].bytes);
      live_[s] = 1;
      total_ += g_.storages[s].bytes;
    }
    be_.initialize_persistent();
    res_.baseline_bytes = total_;
    const int32_t n_ops = static_cast<int32_t>(g_.ops.size());
    for (int32_t i = 0; i < n_ops; ++i) forward(i);
    drain(sched_.forward_end);
    if (cursor_ != sched_.forward_end)
      fail("the schedule's forward pass ends at event " + std::to_string(sched_.forward_end) +
           ", the executor's at event " + std::to_string(cursor_));
    for (int32_t s : g_.autocast_cached) release(s);  // autocast's cache is cleared on exit
    for (int32_t s : g_.forward_held) release(s);  // hfimpl: the model's forward has returned
    next_fetch_ = static_cast<int32_t>(g_.n_blocks) - 1;  // execreg: offload's prefetch
    fetch_through(static_cast<int32_t>(g_.n_blocks - g_.prefetch));
    for (int32_t i = n_ops - 1; i >= 0; --i) {
      const int32_t r = region_of_[i];
      // execreg: a block's storages come back `prefetch` blocks ahead of its backward
      if (g_.ops[i].block >= 0 && (g_.ops[i].has_backward || (r >= 0 && regions_[r].trigger == i)))
        fetch_through(g_.ops[i].block - static_cast<int32_t>(g_.prefetch));
      if (r >= 0 && regions_[r].trigger == i) recompute(regions_[r]);
      if (g_.ops[i].has_backward) backward(i);
      if (r >= 0 && regions_[r].first == i) close(regions_[r]);
    }
    expect(sim::EventKind::kOptimizer, -1);
    be_.scratch(g_.optimizer_transient_bytes);
    sample(g_.optimizer_transient_bytes);
    be_.optimizer(res_);
    be_.release_scratch();
    ++cursor_;
    for (int32_t s : g_.step_end_frees)
      if (live_[s]) release(s);
    drain();
    if (cursor_ != static_cast<int32_t>(sched_.events.size()))
      fail("the schedule has events after the step ends: " + describe_event(sched_.events[cursor_]));
    release_copied(cursor_);  // execreg: copies still running when the step's events end
    if (next_release_ < releases_.size())
      fail("the simulator releases a copied buffer after the step's end");
    if (host_bytes_ != 0) fail("host copies outlive the step");
    res_.end_bytes = total_;
    if (total_ != res_.baseline_bytes)
      fail("live bytes did not return to the baseline after the step");
    return std::move(res_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ExecutionError("executor: at schedule event " + std::to_string(cursor_) + ": " + what);
  }

  void make_regions() {
    region_of_.assign(g_.ops.size(), -1);
    auto add = [&](RegionKind kind, int32_t first, int32_t last) {
      Region r;
      r.kind = kind;
      r.first = first;
      r.last = last;
      for (int32_t i = first; i <= last; ++i) {
        const Op& op = g_.ops[i];
        if (op.has_backward && op.saves.count > 0) r.stop = i;
        for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s)
          if (g_.storages[*s].producer < first &&
              std::find(r.inputs.begin(), r.inputs.end(), *s) == r.inputs.end())
            r.inputs.push_back(*s);
      }
      if (r.stop < 0) return;  // nothing saved inside: nothing to recompute, nothing held
      // SAC is torch's non-reentrant API only (as sim/src/schedule.cpp make_regions).
      r.reentrant = reentrant_ && kind != RegionKind::kSac;
      if (r.reentrant) {
        // Megatron's CheckpointFunction: its backward runs before any node of the segment and
        // replays all of it.
        r.trigger = last;
        while (r.trigger > first && !g_.ops[r.trigger].has_backward) --r.trigger;
        r.stop = last;
      } else {
        r.trigger = r.stop;  // torch.utils.checkpoint(use_reentrant=False): the first unpack
      }
      const int32_t id = static_cast<int32_t>(regions_.size());
      for (int32_t i = first; i <= last; ++i) region_of_[i] = id;
      regions_.push_back(std::move(r));
    };
    for (const sim::Segment& s : plan_.segments) {
      const sim::IdxRange a = g_.block_ops[s.first], b = g_.block_ops[s.last];
      const size_t before = regions_.size();
      add(RegionKind::kCheckpoint, a.begin, b.begin + b.count - 1);
      if (regions_.size() > before) regions_.back().offload_inputs = s.offload_inputs;  // execreg
    }
    for (size_t blk = 0; blk < plan_.mode.size(); ++blk) {
      const sim::IdxRange r = g_.block_ops[blk];
      if (plan_.mode[blk] == sim::BlockMode::kSacMm) {
        add(RegionKind::kSac, r.begin, r.begin + r.count - 1);
      } else if (plan_.mode[blk] == sim::BlockMode::kSelective) {
        int32_t first = -1, last = -1;
        for (int32_t i = r.begin; i < r.begin + r.count; ++i)
          if (g_.ops[i].core_attention) {
            if (first < 0) first = i;
            last = i;
          }
        if (first >= 0) add(RegionKind::kSelective, first, last);
      }
    }
  }

  // kFree events the schedule has here: each must free a storage whose count has reached zero.
  // `limit`: stop there (the end of the forward pass, where autocast's cache lets go).
  void drain(int32_t limit = -1) {
    const auto& ev = sched_.events;
    const int32_t end = limit >= 0 ? std::min(limit, static_cast<int32_t>(ev.size()))
                                   : static_cast<int32_t>(ev.size());
    while (cursor_ < end && ev[cursor_].kind == sim::EventKind::kFree) {
      const int32_t s = ev[cursor_].id;
      if (s < 0 || s >= static_cast<int32_t>(g_.storages.size())) fail("free of an unknown storage");
      if (!pending_[s]) {
        if (live_[s])
          fail("the schedule frees " + describe_storage(g_, s) + " while the executor holds " +
               std::to_string(refs_[s]) + " reference(s) to it");
        fail("the schedule frees " + describe_storage(g_, s) + ", which is not live");
      }
      pending_[s] = 0;
      --n_pending_;
      ++cursor_;
    }
    if (n_pending_ > 0) {
      for (size_t s = 0; s < pending_.size(); ++s)
        if (pending_[s])
          fail("the executor's last reference to " + describe_storage(g_, static_cast<int32_t>(s)) +
               " is gone but the schedule does not free it here (next: " +
               (cursor_ < static_cast<int32_t>(ev.size()) ? describe_event(ev[cursor_]) : "end") + ")");
    }
  }

  // The next event must be this one (after the frees due before it).
  uint8_t expect(sim::EventKind kind, int32_t id) {
    drain();
    release_copied(cursor_);  // execreg: as the engine, at the event's start
    sim::Event want{kind, 0, id};
    if (cursor_ >= static_cast<int32_t>(sched_.events.size()))
      fail("the schedule ends where the executor expects the " + describe_event(want));
    const sim::Event& e = sched_.events[cursor_];
    if (e.kind != kind || (kind != sim::EventKind::kOptimizer && e.id != id))
      fail("the schedule has the " + describe_event(e) + " where the executor expects the " +
           describe_event(want));
    return e.flags;
  }

  void hold(int32_t s) {
    if (persistent_[s]) return;
    if (!live_[s]) fail("a reference is taken to " + describe_storage(g_, s) + ", which is not live");
    ++refs_[s];
  }
  void release(int32_t s) {
    if (persistent_[s]) return;
    if (refs_[s] <= 0) fail("reference count of " + describe_storage(g_, s) + " below zero");
    if (--refs_[s] == 0) die(s);
  }
  void settle(int32_t s) {
    if (live_[s] && refs_[s] == 0 && !persistent_[s]) die(s);
  }
  // The count reached zero: the buffer goes now, and the schedule must free it next.
  // execreg: unless its copy to the host is still running (release_copied, fetch_through).
  void die(int32_t s) {
    if (!out_host_.empty() && (release_at_[s] >= 0 || (out_host_[s] && taken_back_[s]))) {
      in_flight_[s] = 1;
    } else {
      be_.release(s);
      total_ -= g_.storages[s].bytes;
    }
    live_[s] = 0;
    pending_[s] = 1;
    ++n_pending_;
  }
  void make(int32_t s, int32_t refs) {
    if (live_[s]) fail(describe_storage(g_, s) + " is made again while live");
    if (pending_[s]) fail(describe_storage(g_, s) + " is made again before the schedule freed it");
    // polish: made again (a reentrant replay's segment output) while its old buffer waits on its
    // copy to the host, as the engine's detach: the old buffer's bytes stay until the simulator's
    // copy end, and the new buffer is the storage's (no copy reads it: it goes at its kFree).
    if (!in_flight_.empty() && in_flight_[s]) {
      be_.release(s);  // nothing reads the old buffer again (its host copy was made at the offload)
      in_flight_[s] = 0;
      release_at_[s] = -1;
      detached_[s] = 1;
    }
    be_.allocate(s, g_.storages[s].bytes);
    live_[s] = 1;
    refs_[s] = refs;
    total_ += g_.storages[s].bytes;
  }
  void require_live(int32_t s, int32_t op, const char* what) {
    if (!live_[s])
      fail("the " + std::string(what) + " of " + describe_op(g_, op) + " reads " +
           describe_storage(g_, s) + ", which has been freed");
  }

  // The engine's sample: live storages plus the transients of the running event.
  void sample(int64_t transient) {
    release_copied(cursor_);  // execreg
    const int64_t live = total_ + transient;
    if (live > res_.peak_bytes) {
      res_.peak_bytes = live;
      res_.peak_event_index = cursor_;
      switch (sched_.events[cursor_].kind) {
        case sim::EventKind::kRecompute: res_.peak_phase = sim::Phase::kRecompute; break;
        case sim::EventKind::kBackward: res_.peak_phase = sim::Phase::kBackward; break;
        case sim::EventKind::kOptimizer: res_.peak_phase = sim::Phase::kOptimizer; break;
        case sim::EventKind::kPrefetch: res_.peak_phase = sim::Phase::kBackward; break;
        case sim::EventKind::kForward: case sim::EventKind::kFree: case sim::EventKind::kOffload:
          res_.peak_phase = sim::Phase::kForward;
          break;
      }
    }
  }

  bool active(int32_t i) const { return region_of_[i] >= 0; }

  // execreg (issue 10): offload, derived again from the plan as DESIGN.md §4 defines it (beside
  // sim/src/schedule.cpp plan_offload, on purpose). A storage waits on the host when the device
  // holds it only for saves of `offload` blocks (group: the highest such block) or as an input of
  // offload+full regions only (group: the region's last block); what the training loop holds to
  // the step's end stays. Each storage is copied once; its holds are taken again on its return.
  void plan_offload(const std::vector<sim::Result::CopyRelease>& copies) {
    const size_t n = g_.storages.size();
    group_.assign(n, -1);
    std::vector<uint8_t> kept(n, 0);
    for (int32_t i = 0; i < static_cast<int32_t>(g_.ops.size()); ++i) {
      if (active(i)) continue;  // saves of recomputed ops are not held
      const Op& op = g_.ops[i];
      const bool off = op.block >= 0 && plan_.mode[op.block] == sim::BlockMode::kOffload;
      for (const int32_t* p = g_.begin(op.saves); p != g_.end(op.saves); ++p) {
        if (!off || g_.storages[*p].producer < 0) kept[*p] = 1;
        else group_[*p] = std::max(group_[*p], op.block);
      }
    }
    for (const Region& reg : regions_)
      for (int32_t s : reg.inputs) {
        if (!reg.offload_inputs || g_.storages[s].producer < 0 || group_[s] >= 0) kept[s] = 1;
        else group_[s] = g_.ops[reg.last].block;
      }
    for (int32_t s : g_.step_end_frees) kept[s] = 1;
    members_.assign(static_cast<size_t>(g_.n_blocks), {});
    deferred_.assign(static_cast<size_t>(g_.n_blocks), {});
    for (size_t s = 0; s < n; ++s) {
      if (kept[s]) group_[s] = -1;
      if (group_[s] >= 0) members_[group_[s]].push_back(static_cast<int32_t>(s));
    }
    out_host_.assign(n, 0);
    in_flight_.assign(n, 0);
    detached_.assign(n, 0);  // polish
    release_at_.assign(n, -1);
    taken_back_.assign(n, 0);
    for (const sim::Result::CopyRelease& c : copies) {
      if (c.storage < 0 || static_cast<size_t>(c.storage) >= n || group_[c.storage] < 0)
        fail("the simulator's copy ends name storage " + std::to_string(c.storage) +
             ", which the executor does not offload");
      // At most: taken back at its prefetch while its copy ran, then freed again before that
      // copy ended (the engine keeps the buffer the copy reads), then released.
      if (release_at_[c.storage] >= 0 || (taken_back_[c.storage] && c.taken_back))
        fail("the simulator's copy ends name " + describe_storage(g_, c.storage) +
             " twice in an order the executor does not know");
      if (c.taken_back) {
        taken_back_[c.storage] = 1;
      } else {
        release_at_[c.storage] = c.event;
        releases_.push_back(c);
      }
    }
  }
  bool offloaded(int32_t s) const { return !group_.empty() && group_[s] >= 0; }

  // The save's hold waits on the host with its group; the copy starts at the first such save.
  // `holder` is for the reader only (the walker's holds are counts).
  void offload_save(int32_t s, int32_t holder) {
    (void)holder;
    if (!out_host_[s]) {
      expect(sim::EventKind::kOffload, s);
      if (!live_[s]) fail("the copy to the host reads " + describe_storage(g_, s) + ", which is not live");
      be_.copy_to_host(s);
      out_host_[s] = 1;
      const int64_t bytes = g_.storages[s].bytes;
      res_.offload_bytes += bytes;
      host_bytes_ += bytes;
      res_.host_peak_bytes = std::max(res_.host_peak_bytes, host_bytes_);
      ++cursor_;
    }
    deferred_[group_[s]].push_back(s);
  }

  // Device buffers whose copy to the host ran past their kFree go when the simulator's copy
  // stream says it ended (before the sample of event `k`).
  void release_copied(int32_t k) {
    while (next_release_ < releases_.size() && releases_[next_release_].event <= k) {
      const int32_t s = releases_[next_release_++].storage;
      if (detached_[s]) {  // polish: the old buffer of a storage made again (make)
        detached_[s] = 0;
        total_ -= g_.storages[s].bytes;
        continue;
      }
      if (!in_flight_[s])
        fail("the simulator releases " + describe_storage(g_, s) +
             " after its copy to the host, which the executor has not let go");
      in_flight_[s] = 0;
      release_at_[s] = -1;
      be_.release(s);
      total_ -= g_.storages[s].bytes;
    }
  }

  // Copies back the storages of blocks next_fetch_ down to `block` (the schedule's prefetch):
  // each is allocated on the device and filled from its host copy (or, when its copy out was
  // still running, used as it is), then its deferred holds are taken.
  void fetch_through(int32_t block) {
    if (group_.empty()) return;
    for (; next_fetch_ >= 0 && next_fetch_ >= block; --next_fetch_) {
      for (int32_t s : members_[next_fetch_]) {
        if (!out_host_[s]) continue;
        expect(sim::EventKind::kPrefetch, s);
        if (live_[s]) fail("the prefetch of " + describe_storage(g_, s) + " finds it live");
        const int64_t bytes = g_.storages[s].bytes;
        host_bytes_ -= bytes;
        live_[s] = 1;
        refs_[s] = 0;
        out_host_[s] = 0;
        if (taken_back_[s]) {
          if (!in_flight_[s])
            fail("the simulator uses " + describe_storage(g_, s) +
                 " as it is on the device, which the executor has released");
          in_flight_[s] = 0;
          taken_back_[s] = 0;
          be_.drop_host_copy(s);
        } else {
          if (in_flight_[s]) fail(describe_storage(g_, s) + " comes back while still on the device");
          be_.copy_to_device(s);
          total_ += bytes;
          sample(0);
        }
        ++cursor_;
      }
      for (int32_t s : deferred_[next_fetch_]) hold(s);
    }
  }

  void forward(int32_t i) {
    const Op& op = g_.ops[i];
    const int32_t r = region_of_[i];
    if (r >= 0 && regions_[r].first == i)  // the checkpoint keeps its inputs for the replay
      for (int32_t s : regions_[r].inputs) {
        if (offloaded(s)) offload_save(s, -1 - r);  // execreg: offload+full
        else hold(s);
      }
    expect(sim::EventKind::kForward, i);
    for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s)
      make(*s, g_.initial_uses[*s] + autocast_[*s] + step_end_[*s]);
    run_forward(i, op);
    if (!active(i)) {
      hold_saves(i, true);
    } else if (regions_[r].kind == RegionKind::kSac && sac_keeps(op)) {
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) hold(*s);
      sac_held_[i] = 1;
    }
    for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s) release(*s);
    for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) settle(*s);
  }

  void run_forward(int32_t i, const Op& op) {
    for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s)
      require_live(*s, i, "forward");
    be_.scratch(op.fwd_transient_bytes);
    sample(op.fwd_transient_bytes);
    be_.forward(i);
    be_.release_scratch();
    ++cursor_;
  }

  // execreg: `forward`: saves of offloaded storages go to the host instead (offload_save)
  void hold_saves(int32_t i, bool forward = false) {
    const Op& op = g_.ops[i];
    for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s) {
      if (forward && offloaded(*s)) offload_save(*s, i);
      else hold(*s);
    }
    saves_held_[i] = 1;
  }

  // Forward uses of storage s by the replay's ops after i.
  int32_t replay_uses(int32_t s, int32_t i, int32_t stop) const {
    const sim::IdxRange cr = g_.consumers[s];
    const int32_t* b = g_.begin(cr);
    const int32_t* e = g_.end(cr);
    return static_cast<int32_t>(std::upper_bound(b, e, stop) - std::upper_bound(b, e, i));
  }

  void recompute(const Region& reg) {
    for (int32_t i = reg.first; i <= reg.stop; ++i) {
      const Op& op = g_.ops[i];
      const bool cached = reg.kind == RegionKind::kSac && sac_keeps(op);
      const uint8_t flags = expect(sim::EventKind::kRecompute, i);
      if (((flags & sim::kCachedOutput) != 0) != cached)
        fail("the schedule's recompute of " + describe_op(g_, i) +
             (cached ? " does not use" : " uses") + " the SAC cache, the executor's plan " +
             (cached ? "does" : "does not"));
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) {
        // Reentrant: the replayed segment's output is kept until the segment's backward ends.
        const int32_t uses = replay_uses(*s, i, reg.stop) + (reg.reentrant && outside(reg, *s) ? 1 : 0);
        if (cached) {
          for (int32_t k = 0; k < uses; ++k) hold(*s);
        } else {
          make(*s, uses);
        }
      }
      if (cached) {
        ++cursor_;  // the cache hands its outputs over: nothing runs, nothing is sampled
      } else {
        run_forward(i, op);
      }
      hold_saves(i);
      if (cached) {
        for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) release(*s);
        sac_held_[i] = 0;
      }
      for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s) {
        const int32_t p = g_.storages[*s].producer;
        if (p >= reg.first && p <= reg.stop) release(*s);
      }
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) settle(*s);
    }
  }

  void backward(int32_t i) {
    const Op& op = g_.ops[i];
    const sim::OpArgs& a = g_.args[i];
    expect(sim::EventKind::kBackward, i);
    for (const int32_t* s = g_.begin(op.bwd_allocs); s != g_.end(op.bwd_allocs); ++s)
      make(*s, slot_refs_[*s] + step_end_[*s]);
    // Every read must be of a tensor this node saved, still live; gradients must be live.
    const std::vector<int32_t> reads = backward_reads(g_, i);
    for (int32_t s : reads) {
      if (persistent_[s]) continue;
      const int32_t* b = g_.begin(op.saves);
      const int32_t* e = g_.end(op.saves);
      if (std::find(b, e, s) == e)
        fail("the backward of " + describe_op(g_, i) + " reads " + describe_storage(g_, s) +
             ", which it did not save");
      require_live(s, i, "backward");
    }
    for (int k = 0; k < a.n_out; ++k)
      if (a.out[k].grad >= 0) require_live(a.out[k].grad, i, "backward (output gradient)");
    for (int k = 0; k < a.n_in; ++k) {
      const sim::TensorRef& r = a.in[k];
      if (r.mode == sim::GradMode::kAccum) {
        require_live(r.grad, i, "backward (accumulation target)");
        // In place into a buffer another tensor's slot still shares would change that gradient.
        if (slots_[r.grad] > 1)
          fail("the backward of " + describe_op(g_, i) + " accumulates into " +
               describe_storage(g_, r.grad) + ", shared with another pending gradient");
      }
    }
    const int64_t tr = op.bwd_transient_bytes + op.bwd_accum_bytes;
    be_.scratch(tr);
    sample(tr);
    be_.backward(i, reads);
    be_.release_scratch();
    ++cursor_;
    for (int k = 0; k < a.n_in; ++k)
      if (a.in[k].mode == sim::GradMode::kWrite || a.in[k].mode == sim::GradMode::kAlias)
        ++slots_[a.in[k].grad];
    for (int k = 0; k < a.n_out; ++k)
      if (a.out[k].grad >= 0) --slots_[a.out[k].grad];
    if (saves_held_[i]) {
      for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s) release(*s);
      saves_held_[i] = 0;
    }
    for (int k = 0; k < a.n_out; ++k)
      if (a.out[k].grad >= 0) release(a.out[k].grad);
  }

  // Storage s has a forward consumer after the region.
  bool outside(const Region& reg, int32_t s) const {
    const sim::IdxRange cr = g_.consumers[s];
    return cr.count > 0 && g_.idx[cr.begin + cr.count - 1] > reg.last;
  }

  void close(const Region& reg) {
    for (int32_t s : reg.inputs) release(s);
    if (reg.reentrant)
      for (int32_t j = reg.first; j <= reg.last; ++j) {
        const Op& o = g_.ops[j];
        for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s)
          if (live_[*s] && outside(reg, *s)) release(*s);
      }
    if (reg.kind == RegionKind::kSac)  // cached outputs never replayed (after the stop)
      for (int32_t j = reg.first; j <= reg.last; ++j)
        if (sac_held_[j]) {
          const Op& o = g_.ops[j];
          for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s) release(*s);
          sac_held_[j] = 0;
        }
  }

  const Graph& g_;
  // Whether a SAC region keeps this op's outputs (the plan's policy: sac:mm or sac:torchtitan).
  bool sac_keeps(const Op& op) const {
    return plan_.sac_torchtitan ? op.sac_save_torchtitan : op.sac_save;
  }

  const sim::Plan& plan_;
  const sim::Schedule& sched_;
  Backend& be_;
  bool reentrant_ = false;  // the paper profile's recompute (sim::RecomputeMode::kReentrant)
  std::vector<Region> regions_;
  std::vector<int32_t> region_of_;
  std::vector<int32_t> refs_, slot_refs_;
  std::vector<int32_t> slots_;  // tensors whose gradient slot a storage is, right now
  std::vector<uint8_t> live_, persistent_, pending_, autocast_, step_end_, saves_held_, sac_held_;
  int32_t n_pending_ = 0;
  int32_t cursor_ = 0;
  // execreg: offload (empty unless the plan offloads): per storage its group block (-1: stays
  // on the device), per block its storages and the holds taken when they come back; per storage
  // whether it waits on the host, whether its device buffer outlives its kFree (the copy still
  // running), the event the simulator released it at or whether its prefetch took it back.
  std::vector<int32_t> group_;
  std::vector<std::vector<int32_t>> members_, deferred_;
  std::vector<uint8_t> out_host_, in_flight_, taken_back_;
  std::vector<uint8_t> detached_;  // polish: an old buffer of the storage awaits its copy end
  std::vector<int32_t> release_at_;
  std::vector<sim::Result::CopyRelease> releases_;
  size_t next_release_ = 0;
  int32_t next_fetch_ = -1;
  int64_t host_bytes_ = 0;
  int64_t total_ = 0;
  StepResult res_;
};

}  // namespace

void Backend::copy_to_host(int32_t) {
  throw sim::Unsupported("--strategy", "strategy", "executing an offload plan (this backend has no host pool)");
}
void Backend::copy_to_device(int32_t) {
  throw sim::Unsupported("--strategy", "strategy", "executing an offload plan (this backend has no host pool)");
}
void Backend::drop_host_copy(int32_t) {
  throw sim::Unsupported("--strategy", "strategy", "executing an offload plan (this backend has no host pool)");
}

StepResult run_step(const Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                    Backend& backend) {
  return run_step(graph, plan, schedule, backend, nullptr);
}

StepResult run_step(const Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                    Backend& backend, const std::vector<sim::Result::CopyRelease>* copies) {
  if (graph.args.size() != graph.ops.size())
    throw sim::Unsupported("<graph>", "args", "executing a graph not built by build_graph_exec");
  if (graph.tp > 1 || graph.dp > 1)
    throw sim::Unsupported("--tp/--dp", "parallelism", "executing more than one rank");
  // execreg (issue 10): deepspeed-bf16 and fsdp2-bf16 run at one rank. DeepSpeed's bf16 module
  // and its .grad are the graph's; its fp32 master partition is optimizer state the step does
  // not run. FSDP2's fp32 shards are read as their bf16 copies (cpu_backend.cpp compute_copy),
  // its gradients reduced into the fp32 partitioned buffer (GradMode::kMainGrad).
  // inductor (issue 10): a compiled block's backward reads tensors it recomputes from the cut
  if (graph.compiled)
    throw sim::Unsupported("--compile", "compile",
                           "executing torch.compile's partitioned blocks (the executor runs eager "
                           "code)");
  for (const sim::Op& op : graph.ops) {
    if (op.fp8)
      throw sim::Unsupported("--fp8", "fp8", "executing fp8 linears (no executor kernels)");
    // fp8sac (issue 10): a compiled SAC region keeps some outputs of an op and not others
    if (op.sac_mm_outputs >= 0 || op.sac_tt_always_output >= 0)
      throw sim::Unsupported("--compile", "compile",
                             "executing a compiled SAC region (the executor runs eager code)");
  }
  // exec14 (issue 10): Megatron's fused MLA q rope rotates the q projection's output in place
  // (_FusedMLARoPEInplace, a Triton kernel writing through the pointer: no mark_dirty, no version
  // bump). A save-matmuls SAC block caches that output at forward, already rotated when the
  // recompute takes it back, and the replayed rope rotates it a second time: the step's
  // gradients are not those of the model. Refused rather than run either way.
  for (size_t i = 0; i < graph.args.size(); ++i) {
    const int64_t b = graph.ops[i].block;
    if (graph.args[i].exec == Exec::kMlaRopeQ && b >= 0 &&
        static_cast<size_t>(b) < plan.mode.size() && plan.mode[b] == sim::BlockMode::kSacMm)
      throw sim::Unsupported("--strategy", "strategy",
                             "executing a save-matmuls SAC block over Megatron's in-place MLA q "
                             "rope (the cached q projection output is rotated in place at forward "
                             "and would be rotated again by the replay)");
  }
  // Ops of an implementation variant with no kernel here (exec12: SDPA's memory-efficient
  // kernel, the MoE router and dispatch, ...) are refused by name rather than run approximately.
  // exec11: the first such op, then every other distinct name (one line), so one run lists what
  // a configuration lacks.
  // exec12: HF's loop sizes each expert's gathered tokens by the simulator's assumed counts
  // (sim/src/blocks_moe.cpp expert_tokens, --moe-imbalance); a real top-k routes by the data.
  // exec13: the executor forces those counts (forced_counts); it cannot where they are not a
  // routing: an expert with more than the n tokens, or counts not summing to n k.
  for (size_t i = 0; i < graph.args.size(); ++i) {
    const sim::OpArgs& a = graph.args[i];
    if (a.exec != Exec::kTopK || a.dim[3] != 1) continue;
    const std::vector<int64_t> c = forced_counts(graph, static_cast<int32_t>(i));
    int64_t sum = 0, most = 0;
    for (int64_t x : c) sum += x, most = std::max(most, x);
    if (most > a.dim[0] || sum != a.dim[0] * a.dim[2])
      throw sim::Unsupported("--moe-imbalance", "moe_imbalance",
                             "executing top-" + std::to_string(a.dim[2]) + " routing of " +
                                 std::to_string(a.dim[0]) + " tokens with " +
                                 std::to_string(most) + " on the hottest expert and " +
                                 std::to_string(sum) +
                                 " in all (the executor forces the graph's counts per expert, "
                                 "which must be a routing: at most one per token and expert)");
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < graph.args.size(); ++i)
    if (graph.args[i].exec == Exec::kNone &&
        std::find(missing.begin(), missing.end(), graph.ops[i].name) == missing.end())
      missing.emplace_back(graph.ops[i].name);
  if (!missing.empty()) {
    std::string what = "executing op \"" + missing[0] + "\"";
    for (size_t k = 1; k < missing.size(); ++k)
      what += std::string(k == 1 ? " (also \"" : ", \"") + missing[k] + "\"";
    if (missing.size() > 1) what += ")";
    throw sim::Unsupported("--impl", "impl",
                           what + " (no executor kernel for this implementation's variant)");
  }
  return Walker(graph, plan, schedule, backend, copies).run();
}

StepResult run_cpu(const Graph& graph, const sim::Plan& plan, const sim::Schedule& schedule,
                   const StepOptions& options) {
  auto backend = make_cpu_backend(graph, options);
  return run_step(graph, plan, schedule, *backend,
                  options.has_copy_releases ? &options.copy_releases : nullptr);
}

}  // namespace executor
