// Builds the event list of one step under a plan (DESIGN.md §3 event protocol, §4 strategies) by
// reference counting every storage: forward uses, saved-by edges, checkpoint holds, the SAC cache,
// autocast's weight-cast cache and the training loop's own references. A storage is freed (a kFree
// event) at the instant its count reaches zero.
#include <algorithm>
#include <stdexcept>
#include <cstdint>
#include <vector>

#include "sim/schedule.hpp"
#include "workspace.hpp"

namespace sim {
namespace {

enum class RegionKind : uint8_t { kCheckpoint, kSelective, kSac };

// Ops [first, last] recomputed as one unit.
struct Region {
  RegionKind kind = RegionKind::kCheckpoint;
  int32_t first = 0, last = 0;
  int32_t stop = -1;     // last op that saves anything (non-reentrant early stop)
  int32_t trigger = -1;  // backward node before which the recompute runs
  std::vector<int32_t> inputs;   // storages made before the region and read in it
};

std::vector<Region> make_regions(const Graph& g, const Plan& plan, RecomputeMode mode) {
  std::vector<Region> regions;
  auto add = [&](RegionKind kind, int32_t first, int32_t last) {
    Region r;
    r.kind = kind;
    r.first = first;
    r.last = last;
    for (int32_t i = first; i <= last; ++i) {
      const Op& op = g.ops[i];
      if (op.has_backward && op.saves.count > 0) r.stop = i;
      for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s)
        if (g.storages[*s].producer < first) r.inputs.push_back(*s);
    }
    std::sort(r.inputs.begin(), r.inputs.end());
    r.inputs.erase(std::unique(r.inputs.begin(), r.inputs.end()), r.inputs.end());
    if (r.stop < 0) return;  // nothing saved: nothing to recompute
    if (mode == RecomputeMode::kNonReentrant) {
      r.trigger = r.stop;  // recompute on the first unpack of a saved tensor
    } else {
      r.trigger = last;    // CheckpointFunction.backward runs before any node of the segment
      while (r.trigger > first && !g.ops[r.trigger].has_backward) --r.trigger;
      r.stop = last;       // reentrant replays the whole segment
    }
    regions.push_back(std::move(r));
  };
  for (const Segment& s : plan.segments) {
    const IdxRange a = g.block_ops[s.first], b = g.block_ops[s.last];
    add(RegionKind::kCheckpoint, a.begin, b.begin + b.count - 1);
  }
  for (int64_t blk = 0; blk < static_cast<int64_t>(plan.mode.size()); ++blk) {
    const IdxRange r = g.block_ops[blk];
    if (plan.mode[blk] == BlockMode::kSacMm) {
      add(RegionKind::kSac, r.begin, r.begin + r.count - 1);
    } else if (plan.mode[blk] == BlockMode::kSelective) {
      int32_t first = -1, last = -1;
      for (int32_t i = r.begin; i < r.begin + r.count; ++i)
        if (g.ops[i].core_attention) {
          if (first < 0) first = i;
          last = i;
        }
      if (first >= 0) add(RegionKind::kSelective, first, last);
    }
  }
  std::sort(regions.begin(), regions.end(),
            [](const Region& a, const Region& b) { return a.first < b.first; });
  return regions;
}

class Scheduler {
 public:
  // `scratch` and `reuse`, when given, lend their vectors' capacity for the run (Workspace);
  // they get them back, emptied or holding the schedule, when the scheduler is done.
  Scheduler(const Graph& g, const Plan& plan, RecomputeMode mode, int32_t stop_at,
            ScheduleScratch* scratch = nullptr, Schedule* reuse = nullptr)
      : g_(g), mode_(mode), stop_at_(stop_at), regions_(make_regions(g, plan, mode)),
        scratch_(scratch) {
    if (scratch_) {
      region_of_.swap(scratch_->region_of);
      count_.swap(scratch_->count);
      live_.swap(scratch_->live);
      cached_.swap(scratch_->cached);
      step_end_.swap(scratch_->step_end);
    }
    if (reuse) {
      out_.events.swap(reuse->events);
      out_.events.clear();
    }
    const size_t n = g.storages.size();
    count_.assign(n, 0);
    live_.assign(n, 0);
    // forward + backward + frees of every storage, plus recompute: reserve to avoid regrowth
    out_.events.reserve(g.ops.size() * 5 + n);
    region_of_.assign(g.ops.size(), -1);
    for (int32_t r = 0; r < static_cast<int32_t>(regions_.size()); ++r)
      for (int32_t i = regions_[r].first; i <= regions_[r].last; ++i) region_of_[i] = r;
    cached_.assign(n, 0);
    for (int32_t s : g.autocast_cached) cached_[s] = true;
    step_end_.assign(n, 0);
    for (int32_t s : g.step_end_frees) step_end_[s] = true;
    if (tracking()) holders_.assign(n, {});
  }

