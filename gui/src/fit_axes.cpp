#include "fit_axes.hpp"

#include <algorithm>
#include <bit>

namespace gui {

const char* knob_name(FitKnob k) {
  switch (k) {
    case FitKnob::kMicroBatch: return "micro-batch";
    case FitKnob::kSeq: return "sequence length";
    case FitKnob::kTp: return "tensor parallel";
    case FitKnob::kDp: return "data parallel";
    case FitKnob::kZero: return "ZeRO stage";
    case FitKnob::kEtp: return "expert tensor parallel";  // feat13
    case FitKnob::kCount: break;
  }
  return "?";
}

const char* knob_short(FitKnob k) {
  switch (k) {
    case FitKnob::kMicroBatch: return "b";
    case FitKnob::kSeq: return "s";
    case FitKnob::kTp: return "tp";
    case FitKnob::kDp: return "dp";
    case FitKnob::kZero: return "ZeRO";
    case FitKnob::kEtp: return "etp";  // feat13
    case FitKnob::kCount: break;
  }
  return "?";
}

int64_t knob_min(FitKnob k) { return k == FitKnob::kZero ? 0 : 1; }

int64_t knob_max(FitKnob k) {
  switch (k) {
    case FitKnob::kMicroBatch: return 1024;
    case FitKnob::kSeq: return int64_t{1} << 20;
    case FitKnob::kTp: return 1024;
    case FitKnob::kEtp: return 1024;  // feat13
    case FitKnob::kDp: return int64_t{1} << 16;
    case FitKnob::kZero: return 3;
    case FitKnob::kCount: break;
  }
  return 1;
}

bool knob_pow2(FitKnob k) { return k != FitKnob::kZero; }

int64_t knob_value(const sim::TrainSetup& s, FitKnob k) {
  switch (k) {
    case FitKnob::kMicroBatch: return s.micro_batch;
    case FitKnob::kSeq: return s.seq;
    case FitKnob::kTp: return s.tp;
    case FitKnob::kDp: return s.dp;
    case FitKnob::kZero: return s.zero;
    case FitKnob::kEtp: return sim::resolved_etp(s);  // feat13: unset (0) is --tp
    case FitKnob::kCount: break;
  }
  return 0;
}

void set_knob(sim::TrainSetup& s, FitKnob k, int64_t v) {
  switch (k) {
    case FitKnob::kMicroBatch: s.micro_batch = v; break;
    case FitKnob::kSeq: s.seq = v; break;
    case FitKnob::kTp: s.tp = v; break;
    case FitKnob::kDp: s.dp = v; break;
    case FitKnob::kZero: s.zero = static_cast<int>(v); break;
    case FitKnob::kEtp: s.etp = v; break;  // feat13
    case FitKnob::kCount: break;
  }
}

FitAxis default_axis(FitKnob k) {
  switch (k) {
    case FitKnob::kMicroBatch: return {k, 1, 32, 0};
    case FitKnob::kSeq: return {k, 512, 16384, 0};
    case FitKnob::kTp: return {k, 1, 64, 0};
    case FitKnob::kDp: return {k, 1, 64, 0};
    case FitKnob::kZero: return {k, 0, 3, 1};
    case FitKnob::kEtp: return {k, 1, 64, 0};  // feat13
    case FitKnob::kCount: break;
  }
  return {};
}

FitAxis normalized(FitAxis a) {
  const int64_t lo = knob_min(a.knob), hi = knob_max(a.knob);
  if (!knob_pow2(a.knob) && a.step == 0) a.step = 1;
  a.step = std::clamp<int64_t>(a.step, 0, hi);
  a.lo = std::clamp(a.lo, lo, hi);
  a.hi = std::clamp(a.hi, lo, hi);
  if (a.lo > a.hi) std::swap(a.lo, a.hi);
  if (a.step == 0) a.lo = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::max<int64_t>(a.lo, 1))));
  return a;
}

namespace {

// Values of a normalized axis, up to `limit` + 1 (to tell truncation).
std::vector<int64_t> values(const FitAxis& a, size_t limit) {
  std::vector<int64_t> out;
  for (int64_t v = a.lo; v <= a.hi && out.size() <= limit; v = a.step == 0 ? v * 2 : v + a.step)
    out.push_back(v);
  return out;
}

}  // namespace

std::vector<int64_t> axis_values(const FitAxis& axis) {
  std::vector<int64_t> out = values(normalized(axis), kMaxAxisValues);
  if (out.size() > static_cast<size_t>(kMaxAxisValues)) out.resize(kMaxAxisValues);
  return out;
}

bool axis_truncated(const FitAxis& axis) {
  return values(normalized(axis), kMaxAxisValues).size() > static_cast<size_t>(kMaxAxisValues);
}

void choose_knob(FitAxis& a, FitAxis& other, FitKnob k) {
  if (k == a.knob) return;
  if (k == other.knob) other = a;
  a = default_axis(k);
}

std::string knob_value_label(FitKnob k, int64_t v) {
  if (k == FitKnob::kSeq && v >= 1024 && v % 1024 == 0) return std::to_string(v / 1024) + "k";
  return std::to_string(v);
}

namespace {

std::optional<int64_t> parse_count(std::string_view s) {
  int64_t scale = 1;
  if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) scale = 1024, s.remove_suffix(1);
  if (s.empty() || s.size() > 12) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v * scale;
}

}  // namespace

std::optional<FitAxis> parse_fit_axis(std::string_view text) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  static constexpr std::pair<std::string_view, FitKnob> kNames[] = {
      {"b", FitKnob::kMicroBatch}, {"batch", FitKnob::kMicroBatch}, {"s", FitKnob::kSeq},
      {"seq", FitKnob::kSeq},      {"tp", FitKnob::kTp},            {"dp", FitKnob::kDp},
      {"zero", FitKnob::kZero},    {"etp", FitKnob::kEtp}};  // feat13: etp
  std::optional<FitKnob> knob;
  for (const auto& [name, k] : kNames)
    if (parts[0] == name) knob = k;
  if (!knob || parts.size() == 2 || parts.size() > 4) return std::nullopt;
  FitAxis a = default_axis(*knob);
  if (parts.size() >= 3) {
    const auto lo = parse_count(parts[1]), hi = parse_count(parts[2]);
    if (!lo || !hi || *lo < knob_min(*knob) || *hi < *lo || *hi > knob_max(*knob)) return std::nullopt;
    a.lo = *lo;
    a.hi = *hi;
    a.step = knob_pow2(*knob) ? 0 : 1;
  }
  if (parts.size() == 4) {
    const auto step = parse_count(parts[3]);
    if (!step || *step < 1) return std::nullopt;
    a.step = *step;
  }
  return normalized(a);
}

}  // namespace gui
