// CSV schema v1 and JSON output (sim_io/output.hpp): quoting, the header contract, row formatting
// of a hand-made Result, and the JSON keys and their order.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "sim_io/output.hpp"

namespace {

// Splits one CSV line (RFC 4180, without its trailing newline) into fields.
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

std::size_t column(const std::string& name) {
  const auto& cols = sim_io::csv_columns();
  for (std::size_t i = 0; i < cols.size(); ++i)
    if (cols[i] == name) return i;
  FAIL("no column " << name);
  return 0;
}

sim_io::Row sample_row() {
  sim_io::Row row;
  row.row_index = 7;
  row.key.model = "gpt2-small";
  row.key.device = "h100-sxm";
  row.key.strategy = "every:4";
  row.key.setup.micro_batch = 8;
  row.key.setup.seq = 1024;
  sim::Result r;
  r.layers = 12;
  r.params = 124'439'808;
  r.params_per_rank = 124'439'808;
  r.peak_allocated_bytes = 3'456'789'012;
  r.peak_requested_bytes = 3'456'789'012;
  r.peak_reserved_bytes = 3'460'000'000;
  r.peak_t_ns = 12'345'678;
  r.peak_phase = sim::Phase::kBackward;
  r.peak_op = "block 11 fc1 backward";
  r.activation_bytes_per_layer = 75'497'472;
  r.activation_bytes_per_block = {75'497'472, 75'497'472, 1'572'864};
  r.activation_peak_bytes = 1'500'000'000;
  r.weights_bytes = 497'759'232;
  r.peak_breakdown[static_cast<int>(sim::Category::kWeights)] = 497'759'232;
  r.peak_breakdown[static_cast<int>(sim::Category::kActivations)] = 1'500'000'000;
  r.fwd_flops = 1'000'000'000'000;
  r.bwd_flops = 2'000'000'000'000;
  r.step_time_ns = 20'000'000;
  r.tokens_per_s = 409600.0;
  r.mfu = 0.3512345678;
  r.hfu = 0.5;
  r.fits = true;
  r.device_bytes = 85'520'809'984;
  r.headroom_bytes = 80'000'000'000;
  row.result = r;
  return row;
}

}  // namespace

