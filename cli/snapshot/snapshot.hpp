// PyTorch CUDA memory snapshots (DESIGN.md §6; issue 14): the JSON python/actsim/snapshot.py
// writes from a snapshot pickle, read and replayed into measured peaks. Contract of the replay:
//
// - requested bytes: alloc adds the entry's size, free_requested removes it. Trace sizes are the
//   requested sizes (c10/cuda/CUDACachingAllocator.cpp records orig_size at ALLOC and
//   block->requested_size at FREE_REQUESTED), so this is PyTorch's requested_bytes.
// - allocated bytes: the same events with each size rounded as round_size does (multiples of
//   kMinBlockSize = 512 B); PyTorch's allocated_bytes also drops at FREE_REQUESTED (free()
//   decreases it before free_block). Blocks the allocator leaves unsplit (a remainder under 512 B
//   of a small block, under 1 MiB of a large one) are bigger than that rounding, and the trace
//   does not say which: this figure is a lower bound of max_memory_allocated, exact for blocks
//   live at the end (the snapshot's segments give their sizes).
// - reserved bytes: segment_alloc / segment_map add the segment's size, segment_free /
//   segment_unmap remove it (max_memory_reserved).
// The trace may start after blocks were allocated (history enabled late, or its ring buffer
// wrapped): a block freed in the trace but never allocated in it, or live in the segments but
// never allocated in the trace, was live from the start; reserved bytes at the start are the
// segments' total minus the trace's net change.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/result.hpp"
#include "sim_io/output.hpp"
#include "sweep.hpp"

namespace actsim_cli {

enum class SnapshotAction : uint8_t {
  kAlloc, kFreeRequested, kFreeCompleted, kSegmentAlloc, kSegmentFree, kSegmentMap,
  kSegmentUnmap, kOom, kSnapshot, kAnnotate
};

struct SnapshotEvent {
  SnapshotAction action = SnapshotAction::kAlloc;
  int64_t addr = 0;
  int64_t size = 0;
  int64_t stream = 0;
  int64_t time_us = -1;  // -1: the snapshot's PyTorch records no times (before 2.1)
  std::string frame;     // deepest user frame "file.py:line:function"; empty: none recorded
  std::string phase;     // forward, backward, optimizer (from the frames); empty: no frames
};

struct SnapshotBlock {  // a block in use at the end (active_allocated or active_awaiting_free)
  int64_t address = 0;
  int64_t size = 0;            // the allocator's block size
  int64_t requested_size = 0;
  bool awaiting_free = false;  // free requested, waiting on another stream
  std::string frame, phase;
};

struct SnapshotDevice {
  int64_t index = 0;
  int64_t reserved_bytes = 0;  // the segments' total_size at the end
  std::vector<SnapshotBlock> live;
  std::vector<SnapshotEvent> trace;
};

struct Snapshot {
  std::string file;    // the pickle it came from
  std::string layout;  // "frames" (PyTorch 2.1+), "history" (2.0 and earlier) or "unknown"
  std::vector<SnapshotDevice> devices;
};

// Parses snapshot.py's JSON (format "actsim-snapshot", version 1). Throws sim::ConfigError
// naming `where` and the field for anything malformed.
Snapshot parse_snapshot_json(std::string_view text, const std::string& where);

// Runs the converter (python3 snapshot.py FILE) and parses its output; a .json file is read as
// the converter's output directly. Throws ConfigError with the converter's one-line message.
Snapshot load_snapshot(const std::string& path);

// PyTorch's round_size (CUDACachingAllocator.cpp): at least kMinBlockSize, in its multiples.
int64_t round_block_size(int64_t bytes);

struct SnapshotPeak {
  int64_t bytes = 0;
  int64_t event = -1;    // index in the trace of the event that reached it; -1: at the start
  int64_t time_us = -1;  // since the trace's first event; -1: no times recorded
  std::string phase, frame;  // of that event
};

struct LiveAtPeak {
  int64_t requested_bytes = 0;
  int64_t allocated_bytes = 0;  // rounded (or the segments' size for blocks live at the end)
  int64_t since_event = -1;     // the alloc event; -1: live before the trace
  std::string frame, phase;
};

// The events whose frames hint at one phase (forward, backward, optimizer; "" without frames).
struct PhaseSpan {
  std::string phase;
  int64_t events = 0;
  int64_t first_event = -1, last_event = -1;
  int64_t first_us = -1, last_us = -1;  // since the trace's first event; -1: no times
  int64_t peak_allocated_bytes = 0;     // the highest allocated bytes after one of its events
};

struct SnapshotPeaks {
  int64_t device = 0;
  int64_t events = 0, allocs = 0, ooms = 0;
  int64_t duration_us = -1;  // last event time - first; -1: no times recorded
  int64_t start_requested_bytes = 0, start_allocated_bytes = 0, start_reserved_bytes = 0;
  int64_t start_blocks = 0;  // blocks live before the trace
  SnapshotPeak requested, allocated, reserved;
  std::vector<LiveAtPeak> at_peak;  // live at the allocated peak, largest first
  std::vector<PhaseSpan> phases;    // in order of first appearance
  std::vector<int64_t> curve;       // allocated bytes right after each trace event (the replay)
};

// Replays one device's trace (the contract above). Throws ConfigError(where, ...) when the trace
// and the segments disagree (reserved bytes below zero at the start).
SnapshotPeaks analyze_snapshot(const SnapshotDevice& device, const std::string& where);

// The device whose trace is read: `wanted` (>= 0), else the first with a trace. Throws
// ConfigError naming --cuda-device, or the file when no device has a trace.
const SnapshotDevice& pick_snapshot_device(const Snapshot& s, int64_t wanted,
                                           const std::string& path);

// (Defined by actsim's CLI, cmd_snapshot.cpp.) The snapshot's row of CSV schema v1: source `snapshot`, the key columns the configuration the
// common flags name, layers/params/params_per_rank from `model_size`, the measured peaks in
// peak_allocated_bytes, peak_requested_bytes and peak_reserved_bytes, peak_phase the allocated
// peak's phase hint; every figure that was not measured empty (Row::peak_only).
sim_io::Row snapshot_row(const cli_common::Axes& axes, const cli_common::Inputs& inputs,
                         const cli_common::Point& point,
                         const sim::Result& model_size, const SnapshotPeaks& peaks);

}  // namespace actsim_cli
