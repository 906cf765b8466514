// Strategy parsing, canonical strings and resolution (DESIGN.md §4).
#include <doctest/doctest.h>

#include "sim/error.hpp"
#include "sim/strategy.hpp"

using namespace sim;

TEST_CASE("every strategy of the table parses and round-trips through its canonical string") {
  for (const char* text : {"none", "full", "every:4", "block:2", "sqrt", "selective", "sac:mm",
                           "custom:none@0-3+full@4-23+seg@24-31/4", "custom:sel@0-1+sac@2"}) {
    CAPTURE(text);
    const Strategy s = parse_strategy(text);
    CHECK(s.canonical() == text);
    CHECK(parse_strategy(s.canonical()) == s);
  }
}

TEST_CASE("custom specs are normalized: sorted, adjacent clauses merged") {
  CHECK(parse_strategy("custom:full@4-7+none@0-3").canonical() == "custom:none@0-3+full@4-7");
  CHECK(parse_strategy("custom:none@0-1+none@2-3").canonical() == "custom:none@0-3");
  CHECK(parse_strategy("custom:seg@0-3/4+seg@4-7/4").canonical() == "custom:seg@0-7/4");
  // a seg clause whose length is not a multiple of its group does not merge (different plan)
  CHECK(parse_strategy("custom:seg@0-2/2+seg@3-4/2").canonical() == "custom:seg@0-2/2+seg@3-4/2");
}

TEST_CASE("bad strategies are one-line errors naming --strategy") {
  for (const char* text : {"", "nonsense", "every", "every:0", "every:x", "block:-1", "sac",
                           "sac:all", "full:2", "custom:", "custom:full", "custom:bogus@0-1",
                           "custom:full@3-1", "custom:none@0-3+full@2-5", "custom:full@0-3/2"}) {
    CAPTURE(text);
    try {
      parse_strategy(text);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(e.where() == "--strategy");
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("resolve: segment layouts") {
  SUBCASE("full: one segment per block") {
    const Plan p = resolve(parse_strategy("full"), 3);
    CHECK(p.segments == std::vector<Segment>{{0, 0}, {1, 1}, {2, 2}});
  }
  SUBCASE("every:k: groups of k, the last smaller") {
    const Plan p = resolve(parse_strategy("every:4"), 10);
    CHECK(p.segments == std::vector<Segment>{{0, 3}, {4, 7}, {8, 9}});
  }
  SUBCASE("block:k: the first k blocks checkpointed, the rest stored") {
    const Plan p = resolve(parse_strategy("block:2"), 5);
    CHECK(p.segments == std::vector<Segment>{{0, 0}, {1, 1}});
    CHECK(p.mode[4] == BlockMode::kStore);
  }
  SUBCASE("sqrt: m = round(sqrt n), the first n mod m one longer") {
    CHECK(sqrt_segments(10) == std::vector<Segment>{{0, 3}, {4, 6}, {7, 9}});  // m = 3
    CHECK(sqrt_segments(16).size() == 4);
    CHECK(sqrt_segments(96).size() == 10);  // round(9.80) = 10; 96 = 6*10 - 4 ... sizes 10,10,...,9
    const auto s96 = sqrt_segments(96);
    for (size_t i = 0; i < s96.size(); ++i) CHECK(s96[i].last - s96[i].first + 1 == (i < 6 ? 10 : 9));
    CHECK(sqrt_segments(1) == std::vector<Segment>{{0, 0}});
  }
  SUBCASE("custom covers every block exactly once") {
    const Plan p = resolve(parse_strategy("custom:none@0-3+full@4-5+seg@6-9/2"), 10);
    CHECK(p.segments == std::vector<Segment>{{4, 4}, {5, 5}, {6, 7}, {8, 9}});
    CHECK(p.mode[0] == BlockMode::kStore);
  }
  SUBCASE("selective and sac:mm mark every block") {
    CHECK(resolve(parse_strategy("selective"), 2).mode[1] == BlockMode::kSelective);
    CHECK(resolve(parse_strategy("sac:mm"), 2).mode[0] == BlockMode::kSacMm);
  }
}

TEST_CASE("resolve rejects plans that do not fit the model") {
  CHECK_THROWS_AS(resolve(parse_strategy("every:13"), 12), ConfigError);
  CHECK_THROWS_AS(resolve(parse_strategy("block:13"), 12), ConfigError);
  CHECK_THROWS_WITH(resolve(parse_strategy("custom:none@0-3"), 6),
                    "--strategy: 'custom:none@0-3': blocks 4-5 are not covered by any clause");
  CHECK_THROWS_WITH(resolve(parse_strategy("custom:none@1-5"), 6),
                    "--strategy: 'custom:none@1-5': blocks 0-0 are not covered by any clause");
  CHECK_THROWS_AS(resolve(parse_strategy("custom:none@0-9"), 6), ConfigError);
}
