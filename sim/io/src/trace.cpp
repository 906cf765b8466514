// Chrome / Perfetto trace writer (sim_io/trace.hpp). Written with fmt rather than nlohmann so that
// times keep their fixed three-decimal microsecond form (Trace Event Format: ts and dur in µs).
#include "sim_io/trace.hpp"

#include <fmt/format.h>

#include <iterator>

namespace sim_io {
namespace {

constexpr int kPid = 1;
// OpSpan::stream 0..5
constexpr const char* kTrackNames[] = {"compute",        "collective",
                                       "copy to host",   "copy to device",
                                       "host (dispatch)", "data-parallel comm"};
constexpr int kTracks = 6;
constexpr const char* kCollectiveNames[] = {"", "all-reduce", "all-gather", "reduce-scatter",
                                            "send/recv"};

// Integer nanoseconds as microseconds with exactly three decimals ("12.345"). Never negative.
std::string micros(int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

// A JSON string literal.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string trace_json(const sim::Graph& graph, const sim::Result& result,
                       std::string_view title) {
  const bool reserved = graph.allocator != sim::AllocatorKind::kExact;
  fmt::memory_buffer buf;
  auto out = std::back_inserter(buf);
  fmt::format_to(out, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  fmt::format_to(out,
                 "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,"
                 "\"args\":{{\"name\":{}}}}}",
                 kPid, quoted(title));
  for (int t = 0; t < kTracks; ++t)
    fmt::format_to(out,
                   ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},"
                   "\"args\":{{\"name\":\"{}\"}}}}",
                   kPid, t, kTrackNames[t]);

  for (const sim::OpSpan& s : result.spans) {
    std::string name = "optimizer step";
    int32_t layer = -1;
    int64_t flops = graph.optimizer_cost.flops;
    int64_t bytes = graph.optimizer_cost.bytes;
    if (s.stream == 5) {  // a data-parallel collective: storage holds its sim::Collective
      name = std::string("data-parallel ") +
             (s.storage >= 1 && s.storage <= 4 ? kCollectiveNames[s.storage] : "collective");
      flops = 0;
      bytes = 0;
    } else if (s.stream == 4) {
      name = s.op >= 0 ? std::string("dispatch ") + graph.ops[static_cast<std::size_t>(s.op)].name
                       : std::string("dispatch optimizer");
      flops = 0;
      bytes = 0;
    } else if (s.op == sim::kHostWaitSpan) {
      name = "idle: GPU waiting for the host to issue the next op";
      flops = 0;
      bytes = 0;
    } else if (s.op == sim::kCommWaitSpan) {
      name = "wait: compute waiting for data-parallel communication";
      flops = 0;
      bytes = 0;
    } else if (s.stream >= 2 && s.storage >= 0) {  // an offload copy: the storage it moves
      const sim::Storage& st = graph.storages[static_cast<std::size_t>(s.storage)];
      name = std::string(s.stream == 2 ? "copy to host: " : "copy to device: ") + st.role;
      layer = st.block;
      flops = 0;
      bytes = st.bytes;
    } else if (s.op == sim::kStallSpan) {
      name = "stall: waiting for a copy to the device";
      flops = 0;
      bytes = 0;
    } else if (s.op >= 0) {
      const sim::Op& op = graph.ops[static_cast<std::size_t>(s.op)];
      const sim::OpCost& c = s.phase == sim::Phase::kBackward ? op.bwd : op.fwd;
      name = op.name;
      layer = op.block;
      flops = c.flops;
      bytes = c.bytes;
      if (s.stream == 1) {  // the op's tensor-parallel collective: its payload, no FLOPs
        flops = 0;
        bytes = c.comm_bytes;
      }
    }
    const std::string_view phase = sim::phase_name(s.phase);
    const std::string label =
        s.op < 0 || s.stream >= 2 ? name
                 : (layer >= 0 ? fmt::format("block {} ", layer) : std::string()) + name + " " +
                       std::string(phase);
    fmt::format_to(out,
                   ",\n{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},"
                   "\"tid\":{},\"args\":{{\"layer\":{},\"op\":{},\"phase\":\"{}\",\"flops\":{},"
                   "\"bytes\":{}}}}}",
                   quoted(label), phase, micros(s.start_ns), micros(s.duration_ns), kPid,
                   s.stream, layer, quoted(name), phase, flops, bytes);
  }

  for (const sim::MemorySample& m : result.timeline) {
    fmt::format_to(out,
                   ",\n{{\"name\":\"memory\",\"ph\":\"C\",\"ts\":{},\"pid\":{},"
                   "\"args\":{{\"allocated_bytes\":{}",
                   micros(m.t_ns), kPid, m.allocated_bytes);
    if (reserved) fmt::format_to(out, ",\"reserved_bytes\":{}", m.reserved_bytes);
    fmt::format_to(out, "}}}}");
  }
  fmt::format_to(out, "\n]}}\n");
  return fmt::to_string(buf);
}

}  // namespace sim_io
