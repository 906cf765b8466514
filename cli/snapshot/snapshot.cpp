#include "snapshot.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "sim/error.hpp"

extern char** environ;

namespace actsim_cli {
namespace {

using nlohmann::json;

const json& member(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key))
    throw sim::ConfigError(where, key, "missing (not the JSON of actsim's snapshot converter)");
  return obj.at(key);
}

int64_t integer(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    throw sim::ConfigError(where, key, "expected a 64-bit integer");
  return v.get<int64_t>();
}

// Sizes are bytes of one GPU: anything beyond 2^56 (64 PiB) is not a real snapshot, and the
// bound keeps rounding and sums of a trace's sizes far from 64-bit overflow (checked anyway).
constexpr int64_t kMaxBytes = int64_t{1} << 56;

int64_t bytes(const json& obj, const char* key, const std::string& where) {
  const int64_t v = integer(obj, key, where);
  if (v < 0 || v > kMaxBytes)
    throw sim::ConfigError(where, key, "expected a byte count in [0, 2^56]");
  return v;
}

void add_bytes(int64_t& total, int64_t v, const std::string& where) {
  if (__builtin_add_overflow(total, v, &total))
    throw sim::ConfigError(where, "size", "the trace's byte counts overflow 64 bits");
}

std::string text(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_string()) throw sim::ConfigError(where, key, "expected a string");
  return v.get<std::string>();
}

const json& array(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_array()) throw sim::ConfigError(where, key, "expected an array");
  return v;
}

SnapshotAction parse_action(const std::string& s, const std::string& where) {
  static const std::map<std::string, SnapshotAction, std::less<>> kActions = {
      {"alloc", SnapshotAction::kAlloc},
      {"free_requested", SnapshotAction::kFreeRequested},
      {"free_completed", SnapshotAction::kFreeCompleted},
      {"segment_alloc", SnapshotAction::kSegmentAlloc},
      {"segment_free", SnapshotAction::kSegmentFree},
      {"segment_map", SnapshotAction::kSegmentMap},
      {"segment_unmap", SnapshotAction::kSegmentUnmap},
      {"oom", SnapshotAction::kOom},
      {"snapshot", SnapshotAction::kSnapshot},
      {"annotate", SnapshotAction::kAnnotate}};
  const auto it = kActions.find(s);
  if (it == kActions.end()) throw sim::ConfigError(where, "action", "unknown action '" + s + "'");
  return it->second;
}

// The converter's folder: beside this executable, or <prefix>/share/actsim when installed.
std::filesystem::path converter_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path bin = ec ? std::filesystem::current_path() : exe.parent_path();
  for (const std::filesystem::path& p :
       {bin / "actsim-snapshot.py", bin / ".." / "share" / "actsim" / "actsim-snapshot.py"}) {
    if (std::filesystem::exists(p, ec)) return p.lexically_normal();
  }
  throw sim::ConfigError("actsim snapshot", "converter",
                         "actsim-snapshot.py is neither beside actsim nor in ../share/actsim");
}

std::string read_fd(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  return out;
}

// Runs `python3 converter FILE`; returns its stdout, or throws its one-line stderr message.
std::string run_converter(const std::string& path) {
  const char* env_python = std::getenv("ACTSIM_PYTHON");
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "python3";
  const std::string converter = converter_path().string();
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe(out_pipe) != 0) throw std::runtime_error("pipe failed");
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
    posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<std::string> args = {python, "-I", converter, path};  // -I: no user site, no cwd
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw sim::ConfigError("actsim snapshot", python,
                           std::string("cannot run the converter's interpreter (") +
                               std::strerror(spawned) + "; set ACTSIM_PYTHON)");
  }
  // The converter writes at most one line to stderr, so stdout is read to its end first.
  std::string out = read_fd(out_pipe[0]);
  std::string err = read_fd(err_pipe[0]);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  std::string line = err.substr(0, err.find('\n'));
  const std::string prefix = path + ": ";
  if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
  if (line.empty()) line = "the converter failed (" + python + " " + converter + ")";
  throw sim::ConfigError(path, "snapshot", line);
}

}  // namespace

