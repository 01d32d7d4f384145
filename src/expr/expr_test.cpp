#include "expr/expr.h"

#include <cstdio>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "util/fs.h"
#include "util/process.h"

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

// Expression::to_c over c_helpers(), compiled by the system's C++ compiler, gives eval()'s value
// wherever eval() succeeds and sets the error flag exactly where it fails.
TEST(Expr, CTranslationMatchesEval) {
  ProcessOptions probe;
  probe.argv = {"c++", "--version"};
  probe.timeout_s = 60;
  if (auto r = run_process(probe); !r || !r->ok()) GTEST_SKIP() << "no C++ compiler (c++)";

  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<std::string> names = {"a", "b", "c", "z", "n", "big", "small", "A.size"};
  const std::vector<std::vector<int64_t>> rows = {
      {7, 3, 5, 0, -7, kMax, kMin, 100},
      {64, 2, -5, 0, -64, kMax, kMin, 0},
      {1, 63, 62, 0, -1, kMax, kMin, 1},
      {-1, 0, 1, 0, -9, kMax, kMin, 7},
      {0, -3, 64, 0, -2, kMax, kMin, 64},
      {2, 62, -1, 0, -3, kMax, kMin, 9},
      {3000000000, 3000000000, 4000000000, 0, -4000000000, kMax, kMin, 1 << 20},
      {kMax, -1, 2, 0, kMin, kMax, kMin, 5},
  };
  const std::vector<std::string> exprs = {
      // arithmetic and overflow
      "a + b * c", "a - b", "a * b", "a * c", "big + 1", "big + a", "small - 1", "small + n",
      "big * 2", "small * -1", "-small", "-a", "-n", "n * n", "c * c * c * c * c", "A.size * 2 + a",
      // division
      "a / b", "a % b", "n / b", "n % b", "a / n", "a % n", "a / z", "a % z", "small / -1",
      "small % -1", "small / n", "z / a",
      // shifts
      "a << b", "a >> b", "a << 63", "1 << 62", "1 << 63", "-1 << 63", "0 << 63", "n << 63",
      "a << -1", "a >> -1", "a >> 64", "a << 64", "n >> 2", "n >> 63", "big << 1", "small >> 63",
      "1 << c", "a >> c",
      // the division helpers, with negatives
      "ceil_div(n, b)", "floor_div(n, b)", "round_up(n, b)", "ceil_div(a, n)", "floor_div(a, n)",
      "round_up(a, n)", "ceil_div(n, c)", "floor_div(n, c)", "round_up(n, c)", "ceil_div(a, z)",
      "floor_div(a, z)", "round_up(a, z)", "floor_div(small, -1)", "ceil_div(small, -1)",
      "round_up(small, -1)", "round_up(big, 2)", "round_up(big, b)", "round_up(small, 3)",
      "ceil_div(big, a)", "floor_div(small, a)",
      // pow, log2, abs, is_pow2
      "pow(a, b)", "pow(2, 62)", "pow(2, 63)", "pow(-2, 63)", "pow(-2, 64)", "pow(3, 39)",
      "pow(3, 40)", "pow(a, n)", "pow(0, 0)", "pow(n, 3)", "pow(big, 1)", "pow(big, 0)",
      "pow(1, big)", "pow(-1, big)", "pow(2, big)", "pow(b, c)", "pow(c, b)", "pow(small, 1)",
      "pow(small, 2)", "log2(a)", "log2(z)", "log2(n)", "log2(big)", "log2(1)", "log2(c)", "abs(n)",
      "abs(small)", "abs(big)", "is_pow2(a)", "is_pow2(z)", "is_pow2(n)", "is_pow2(64)",
      "is_pow2(small)",
      // min and max of several
      "min(a, b, c)", "max(a, b, c)", "min(n, z, big)", "max(small, n, z)", "min(a)",
      "max(a / z, 1)", "min(c, a / b, n % b)", "max(big, small, a + 1)",
      // comparisons, logic, conditionals: only the branch taken may fail
      "a == b", "a != b", "a <= b", "a >= b", "a < b", "a > b", "!a", "!z", "!!n", "z && a / z",
      "a || a / z", "a && a / z", "z || a / z", "a / z && z", "a / z || a", "z ? a / z : b",
      "a ? b : a / z", "(a / z) ? 1 : 2", "a > b ? a - b : b - a", "a ? (b ? c : a / z) : n",
      "c > 0 && c < 63 ? 1 << c : -1",
      // everything at once
      "ceil_div(a * b, c) + round_up(n, 7) - floor_div(n, 7) * max(1, b, c)",
      "min(ceil_div(A.size, max(a, 1)), pow(b, 2)) << min(b, 3)"};

  std::vector<Expression> parsed;
  std::string body;
  for (size_t i = 0; i < exprs.size(); ++i) {
    auto e = Expression::parse(exprs[i]);
    ASSERT_TRUE(e) << exprs[i] << ": " << e.error();
    auto c = e->to_c(
        [&](const std::string& id) -> Result<std::string> {
          for (size_t k = 0; k < names.size(); ++k)
            if (names[k] == id) return fmt::format("v[{}]", k);
          return make_error("unknown identifier '" + id + "'");
        },
        "&e");
    ASSERT_TRUE(c) << exprs[i] << ": " << c.error();
    body += fmt::format(
        "    {{ int e = 0; const int64_t x = {}; printf(\"%d %lld\\n\", e, (long long)(e ? 0 : "
        "x)); "
        "}}\n",
        *c);
    parsed.push_back(*e);
  }
  std::string table;
  for (const auto& r : rows) {
    std::vector<std::string> v;
    for (int64_t x : r)
      v.push_back(x == kMin ? "(-9223372036854775807LL - 1)" : fmt::format("{}LL", x));
    table += "  {" + join(v, ", ") + "},\n";
  }
  const std::string program = fmt::format(
      "#include <stdint.h>\n#include <stdio.h>\n{}\nstatic const int64_t rows[][{}] = {{\n{}}};\n"
      "int main(void) {{\n  for (unsigned r = 0; r < sizeof rows / sizeof rows[0]; ++r) {{\n"
      "    const int64_t* v = rows[r];\n{}  }}\n  return 0;\n}}\n",
      c_helpers(), names.size(), table, body);

  auto dir = make_temp_dir("peak-expr-c-");
  ASSERT_TRUE(dir) << dir.error();
  ASSERT_TRUE(write_file(*dir / "x.cpp", program));
  ProcessOptions cc;
  cc.argv = {"c++",
             "-std=c++17",
             "-O2",
             "-Wall",
             "-Wextra",
             "-Werror",
             "-Wno-unused-function",
             "-o",
             (*dir / "x").string(),
             (*dir / "x.cpp").string()};
  cc.timeout_s = 300;
  auto built = run_process(cc);
  ASSERT_TRUE(built) << built.error();
  ASSERT_TRUE(built->ok()) << built->err << "\n" << program;
  ProcessOptions run;
  run.argv = {(*dir / "x").string()};
  run.timeout_s = 60;
  auto ran = run_process(run);
  ASSERT_TRUE(ran) << ran.error();
  ASSERT_TRUE(ran->ok()) << ran->describe();
  std::error_code ec;
  std::filesystem::remove_all(*dir, ec);

  const std::vector<std::string> lines = split_lines(ran->out);
  ASSERT_EQ(lines.size(), rows.size() * exprs.size());
  size_t failures = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    Env env;
    for (size_t k = 0; k < names.size(); ++k) env[names[k]] = rows[r][k];
    for (size_t i = 0; i < exprs.size(); ++i) {
      int err = 0;
      long long value = 0;
      const std::string& line = lines[r * exprs.size() + i];
      ASSERT_EQ(std::sscanf(line.c_str(), "%d %lld", &err, &value), 2) << line;
      auto want = parsed[i].eval(env);
      SCOPED_TRACE(fmt::format("`{}` at row {}", exprs[i], r));
      EXPECT_EQ(err != 0, !want.is_ok()) << (want ? std::to_string(*want) : want.error());
      if (want && err == 0) {
        EXPECT_EQ(value, *want);
      }
      failures += want ? 0 : 1;
    }
  }
  // Both outcomes occur often.
  EXPECT_GT(failures, rows.size() * 10);
  EXPECT_LT(failures, rows.size() * exprs.size() / 2);

  // A name the caller does not know is an error naming it.
  auto e = Expression::parse("ceil_div(M, TILEZ)");
  ASSERT_TRUE(e);
  auto c = e->to_c(
      [](const std::string& id) -> Result<std::string> {
        if (id == "M") return std::string("s->M");
        return make_error("unknown identifier '" + id + "'");
      },
      "&e_");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("TILEZ"), std::string::npos) << c.error();
}

}  // namespace
}  // namespace peak::expr