TEST_CASE("csv_quote follows RFC 4180") {
  CHECK(sim_io::csv_quote("plain") == "plain");
  CHECK(sim_io::csv_quote("") == "");
  CHECK(sim_io::csv_quote("custom:none@0-3+full@4-11") == "custom:none@0-3+full@4-11");
  CHECK(sim_io::csv_quote("a,b") == "\"a,b\"");
  CHECK(sim_io::csv_quote("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(sim_io::csv_quote("two\nlines") == "\"two\nlines\"");
  CHECK(sim_io::csv_quote("cr\r") == "\"cr\r\"");
}

TEST_CASE("the CSV header is the v1 contract") {
  const auto& cols = sim_io::csv_columns();
  const std::vector<std::string> key = {
      "schema_version", "source", "row_index", "model", "device", "strategy", "profile",
      "precision", "attention", "dropout", "batch", "seq", "tp", "sp", "dp", "zero",
      "optimizer", "allocator", "layers", "params", "params_per_rank", "peak_allocated_bytes",
      "peak_time_ns", "peak_phase", "activation_bytes_per_layer", "activation_peak_bytes",
      "weights_bytes", "grads_bytes", "optimizer_bytes", "workspace_bytes"};
  REQUIRE(cols.size() == key.size() + sim::kCategoryCount + 65);  // famenc 1, moe 2, feat 5, implver 1, hfimpl 1, time5 1, fp8sac 1, time6 1, polish 3, mla5 1, etp 1, te_norm 1, time7 1, moetp 1, feat13 1, ds3b 5, tece 1
  for (std::size_t i = 0; i < key.size(); ++i) CHECK(cols[i] == key[i]);
  for (int c = 0; c < sim::kCategoryCount; ++c) {
    CHECK(cols[key.size() + static_cast<std::size_t>(c)] ==
          "peak_" + std::string(sim::category_name(static_cast<sim::Category>(c))) + "_bytes");
  }
  const std::vector<std::string> tail = {
      "fwd_flops", "bwd_flops", "recompute_flops", "model_flops", "step_time_ns", "fwd_time_ns",
      "bwd_time_ns", "recompute_time_ns", "optimizer_time_ns", "comm_time_ns", "tokens_per_s",
      "mfu", "hfu", "fits", "headroom_bytes", "cuda_context_bytes", "comm_buffer_bytes",
      "device_bytes", "error", "peak_requested_bytes", "peak_reserved_bytes", "prefetch",
      "offload_bytes", "pinned_host_bytes", "offload_stall_ns", "pp", "vpp", "num_microbatches",
      "pp_stage", "pp_in_flight", "impl", "tokens_per_s_per_gpu", "host_wait_ns", "dp_comm_ns",
      "comm_wait_ns", "set_to_none", "reentrant", "target_seq", "ep", "moe_imbalance",
      "lora_rank", "lora_targets", "qlora", "cp", "fp8",  // famenc, moe, feat (issues 12, 13)
      "impl_version",                                     // implver (issue 10)
      "padding",                                          // hfimpl (issue 10)
      "norm_kernel",                                      // time5 (issue 11)
      "compile",                                         // fp8sac (issue 10)
      "grad_accum_fusion",                               // time6 (issue 11)
      "mfu_peak_flops_per_s", "fp8_model_flops", "mfu_fp8_mixed",  // polish (results)
      "moe_aux_loss_coeff",                               // mla5 (issue 13)
      "etp",                                             // etp (issue 13)
      "cross_entropy_loss_fusion",                        // te_norm (issue 10)
      "deterministic",                                    // time7 (issue 11)
      "moe_shared_expert_overlap",                       // moetp (issue 13)
      "lora_dropout",                                    // feat13 (issue 13)
      "ds_reduce_bucket", "ds_prefetch_bucket", "ds_persistence_threshold",  // ds3b (issue 10)
      "ds_max_live", "ds_max_reuse_distance",

      "transformer_impl"};                                // tece (issue 10)
  for (std::size_t i = 0; i < tail.size(); ++i)
    CHECK(cols[key.size() + sim::kCategoryCount + i] == tail[i]);

  // Names are unique, lower-case identifiers (no quoting ever needed).
  std::set<std::string> unique(cols.begin(), cols.end());
  CHECK(unique.size() == cols.size());
  for (const std::string& c : cols) {
    CHECK(c.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos);
  }
  const std::string header = sim_io::csv_header();
  CHECK(header.back() == '\n');
  CHECK(split_csv(header.substr(0, header.size() - 1)) == cols);
}

TEST_CASE("a result row has one field per column, formatted exactly") {
  const std::string line = sim_io::csv_row(sample_row());
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  const auto f = split_csv(line.substr(0, line.size() - 1));
  REQUIRE(f.size() == sim_io::csv_columns().size());
  CHECK(f[column("schema_version")] == "1");
  CHECK(f[column("source")] == "sim");
  CHECK(f[column("row_index")] == "7");
  CHECK(f[column("strategy")] == "every:4");
  CHECK(f[column("profile")] == "pytorch");
  CHECK(f[column("precision")] == "bf16-amp");  // resolved from the profile
  CHECK(f[column("dropout")] == "");            // the config's
  CHECK(f[column("batch")] == "8");
  CHECK(f[column("sp")] == "off");
  CHECK(f[column("optimizer")] == "adam");
  CHECK(f[column("allocator")] == "exact");
  CHECK(f[column("peak_allocated_bytes")] == "3456789012");
  CHECK(f[column("peak_phase")] == sim::phase_name(sim::Phase::kBackward));
  CHECK(f[column("peak_" + std::string(sim::category_name(sim::Category::kActivations)) +
                 "_bytes")] == "1500000000");
  CHECK(f[column("fwd_flops")] == "1000000000000");
  CHECK(f[column("tokens_per_s")] == "409600.000");
  CHECK(f[column("mfu")] == "0.351235");
  CHECK(f[column("hfu")] == "0.500000");
  CHECK(f[column("fits")] == "true");
  CHECK(f[column("device_bytes")] == "85520809984");
  CHECK(f[column("error")] == "");
  CHECK(f[column("peak_requested_bytes")] == "3456789012");
  CHECK(f[column("peak_reserved_bytes")] == "3460000000");

  // Byte-identical on a second call.
  CHECK(sim_io::csv_row(sample_row()) == line);
}

TEST_CASE("set knobs and awkward names are written as the flags take them") {
  sim_io::Row row = sample_row();
  row.key.model = "/data/my, model/config.json";
  row.key.setup.dropout = 0.1;
  row.key.setup.sp = true;
  row.key.setup.tp = 2;
  row.key.setup.precision = sim::Precision::kFp32;
  const std::string line = sim_io::csv_row(row);
  CHECK(line.find("\"/data/my, model/config.json\"") != std::string::npos);
  const auto f = split_csv(line.substr(0, line.size() - 1));
  REQUIRE(f.size() == sim_io::csv_columns().size());
  CHECK(f[column("model")] == "/data/my, model/config.json");
  CHECK(f[column("dropout")] == "0.1");
  CHECK(f[column("sp")] == "on");
  CHECK(f[column("precision")] == "fp32");
}

TEST_CASE("ds3b: the --ds-* knobs are key columns, empty when not given") {
  sim_io::Row row = sample_row();
  auto fields = [&] {
    const std::string line = sim_io::csv_row(row);
    return split_csv(line.substr(0, line.size() - 1));
  };
  auto f = fields();
  REQUIRE(f.size() == sim_io::csv_columns().size());
  for (const char* c : {"ds_reduce_bucket", "ds_prefetch_bucket", "ds_persistence_threshold",
                        "ds_max_live", "ds_max_reuse_distance"})
    CHECK(f[column(c)] == "");
  row.key.setup.ds_reduce_bucket = 500'000'000;
  row.key.setup.ds_prefetch_bucket = 0;
  row.key.setup.ds_persistence_threshold = 100'000;
  row.key.setup.ds_max_live = 300'000'000;
  row.key.setup.ds_max_reuse_distance = 7;
  f = fields();
  REQUIRE(f.size() == sim_io::csv_columns().size());
  CHECK(f[column("ds_reduce_bucket")] == "500000000");
  CHECK(f[column("ds_prefetch_bucket")] == "0");
  CHECK(f[column("ds_persistence_threshold")] == "100000");
  CHECK(f[column("ds_max_live")] == "300000000");
  CHECK(f[column("ds_max_reuse_distance")] == "7");
  // five adjacent fields, in that order, before tece's transformer_impl (the last column)
  CHECK(f[f.size() - 6] == "500000000");
  CHECK(f[f.size() - 2] == "7");
  // an error row keeps them (they are key columns)
  row.result.reset();
  row.error = "x";
  f = fields();
  REQUIRE(f.size() == sim_io::csv_columns().size());
  CHECK(f[column("ds_max_live")] == "300000000");
}

TEST_CASE("an error row keeps its key, leaves the figures empty and quotes the message") {
  sim_io::Row row = sample_row();
  row.result.reset();
  row.error = "--seq: sequence 2048 exceeds the model's 1024 learned positions, \"n_positions\"";
  const std::string line = sim_io::csv_row(row);
  const auto f = split_csv(line.substr(0, line.size() - 1));
  REQUIRE(f.size() == sim_io::csv_columns().size());
  CHECK(f[column("model")] == "gpt2-small");
  CHECK(f[column("seq")] == "1024");
  CHECK(f[column("peak_allocated_bytes")] == "");
  CHECK(f[column("fits")] == "");
  CHECK(f[column("device_bytes")] == "");
  CHECK(f[column("error")] == row.error);
  CHECK(f[column("peak_reserved_bytes")] == "");
}

TEST_CASE("result_json has every figure, in a fixed key order") {
  const std::string text = sim_io::result_json(sample_row());
  CHECK(text == sim_io::result_json(sample_row()));
  const auto j = nlohmann::ordered_json::parse(text);
  REQUIRE(j.is_object());
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  REQUIRE(keys.size() > 20);
  CHECK(keys[0] == "schema_version");
  CHECK(keys[3] == "model");
  CHECK(keys.back() == "error");
  // Every CSV column is a JSON key (peak_<category>_bytes live in the breakdown object).
  for (const std::string& c : sim_io::csv_columns()) {
    if (c.rfind("peak_", 0) == 0 && c != "peak_allocated_bytes" && c != "peak_time_ns" &&
        c != "peak_phase" && c != "peak_requested_bytes" && c != "peak_reserved_bytes")
      continue;
    CHECK_MESSAGE(j.contains(c), c);
  }
  CHECK(j["model"] == "gpt2-small");
  CHECK(j["peak_allocated_bytes"] == 3'456'789'012);
  CHECK(j["peak_op"] == "block 11 fc1 backward");
  CHECK(j["dropout"].is_null());
  CHECK(j["sp"] == false);
  CHECK(j["error"].is_null());
  CHECK(j["mfu"].get<double>() == doctest::Approx(0.3512345678));
  const auto& breakdown = j["peak_breakdown_bytes"];
  REQUIRE(breakdown.size() == static_cast<std::size_t>(sim::kCategoryCount));
  CHECK(breakdown[std::string(sim::category_name(sim::Category::kActivations))] == 1'500'000'000);
  CHECK(j["activation_bytes_per_block"] ==
        nlohmann::ordered_json::array({75'497'472, 75'497'472, 1'572'864}));
}

TEST_CASE("result_json of an error row has the key and the error only") {
  sim_io::Row row = sample_row();
  row.result.reset();
  row.error = "--tp: attention heads (12) must divide by tp";
  const auto j = nlohmann::ordered_json::parse(sim_io::result_json(row));
  CHECK(j["error"] == row.error);
  CHECK(j["strategy"] == "every:4");
  CHECK_FALSE(j.contains("peak_allocated_bytes"));
}
