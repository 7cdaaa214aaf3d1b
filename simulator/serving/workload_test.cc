#include "simulator/serving/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace parallax::serving {
namespace {

bool has_error(const Diagnostics& ds, const std::string& needle) {
  for (const auto& d : ds) {
    if (d.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(WorkloadPoisson, DeterministicWithExponentialGaps) {
  const int64_t n = 20000;
  const double rate = 4.0;
  auto a = poisson_requests(n, rate, 100, 20, 7);
  auto b = poisson_requests(n, rate, 100, 20, 7);
  auto c = poisson_requests(n, rate, 100, 20, 8);
  ASSERT_EQ(a.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i].id, i);
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].prompt_len, 100);
    EXPECT_EQ(a[i].output_len, 20);
    if (i > 0) {
      EXPECT_GE(a[i].arrival_s, a[i - 1].arrival_s);
    }
  }
  EXPECT_NE(a.back().arrival_s, c.back().arrival_s);
  // Mean gap of an exponential = 1 / rate; the sample mean's standard error is
  // (1 / rate) / sqrt(n) = 0.7%, so 3% is > 4 sigma.
  EXPECT_NEAR(a.back().arrival_s / n, 1.0 / rate, 0.03 / rate);
  // The coefficient of variation of exponential gaps is 1.
  double sum2 = 0;
  for (int64_t i = 1; i < n; ++i) {
    const double g = a[i].arrival_s - a[i - 1].arrival_s - 1.0 / rate;
    sum2 += g * g;
  }
  EXPECT_NEAR(std::sqrt(sum2 / (n - 1)) * rate, 1.0, 0.05);
}

TEST(WorkloadPoisson, ZeroOrInfiniteRateArrivesAtOnce) {
  for (double rate : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    auto rs = poisson_requests(5, rate, 10, 2, 1);
    ASSERT_EQ(rs.size(), 5u);
    for (const auto& r : rs) EXPECT_EQ(r.arrival_s, 0.0);
  }
}

TEST(WorkloadTrace, ParsesJsonLinesWithAliasesSortedByArrival) {
  const std::string text =
      "{\"arrival_s\": 0.5, \"prompt_len\": 812, \"output_len\": 128}\r\n"
      "\n"
      "{\"timestamp\": 0.25, \"input_len\": 10, \"output_tokens\": 3, \"model\": \"x\"}\n"
      "   \n"
      "{\"arrival_s\": 1, \"prompt_tokens\": 7.0, \"output_len\": 1}\n";
  auto r = parse_requests(text, "trace.jsonl");
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_EQ(r->size(), 3u);
  // Sorted by arrival; ids keep the record's position in the file.
  EXPECT_EQ((*r)[0].id, 1);
  EXPECT_EQ((*r)[0].arrival_s, 0.25);
  EXPECT_EQ((*r)[0].prompt_len, 10);
  EXPECT_EQ((*r)[0].output_len, 3);
  EXPECT_EQ((*r)[1].id, 0);
  EXPECT_EQ((*r)[1].prompt_len, 812);
  EXPECT_EQ((*r)[1].output_len, 128);
  EXPECT_EQ((*r)[2].id, 2);
  EXPECT_EQ((*r)[2].prompt_len, 7);
}

TEST(WorkloadTrace, ParsesCsvWithAnyColumnOrder) {
  const std::string text =
      "\xEF\xBB\xBFinput_len, output_tokens ,timestamp,user\n"
      "100,20,2.0,alice\n"
      "\n"
      "50, 5, 1.5 ,bob\r\n";
  auto r = parse_requests(text, "trace.csv");
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].id, 1);
  EXPECT_EQ((*r)[0].arrival_s, 1.5);
  EXPECT_EQ((*r)[0].prompt_len, 50);
  EXPECT_EQ((*r)[0].output_len, 5);
  EXPECT_EQ((*r)[1].arrival_s, 2.0);
  EXPECT_EQ((*r)[1].prompt_len, 100);
}

TEST(WorkloadTrace, ReportsEveryBadJsonLine) {
  const std::string text =
      "{\"arrival_s\": 0, \"prompt_len\": 8, \"output_len\": 4}\n"      // 1 good
      "{\"arrival_s\": 0, \"prompt_len\": 8}\n"                         // 2 missing output
      "{\"arrival_s\": 0, \"prompt_len\": -5, \"output_len\": 4}\n"     // 3 negative
      "\n"                                                              // 4 blank
      "{\"arrival_s\": -1, \"prompt_len\": 2.5, \"output_len\": 4}\n"   // 5 two problems
      "{\"arrival_s\": 0, \"prompt_len\": \"8\", \"output_len\": 4}\n"  // 6 string
      "{\"arrival_s\": 0, \"prompt_len\": 8, \n"                        // 7 broken JSON
      "[1, 2, 3]\n";                                                    // 8 not an object
  auto r = parse_requests(text, "t.jsonl");
  ASSERT_FALSE(r.ok());
  const auto& e = r.errors();
  EXPECT_EQ(e.size(), 7u) << r.error_text();
  EXPECT_TRUE(has_error(e,
                        "t.jsonl:2: output_len: missing (hint: accepted keys: output_len, "
                        "output_tokens, output_length)"))
      << r.error_text();
  EXPECT_TRUE(has_error(e, "t.jsonl:3: prompt_len: must be an integer in [1, 33554432], got -5"));
  EXPECT_TRUE(has_error(e, "t.jsonl:5: arrival_s: must be a finite number >= 0"));
  EXPECT_TRUE(has_error(e, "t.jsonl:5: prompt_len: must be an integer in [1, 33554432], got 2.5"));
  EXPECT_TRUE(has_error(e, "t.jsonl:6: prompt_len: must be a number, got \"8\""));
  EXPECT_TRUE(has_error(e, "t.jsonl:7:34: malformed JSON")) << r.error_text();
  EXPECT_TRUE(has_error(e, "t.jsonl:8: want a JSON object, got [1, 2, 3]"));
}

