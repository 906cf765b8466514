// The CLI through its parser (argument vectors, as a shell passes them), the axis grammar, the
// order of a sweep's points, and the parallel sweep's ordered delivery.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <vector>

#include "app.hpp"
#include "axes.hpp"
#include "flags.hpp"
#include "sim/error.hpp"
#include "sweep.hpp"

using namespace cli_common;

namespace {

// The flag a parse error names, or "" when it parsed.
template <typename F>
std::string error_flag(F&& parse) {
  try {
    parse();
  } catch (const sim::ConfigError& e) {
    return e.where();
  }
  return "";
}

std::vector<int64_t> ints(const char* text, bool sizes = true) {
  return parse_int_axis(text, "--seq", sizes);
}

}  // namespace

TEST_CASE("numeric axes: lists, ranges, multiplicative steps and size suffixes") {
  CHECK(ints("1024") == std::vector<int64_t>{1024});
  CHECK(ints("1,2,8") == std::vector<int64_t>{1, 2, 8});
  CHECK(ints(" 1 , 2 ") == std::vector<int64_t>{1, 2});
  CHECK(ints("1:4") == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(ints("1:8:3") == std::vector<int64_t>{1, 4, 7});
  CHECK(ints("2:2") == std::vector<int64_t>{2});
  CHECK(ints("1:8:x2") == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(ints("1:10:x2") == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(ints("3:100:x3") == std::vector<int64_t>{3, 9, 27, 81});
  CHECK(ints("1k") == std::vector<int64_t>{1024});
  CHECK(ints("2K") == std::vector<int64_t>{2048});
  CHECK(ints("1M") == std::vector<int64_t>{1024 * 1024});
  CHECK(ints("1k:32k:x2") == std::vector<int64_t>{1024, 2048, 4096, 8192, 16384, 32768});
  CHECK(ints("512,1k:2k:512") == std::vector<int64_t>{512, 1024, 1536, 2048});
  // A range that would overflow stops at its last representable value.
  CHECK(ints("4611686018427387904:9223372036854775807:x2").size() == 1);
}

TEST_CASE("bad numeric axes are one ConfigError naming the flag") {
  for (const char* bad : {"", "abc", "1,,2", ",", "-1", "1.5", "8:1", "1:8:0", "1:8:x1",
                          "0:8:x2", "1:2:3:4", "1:", ":4", "1:8:x", "99999999999999999999",
                          "9007199254740993M", "1m"}) {
    CAPTURE(bad);
    CHECK(error_flag([&] { ints(bad); }) == "--seq");
  }
  CHECK(error_flag([] { parse_int_axis("1k", "--tp", false); }) == "--tp");  // no suffix on tp
  CHECK(error_flag([] { parse_int_axis("0", "--tp", false, 1); }) == "--tp");
  CHECK(error_flag([] { parse_int_axis("0:4", "--zero", false, 0, 3); }) == "--zero");
  CHECK(error_flag([] { parse_int_axis("1:2000000", "--batch", true); }) == "--batch");
  try {
    ints("8:1");
    FAIL("no error");
  } catch (const sim::ConfigError& e) {
    CHECK(e.field() == "8:1");
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("real and switch axes") {
  CHECK(parse_real_axis("0.1", "--dropout") == std::vector<double>{0.1});
  const auto r = parse_real_axis("0:0.3:0.1", "--dropout");
  REQUIRE(r.size() == 4);
  CHECK(r[3] == 0.3);  // rounded: the CSV shows 0.3, not 0.30000000000000004
  CHECK(error_flag([] { parse_real_axis("0.3:0", "--dropout"); }) == "--dropout");
  CHECK(error_flag([] { parse_real_axis("x", "--dropout"); }) == "--dropout");

  CHECK(parse_switch_axis("", "--sp") == std::vector<bool>{true});
  CHECK(parse_switch_axis("on,off", "--sp") == std::vector<bool>{true, false});
  CHECK(parse_switch_axis("false,1", "--sp") == std::vector<bool>{false, true});
  CHECK(error_flag([] { parse_switch_axis("maybe", "--sp"); }) == "--sp");
}

TEST_CASE("named axes and strategies") {
  CHECK(parse_precision_axis("fp32,bf16-mixed") ==
        std::vector<sim::Precision>{sim::Precision::kFp32, sim::Precision::kBf16Mixed});
  CHECK(error_flag([] { parse_precision_axis("fp8"); }) == "--precision");
  CHECK(error_flag([] { parse_profile_axis("paper,nope"); }) == "--profile");
  CHECK(error_flag([] { parse_attention_axis("sparse"); }) == "--attention");
  CHECK(error_flag([] { parse_optimizer_axis("lion"); }) == "--optimizer");
  CHECK(error_flag([] { parse_allocator_axis("slab"); }) == "--allocator");

  const auto s = parse_strategy_axis("none,full,every:4,custom:none@0-3+full@4-11");
  REQUIRE(s.size() == 4);
  CHECK(s[0].kind == sim::StrategyKind::kNone);
  CHECK(s[2].kind == sim::StrategyKind::kEvery);
  CHECK(s[3].kind == sim::StrategyKind::kCustom);
  CHECK(error_flag([] { parse_strategy_axis("none,bogus"); }) == "--strategy");
  CHECK(split_list("gpt2-small,/x/config.json", "--model") ==
        std::vector<std::string>{"gpt2-small", "/x/config.json"});
}

TEST_CASE("the parser takes argument vectors and keeps the documented defaults") {
  const auto p = actsim_cli::parse_command_line({"actsim", "run"});
  REQUIRE(p.invocation);
  CHECK(p.invocation->verb == actsim_cli::Verb::kRun);
  const Axes a = parse_axes(p.invocation->flags);
  CHECK(a.models == std::vector<std::string>{"gpt2-small"});
  CHECK(a.devices == std::vector<std::string>{"h100-sxm"});
  CHECK(a.strategies.size() == 1);
  CHECK(a.profiles == std::vector<sim::Profile>{sim::Profile::kPytorch});
  CHECK(a.precisions.size() == 1);
  CHECK_FALSE(a.precisions[0].has_value());
  CHECK_FALSE(a.dropouts[0].has_value());
  CHECK(a.batches == std::vector<int64_t>{1});
  CHECK(a.seqs == std::vector<int64_t>{1024});
  CHECK(a.tps == std::vector<int64_t>{1});
  CHECK(a.sps == std::vector<bool>{false});
  CHECK(a.dps == std::vector<int64_t>{1});
  CHECK(a.zeros == std::vector<int64_t>{0});
  // implver: no --optimizer: the implementation's default, resolved per set-up
  CHECK(a.optimizers.size() == 1);
  CHECK_FALSE(a.optimizers[0].has_value());
  CHECK(a.allocators == std::vector<sim::AllocatorKind>{sim::AllocatorKind::kExact});
  CHECK(p.invocation->flags.format.empty());
  CHECK(p.invocation->flags.output.empty());
}

TEST_CASE("flags in order, --sp alone, and the sweep's --jobs") {
  const auto p = actsim_cli::parse_command_line(
      {"actsim", "sweep", "--model", "gpt2-small,gpt2-medium", "--batch", "1:8:x2", "--seq",
       "1k", "--sp", "--tp", "2", "-o", "out.csv", "--jobs", "3", "--strategy",
       "none,custom:none@0-3+full@4-11"});
  REQUIRE(p.invocation);
  const auto& inv = *p.invocation;
  CHECK(inv.verb == actsim_cli::Verb::kSweep);
  CHECK(inv.jobs == 3);
  CHECK(inv.flags.output == "out.csv");
  const Axes a = parse_axes(inv.flags);
  CHECK(a.models.size() == 2);
  CHECK(a.batches == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(a.seqs == std::vector<int64_t>{1024});
  CHECK(a.sps == std::vector<bool>{true});
  CHECK(a.tps == std::vector<int64_t>{2});
  CHECK(a.strategies.size() == 2);

  const auto q = actsim_cli::parse_command_line({"actsim", "run", "--sp", "on,off"});
  REQUIRE(q.invocation);
  CHECK(parse_axes(q.invocation->flags).sps == std::vector<bool>{true, false});
}

TEST_CASE("validate takes the measured CSV and a tolerance") {
  const auto p = actsim_cli::parse_command_line({"actsim", "validate", "m.csv", "--tolerance", "0"});
  REQUIRE(p.invocation);
  CHECK(p.invocation->verb == actsim_cli::Verb::kValidate);
  CHECK(p.invocation->validate_file == "m.csv");
  CHECK(p.invocation->tolerance == 0.0);
  const auto d = actsim_cli::parse_command_line({"actsim", "validate", "m.csv"});
  REQUIRE(d.invocation);
  CHECK(d.invocation->tolerance == 1.0);  // the documented default, percent
  CHECK_FALSE(d.invocation->tolerance_given);  // published rows then take per-figure defaults
  CHECK(p.invocation->tolerance_given);
  const auto missing = actsim_cli::parse_command_line({"actsim", "validate"});
  CHECK_FALSE(missing.invocation);
  CHECK(missing.exit_code == 2);
}

TEST_CASE("usage errors and help") {
  const auto bogus = actsim_cli::parse_command_line({"actsim", "run", "--bogus"});
  CHECK_FALSE(bogus.invocation);
  CHECK(bogus.exit_code == 2);
  CHECK(bogus.message.find("--bogus") != std::string::npos);
  CHECK(bogus.message.find('\n') == std::string::npos);

  const auto none = actsim_cli::parse_command_line({"actsim"});
  CHECK_FALSE(none.invocation);
  CHECK(none.exit_code == 2);

  const auto valley_strategy =
      actsim_cli::parse_command_line({"actsim", "valley", "--strategy", "full"});
  CHECK(valley_strategy.exit_code == 2);

  const auto help = actsim_cli::parse_command_line({"actsim", "--help"});
  CHECK_FALSE(help.invocation);
  CHECK(help.exit_code == 0);
  CHECK(help.message.find("sweep") != std::string::npos);

  const auto run_help = actsim_cli::parse_command_line({"actsim", "run", "--help"});
  CHECK(run_help.exit_code == 0);
  CHECK(run_help.message.find("--strategy") != std::string::npos);
}

TEST_CASE("--format is checked against the verb's formats") {
  CHECK(parse_format("", "table|csv|json", Format::kTable) == Format::kTable);
  CHECK(parse_format("csv", "table|csv|json", Format::kTable) == Format::kCsv);
  CHECK(parse_format("json", "csv|json", Format::kCsv) == Format::kJson);
  CHECK(error_flag([] { parse_format("table", "csv|json", Format::kCsv); }) == "--format");
  CHECK(error_flag([] { parse_format("cs", "table|csv", Format::kTable); }) == "--format");
}

TEST_CASE("--prefetch is a list swept fastest, after --lora-dropout, one value where one runs") {
  // polish: the prefetch axis is innermost, so sweeps without a --prefetch list keep their rows
  CommonFlags f;
  f.lora_dropout = "0,0.1";
  f.prefetch = "1,2,4";
  const Axes a = parse_axes(f);
  REQUIRE(point_count(a) == 6);
  const int64_t want_prefetch[] = {1, 2, 4, 1, 2, 4};
  const double want_dropout[] = {0, 0, 0, 0.1, 0.1, 0.1};
  for (int64_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(point_at(a, i).setup.prefetch == want_prefetch[i]);
    CHECK(point_at(a, i).setup.lora_dropout == want_dropout[i]);
    CHECK(point_at(a, i).setup_index == i);
  }
  CHECK(error_flag([&] { require_single(a, f, "trace"); }) == "--lora-dropout");
  f.lora_dropout = "0";
  CHECK(error_flag([&] { require_single(parse_axes(f), f, "trace"); }) == "--prefetch");
  f.prefetch = "2";
  CHECK_NOTHROW(require_single(parse_axes(f), f, "trace"));
  CHECK(point_at(parse_axes(f), 0).setup.prefetch == 2);
  f.prefetch = "1,-2";
  CHECK(error_flag([&] { (void)parse_axes(f); }) == "--prefetch");
}

TEST_CASE("points come in the documented order: model outermost, allocator fastest") {
  CommonFlags f;
  f.model = "a,b";
  f.device = "d";
  f.strategy = "none,full";
  f.batch = "1,2";
  f.seq = "512,1k";
  f.allocator = "exact";
  const Axes a = parse_axes(f);
  REQUIRE(point_count(a) == 16);
  const auto at = [&](int64_t i) { return point_at(a, i); };
  CHECK(at(0).model == 0);
  CHECK(at(0).strategy == 0);
  CHECK(at(0).setup.micro_batch == 1);
  CHECK(at(0).setup.seq == 512);
  CHECK(at(1).setup.seq == 1024);  // seq varies faster than batch
  CHECK(at(1).setup.micro_batch == 1);
  CHECK(at(2).setup.micro_batch == 2);
  CHECK(at(2).setup.seq == 512);
  CHECK(at(4).strategy == 1);  // then the strategy
  CHECK(at(4).setup.micro_batch == 1);
  CHECK(at(8).model == 1);  // model outermost
  CHECK(at(8).strategy == 0);
  CHECK(at(15).model == 1);
  CHECK(at(15).strategy == 1);
  CHECK(at(15).setup.seq == 1024);
  CHECK(at(15).setup.micro_batch == 2);
  // Equal set-ups share a setup_index across strategies and models (graph reuse).
  CHECK(at(1).setup_index == at(5).setup_index);
  CHECK(at(1).setup_index == at(13).setup_index);
  CHECK(at(1).setup_index != at(2).setup_index);

  Inputs in;  // models that no implementation runs: the key keeps the set-up as given
  in.models.resize(2);
  const sim_io::RowKey key = row_key(a, in, at(13));
  CHECK(key.model == "b");
  CHECK(key.strategy == "full");
  CHECK(key.setup.seq == 1024);
}

TEST_CASE("a huge product is refused") {
  CommonFlags f;
  f.batch = "1:1000";
  f.seq = "1:1000";
  f.tp = "1:1000";
  CHECK_THROWS_AS(point_count(parse_axes(f)), sim::ConfigError);
}

namespace {

// A tiny GPT so the sweep tests need no files.
Inputs tiny_inputs(std::size_t devices) {
  sim::ModelConfig m;
  m.name = "tiny";
  m.source = "test";
  m.family = "gpt2";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 128;
  m.max_positions = 256;
  sim::Device d;
  d.name = "dev";
  d.source = "test";
  d.label = "test device";
  d.hbm_bytes = 80LL << 30;
  d.cuda_context_bytes = 500LL << 20;
  d.nccl_buffer_bytes = 1LL << 30;
  d.cublas_workspace_bytes = 32LL << 20;
  d.peak_bf16_flops_per_s = 1e15;
  d.peak_tf32_flops_per_s = 5e14;
  d.peak_fp32_flops_per_s = 6e13;
  d.hbm_bytes_per_s = 3e12;
  d.host_link_bytes_per_s = 5e10;
  d.nvlink_bytes_per_s = 4.5e11;
  d.compute_efficiency = 0.8;
  d.memory_efficiency = 0.9;
  d.launch_overhead_ns = 3000;
  d.sm_count = 132;
  d.host_dispatch_ns = 8000;
  d.internode_bytes_per_s = 5e10;
  return {{m}, std::vector<sim::Device>(devices, d)};
}

}  // namespace

TEST_CASE("sweeps deliver rows in configuration order, identical whatever jobs and sharing") {
  CommonFlags f;
  f.model = "tiny";
  f.device = "dev,dev";
  f.strategy = "none,full,every:2,custom:full@0-5";  // blocks 4-5 do not exist: row errors
  f.batch = "1:3";
  f.seq = "64,128,512";  // 512 > 256 positions: row errors for every strategy
  const Axes a = parse_axes(f);
  const Inputs in = tiny_inputs(2);
  const int64_t total = point_count(a);
  REQUIRE(total == 72);

  // The reference: one point at a time through sim::simulate.
  std::vector<std::string> reference;
  for (int64_t i = 0; i < total; ++i) reference.push_back(sim_io::csv_row(evaluate_point(a, in, i)));

  struct Case {
    int jobs;
    int64_t window;
    bool share;
  };
  for (const Case c : {Case{1, 0, false}, Case{1, 0, true}, Case{4, 1, true}, Case{3, 2, false},
                       Case{2, 0, true}}) {
    CAPTURE(c.jobs);
    CAPTURE(c.window);
    CAPTURE(c.share);
    std::vector<std::string> rows;
    int64_t next = 0;
    run_sweep(a, in, {c.jobs, c.window, c.share}, [&](const sim_io::Row& r) {
      CHECK(r.row_index == next++);
      rows.push_back(sim_io::csv_row(r));
    });
    CHECK(rows == reference);
  }

  int seq_errors = 0;
  int strategy_errors = 0;
  for (int64_t i = 0; i < total; ++i) {
    const sim_io::Row row = evaluate_point(a, in, i);
    if (row.key.setup.seq == 512) {
      ++seq_errors;
      CHECK(row.error.rfind("--seq", 0) == 0);
    } else if (row.key.strategy.rfind("custom", 0) == 0) {
      ++strategy_errors;
      CHECK(row.error.rfind("--strategy", 0) == 0);
    } else {
      CHECK(row.error.empty());
      CHECK(row.result.has_value());
    }
  }
  CHECK(seq_errors == 24);
  CHECK(strategy_errors == 12);
}

TEST_CASE("a row range delivers exactly its rows, as the whole sweep does, shared graphs or not") {
  CommonFlags f;
  f.model = "tiny";
  f.device = "dev,dev";
  f.strategy = "none,full,every:2";
  f.batch = "1:3";
  f.seq = "64,128";
  const Axes a = parse_axes(f);
  const Inputs in = tiny_inputs(2);
  const int64_t total = point_count(a);
  REQUIRE(total == 36);
  std::vector<std::string> reference;
  for (int64_t i = 0; i < total; ++i) reference.push_back(sim_io::csv_row(evaluate_point(a, in, i)));

  // Shards: sizes differ by at most one and together cover every row once.
  for (int64_t n : {1, 5, 7, 36, 40}) {
    int64_t next = 0;
    for (int64_t i = 1; i <= n; ++i) {
      const cli_common::RowRange r = cli_common::shard_range(total, i, n);
      CHECK(r.first == next);
      CHECK(r.end - r.first >= total / n);
      CHECK(r.end - r.first <= total / n + 1);
      next = r.end;
    }
    CHECK(next == total);
  }
  CHECK(cli_common::parse_shard("3/8") == std::pair<int64_t, int64_t>{3, 8});
  for (const char* bad : {"0/8", "9/8", "1/0", "-1/2", "1/2x", "/2", "1/", "12"})
    CHECK_THROWS_AS(cli_common::parse_shard(bad), sim::ConfigError);

  for (const auto& [first, end] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 36}, {5, 17}, {11, 12}, {13, 30}, {35, 36}, {20, 20}}) {
    for (const int jobs : {1, 3}) {
      for (const bool share : {true, false}) {
        CAPTURE(first);
        CAPTURE(end);
        CAPTURE(jobs);
        CAPTURE(share);
        cli_common::SweepOptions o;
        o.jobs = jobs;
        o.share_graphs = share;
        o.first = first;
        o.end = end;
        std::vector<std::string> rows;
        run_sweep(a, in, o, [&](const sim_io::Row& r) { rows.push_back(sim_io::csv_row(r)); });
        CHECK(rows == std::vector<std::string>(reference.begin() + first, reference.begin() + end));
      }
    }
  }
}

TEST_CASE("a cancelled sweep stops after whole rows and throws Cancelled") {
  CommonFlags f;
  f.model = "tiny";
  f.device = "dev";
  f.strategy = "none,full";
  f.batch = "1:40";
  f.seq = "64";
  const Axes a = parse_axes(f);
  const Inputs in = tiny_inputs(1);
  for (const int jobs : {1, 3}) {
    std::atomic<bool> cancel{false};
    cli_common::SweepOptions o;
    o.jobs = jobs;
    o.cancel = &cancel;
    int64_t seen = 0;
    CHECK_THROWS_AS(run_sweep(a, in, o,
                              [&](const sim_io::Row& r) {
                                CHECK(r.row_index == seen++);
                                if (seen == 7) cancel = true;
                              }),
                    cli_common::Cancelled);
    CHECK(seen == 7);
  }
}

TEST_CASE("an exception from the consumer stops the sweep and propagates") {
  CommonFlags f;
  f.model = "tiny";
  f.device = "dev";
  f.batch = "1:40";
  f.seq = "64";
  const Axes a = parse_axes(f);
  const Inputs in = tiny_inputs(1);
  int seen = 0;
  CHECK_THROWS_AS(run_sweep(a, in, {3, 4},
                            [&](const sim_io::Row&) {
                              if (++seen == 5) throw std::runtime_error("disk full");
                            }),
                  std::runtime_error);
  CHECK(seen == 5);
}
