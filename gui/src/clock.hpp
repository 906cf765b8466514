// Wall-clock milliseconds for the GUI's own timings (re-simulation, jobs, the worker).
#pragma once

#include <chrono>

namespace gui {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace gui