Snapshot parse_snapshot_json(std::string_view body, const std::string& where) {
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e999 (the fuzzer's)
    throw sim::ConfigError(where, "json", std::string("not JSON (") + e.what() + ")");
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "actsim-snapshot")
    throw sim::ConfigError(where, "format", "not actsim's snapshot JSON (python/actsim/snapshot.py)");
  if (integer(doc, "version", where) != 1)
    throw sim::ConfigError(where, "version", "unknown version (this actsim reads 1)");
  Snapshot s;
  s.file = text(doc, "file", where);
  s.layout = text(doc, "layout", where);
  for (const json& d : array(doc, "devices", where)) {
    SnapshotDevice dev;
    dev.index = integer(d, "index", where);
    const std::string dw = where + ": devices[" + std::to_string(dev.index) + "]";
    for (const json& seg : array(d, "segments", dw)) {
      add_bytes(dev.reserved_bytes, bytes(seg, "total_size", dw), dw);
    }
    for (const json& b : array(d, "live", dw)) {
      SnapshotBlock block;
      block.address = integer(b, "address", dw);
      block.size = bytes(b, "size", dw);
      block.requested_size = bytes(b, "requested_size", dw);
      const std::string state = text(b, "state", dw);
      if (state != "active_allocated" && state != "active_awaiting_free")
        throw sim::ConfigError(dw, "state", "unknown block state '" + state + "'");
      block.awaiting_free = state == "active_awaiting_free";
      block.frame = text(b, "frame", dw);
      block.phase = text(b, "phase", dw);
      dev.live.push_back(std::move(block));
    }
    for (const json& e : array(d, "trace", dw)) {
      SnapshotEvent ev;
      ev.action = parse_action(text(e, "action", dw), dw);
      ev.addr = integer(e, "addr", dw);
      ev.size = bytes(e, "size", dw);
      ev.stream = integer(e, "stream", dw);
      const json& t = member(e, "time_us", dw);
      ev.time_us = t.is_null() ? -1 : integer(e, "time_us", dw);
      if (ev.time_us < -1 || (!t.is_null() && ev.time_us < 0))
        throw sim::ConfigError(dw, "time_us", "expected a non-negative integer or null");
      ev.frame = text(e, "frame", dw);
      ev.phase = text(e, "phase", dw);
      dev.trace.push_back(std::move(ev));
    }
    s.devices.push_back(std::move(dev));
  }
  return s;
}

Snapshot load_snapshot(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw sim::ConfigError(path, "snapshot", "no such file");
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    return parse_snapshot_json(buf.str(), path);
  }
  return parse_snapshot_json(run_converter(path), path);
}

