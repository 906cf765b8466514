// GPU files (models/devices/<name>.json, "format": "actsim-device-v1"). Strict: every field is
// required, unknown keys are errors, and "provenance" must give a one-line source for every
// numeric field (a datasheet, a measurement with GPU and date, or "assumption: ..." with the
// reasoning), so no figure enters the simulator without saying where it came from. Optional:
// "efficiency_by_kind": {"<op kind>": {"compute_efficiency": x, "memory_efficiency": y}, ...}
// (per-kind overrides, as actsim calibrate writes them), with one provenance line for the table.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "json_reader.hpp"
#include "sim/device.hpp"
#include "sim/error.hpp"
#include "sim_io/load.hpp"

namespace sim_io {
namespace {

using detail::ObjectReader;

constexpr std::string_view kDeviceFormat = "actsim-device-v1";

// The numeric fields, each of which needs a provenance line.
// clang-format off
constexpr std::string_view kIntegerFields[] = {
    "sm_arch", "hbm_bytes", "driver_reserved_bytes", "cuda_context_bytes", "nccl_buffer_bytes", "cublas_workspace_bytes",
    "launch_overhead_ns", "sm_count", "host_dispatch_ns"};
constexpr std::string_view kRealFields[] = {
    "peak_bf16_flops_per_s", "peak_tf32_flops_per_s", "peak_fp32_flops_per_s", "hbm_bytes_per_s",
    "host_link_bytes_per_s", "nvlink_bytes_per_s", "compute_efficiency", "memory_efficiency",
    "internode_bytes_per_s"};
// clang-format on
// Optional numeric fields (issue 11, time): a provenance line when present.
constexpr std::string_view kOptionalRealFields[] = {"peak_fp8_flops_per_s"};

bool is_numeric_field(std::string_view key) {
  return std::find(std::begin(kIntegerFields), std::end(kIntegerFields), key) !=
             std::end(kIntegerFields) ||
         std::find(std::begin(kRealFields), std::end(kRealFields), key) != std::end(kRealFields) ||
         std::find(std::begin(kOptionalRealFields), std::end(kOptionalRealFields), key) !=
             std::end(kOptionalRealFields);
}

// Every numeric field has a non-empty provenance string, and every provenance entry names a
// numeric field (a misspelt one would otherwise leave its field undocumented).
void check_provenance(const ObjectReader& in) {
  if (!in.has("provenance"))
    in.fail("provenance", "missing: give a one-line source for every numeric field");
  const detail::Json& table = in.json().at("provenance");
  if (!table.is_object())
    in.fail("provenance", std::string("expected an object mapping each numeric field to its "
                                      "source, got ") +
                              table.type_name());
  for (const auto& [key, value] : table.items()) {
    const std::string field = "provenance." + key;
    if (!is_numeric_field(key) && !(key == "efficiency_by_kind" && in.has(key)))
      in.fail(field, "not a numeric field of the device");
    if (!value.is_string())
      in.fail(field, std::string("expected a string, got ") + value.type_name());
    if (value.get_ref<const std::string&>().empty()) in.fail(field, "must not be empty");
  }
  auto require = [&](std::string_view key) {
    if (!table.contains(key))
      in.fail(key, "no provenance: add a one-line source for it under \"provenance\"");
  };
  for (std::string_view key : kIntegerFields) require(key);
  for (std::string_view key : kRealFields) require(key);
  if (in.has("efficiency_by_kind")) require("efficiency_by_kind");
  for (std::string_view key : kOptionalRealFields)
    if (in.has(key)) require(key);
}

// The optional per-kind table; kinds come out sorted (JSON objects are read in key order).
std::vector<sim::KindEfficiency> read_kind_efficiencies(const ObjectReader& in) {
  std::vector<sim::KindEfficiency> out;
  if (!in.has("efficiency_by_kind")) return out;
  const detail::Json& table = in.json().at("efficiency_by_kind");
  if (!table.is_object())
    in.fail("efficiency_by_kind", std::string("expected an object of op kinds, got ") +
                                      table.type_name());
  for (const auto& item : table.items()) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    const std::string& kind = item.key();
    const detail::Json& value = item.value();
    const std::string field = "efficiency_by_kind." + kind;
    if (!value.is_object()) in.fail(field, std::string("expected an object, got ") + value.type_name());
    for (const auto& [key, v] : value.items())
      if (key != "compute_efficiency" && key != "memory_efficiency")
        in.fail(field + "." + key, "unknown key (compute_efficiency, memory_efficiency)");
    auto number = [&](const char* key) {
      if (!value.contains(key)) in.fail(field + "." + key, "missing");
      if (!value.at(key).is_number()) in.fail(field + "." + key, "expected a number");
      return value.at(key).get<double>();
    };
    out.push_back({kind, number("compute_efficiency"), number("memory_efficiency")});
  }
  return out;
}

}  // namespace