  Schedule run() {
    forward();
    out_.forward_end = static_cast<int32_t>(out_.events.size());
    for (int32_t s : g_.autocast_cached) release(s, {Holder::kAutocastCache, -1});
    backward();
    emit(EventKind::kOptimizer, -1);
    sampled();
    for (int32_t s : g_.step_end_frees)
      if (live_[s]) release(s, {Holder::kPersistent, -1});
    return std::move(out_);
  }

  ~Scheduler() {
    if (!scratch_) return;
    region_of_.swap(scratch_->region_of);
    count_.swap(scratch_->count);
    live_.swap(scratch_->live);
    cached_.swap(scratch_->cached);
    step_end_.swap(scratch_->step_end);
  }
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::vector<std::vector<Holder>> snapshot;  // filled at event stop_at when tracking

 private:
  bool tracking() const { return stop_at_ >= 0; }

  void emit(EventKind kind, int32_t id, uint8_t flags = 0) {
    out_.events.push_back({kind, flags, id});
  }
  // The engine samples the peak right after an event's allocations; the explanation is taken at
  // the same point, before anything the event releases.
  void sampled() {
    if (!tracking() || static_cast<int32_t>(out_.events.size()) - 1 != stop_at_) return;
    snapshot.assign(g_.storages.size(), {});
    for (size_t s = 0; s < g_.storages.size(); ++s) {
      if (!live_[s]) continue;
      if (!holders_[s].empty()) {
        snapshot[s] = holders_[s];
      } else if (g_.storages[s].producer < 0) {
        snapshot[s] = {{Holder::kPersistent, -1}};
      } else {
        snapshot[s] = {{Holder::kGradSlot, g_.storages[s].producer}};
      }
    }
  }

  void hold(int32_t s, Holder h) {
    ++count_[s];
    if (tracking()) holders_[s].push_back(h);
  }
  void release(int32_t s, Holder h) {
    if (tracking()) {
      auto& v = holders_[s];
      auto it = std::find_if(v.begin(), v.end(),
                             [&](const Holder& x) { return x.kind == h.kind && (h.op < 0 || x.op == h.op); });
      if (it != v.end()) v.erase(it);
    }
    if (--count_[s] == 0) free_storage(s);
  }
  void free_storage(int32_t s) {
    live_[s] = 0;
    emit(EventKind::kFree, s);
  }
  // A storage made by an op: alive from now, held by its uses; freed at once if nothing holds it.
  void made(int32_t s, int32_t uses) {
    if (live_[s]) throw std::logic_error("schedule: storage made twice while alive");
    live_[s] = 1;
    count_[s] = 0;
    if (tracking()) holders_[s].clear();
    for (int32_t k = 0; k < uses; ++k) hold(s, {Holder::kForwardUse, -1});
  }
  void settle(int32_t s) {
    if (live_[s] && count_[s] == 0) free_storage(s);
  }