int64_t round_block_size(int64_t bytes) {
  constexpr int64_t kMinBlockSize = 512;  // c10/cuda/CUDACachingAllocator.cpp
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

SnapshotPeaks analyze_snapshot(const SnapshotDevice& d, const std::string& where) {
  SnapshotPeaks p;
  p.device = d.index;
  p.events = static_cast<int64_t>(d.trace.size());
  int64_t t0 = -1;
  int64_t t_last = -1;
  for (const SnapshotEvent& e : d.trace) {
    if (e.time_us >= 0) {
      if (t0 < 0) t0 = e.time_us;
      t_last = e.time_us;
    }
    if (e.action == SnapshotAction::kAlloc) ++p.allocs;
    if (e.action == SnapshotAction::kOom) ++p.ooms;
  }
  if (t0 >= 0) p.duration_us = t_last - t0;

  // Exact sizes of blocks live at the end, by address (the trace's sizes are requested sizes).
  std::map<int64_t, const SnapshotBlock*> end_blocks;
  for (const SnapshotBlock& b : d.live)
    if (!b.awaiting_free) end_blocks[b.address] = &b;

  // Pass 1: which blocks were live before the trace began.
  std::map<int64_t, LiveAtPeak> live;
  std::map<int64_t, LiveAtPeak> before;
  int64_t net_reserved = 0;
  for (std::size_t i = 0; i < d.trace.size(); ++i) {
    const SnapshotEvent& e = d.trace[i];
    switch (e.action) {
      case SnapshotAction::kAlloc: live[e.addr] = LiveAtPeak{}; break;
      case SnapshotAction::kFreeRequested:
        if (live.erase(e.addr) == 0 && before.count(e.addr) == 0) {
          before[e.addr] = {e.size, round_block_size(e.size), -1, e.frame, e.phase};
        }
        break;
      case SnapshotAction::kSegmentAlloc:
      case SnapshotAction::kSegmentMap: add_bytes(net_reserved, e.size, where); break;
      case SnapshotAction::kSegmentFree:
      case SnapshotAction::kSegmentUnmap: add_bytes(net_reserved, -e.size, where); break;
      default: break;
    }
  }
  for (const auto& [addr, b] : end_blocks) {
    if (live.count(addr) == 0 && before.count(addr) == 0)
      before[addr] = {b->requested_size, b->size, -1, b->frame, b->phase};
  }
  p.start_reserved_bytes = d.reserved_bytes;
  add_bytes(p.start_reserved_bytes, -net_reserved, where);
  if (p.start_reserved_bytes < 0)
    throw sim::ConfigError(where, "segments",
                           "the trace frees more segment bytes than the segments and trace "
                           "allocate (trace and segments from different moments?)");

  // Pass 2: the curves from the start state.
  live = before;
  p.start_blocks = static_cast<int64_t>(before.size());
  int64_t requested = 0;
  int64_t allocated = 0;
  for (const auto& [addr, b] : before) {
    add_bytes(requested, b.requested_bytes, where);
    add_bytes(allocated, b.allocated_bytes, where);
  }
  int64_t reserved = p.start_reserved_bytes;
  p.start_requested_bytes = requested;
  p.start_allocated_bytes = allocated;
  p.requested.bytes = requested;
  p.allocated.bytes = allocated;
  p.reserved.bytes = reserved;
  const auto mark = [&](SnapshotPeak& peak, int64_t bytes, int64_t i, const SnapshotEvent& e) {
    if (bytes <= peak.bytes) return;
    peak.bytes = bytes;
    peak.event = i;
    peak.time_us = e.time_us >= 0 && t0 >= 0 ? e.time_us - t0 : -1;
    peak.phase = e.phase;
    peak.frame = e.frame;
  };
  // One replay step of alloc / free_requested on `blocks`, keeping the two sums.
  const auto step = [&](std::map<int64_t, LiveAtPeak>& blocks, const SnapshotEvent& e, int64_t i,
                        int64_t& req, int64_t& alloc) {
    if (e.action == SnapshotAction::kAlloc) {
      // The end state's block size when this allocation may be the one live at the end.
      const auto end = end_blocks.find(e.addr);
      const bool exact = end != end_blocks.end() && end->second->requested_size == e.size;
      LiveAtPeak b{e.size, exact ? end->second->size : round_block_size(e.size), i, e.frame,
                   e.phase};
      if (const auto old = blocks.find(e.addr); old != blocks.end()) {
        // Allocated twice without a free in between: the trace lost the free.
        req -= old->second.requested_bytes;
        alloc -= old->second.allocated_bytes;
      }
      add_bytes(req, b.requested_bytes, where);
      add_bytes(alloc, b.allocated_bytes, where);
      blocks[e.addr] = std::move(b);
    } else if (e.action == SnapshotAction::kFreeRequested) {
      const auto it = blocks.find(e.addr);
      if (it != blocks.end()) {
        req -= it->second.requested_bytes;
        alloc -= it->second.allocated_bytes;
        blocks.erase(it);
      }
    }
  };
  std::map<std::string, std::size_t> phase_index;
  p.curve.reserve(d.trace.size());
  for (std::size_t k = 0; k < d.trace.size(); ++k) {
    const SnapshotEvent& e = d.trace[k];
    const auto i = static_cast<int64_t>(k);
    step(live, e, i, requested, allocated);
    auto [pos, added] = phase_index.try_emplace(e.phase, p.phases.size());
    if (added) p.phases.push_back(PhaseSpan{e.phase});
    PhaseSpan& span = p.phases[pos->second];
    const int64_t t = e.time_us >= 0 && t0 >= 0 ? e.time_us - t0 : -1;
    if (span.events++ == 0) {
      span.first_event = i;
      span.first_us = t;
    }
    span.last_event = i;
    span.last_us = t;
    span.peak_allocated_bytes = std::max(span.peak_allocated_bytes, allocated);
    p.curve.push_back(allocated);
    switch (e.action) {
      case SnapshotAction::kAlloc:
        mark(p.requested, requested, i, e);
        mark(p.allocated, allocated, i, e);
        break;
      case SnapshotAction::kSegmentAlloc:
      case SnapshotAction::kSegmentMap:
        add_bytes(reserved, e.size, where);
        mark(p.reserved, reserved, i, e);
        break;
      case SnapshotAction::kSegmentFree:
      case SnapshotAction::kSegmentUnmap: add_bytes(reserved, -e.size, where); break;
      default: break;
    }
  }
  // Pass 3: the blocks live right after the allocated peak's event.
  std::map<int64_t, LiveAtPeak> blocks = before;
  int64_t req = 0;
  int64_t alloc = 0;
  for (int64_t k = 0; k <= p.allocated.event; ++k)
    step(blocks, d.trace[static_cast<std::size_t>(k)], k, req, alloc);
  std::vector<LiveAtPeak> at_peak;
  at_peak.reserve(blocks.size());
  for (auto& [addr, blk] : blocks) at_peak.push_back(std::move(blk));
  std::stable_sort(at_peak.begin(), at_peak.end(), [](const LiveAtPeak& a, const LiveAtPeak& b) {
    return a.allocated_bytes > b.allocated_bytes;
  });
  p.at_peak = std::move(at_peak);
  return p;
}

const SnapshotDevice& pick_snapshot_device(const Snapshot& s, int64_t wanted,
                                           const std::string& path) {
  const SnapshotDevice* chosen = nullptr;
  for (const SnapshotDevice& d : s.devices) {
    if (wanted >= 0 ? d.index == wanted : !d.trace.empty()) {
      chosen = &d;
      break;
    }
  }
  if (chosen == nullptr && wanted >= 0)
    throw sim::ConfigError("--cuda-device", std::to_string(wanted), "not in " + path);
  if (chosen == nullptr || chosen->trace.empty())
    throw sim::ConfigError(path, "device_traces",
                           "no device trace (history not recorded: call "
                           "torch.cuda.memory._record_memory_history() before the step)");
  return *chosen;
}

}  // namespace actsim_cli