sim::Device parse_device(std::string_view json_text, std::string_view name,
                         std::string_view source) {
  const detail::Json doc = detail::parse_json_object(json_text, source);
  const ObjectReader in(doc, std::string(source), ObjectReader::Nulls::kStrict);
  in.reject_unknown({"format", "label", "sm_arch", "hbm_bytes", "driver_reserved_bytes",
                     "cuda_context_bytes",
                     "nccl_buffer_bytes", "cublas_workspace_bytes", "peak_bf16_flops_per_s",
                     "peak_tf32_flops_per_s", "peak_fp32_flops_per_s", "hbm_bytes_per_s",
                     "host_link_bytes_per_s", "nvlink_bytes_per_s", "compute_efficiency",
                     "memory_efficiency", "launch_overhead_ns", "sm_count", "host_dispatch_ns",
                     "internode_bytes_per_s", "efficiency_by_kind",
                     "peak_fp8_flops_per_s",  // optional (issue 11, time)
                     "provenance"});
  if (const std::string format = in.string("format"); format != kDeviceFormat)
    in.fail("format",
            "unknown format \"" + format + "\"; expected \"" + std::string(kDeviceFormat) + "\"");

  sim::Device d;
  d.name = std::string(name);
  d.source = std::string(source);
  d.label = in.string("label");
  if (d.label.empty()) in.fail("label", "must not be empty");
  const int64_t sm_arch = in.integer("sm_arch");
  if (sm_arch <= 0 || sm_arch > std::numeric_limits<int>::max())
    in.fail("sm_arch",
            "must be a positive compute capability x10 (80, 90), got " + std::to_string(sm_arch));
  d.sm_arch = static_cast<int>(sm_arch);
  d.hbm_bytes = in.integer("hbm_bytes");
  d.driver_reserved_bytes = in.integer("driver_reserved_bytes");
  d.cuda_context_bytes = in.integer("cuda_context_bytes");
  d.nccl_buffer_bytes = in.integer("nccl_buffer_bytes");
  d.cublas_workspace_bytes = in.integer("cublas_workspace_bytes");
  d.peak_bf16_flops_per_s = in.number("peak_bf16_flops_per_s");
  d.peak_tf32_flops_per_s = in.number("peak_tf32_flops_per_s");
  d.peak_fp32_flops_per_s = in.number("peak_fp32_flops_per_s");
  d.hbm_bytes_per_s = in.number("hbm_bytes_per_s");
  d.host_link_bytes_per_s = in.number("host_link_bytes_per_s");
  d.nvlink_bytes_per_s = in.number("nvlink_bytes_per_s");
  d.compute_efficiency = in.number("compute_efficiency");
  d.memory_efficiency = in.number("memory_efficiency");
  d.launch_overhead_ns = in.integer("launch_overhead_ns");
  const int64_t sms = in.integer("sm_count");
  if (sms <= 0 || sms > 100000) in.fail("sm_count", "must be a positive number of SMs");
  d.sm_count = static_cast<int>(sms);
  d.host_dispatch_ns = in.integer("host_dispatch_ns");
  d.internode_bytes_per_s = in.number("internode_bytes_per_s");
  d.kind_efficiencies = read_kind_efficiencies(in);
  // Optional (issue 11, time): absent = no FP8 tensor cores (V100, A100).
  if (const std::optional<double> fp8 = in.opt_number("peak_fp8_flops_per_s")) {
    if (!(*fp8 >= 0)) in.fail("peak_fp8_flops_per_s", "must be >= 0 (0: no FP8 tensor cores)");
    d.peak_fp8_flops_per_s = *fp8;
  }
  check_provenance(in);
  sim::validate(d);
  return d;
}

}  // namespace sim_io
