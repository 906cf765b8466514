// Human units for labels: binary bytes, SI time from nanoseconds, SI FLOPs and counts; and tick
// labels whose decimals follow the tick step.
#pragma once

#include <cstdint>
#include <string>

namespace gui_plot {

// Three significant digits in the largest binary unit below the value: "0 B", "512 B",
// "1.50 KiB", "80.0 GiB", "-3.25 MiB".
std::string human_bytes(int64_t bytes);

// At most three characters of number and a one-letter binary unit, for cells: "512M", "9.5G",
// "126G", "53T", "800" (bytes below 1 KiB).
std::string compact_bytes(int64_t bytes);

// Three significant digits in ns, µs, ms or s: "850 ns", "12.3 µs", "1.50 s"; minutes are not
// used (a step is short).
std::string human_time_ns(int64_t ns);

// SI with three significant digits and a suffix: human_si(1.23e15, "FLOP") = "1.23 PFLOP".
std::string human_si(double value, const char* suffix);

// What a tick label shows.
enum class Unit { kPlain, kBytes, kTimeNs };

// The label of tick `v` on an axis whose ticks are `step` apart and whose largest |value| is
// `max_abs`: one unit for the whole axis (chosen from max_abs) and just enough decimals to tell
// neighbouring ticks apart. Bytes: "40 GiB", "1.5 GiB"; time: "250 ms", "1.2 s".
std::string format_tick(double v, double step, double max_abs, Unit unit);

}  // namespace gui_plot
