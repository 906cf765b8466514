// gui_plot: the pure plot maths of the GUI (STYLE.md rule 9): axis mapping, nice ticks, human
// units, min/max decimation with its step semantics, grid contours, colour map.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gui_plot/axis.hpp"
#include "gui_plot/decimate.hpp"
#include "gui_plot/format.hpp"
#include "gui_plot/grid.hpp"
#include "gui_plot/ticks.hpp"

using namespace gui_plot;

TEST_CASE("axis maps values to pixels as px_min + scale * (v - lo)") {
  const Axis x{10, 20, 100, 600};  // 50 px per unit
  CHECK(x.scale() == doctest::Approx(50));
  CHECK(x.to_px(10) == doctest::Approx(100));
  CHECK(x.to_px(20) == doctest::Approx(600));
  CHECK(x.to_px(12.5) == doctest::Approx(225));
  CHECK(x.to_value(225) == doctest::Approx(12.5));
  const Axis y{0, 100, 500, 100};  // screen y grows downwards
  CHECK(y.to_px(0) == doctest::Approx(500));
  CHECK(y.to_px(100) == doctest::Approx(100));
  CHECK(y.to_px(25) == doctest::Approx(400));
  CHECK(y.to_value(y.to_px(37)) == doctest::Approx(37));
}

TEST_CASE("zoom keeps the value under the mouse, pan follows the drag, clamp stays inside") {
  const Range r{0, 100};
  const Range z = zoom_about(r, 25, 2, 1e-9);
  CHECK(z.hi - z.lo == doctest::Approx(50));
  CHECK((25 - z.lo) / (z.hi - z.lo) == doctest::Approx(0.25));  // same relative place
  CHECK(zoom_about(r, 50, 1e9, 10).hi - zoom_about(r, 50, 1e9, 10).lo == doctest::Approx(10));
  const Range p = pan_by_pixels(r, 100, 1000);  // drag right by a tenth: content moves right
  CHECK(p.lo == doctest::Approx(-10));
  CHECK(p.hi == doctest::Approx(90));
  const Range c = clamp_into(p, 0, 100);
  CHECK(c.lo == doctest::Approx(0));
  CHECK(c.hi == doctest::Approx(100));
  CHECK(clamp_into({90, 120}, 0, 100).lo == doctest::Approx(70));
  CHECK(clamp_into({-50, 200}, 0, 100).hi == doctest::Approx(100));
  const Range d = widen_degenerate({5, 5});
  CHECK(d.hi > d.lo);
  CHECK(widen_degenerate({0, 0}).hi == doctest::Approx(1));
}

TEST_CASE("nice steps are 1, 2 or 5 times a power of ten") {
  CHECK(nice_step(1) == doctest::Approx(1));
  CHECK(nice_step(1.01) == doctest::Approx(2));
  CHECK(nice_step(2.5) == doctest::Approx(5));
  CHECK(nice_step(7) == doctest::Approx(10));
  CHECK(nice_step(0.003) == doctest::Approx(0.005));
  CHECK(nice_step(4e9) == doctest::Approx(5e9));
  CHECK(nice_step(1e-7) == doctest::Approx(1e-7));
}

TEST_CASE("tick count follows the pixel width") {
  const Ticks t = nice_ticks(0, 100, 500, 50);  // room for 10 ticks
  CHECK(t.step == doctest::Approx(10));
  REQUIRE(t.values.size() == 11);
  CHECK(t.values.front() == doctest::Approx(0));
  CHECK(t.values.back() == doctest::Approx(100));
  // Narrower: fewer, wider steps, never closer than the minimum spacing.
  const Ticks n = nice_ticks(0, 100, 120, 50);
  CHECK(n.step == doctest::Approx(50));
  CHECK(n.values.size() == 3);
  for (double w : {37.0, 100.0, 333.0, 1000.0, 4000.0}) {
    const Ticks k = nice_ticks(-3.7, 812.4, w, 40);
    CHECK(static_cast<double>(k.values.size()) <= w / 40 + 1);
    CHECK(k.step / (812.4 + 3.7) * w >= 40 - 1e-9);  // pixels between ticks
    for (double v : k.values) CHECK(v >= -3.7);
  }
  // Values are multiples of the step inside the range, computed without accumulation.
  const Ticks f = nice_ticks(0.1, 0.7, 600, 50);
  CHECK(f.step == doctest::Approx(0.05));
  CHECK(f.values.front() == doctest::Approx(0.1));
  CHECK(f.values[4] == doctest::Approx(0.3));
  CHECK(nice_ticks(5, 5, 100, 10).values.empty());
  CHECK(nice_ticks(0, 1, 0, 10).values.empty());
}