  void forward() {
    for (int32_t s : g_.persistent) live_[s] = 1;  // baseline, never freed by the schedule
    for (int32_t i = 0; i < static_cast<int32_t>(g_.ops.size()); ++i) {
      const Op& op = g_.ops[i];
      const int32_t r = region_of_[i];
      if (r >= 0 && i == regions_[r].first && regions_[r].stop >= 0)
        for (int32_t s : regions_[r].inputs) hold(s, {Holder::kCheckpointInput, regions_[r].first});
      emit(EventKind::kForward, i);
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) {
        made(*s, g_.initial_uses[*s]);
        if (cached_[*s]) hold(*s, {Holder::kAutocastCache, -1});
        if (step_end_[*s]) hold(*s, {Holder::kPersistent, -1});
      }
      sampled();
      const bool in_region = r >= 0 && regions_[r].stop >= 0;
      if (!in_region) {
        for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s)
          hold(*s, {Holder::kSavedBy, i});
      } else if (regions_[r].kind == RegionKind::kSac && op.sac_save) {
        for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s)
          hold(*s, {Holder::kSacCache, i});
      }
      for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s)
        release(*s, {Holder::kForwardUse, -1});
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) settle(*s);
    }
  }

  // Replays region r's forward ops [first, stop] before the backward of its trigger op.
  void recompute(const Region& reg) {
    // Uses of each storage made in the replay by later replayed ops.
    auto in_replay = [&](int32_t s) {
      int32_t p = g_.storages[s].producer;
      return p >= reg.first && p <= reg.stop;
    };
    for (int32_t i = reg.first; i <= reg.stop; ++i) {
      const Op& op = g_.ops[i];
      const bool cached = reg.kind == RegionKind::kSac && op.sac_save;
      emit(EventKind::kRecompute, i, cached ? kCachedOutput : 0);
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) {
        const IdxRange cr = g_.consumers[*s];
        const int32_t* cb = g_.begin(cr);
        const int32_t* ce = g_.end(cr);
        int32_t uses = static_cast<int32_t>(std::upper_bound(cb, ce, reg.stop) -
                                            std::upper_bound(cb, ce, i));
        // Reentrant: the segment's output is kept until the segment's backward ends.
        if (mode_ == RecomputeMode::kReentrant && consumed_outside(reg, *s)) ++uses;
        if (cached) {
          for (int32_t k = 0; k < uses; ++k) hold(*s, {Holder::kForwardUse, -1});
        } else {
          made(*s, uses);
        }
      }
      sampled();
      for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s)
        hold(*s, {Holder::kSavedBy, i});
      if (cached)  // the cache hands its outputs to the replay (after they are saved again)
        for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s)
          release(*s, {Holder::kSacCache, i});
      for (const int32_t* s = g_.begin(op.inputs); s != g_.end(op.inputs); ++s)
        if (in_replay(*s)) release(*s, {Holder::kForwardUse, -1});
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) settle(*s);
    }
  }

  bool consumed_outside(const Region& reg, int32_t s) const {
    const IdxRange cr = g_.consumers[s];
    return cr.count > 0 && g_.idx[cr.begin + cr.count - 1] > reg.last;
  }

  void backward() {
    for (int32_t i = static_cast<int32_t>(g_.ops.size()) - 1; i >= 0; --i) {
      const Op& op = g_.ops[i];
      const int32_t r = region_of_[i];
      const bool in_region = r >= 0 && regions_[r].stop >= 0;
      if (in_region && i == regions_[r].trigger) recompute(regions_[r]);
      if (op.has_backward) {
        emit(EventKind::kBackward, i);
        for (const int32_t* s = g_.begin(op.bwd_allocs); s != g_.end(op.bwd_allocs); ++s) {
          live_[*s] = 1;
          if (step_end_[*s]) hold(*s, {Holder::kPersistent, -1});
        }
        sampled();
        for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s)
          if (!in_region || i <= regions_[r].stop) release(*s, {Holder::kSavedBy, i});
        for (const int32_t* s = g_.begin(op.bwd_frees); s != g_.end(op.bwd_frees); ++s)
          free_storage(*s);
      }
      if (in_region && i == regions_[r].first) {
        const Region& reg = regions_[r];
        for (int32_t s : reg.inputs) release(s, {Holder::kCheckpointInput, reg.first});
        if (reg.kind == RegionKind::kSac) {  // cached outputs never replayed (after the stop)
          for (int32_t j = reg.stop + 1; j <= reg.last; ++j) {
            const Op& o = g_.ops[j];
            if (!o.sac_save) continue;
            for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s)
              if (live_[*s]) release(*s, {Holder::kSacCache, j});
          }
        }
        if (mode_ == RecomputeMode::kReentrant) {
          for (int32_t j = reg.first; j <= reg.last; ++j) {
            const Op& o = g_.ops[j];
            for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s)
              if (live_[*s] && consumed_outside(reg, *s)) release(*s, {Holder::kForwardUse, -1});
          }
        }
      }
    }
  }

  const Graph& g_;
  RecomputeMode mode_;
  int32_t stop_at_;
  std::vector<Region> regions_;
  std::vector<int32_t> region_of_;
  std::vector<int32_t> count_;
  std::vector<uint8_t> live_, cached_, step_end_;
  std::vector<std::vector<Holder>> holders_;
  Schedule out_;
  ScheduleScratch* scratch_;
};

}  // namespace

Schedule build_schedule(const Graph& graph, const Plan& plan, RecomputeMode mode) {
  return Scheduler(graph, plan, mode, -1).run();
}

void build_schedule(const Graph& graph, const Plan& plan, RecomputeMode mode, Schedule& out,
                    ScheduleScratch& scratch) {
  out = Scheduler(graph, plan, mode, -1, &scratch, &out).run();
}

std::vector<std::vector<Holder>> holders_at(const Graph& graph, const Plan& plan,
                                            RecomputeMode mode, int32_t stop_at) {
  Scheduler s(graph, plan, mode, stop_at);
  s.run();
  return std::move(s.snapshot);
}

}  // namespace sim
