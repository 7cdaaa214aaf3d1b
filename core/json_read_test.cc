#include "core/json_read.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/test_support.h"

namespace parallax {
namespace {

using testing::mentions;

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonRead, NestingUpToTheBoundIsRead) {
  auto j = parse_json(nested(kMaxJsonDepth), "ok.json");
  EXPECT_TRUE(j.ok()) << j.error_text();
}

TEST(JsonRead, NestingBeyondTheBoundIsRefusedWhereItGoesTooDeep) {
  // The 65th '[' is column 65 of line 1.
  auto j = parse_json(nested(kMaxJsonDepth + 1), "deep.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.errors()[0].where, "deep.json:1:65");
  EXPECT_TRUE(mentions(j, "nested deeper than 64 levels")) << j.error_text();
}

TEST(JsonRead, HundredThousandLevelsAreRefusedNotOverflowingTheStack) {
  auto j = parse_json("{\"a\": " + nested(100000) + "}", "huge.json");
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(mentions(j, "nested deeper")) << j.error_text();
}

TEST(JsonRead, BracketsInsideStringsDoNotCount) {
  auto j = parse_json("{\"a\": \"" + std::string(1000, '[') + "\\\"]\"}", "s.json");
  EXPECT_TRUE(j.ok()) << j.error_text();
}

TEST(JsonRead, NumberOverflowIsLocatedNotThrown) {
  // Line 2, the value starts at column 13 and the error points into it.
  auto j = parse_json("{\n  \"hidden\": 1e400\n}", "m.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.errors()[0].where.rfind("m.json:2:", 0), 0u) << j.error_text();
  EXPECT_TRUE(mentions(j, "number overflow parsing '1e400'")) << j.error_text();
}

TEST(JsonRead, LargeIntegersBeyondInt64BecomeDoubles) {
  auto j = parse_json("[123456789012345678901234567890]", "i.json");
  ASSERT_TRUE(j.ok()) << j.error_text();
  EXPECT_TRUE((*j)[0].is_number_float());
}

TEST(JsonRead, AKeyGivenTwiceIsRefusedWithItsPointerAndLine) {
  auto j = parse_json("{\"a\": {\"b\": 1,\n \"b\": 2}}", "dup.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.errors()[0].where, "dup.json:2:2") << j.error_text();
  EXPECT_TRUE(mentions(j, "key /a/b given twice")) << j.error_text();
}

TEST(JsonRead, TheSameKeyInTwoObjectsIsFine) {
  auto j = parse_json(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}}])", "ok.json");
  EXPECT_TRUE(j.ok()) << j.error_text();
}

TEST(JsonRead, ALineOfALargerFileCountsFromItsFirstLine) {
  auto j = parse_json("{\"a\": }", "records.jsonl", 7);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.errors()[0].where.rfind("records.jsonl:7:", 0), 0u) << j.error_text();
}

TEST(JsonRead, ExcerptEscapesControlCharactersAndIsBounded) {
  EXPECT_EQ(text_excerpt("a\x1b[2Jb\n"), "a\\x1b[2Jb\\n");
  const std::string huge(10 << 20, 'x');
  const std::string e = text_excerpt(huge, 80);
  EXPECT_LT(e.size(), 120u);
  EXPECT_NE(e.find("10 MiB in all"), std::string::npos) << e;
}

TEST(JsonRead, JsonExcerptDescribesLargeContainers) {
  Json big = Json::array();
  for (int i = 0; i < 1000; ++i) big.push_back(i);
  EXPECT_EQ(json_excerpt(big), "an array of 1000 items");
  EXPECT_EQ(json_excerpt(Json("a\tb")), "\"a\\tb\"");
  EXPECT_LT(json_excerpt(Json(std::string(1 << 20, 'y'))).size(), 120u);
}

TEST(JsonFieldsRead, RangesNameTheFieldTheRangeAndWhy) {
  Diagnostics d;
  const Json j = {{"n", 0}, {"x", 2.5}};  // JsonFields keeps a reference
  JsonFields f(j, "f.json:", &d);
  EXPECT_EQ(f.integer_in("n", 1, 8, "a count"), 1);
  EXPECT_EQ(f.number_in("x", 0, 1, "a fraction", 0.5), 0.5);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].where, "f.json:/n");
  EXPECT_EQ(d[0].what, "got 0, want 1..8");
  EXPECT_EQ(d[0].hint, "a count");
  EXPECT_EQ(d[1].where, "f.json:/x");
}

TEST(JsonFieldsRead, ANameMustBePrintable) {
  Diagnostics d;
  const Json j = {{"name", "h100\x1b[31m"}};
  JsonFields f(j, "p.json:", &d);
  f.name("name");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where, "p.json:/name");
  EXPECT_NE(d[0].what.find("control character"), std::string::npos) << d[0].what;
  EXPECT_EQ(d[0].what.find('\x1b'), std::string::npos) << "the message must escape it";
}

TEST(JsonFieldsRead, AnArrayFieldOfAnotherTypeIsReported) {
  Diagnostics d;
  const Json j = {{"gemm", "fast"}, {"ok", Json::array()}};
  JsonFields f(j, "t.json:", &d);
  EXPECT_EQ(f.array("gemm"), nullptr);
  EXPECT_NE(f.array("ok"), nullptr);
  EXPECT_EQ(f.array("absent"), nullptr);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].where, "t.json:/gemm");
  EXPECT_EQ(d[0].what, "expected an array, got \"fast\"");
}

TEST(JsonFieldsRead, MistypedValuesAreQuotedBriefly) {
  Diagnostics d;
  const Json j = {{"layers", std::string(1 << 20, 'z')}};
  JsonFields f(j, "m.json:", &d);
  f.integer("layers");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_LT(d[0].what.size(), 160u);
}

}  // namespace
}  // namespace parallax