TEST(WorkloadTrace, ReadsMooncakeHashIds) {
  // Mooncake's keys (input_length, output_length, hash_ids); arrivals already in seconds.
  const std::string text =
      "{\"timestamp\": 2, \"input_length\": 1100, \"output_length\": 9, "
      "\"hash_ids\": [0, 1, 7]}\n"
      "{\"timestamp\": 1, \"input_length\": 600, \"output_length\": 3}\n";
  auto r = parse_requests(text, "mooncake.jsonl", 512);
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].prompt_len, 600);  // sorted by arrival
  EXPECT_TRUE((*r)[0].prefix_hashes.empty());
  EXPECT_EQ((*r)[1].prefix_hashes, (std::vector<uint64_t>{0, 1, 7}));
  EXPECT_EQ((*r)[1].hash_block, 512);
  EXPECT_EQ((*r)[1].output_len, 9);

  auto bad = parse_requests(
      "{\"arrival_s\": 0, \"prompt_len\": 8, \"output_len\": 4, \"hash_ids\": [1, -2]}\n"
      "{\"arrival_s\": 0, \"prompt_len\": 8, \"output_len\": 4, \"hash_ids\": 5}\n",
      "h.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.errors().size(), 2u) << bad.error_text();
  EXPECT_TRUE(has_error(bad.errors(), "h.jsonl:1: hash_ids[1]: must be an integer >= 0, got -2"))
      << bad.error_text();
  EXPECT_TRUE(has_error(bad.errors(), "h.jsonl:2: hash_ids: must be an array of integers"));
}

TEST(WorkloadPrefix, EachRequestGetsOneOfTheGroupsDeterministically) {
  auto a = poisson_requests(400, 5.0, 1000, 10, 3);
  auto b = a;
  assign_shared_prefixes(&a, 700, 4, 9);
  assign_shared_prefixes(&b, 700, 4, 9);
  std::vector<int> count(4, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].prefix_hashes.size(), 1u);
    EXPECT_EQ(a[i].prefix_hashes, b[i].prefix_hashes);
    EXPECT_EQ(a[i].hash_block, 700);
    ASSERT_LT(a[i].prefix_hashes[0], 4u);
    ++count[a[i].prefix_hashes[0]];
  }
  // 400 draws over 4 groups: each near 100 (binomial sd ~8.7).
  for (int c : count) EXPECT_NEAR(c, 100, 40);
  EXPECT_EQ(a[7].arrival_s, poisson_requests(400, 5.0, 1000, 10, 3)[7].arrival_s);
}

TEST(WorkloadTrace, ReportsEveryBadCsvRow) {
  const std::string text =
      "arrival_s,prompt_len,output_len\n"
      "0,8,4\n"
      "0,8\n"
      "abc,8,4\n"
      "0.5,0,-2\n";
  auto r = parse_requests(text, "t.csv");
  ASSERT_FALSE(r.ok());
  const auto& e = r.errors();
  EXPECT_EQ(e.size(), 4u) << r.error_text();
  EXPECT_TRUE(has_error(e, "t.csv:3: row: want 3 fields as the header, got 2"));
  EXPECT_TRUE(has_error(e, "t.csv:4: arrival_s: not a number, got 'abc'"));
  EXPECT_TRUE(has_error(e, "t.csv:5: prompt_len: must be an integer in [1, 33554432], got 0"));
  EXPECT_TRUE(has_error(e, "t.csv:5: output_len: must be an integer in [1, 33554432], got -2"));
}

TEST(WorkloadTrace, KeysAndColumnsNotReadAreNotedOnce) {
  Diagnostics notes;
  auto r = parse_requests(
      "{\"arrival_s\": 0, \"prompt_len\": 8, \"output_len\": 4, \"prio\": 1}\n"
      "{\"arrival_s\": 1, \"prompt_len\": 8, \"output_len\": 4, \"prio\": 2}\n",
      "t.jsonl", 512, &notes);
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].str().rfind("t.jsonl:1: 'prio' is not read", 0), 0u) << notes[0].str();
  notes.clear();
  auto c = parse_requests("arrival_s,prompt_len,output_len,user\n0,8,4,7\n", "t.csv", 512, &notes);
  ASSERT_TRUE(c.ok()) << c.error_text();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].str().rfind("t.csv:1: 'user' is not read", 0), 0u) << notes[0].str();
}

TEST(WorkloadTrace, CsvHeaderMustNameEveryColumn) {
  auto r = parse_requests("time,prompt_len\n0,8\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors().size(), 2u) << r.error_text();
  EXPECT_TRUE(has_error(r.errors(),
                        "t.csv:1: header: no column arrival_s, got time,prompt_len "
                        "(hint: accepted names: arrival_s, timestamp)"));
  EXPECT_TRUE(has_error(r.errors(), "header: no column output_len"));
}

TEST(WorkloadTrace, EmptyTraceIsAnError) {
  auto r = parse_requests("\n  \n", "empty.jsonl");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_error(r.errors(), "empty.jsonl: no requests"));
  auto h = parse_requests("arrival_s,prompt_len,output_len\n", "h.csv");
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(has_error(h.errors(), "h.csv: no requests"));
}

}  // namespace
}  // namespace parallax::serving
