// Checked arithmetic and config validation: bad input is a one-line error naming file and field.
#include <doctest/doctest.h>

#include <limits>

#include "fixtures.hpp"
#include "sim/error.hpp"

using namespace sim;

TEST_CASE("checked arithmetic reports overflow as a config error") {
  CHECK(checked_mul(1LL << 31, 1LL << 31, "x") == 1LL << 62);
  CHECK_THROWS_AS(checked_mul(1LL << 32, 1LL << 32, "bytes"), ConfigError);
  CHECK_THROWS_AS(checked_add(std::numeric_limits<int64_t>::max(), 1, "bytes"), ConfigError);
  CHECK(checked_product({2, 3, 7}, "x") == 42);
}

TEST_CASE("model validation names the file and the field") {
  ModelConfig m = fixtures::gpt2_small();
  m.source = "models/x.json";
  m.hidden = 0;
  CHECK_THROWS_WITH(validate(m), "models/x.json: hidden: must be a positive integer, got 0");
  m = fixtures::gpt2_small();
  m.source = "models/x.json";
  m.kv_heads = 5;
  CHECK_THROWS_WITH(validate(m),
                    "models/x.json: kv_heads: query heads (12) must be a multiple of KV heads (5)");
  m = fixtures::gpt2_small();
  m.layers = -3;
  CHECK_THROWS_AS(validate(m), ConfigError);
  m = fixtures::gpt2_small();
  m.source = "models/x.json";
  m.layers = 1'000'000'000;
  CHECK_THROWS_WITH(validate(m),
                    "models/x.json: layers: 1000000000 blocks: at most 16384 are simulated");
  m = fixtures::gpt2_small();
  m.attn_dropout = 1.5;
  CHECK_THROWS_AS(validate(m), ConfigError);
}

TEST_CASE("a model too large for 64-bit byte counts is an error, not a wrong number") {
  ModelConfig m = fixtures::gpt2_small();
  m.hidden = 1LL << 40;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = 4 * m.hidden;
  CHECK_THROWS_AS(validate(m), ConfigError);
  m = fixtures::gpt2_small();
  m.source = "models/gpt2-small.json";
  TrainSetup s;
  s.micro_batch = 1LL << 40;
  try {
    simulate(m, s, fixtures::h100(), parse_strategy("none"));
    FAIL("overflow accepted");
  } catch (const ConfigError& e) {
    CHECK(e.where() == "models/gpt2-small.json");
    CHECK(std::string(e.what()).find("overflows 64 bits with --batch 1099511627776 --seq 1024") !=
          std::string::npos);
  }
}

TEST_CASE("an error names a flag's knob once, and keeps a field that says more") {
  // The flag is the knob: "--lora-rank: lora_rank: ..." would name it twice.
  const Unsupported lora("--lora-rank", "lora_rank", "LoRA under --impl megatron");
  CHECK(std::string(lora.what()) == "--lora-rank: not supported yet: LoRA under --impl megatron");
  CHECK(lora.field() == "lora_rank");  // still there for callers that map errors to fields
  CHECK(lora.message() == "not supported yet: LoRA under --impl megatron");
  // What the code simulated lacks reads differently from what actsim has not modeled yet
  const NotInCode tp("--tp", "tp", "tensor parallelism under --impl hf");
  CHECK(std::string(tp.what()) == "--tp: not in the code simulated: tensor parallelism under --impl hf");
  CHECK(tp.field() == "tp");
  CHECK(config_error_text("--impl", "impl", "x") == "--impl: x");
  CHECK(config_error_text("--gpus-per-node", "gpus_per_node", "x") == "--gpus-per-node: x");
  // A field that is not the flag's own knob stays: the value parsed, or a sub-field.
  CHECK(config_error_text("--seq", "1k:x", "bad") == "--seq: 1k:x: bad");
  CHECK(config_error_text("--strategy", "budget", "x") == "--strategy: budget: x");
  CHECK(config_error_text("--tp", "tpx", "x") == "--tp: tpx: x");
  CHECK(config_error_text("--t", "tp", "x") == "--t: tp: x");
  // A file names its field: "models/x.json: hidden: ...", even for a key named like a flag.
  CHECK(config_error_text("models/x.json", "hidden", "x") == "models/x.json: hidden: x");
  CHECK(config_error_text("hidden", "hidden", "x") == "hidden: hidden: x");
}

TEST_CASE("set-up validation names the flag") {
  const ModelConfig m = fixtures::gpt2_small();
  TrainSetup s;
  s.micro_batch = 0;
  CHECK_THROWS_WITH(validate(m, s), "--batch: must be a positive integer");
  s = TrainSetup{};
  s.seq = 4096;  // GPT-2 has 1024 learned positions
  CHECK_THROWS_AS(validate(m, s), ConfigError);
  s = TrainSetup{};
  s.tp = 5;
  CHECK_THROWS_AS(validate(m, s), ConfigError);  // 12 heads
  s = TrainSetup{};
  s.sp = true;
  CHECK_THROWS_WITH(validate(m, s), "--sp: sequence parallelism needs --tp > 1");
  s = TrainSetup{};
  s.zero = 2;
  CHECK_THROWS_AS(validate(m, s), ConfigError);  // needs dp > 1
  s = TrainSetup{};
  s.allocator = AllocatorKind::kCaching;
  CHECK_NOTHROW(validate(m, s));  // modeled since sim/src/allocator.cpp
}

TEST_CASE("enum names round-trip") {
  for (Precision p : {Precision::kBf16Mixed, Precision::kBf16Amp, Precision::kFp16Amp, Precision::kFp32})
    CHECK(parse_precision(name(p)) == p);
  CHECK(parse_precision("bf16") == std::nullopt);
  CHECK(parse_optimizer("adam") == Optimizer::kAdamForeach);
  CHECK(parse_profile("paper") == Profile::kPaper);
  CHECK(parse_attention("flash") == AttentionKind::kFlash);
}
