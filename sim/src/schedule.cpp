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
  bool offload_inputs = false;   // offload+full: the inputs wait on the host, not the device
  bool reentrant = false;        // replays the whole region, keeping its output (RecomputeMode)
  int32_t last_block = -1;       // block of `last` (whose backward first needs the region)
  std::vector<int32_t> inputs;   // storages made before the region and read in it
};

std::vector<Region> make_regions(const Graph& g, const Plan& plan, RecomputeMode mode) {
  std::vector<Region> regions;
  auto add = [&](RegionKind kind, int32_t first, int32_t last, bool offload_inputs = false) {
    Region r;
    r.kind = kind;
    r.first = first;
    r.last = last;
    r.offload_inputs = offload_inputs;
    r.last_block = g.ops[last].block;
    for (int32_t i = first; i <= last; ++i) {
      const Op& op = g.ops[i];
      if (op.has_backward && op.saves.count > 0) r.stop = i;
      for (const int32_t* s = g.begin(op.inputs); s != g.end(op.inputs); ++s)
        if (g.storages[*s].producer < first) r.inputs.push_back(*s);
    }
    std::sort(r.inputs.begin(), r.inputs.end());
    r.inputs.erase(std::unique(r.inputs.begin(), r.inputs.end()), r.inputs.end());
    if (r.stop < 0) return;  // nothing saved: nothing to recompute
    // Selective activation checkpointing is torch's non-reentrant API only
    // (torch/utils/checkpoint.py: create_selective_checkpoint_contexts needs use_reentrant=False).
    r.reentrant = mode == RecomputeMode::kReentrant && kind != RegionKind::kSac;
    if (!r.reentrant) {
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
    add(RegionKind::kCheckpoint, a.begin, b.begin + b.count - 1, s.offload_inputs);
  }
  for (int64_t blk = 0; blk < static_cast<int64_t>(plan.mode.size()); ++blk) {
    const IdxRange r = g.block_ops[blk];
    if (plan.mode[blk] == BlockMode::kSacMm) {
      add(RegionKind::kSac, r.begin, r.begin + r.count - 1);
    } else if (plan.mode[blk] == BlockMode::kSelective) {
      // One region per core attention: a block with two (famenc: T5's decoder blocks, self- and
      // cross-attention) gets two, split where a linear (a projection) lies between them.
      int32_t first = -1, last = -1;
      for (int32_t i = r.begin; i < r.begin + r.count; ++i) {
        if (first >= 0 && g.ops[i].kind == OpKind::kLinear) {
          add(RegionKind::kSelective, first, last);
          first = last = -1;
        }
        if (g.ops[i].core_attention) {
          if (first < 0) first = i;
          last = i;
        }
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
      : g_(g), stop_at_(stop_at), sac_torchtitan_(plan.sac_torchtitan),
        regions_(make_regions(g, plan, mode)),
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
    for (int32_t s : g.forward_held) cached_[s] = 2;  // hfimpl: the forward's return value
    step_end_.assign(n, 0);
    for (int32_t s : g.step_end_frees) step_end_[s] = true;
    if (tracking()) holders_.assign(n, {});
    plan_offload(plan);
  }

  Schedule run() {
    forward();
    out_.forward_end = static_cast<int32_t>(out_.events.size());
    for (int32_t s : g_.autocast_cached) release(s, {Holder::kAutocastCache, -1});
    for (int32_t s : g_.forward_held) release(s, {Holder::kForwardReturn, -1});  // hfimpl
    next_fetch_ = static_cast<int32_t>(g_.n_blocks) - 1;
    fetch_through(static_cast<int32_t>(g_.n_blocks - g_.prefetch));
    backward();
    // ds3: what the backward's end releases (DeepSpeed's IPG buffer at stage 2)
    for (int32_t s : g_.backward_end_frees)
      if (live_[s]) release(s, {Holder::kPersistent, -1});
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

  // Offload (DESIGN.md §4): which storages wait on the host, and for which block. A storage
  // qualifies when the device holds it only for the offloaded saves: saved solely by ops of
  // `offload` blocks (group: the highest such block, whose backward needs it first), or an input of
  // offload+full regions only (group: the region's last block). Anything else a storage is kept
  // for (a save outside offloaded blocks, an ordinary checkpoint) keeps it on the device. Each
  // storage is copied once, whatever the number of saves (storage identity, DESIGN.md §3).
  void plan_offload(const Plan& plan) {
    bool any = false;
    for (BlockMode m : plan.mode) any |= m == BlockMode::kOffload;
    for (const Segment& sg : plan.segments) any |= sg.offload_inputs;
    if (!any) return;
    const size_t n = g_.storages.size();
    group_.assign(n, -1);
    std::vector<uint8_t> kept(n, 0);
    for (int32_t i = 0; i < static_cast<int32_t>(g_.ops.size()); ++i) {
      const Op& op = g_.ops[i];
      const int32_t r = region_of_[i];
      if (r >= 0 && regions_[r].stop >= 0) continue;  // saves of recomputed ops are not held
      const bool off = op.block >= 0 && plan.mode[op.block] == BlockMode::kOffload;
      for (const int32_t* p = g_.begin(op.saves); p != g_.end(op.saves); ++p) {
        if (!off || g_.storages[*p].producer < 0) kept[*p] = 1;
        else group_[*p] = std::max(group_[*p], op.block);
      }
    }
    for (const Region& reg : regions_) {
      if (reg.stop < 0) continue;
      for (int32_t sid : reg.inputs) {
        if (!reg.offload_inputs || g_.storages[sid].producer < 0 || group_[sid] >= 0) kept[sid] = 1;
        else group_[sid] = reg.last_block;
      }
    }
    // What the training loop (or the autograd graph) holds to the step's end stays on the device
    // (feat: PEFT's input embeddings under LoRA are also block 0's norm input).
    for (int32_t sid : g_.step_end_frees) kept[sid] = 1;
    members_.assign(static_cast<size_t>(g_.n_blocks), {});
    for (size_t sid = 0; sid < n; ++sid) {
      if (kept[sid]) group_[sid] = -1;
      if (group_[sid] < 0) continue;
      members_[group_[sid]].push_back(static_cast<int32_t>(sid));
    }
  }
  bool offloaded(int32_t s) const { return !group_.empty() && group_[s] >= 0; }
  // The device copy is released once its forward uses end; the engine keeps the buffer until the
  // copy to the host completes. The holds it skips now are taken again when it comes back.
  void offload_save(int32_t s, Holder h) {
    if (!out_host_[s]) {
      out_host_[s] = 1;
      emit(EventKind::kOffload, s);
    }
    deferred_[group_[s]].push_back({s, h});
  }
  // Copies back the storages of blocks next_fetch_ down to `block` (DESIGN.md §4 prefetch).
  void fetch_through(int32_t block) {
    if (group_.empty()) return;
    for (; next_fetch_ >= 0 && next_fetch_ >= block; --next_fetch_) {
      for (int32_t s : members_[next_fetch_]) {
        if (!out_host_[s]) continue;
        if (live_[s]) throw std::logic_error("schedule: prefetch of a storage still on the device");
        emit(EventKind::kPrefetch, s);
        live_[s] = 1;
        count_[s] = 0;
        if (tracking()) holders_[s].clear();
      }
      for (const auto& [s, h] : deferred_[next_fetch_]) hold(s, h);
      sampled();
    }
  }

  void forward() {
    if (!group_.empty()) {
      out_host_.assign(g_.storages.size(), 0);
      deferred_.assign(static_cast<size_t>(g_.n_blocks), {});
    }
    for (int32_t s : g_.persistent) live_[s] = 1;  // baseline, never freed by the schedule
    for (int32_t i = 0; i < static_cast<int32_t>(g_.ops.size()); ++i) {
      const Op& op = g_.ops[i];
      const int32_t r = region_of_[i];
      if (r >= 0 && i == regions_[r].first && regions_[r].stop >= 0)
        for (int32_t s : regions_[r].inputs) {
          const Holder h{Holder::kCheckpointInput, regions_[r].first};
          if (offloaded(s)) offload_save(s, h);
          else hold(s, h);
        }
      emit(EventKind::kForward, i);
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s) {
        made(*s, g_.initial_uses[*s]);
        if (cached_[*s]) hold(*s, {cached_[*s] == 2 ? Holder::kForwardReturn : Holder::kAutocastCache, -1});
        if (step_end_[*s]) hold(*s, {Holder::kPersistent, -1});
      }
      sampled();
      const bool in_region = r >= 0 && regions_[r].stop >= 0;
      if (!in_region) {
        for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s) {
          if (offloaded(*s)) offload_save(*s, {Holder::kSavedBy, i});
          else hold(*s, {Holder::kSavedBy, i});
        }
      } else if (regions_[r].kind == RegionKind::kSac) {
        int k = 0;  // fp8sac: per output (Op::sac_mm_outputs, sac_tt_always_output)
        for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s, ++k)
          if (sac_caches(op, k)) hold(*s, {Holder::kSacCache, i});
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
      const bool cached_op = reg.kind == RegionKind::kSac && sac_keeps(op);
      emit(EventKind::kRecompute, i,
           static_cast<uint8_t>((cached_op ? kCachedOutput : 0) |
                                (sac_torchtitan_ ? kSacTorchtitan : 0)));
      int k = 0;  // fp8sac: an op's outputs are cached one by one (sac_caches)
      bool any_cached = false;
      for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s, ++k) {
        const bool cached = reg.kind == RegionKind::kSac && sac_caches(op, k);
        any_cached = any_cached || cached;
        const IdxRange cr = g_.consumers[*s];
        const int32_t* cb = g_.begin(cr);
        const int32_t* ce = g_.end(cr);
        int32_t uses = static_cast<int32_t>(std::upper_bound(cb, ce, reg.stop) -
                                            std::upper_bound(cb, ce, i));
        // Reentrant: the segment's output is kept until the segment's backward ends.
        if (reg.reentrant && consumed_outside(reg, *s)) ++uses;
        if (cached) {
          for (int32_t u = 0; u < uses; ++u) hold(*s, {Holder::kForwardUse, -1});
        } else {
          made(*s, uses);
        }
      }
      sampled();
      for (const int32_t* s = g_.begin(op.saves); s != g_.end(op.saves); ++s)
        hold(*s, {Holder::kSavedBy, i});
      if (any_cached) {  // the cache hands its outputs to the replay (after they are saved again)
        k = 0;
        for (const int32_t* s = g_.begin(op.outputs); s != g_.end(op.outputs); ++s, ++k)
          if (sac_caches(op, k)) release(*s, {Holder::kSacCache, i});
      }
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
      if (op.block >= 0 && (op.has_backward || (in_region && i == regions_[r].trigger)))
        fetch_through(op.block - static_cast<int32_t>(g_.prefetch));
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
            int k = 0;  // fp8sac
            for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s, ++k)
              if (sac_caches(o, k) && live_[*s]) release(*s, {Holder::kSacCache, j});
          }
        }
        if (reg.reentrant) {
          for (int32_t j = reg.first; j <= reg.last; ++j) {
            const Op& o = g_.ops[j];
            for (const int32_t* s = g_.begin(o.outputs); s != g_.end(o.outputs); ++s)
              if (live_[*s] && consumed_outside(reg, *s)) release(*s, {Holder::kForwardUse, -1});
          }
        }
      }
    }
  }

  // Whether a SAC region keeps this op's outputs (the plan's policy: sac:mm or sac:torchtitan).
  bool sac_keeps(const Op& op) const {
    return sac_torchtitan_ ? op.sac_save_torchtitan : op.sac_save;
  }
  // fp8sac (issue 10): whether the policy caches output k of the op: the matmul's outputs as
  // sac_keeps says; torchtitan's always-kept output (eager amax's abs) under sac:torchtitan;
  // the others (fp8 casts) never.
  bool sac_caches(const Op& op, int k) const {
    return sac_cached_output(op, k, sac_keeps(op), sac_torchtitan_);
  }

  const Graph& g_;  // the mode lives in regions_ (Region::reentrant)
  int32_t stop_at_;
  bool sac_torchtitan_ = false;  // Plan::sac_torchtitan
  std::vector<Region> regions_;
  std::vector<int32_t> region_of_;
  std::vector<int32_t> count_;
  std::vector<uint8_t> live_, cached_, step_end_;
  std::vector<std::vector<Holder>> holders_;
  // Offload (empty unless the plan offloads): per storage its group block (-1: stays on the
  // device); per block its storages and the holds to take
  // when they come back; storages copied out; the next block to fetch.
  std::vector<int32_t> group_;
  std::vector<uint8_t> out_host_;
  std::vector<std::vector<int32_t>> members_;
  std::vector<std::vector<std::pair<int32_t, Holder>>> deferred_;
  int32_t next_fetch_ = -1;
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
