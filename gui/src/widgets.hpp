// Small editing widgets shared by the config panels: int64 and real fields with limits, and enum
// combos over a fixed table of names. Each returns true when the value changed.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace gui {

// An integer field clamped to [min_value, max_value]; `step` for the +/- buttons (0: none).
bool edit_i64(const char* label, int64_t& value, int64_t min_value, int64_t max_value,
              int64_t step = 1);
bool edit_int(const char* label, int& value, int min_value, int max_value);
// A real field clamped to [min_value, max_value], shown with `format`; `scale` converts the
// stored value to the shown one (1e-12 shows FLOP/s as TFLOP/s).
bool edit_real(const char* label, double& value, double min_value, double max_value,
               const char* format, double scale = 1);
// Bytes shown and edited in MiB (or GiB with `gib`).
bool edit_bytes(const char* label, int64_t& bytes, bool gib);

// A combo over `names`; `index` is the selected position.
bool edit_choice(const char* label, int& index, std::span<const std::string_view> names);

// Label in the left column, widget right of it (one row of a two-column form).
void form_label(const char* text);

}  // namespace gui
