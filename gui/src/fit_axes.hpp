// The fit map's axes: which set-up knob each axis varies and over which values (powers of two or
// an additive step). Pure functions, no ImGui; the worker and the view share them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/setup.hpp"

namespace gui {

// feat13 (issue 13): kEtp, the expert-tensor-parallel ranks (--etp), as tp is swept
enum class FitKnob : uint8_t { kMicroBatch, kSeq, kTp, kDp, kZero, kEtp, kCount };

const char* knob_name(FitKnob k);   // "micro-batch", "sequence length", "tensor parallel", ...
const char* knob_short(FitKnob k);  // "b", "s", "tp", "dp", "ZeRO", "etp": cell captions
int64_t knob_min(FitKnob k);        // least value the set-up accepts (1; ZeRO 0)
int64_t knob_max(FitKnob k);        // greatest value an axis offers
bool knob_pow2(FitKnob k);          // whether powers of two suit it (all but ZeRO)

int64_t knob_value(const sim::TrainSetup& setup, FitKnob k);
void set_knob(sim::TrainSetup& setup, FitKnob k, int64_t value);

// One axis: values lo, lo*2, lo*4, ... <= hi when step == 0, else lo, lo+step, ... <= hi.
struct FitAxis {
  FitKnob knob = FitKnob::kMicroBatch;
  int64_t lo = 1, hi = 32;
  int64_t step = 0;  // 0: powers of two (lo itself rounded to one); > 0: additive
  friend bool operator==(const FitAxis&, const FitAxis&) = default;
};

// At most this many values per axis (a linear step over a wide range is cut there).
inline constexpr int kMaxAxisValues = 48;

FitAxis default_axis(FitKnob k);  // b 1..32, s 512..16k, tp 1..64, dp 1..64 (x2); ZeRO 0..3 (+1)
// lo and hi clamped to the knob's range and ordered, lo a power of two when step == 0 (rounded
// down), ZeRO always linear.
FitAxis normalized(FitAxis a);
std::vector<int64_t> axis_values(const FitAxis& a);  // ascending, at most kMaxAxisValues
bool axis_truncated(const FitAxis& a);               // values beyond kMaxAxisValues were cut

// Points axis `a` at knob `k` with its default range; when `other` varies `k` already, the two
// swap knobs (an axis never varies the knob the other does).
void choose_knob(FitAxis& a, FitAxis& other, FitKnob k);

std::string knob_value_label(FitKnob k, int64_t v);  // "16k" for sequence 16384, else the number

// "KNOB[:LO:HI[:STEP]]" as the --fit-x/--fit-y flags take it: KNOB one of b, s, tp, dp, zero, etp
// (or batch, seq); LO and HI integers (a k suffix: x1024); STEP additive, omitted for powers of
// two (ZeRO: 1). Without a range, the knob's default_axis. nullopt when malformed.
std::optional<FitAxis> parse_fit_axis(std::string_view text);

}  // namespace gui
