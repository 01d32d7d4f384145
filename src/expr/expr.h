#pragma once
// A small integer expression language for sizes, validity constraints, dispatch sizes and FLOP
// counts. Integers are 64-bit; booleans are 0/1.
//
//   literals 123, identifiers [A-Za-z_][A-Za-z0-9_.]* (so `A.size` is one identifier),
//   unary - ! ; binary * / % + - << >> < <= > >= == != && || ; ternary c ? a : b ; parentheses;
//   functions min(a,b,...), max(a,b,...), ceil_div(a,b), floor_div(a,b), round_up(a,b),
//   abs(a), is_pow2(a), log2(a) (floor), pow(a,b).
// Division by zero, overflow of 64 bits, unknown identifiers and syntax errors are errors whose
// message names the column.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace peak::expr {

using Env = std::map<std::string, int64_t, std::less<>>;

struct Node;  // private AST

class Expression {
 public:
  Expression();
  ~Expression();
  Expression(const Expression&);
  Expression& operator=(const Expression&);
  Expression(Expression&&) noexcept;
  Expression& operator=(Expression&&) noexcept;

  // Parses; an error reads like "column 7: expected ')' after arguments of min".
  static Result<Expression> parse(std::string_view text);
  Result<int64_t> eval(const Env& env) const;
  // Every identifier the expression reads, sorted, without duplicates.
  std::vector<std::string> identifiers() const;
  // The expression as C (C99 and C++) over the helpers of c_helpers(): every operation that can
  // fail (overflow, division by zero, a bad shift, log2 or pow) is a call that sets `*ERR` to 1
  // and yields 0, so the C value equals eval()'s wherever eval() succeeds and `*ERR` is set
  // wherever it fails. `name` spells an identifier in C (an error for names it does not know);
  // `err` is the C expression of the `int*` the helpers set.
  Result<std::string> to_c(const std::function<Result<std::string>(const std::string&)>& name,
                           std::string_view err) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// The C definitions (static inline functions named pk_x_*) that to_c()'s text calls.
std::string_view c_helpers();

// Parse and evaluate in one call.
Result<int64_t> evaluate(std::string_view text, const Env& env);

}  // namespace peak::expr