TEST_CASE("byte axes tick at nice numbers of a binary unit") {
  CHECK(byte_unit(500) == 1);
  CHECK(byte_unit(2048) == 1024);
  CHECK(byte_unit(80.0 * 1024 * 1024 * 1024) == doctest::Approx(1024.0 * 1024 * 1024));
  const double gib = 1024.0 * 1024 * 1024;
  const Ticks t = nice_ticks(0, 85 * gib, 400, 40, byte_unit(85 * gib));
  CHECK(t.step == doctest::Approx(10 * gib));
  CHECK(format_tick(t.values[4], t.step, 85 * gib, Unit::kBytes) == "40 GiB");
  CHECK(format_tick(1.5 * gib, 0.5 * gib, 2 * gib, Unit::kBytes) == "1.5 GiB");
  CHECK(format_tick(0, 0.5 * gib, 2 * gib, Unit::kBytes) == "0.0 GiB");
}

TEST_CASE("human units") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(512) == "512 B");
  CHECK(human_bytes(1536) == "1.50 KiB");
  CHECK(human_bytes(int64_t{80} * 1024 * 1024 * 1024) == "80.0 GiB");
  CHECK(human_bytes(int64_t{126} * 1024 * 1024 * 1024) == "126 GiB");
  CHECK(human_bytes(-3 * 1024 * 1024 - 256 * 1024) == "-3.25 MiB");
  CHECK(human_bytes(1024 * 1024 - 1) == "1.00 MiB");  // never "1024 KiB"
  CHECK(compact_bytes(int64_t{126} * 1024 * 1024 * 1024) == "126G");
  CHECK(compact_bytes(int64_t{9} * 1024 * 1024 * 1024 + 512 * 1024 * 1024) == "9.5G");
  CHECK(compact_bytes(800) == "800");
  CHECK(human_time_ns(850) == "850 ns");
  CHECK(human_time_ns(12'300) == "12.3 \xC2\xB5s");
  CHECK(human_time_ns(61'234'567) == "61.2 ms");
  CHECK(human_time_ns(1'500'000'000) == "1.50 s");
  CHECK(human_si(1.23e15, "FLOP") == "1.23 PFLOP");
  CHECK(human_si(0, "FLOP") == "0 FLOP");
  CHECK(human_si(16700, "") == "16.7 k");
  CHECK(format_tick(250e6, 50e6, 400e6, Unit::kTimeNs) == "250 ms");
  CHECK(format_tick(1.2e9, 0.2e9, 1.6e9, Unit::kTimeNs) == "1.2 s");
  CHECK(format_tick(0.25, 0.05, 1, Unit::kPlain) == "0.25");
  CHECK(format_tick(-1e-12, 0.5, 1, Unit::kPlain) == "0.0");  // no "-0.0"
}

namespace {

struct Sample {
  int64_t t;
  int64_t y;
};

std::vector<StepColumn> decimate(const std::vector<Sample>& s, const Axis& x) {
  return decimate_steps(
      s.size(), [&](std::size_t i) { return s[i].t; }, [&](std::size_t i) { return s[i].y; }, x);
}

}  // namespace

TEST_CASE("step decimation: one column per pixel with min, max and the held value") {
  // 10 ns per pixel over pixels 0..100.
  const Axis x{0, 1000, 0, 100};
  const std::vector<Sample> s{{0, 5}, {3, 9}, {3, 2}, {7, 4}, {25, 6}, {600, 1}};
  const auto cols = decimate(s, x);
  REQUIRE(cols.size() == 3);
  // Column 0 has samples at 0, 3, 3, 7: the zero-length 9 is an instant that still counts.
  CHECK(cols[0].px == 0);
  CHECK(cols[0].y_min == 2);
  CHECK(cols[0].y_max == 9);
  CHECK(cols[0].max_index == 1);
  CHECK(cols[0].y_last == 4);
  CHECK(cols[0].last_index == 3);
  // Column 2 (t = 25): the value entering it (4, held since t = 7) counts toward its range.
  CHECK(cols[1].px == 2);
  CHECK(cols[1].y_min == 4);
  CHECK(cols[1].y_max == 6);
  CHECK(cols[1].y_last == 6);
  CHECK(cols[2].px == 60);
  CHECK(cols[2].y_min == 1);
  CHECK(cols[2].y_max == 6);
}

TEST_CASE("step decimation culls to the visible range and starts with the held sample") {
  const std::vector<Sample> s{{0, 1}, {100, 7}, {200, 3}, {300, 8}, {400, 2}};
  // Visible 150..250: the sample holding at 150 (t = 100, y = 7) enters the first column.
  const auto cols = decimate(s, Axis{150, 250, 0, 100});
  REQUIRE(cols.size() == 2);
  CHECK(cols[0].px == 0);
  CHECK(cols[0].y_max == 7);
  CHECK(cols[1].px == 50);
  CHECK(cols[1].y_min == 3);
  CHECK(cols[1].y_max == 7);
  CHECK(decimate({}, Axis{0, 1, 0, 10}).empty());
}

TEST_CASE("a million samples become at most one column per pixel, peaks kept") {
  std::vector<Sample> s;
  s.reserve(1'000'000);
  for (int64_t i = 0; i < 1'000'000; ++i) s.push_back({i * 10, (i * 7919) % 1000});
  s[777'777].y = 5000;  // one spike
  const Axis x{0, 1e7, 0, 1200};
  const auto cols = decimate(s, x);
  CHECK(cols.size() <= 1201);
  CHECK(cols.size() >= 1199);
  double top = 0;
  for (const auto& c : cols) top = std::max(top, c.y_max);
  CHECK(top == 5000);
}

TEST_CASE("bar decimation: wide bars stay, narrow touching bars of one key merge") {
  struct Bar {
    int64_t start, dur;
    int key;
  };
  // 1 ns per pixel. Bars 0-2 are narrow and touch; bar 3 is narrow but of another key; bar 4 wide.
  const std::vector<Bar> bars{{0, 1, 0}, {1, 1, 0}, {2, 1, 0}, {3, 1, 1}, {10, 20, 0}, {50, 1, 0}};
  const auto items = decimate_bars(
      bars.size(), [&](std::size_t i) { return bars[i].start; },
      [&](std::size_t i) { return bars[i].dur; }, [&](std::size_t i) { return bars[i].key; },
      Axis{0, 100, 0, 100}, 3.0);
  REQUIRE(items.size() == 4);
  CHECK(items[0].first == 0);
  CHECK(items[0].count == 3);
  CHECK(items[0].px1 == doctest::Approx(3));
  CHECK(items[1].first == 3);
  CHECK(items[1].count == 1);
  CHECK(items[2].first == 4);
  CHECK(items[2].px1 - items[2].px0 == doctest::Approx(20));
  CHECK(items[3].px1 - items[3].px0 >= 1);  // every item covers a pixel
  // Culled: only bars reaching into 12..40.
  const auto visible = decimate_bars(
      bars.size(), [&](std::size_t i) { return bars[i].start; },
      [&](std::size_t i) { return bars[i].dur; }, [&](std::size_t i) { return bars[i].key; },
      Axis{12, 40, 0, 28}, 3.0);
  REQUIRE(visible.size() == 1);
  CHECK(visible[0].first == 4);
}

TEST_CASE("grid boundary: the staircase between inside and outside cells") {
  // 2 rows x 3 cols, inside = bottom-left region:  row 0: 1 1 0 / row 1: 1 0 0
  const std::vector<uint8_t> inside{1, 1, 0, 1, 0, 0};
  const auto edges = boundary_edges(inside, 2, 3);
  const std::vector<GridEdge> expected{{2, 0, 2, 1}, {1, 1, 2, 1}, {1, 1, 1, 2}};
  CHECK(edges == expected);
  CHECK(boundary_edges({1, 1, 1, 1}, 2, 2).empty());
  CHECK(boundary_edges({1}, 2, 2).empty());  // too short: nothing, no overrun
}

TEST_CASE("viridis runs from dark purple to yellow") {
  const Rgb lo = viridis(0), hi = viridis(1), mid = viridis(0.5);
  CHECK(lo.r == doctest::Approx(0.267f));
  CHECK(hi.g == doctest::Approx(0.906f));
  CHECK(mid.g > lo.g);
  CHECK(viridis(-1).b == lo.b);
  CHECK(viridis(2).r == hi.r);
}
