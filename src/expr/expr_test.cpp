#include "expr/expr.h"

#include <limits>

#include <gtest/gtest.h>

namespace peak::expr {
namespace {

int64_t eval_ok(std::string_view text, const Env& env = {}) {
  auto r = evaluate(text, env);
  EXPECT_TRUE(r.is_ok()) << text << ": " << (r.is_ok() ? "" : r.error());
  return r.is_ok() ? *r : -999999;
}

std::string eval_err(std::string_view text, const Env& env = {}) {
  auto r = evaluate(text, env);
  EXPECT_FALSE(r.is_ok()) << text << " evaluated to " << (r.is_ok() ? *r : 0);
  return r.is_ok() ? "" : r.error();
}

std::string parse_err(std::string_view text) {
  auto r = Expression::parse(text);
  EXPECT_FALSE(r.is_ok()) << text << " parsed";
  return r.is_ok() ? "" : r.error();
}

TEST(Expr, Literals) {
  EXPECT_EQ(eval_ok("0"), 0);
  EXPECT_EQ(eval_ok("123"), 123);
  EXPECT_EQ(eval_ok("  42  "), 42);
  EXPECT_EQ(eval_ok("\t1 +\n 2\r\n"), 3);  // any blanks between tokens
  EXPECT_EQ(eval_ok("9223372036854775807"), std::numeric_limits<int64_t>::max());
}

TEST(Expr, Precedence) {
  EXPECT_EQ(eval_ok("2 + 3 * 4"), 14);
  EXPECT_EQ(eval_ok("(2 + 3) * 4"), 20);
  EXPECT_EQ(eval_ok("10 - 4 - 3"), 3);  // left associative
  EXPECT_EQ(eval_ok("100 / 10 / 5"), 2);
  EXPECT_EQ(eval_ok("7 % 4 * 2"), 6);
  EXPECT_EQ(eval_ok("-2 * 3"), -6);
  EXPECT_EQ(eval_ok("- -5"), 5);
  EXPECT_EQ(eval_ok("!0 + 1"), 2);
  EXPECT_EQ(eval_ok("1 << 2 + 1"), 8);  // + binds tighter than <<
  EXPECT_EQ(eval_ok("1 + 2 < 4"), 1);   // << and + bind tighter than <
  EXPECT_EQ(eval_ok("1 << 3 > 7"), 1);
  EXPECT_EQ(eval_ok("1 < 2 == 1"), 1);  // < binds tighter than ==
  EXPECT_EQ(eval_ok("1 == 1 && 0 == 0"), 1);
  EXPECT_EQ(eval_ok("1 || 0 && 0"), 1);  // && binds tighter than ||
  EXPECT_EQ(eval_ok("0 && 1 || 1"), 1);
  EXPECT_EQ(eval_ok("1 ? 2 : 3"), 2);
  EXPECT_EQ(eval_ok("0 ? 2 : 3"), 3);
  EXPECT_EQ(eval_ok("0 ? 1 : 0 ? 2 : 3"), 3);  // right associative
  EXPECT_EQ(eval_ok("1 ? 0 ? 5 : 6 : 7"), 6);
  EXPECT_EQ(eval_ok("1 + 1 ? 10 : 20"), 10);
}

TEST(Expr, Operators) {
  EXPECT_EQ(eval_ok("7 / 2"), 3);
  EXPECT_EQ(eval_ok("-7 / 2"), -3);  // truncation, like C
  EXPECT_EQ(eval_ok("-7 % 2"), -1);
  EXPECT_EQ(eval_ok("256 >> 4"), 16);
  EXPECT_EQ(eval_ok("-16 >> 2"), -4);
  EXPECT_EQ(eval_ok("3 <= 3"), 1);
  EXPECT_EQ(eval_ok("3 >= 4"), 0);
  EXPECT_EQ(eval_ok("3 != 4"), 1);
  EXPECT_EQ(eval_ok("!5"), 0);
  EXPECT_EQ(eval_ok("5 && 7"), 1);  // booleans are 0/1
  EXPECT_EQ(eval_ok("0 || 9"), 1);
}

TEST(Expr, Functions) {
  EXPECT_EQ(eval_ok("min(3, 1, 2)"), 1);
  EXPECT_EQ(eval_ok("max(3, 1, 2)"), 3);
  EXPECT_EQ(eval_ok("min(5)"), 5);
  EXPECT_EQ(eval_ok("ceil_div(7, 2)"), 4);
  EXPECT_EQ(eval_ok("ceil_div(8, 2)"), 4);
  EXPECT_EQ(eval_ok("ceil_div(-7, 2)"), -3);
  EXPECT_EQ(eval_ok("floor_div(7, 2)"), 3);
  EXPECT_EQ(eval_ok("floor_div(-7, 2)"), -4);
  EXPECT_EQ(eval_ok("floor_div(7, -2)"), -4);
  EXPECT_EQ(eval_ok("round_up(100, 32)"), 128);
  EXPECT_EQ(eval_ok("round_up(128, 32)"), 128);
  EXPECT_EQ(eval_ok("round_up(0, 32)"), 0);
  EXPECT_EQ(eval_ok("abs(-9)"), 9);
  EXPECT_EQ(eval_ok("abs(9)"), 9);
  EXPECT_EQ(eval_ok("is_pow2(64)"), 1);
  EXPECT_EQ(eval_ok("is_pow2(1)"), 1);
  EXPECT_EQ(eval_ok("is_pow2(96)"), 0);
  EXPECT_EQ(eval_ok("is_pow2(0)"), 0);
  EXPECT_EQ(eval_ok("is_pow2(-4)"), 0);
  EXPECT_EQ(eval_ok("log2(1)"), 0);
  EXPECT_EQ(eval_ok("log2(1024)"), 10);
  EXPECT_EQ(eval_ok("log2(1023)"), 9);
  EXPECT_EQ(eval_ok("pow(2, 10)"), 1024);
  EXPECT_EQ(eval_ok("pow(-3, 3)"), -27);
  EXPECT_EQ(eval_ok("pow(7, 0)"), 1);
  EXPECT_EQ(eval_ok("pow(2, 62)"), int64_t{1} << 62);
  EXPECT_EQ(eval_ok("pow(-2, 63)"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(eval_ok("max(min(4, 8), ceil_div(9, 2)) * 2"), 10);
}

TEST(Expr, Identifiers) {
  Env env{{"M", 64}, {"N", 32}, {"K", 16}, {"A.size", 1024}, {"tile_m", 8}};
  EXPECT_EQ(eval_ok("2 * M * N * K", env), 65536);
  EXPECT_EQ(eval_ok("A.size == M * K", env), 1);
  EXPECT_EQ(eval_ok("ceil_div(M, tile_m)", env), 8);

  auto e = Expression::parse("A.size == M * K && B.size >= K * N + M");
  ASSERT_TRUE(e.is_ok()) << e.error();
  EXPECT_EQ(e->identifiers(), (std::vector<std::string>{"A.size", "B.size", "K", "M", "N"}));
  EXPECT_EQ(e->text(), "A.size == M * K && B.size >= K * N + M");
  auto f = Expression::parse("min(x, 3)");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->identifiers(), std::vector<std::string>{"x"});  // function names are not identifiers
}

TEST(Expr, ReusableAndCopyable) {
  auto e = Expression::parse("M * 2");
  ASSERT_TRUE(e.is_ok());
  Expression copy = *e;
  Expression moved = std::move(copy);
  EXPECT_EQ(*moved.eval({{"M", 3}}), 6);
  EXPECT_EQ(*e->eval({{"M", 5}}), 10);
  Expression empty;
  EXPECT_FALSE(empty.eval({}).is_ok());
  EXPECT_TRUE(empty.identifiers().empty());
}

TEST(Expr, UnknownIdentifierNamesColumnAndKnownNames) {
  std::string e = eval_err("M + Q", {{"M", 1}, {"N", 2}});
  EXPECT_EQ(e, "column 5: unknown identifier 'Q' (known: M, N)");
  e = eval_err("A.size", {});
  EXPECT_EQ(e, "column 1: unknown identifier 'A.size' (known: none)");
}

TEST(Expr, ShortCircuitAvoidsErrors) {
  EXPECT_EQ(eval_ok("0 && 1 / 0"), 0);
  EXPECT_EQ(eval_ok("1 || 1 / 0"), 1);
  EXPECT_EQ(eval_ok("1 ? 5 : 1 / 0"), 5);
  EXPECT_EQ(eval_ok("K > 0 && 100 / K > 2", {{"K", 0}}), 0);
}

TEST(Expr, DivisionByZero) {
  EXPECT_EQ(eval_err("10 / (3 - 3)"), "column 4: division by zero ('/' by 0)");
  EXPECT_EQ(eval_err("10 % 0"), "column 4: division by zero ('%' by 0)");
  EXPECT_EQ(eval_err("1 + ceil_div(4, 0)"), "column 5: division by zero in ceil_div");
  EXPECT_NE(eval_err("floor_div(4, 0)").find("column 1: division by zero"), std::string::npos);
  EXPECT_NE(eval_err("round_up(4, 0)").find("column 1: division by zero"), std::string::npos);
}

TEST(Expr, Overflow) {
  EXPECT_EQ(eval_err("9223372036854775807 + 1"), "column 21: '+' overflows 64-bit integers");
  EXPECT_EQ(eval_err("M * M", {{"M", int64_t{1} << 32}}),
            "column 3: '*' overflows 64-bit integers");
  EXPECT_NE(eval_err("-9223372036854775807 - 2").find("column 22"), std::string::npos);
  EXPECT_NE(eval_err("1 << 63").find("overflows"), std::string::npos);
  EXPECT_EQ(eval_ok("1 << 62"), int64_t{1} << 62);
  EXPECT_EQ(eval_ok("-1 << 63"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(eval_ok("0 << 63"), 0);
  EXPECT_NE(eval_err("3 << 62").find("overflows"), std::string::npos);
  EXPECT_NE(eval_err("1 << 64").find("shift count 64"), std::string::npos);
  EXPECT_NE(eval_err("1 >> -1").find("shift count -1"), std::string::npos);
  EXPECT_NE(eval_err("pow(2, 63)").find("column 1: 'pow' overflows"), std::string::npos);
  EXPECT_NE(eval_err("pow(10, 19)").find("overflows"), std::string::npos);
  EXPECT_NE(eval_err("round_up(9223372036854775807, 2)").find("overflows"), std::string::npos);
  Env env{{"m", std::numeric_limits<int64_t>::min()}};
  EXPECT_NE(eval_err("-m", env).find("column 1: '-' overflows"), std::string::npos);
  EXPECT_NE(eval_err("abs(m)", env).find("overflows"), std::string::npos);
  EXPECT_NE(eval_err("m / -1", env).find("overflows"), std::string::npos);
  EXPECT_NE(parse_err("99999999999999999999")
                .find("column 1: the number 99999999999999999999 does not fit"),
            std::string::npos);
}

TEST(Expr, DomainErrors) {
  EXPECT_EQ(eval_err("log2(0)"), "column 1: log2 of 0 (needs a positive value)");
  EXPECT_EQ(eval_err("2 + pow(2, -1)"), "column 5: pow with a negative exponent (-1)");
}

TEST(Expr, SyntaxErrorsWithColumns) {
  EXPECT_EQ(parse_err("min(1, 2"),
            "column 9: expected ')' after arguments of min, found end of input");
  EXPECT_EQ(parse_err("min(1 2)"), "column 7: expected ')' after arguments of min, found number 2");
  EXPECT_EQ(parse_err(""), "column 1: expected an expression, found end of input");
  EXPECT_EQ(parse_err("2 * M *"), "column 8: expected an expression, found end of input");
  EXPECT_EQ(parse_err("(1 + 2"),
            "column 7: expected ')' to close the '(' at column 1, found end of input");
  EXPECT_EQ(parse_err("1 + 2)"), "column 6: unexpected ')' after the end of the expression");
  EXPECT_EQ(parse_err("M = 3"), "column 3: '=' is not an operator; write '==' to compare");
  EXPECT_EQ(parse_err("a & b"), "column 3: '&' is not supported; write '&&' for logical and");
  EXPECT_EQ(parse_err("a | b"), "column 3: '|' is not supported; write '||' for logical or");
  EXPECT_EQ(parse_err("1 $ 2"), "column 3: unexpected character '$'");
  EXPECT_EQ(parse_err("1 ? 2"),
            "column 6: expected ':' of the '?' at column 3, found end of input");
  EXPECT_EQ(parse_err("3M"), "column 2: unexpected 'M' after the number 3");
  EXPECT_EQ(parse_err("A. + 1"), "column 1: malformed identifier 'A.' (write names like A.size)");
  EXPECT_EQ(parse_err("1 + * 2"), "column 5: expected an expression, found '*'");
  EXPECT_EQ(parse_err("2.5"), "column 2: unexpected character '.'");
}

TEST(Expr, FunctionErrors) {
  EXPECT_EQ(parse_err("  sqrt(4)"),
            "column 3: unknown function 'sqrt' (known functions: min, max, ceil_div, floor_div, "
            "round_up, abs, is_pow2, log2, pow)");
  EXPECT_EQ(parse_err("ceil_div(1, 2, 3)"), "column 1: ceil_div takes 2 arguments, got 3");
  EXPECT_EQ(parse_err("abs()"), "column 1: abs takes 1 argument, got 0");
  EXPECT_EQ(parse_err("max()"), "column 1: max takes at least 1 argument, got 0");
}

}  // namespace
}  // namespace peak::expr
