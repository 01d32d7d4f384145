#include "expr/expr.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace peak::expr {

// ---- AST ----

enum class Op {
  number,
  identifier,
  neg,
  logical_not,
  mul,
  div,
  mod,
  add,
  sub,
  shl,
  shr,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  logical_and,
  logical_or,
  ternary,
  call,
};

struct Node {
  Op op = Op::number;
  int column = 1;     // 1-based column of the token that names this node
  int64_t value = 0;  // number
  std::string name;   // identifier or function name
  std::vector<std::shared_ptr<const Node>> args;
};

namespace {

using NodePtr = std::shared_ptr<const Node>;

std::string_view op_spelling(Op op) {
  switch (op) {
    case Op::neg:
      return "-";
    case Op::logical_not:
      return "!";
    case Op::mul:
      return "*";
    case Op::div:
      return "/";
    case Op::mod:
      return "%";
    case Op::add:
      return "+";
    case Op::sub:
      return "-";
    case Op::shl:
      return "<<";
    case Op::shr:
      return ">>";
    case Op::lt:
      return "<";
    case Op::le:
      return "<=";
    case Op::gt:
      return ">";
    case Op::ge:
      return ">=";
    case Op::eq:
      return "==";
    case Op::ne:
      return "!=";
    case Op::logical_and:
      return "&&";
    case Op::logical_or:
      return "||";
    case Op::ternary:
      return "?:";
    default:
      return "";
  }
}

struct FunctionInfo {
  std::string_view name;
  int min_args;
  int max_args;  // -1: any number >= min_args
};

constexpr FunctionInfo kFunctions[] = {
    {"min", 1, -1}, {"max", 1, -1},    {"ceil_div", 2, 2}, {"floor_div", 2, 2}, {"round_up", 2, 2},
    {"abs", 1, 1},  {"is_pow2", 1, 1}, {"log2", 1, 1},     {"pow", 2, 2},
};

const FunctionInfo* find_function(std::string_view name) {
  for (const auto& f : kFunctions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string known_functions() {
  std::string s;
  for (const auto& f : kFunctions) {
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

Error error_at(int column, std::string_view message) {
  return Error{fmt::format("column {}: {}", column, message)};
}

// ---- Tokenizer ----

enum class Tok { end, number, identifier, op, lparen, rparen, comma, question, colon };

struct Token {
  Tok kind = Tok::end;
  std::string text;
  int column = 1;
  int64_t value = 0;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::end:
      return "end of input";
    case Tok::number:
      return fmt::format("number {}", t.text);
    case Tok::identifier:
      return fmt::format("identifier '{}'", t.text);
    default:
      return fmt::format("'{}'", t.text);
  }
}

Result<std::vector<Token>> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  auto is_ident_start = [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  };
  auto is_ident_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  while (i < s.size()) {
    char c = s[i];
    int col = static_cast<int>(i) + 1;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    Token t;
    t.column = col;
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      int64_t v = 0;
      bool overflow = false;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        int d = s[j] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - d) / 10) overflow = true;
        if (!overflow) v = v * 10 + d;
        ++j;
      }
      if (j < s.size() && is_ident_start(s[j])) {
        return error_at(static_cast<int>(j) + 1, fmt::format("unexpected '{}' after the number {}",
                                                             s[j], s.substr(i, j - i)));
      }
      if (overflow) {
        return error_at(col,
                        fmt::format("the number {} does not fit in 64 bits", s.substr(i, j - i)));
      }
      t.kind = Tok::number;
      t.text = std::string(s.substr(i, j - i));
      t.value = v;
      i = j;
    } else if (is_ident_start(c)) {
      size_t j = i;
      while (j < s.size() && is_ident_char(s[j])) ++j;
      t.kind = Tok::identifier;
      t.text = std::string(s.substr(i, j - i));
      if (t.text.back() == '.' || t.text.find("..") != std::string::npos) {
        return error_at(col,
                        fmt::format("malformed identifier '{}' (write names like A.size)", t.text));
      }
      i = j;
    } else {
      static constexpr std::string_view kTwo[] = {"<<", ">>", "<=", ">=", "==", "!=", "&&", "||"};
      std::string_view two = s.substr(i, 2);
      bool matched = false;
      for (auto op : kTwo) {
        if (two == op) {
          t.kind = Tok::op;
          t.text = std::string(op);
          i += 2;
          matched = true;
          break;
        }
      }
      if (!matched) {
        switch (c) {
          case '(':
            t.kind = Tok::lparen;
            break;
          case ')':
            t.kind = Tok::rparen;
            break;
          case ',':
            t.kind = Tok::comma;
            break;
          case '?':
            t.kind = Tok::question;
            break;
          case ':':
            t.kind = Tok::colon;
            break;
          case '+':
          case '-':
          case '*':
          case '/':
          case '%':
          case '<':
          case '>':
          case '!':
            t.kind = Tok::op;
            break;
          case '=':
            return error_at(col, "'=' is not an operator; write '==' to compare");
          case '&':
            return error_at(col, "'&' is not supported; write '&&' for logical and");
          case '|':
            return error_at(col, "'|' is not supported; write '||' for logical or");
          default:
            return error_at(col, fmt::format("unexpected character '{}'", c));
        }
        t.text = std::string(1, c);
        ++i;
      }
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::end;
  end.column = static_cast<int>(s.size()) + 1;
  out.push_back(end);
  return out;
}

// ---- Parser (recursive descent, C precedence) ----

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Result<NodePtr> parse_all() {
    auto e = ternary();
    if (!e) return e;
    if (peek().kind != Tok::end) {
      return error_at(peek().column, fmt::format("unexpected {} after the end of the expression",
                                                 describe(peek())));
    }
    return e;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() { return toks_[pos_++]; }
  bool peek_op(std::string_view op) const { return peek().kind == Tok::op && peek().text == op; }

  static NodePtr make(Op op, int column, std::vector<NodePtr> args) {
    auto n = std::make_shared<Node>();
    n->op = op;
    n->column = column;
    n->args = std::move(args);
    return n;
  }

  Result<NodePtr> ternary() {
    auto cond = logical_or();
    if (!cond) return cond;
    if (peek().kind != Tok::question) return cond;
    int col = next().column;
    auto a = ternary();
    if (!a) return a;
    if (peek().kind != Tok::colon) {
      return error_at(peek().column, fmt::format("expected ':' of the '?' at column {}, found {}",
                                                 col, describe(peek())));
    }
    next();
    auto b = ternary();
    if (!b) return b;
    return make(Op::ternary, col, {*cond, *a, *b});
  }

  // One left-associative binary level: operands from `sub`, operators from `ops`.
  template <typename Sub>
  Result<NodePtr> binary_level(Sub sub,
                               std::initializer_list<std::pair<std::string_view, Op>> ops) {
    auto lhs = (this->*sub)();
    if (!lhs) return lhs;
    NodePtr left = *lhs;
    for (;;) {
      const Op* found = nullptr;
      for (const auto& [spelling, op] : ops) {
        if (peek_op(spelling)) {
          found = &op;
          break;
        }
      }
      if (!found) return left;
      Op op = *found;
      int col = next().column;
      auto rhs = (this->*sub)();
      if (!rhs) return rhs;
      left = make(op, col, {left, *rhs});
    }
  }

  Result<NodePtr> logical_or() {
    return binary_level(&Parser::logical_and, {{"||", Op::logical_or}});
  }
  Result<NodePtr> logical_and() {
    return binary_level(&Parser::equality, {{"&&", Op::logical_and}});
  }
  Result<NodePtr> equality() {
    return binary_level(&Parser::relational, {{"==", Op::eq}, {"!=", Op::ne}});
  }
  Result<NodePtr> relational() {
    return binary_level(&Parser::shift,
                        {{"<", Op::lt}, {"<=", Op::le}, {">", Op::gt}, {">=", Op::ge}});
  }
  Result<NodePtr> shift() {
    return binary_level(&Parser::additive, {{"<<", Op::shl}, {">>", Op::shr}});
  }
  Result<NodePtr> additive() {
    return binary_level(&Parser::multiplicative, {{"+", Op::add}, {"-", Op::sub}});
  }
  Result<NodePtr> multiplicative() {
    return binary_level(&Parser::unary, {{"*", Op::mul}, {"/", Op::div}, {"%", Op::mod}});
  }

  Result<NodePtr> unary() {
    if (peek_op("-") || peek_op("!")) {
      const Token& t = next();
      Op op = t.text == "-" ? Op::neg : Op::logical_not;
      int col = t.column;
      auto operand = unary();
      if (!operand) return operand;
      return make(op, col, {*operand});
    }
    return primary();
  }

  Result<NodePtr> primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::number: {
        next();
        auto n = std::make_shared<Node>();
        n->op = Op::number;
        n->column = t.column;
        n->value = t.value;
        return NodePtr(n);
      }
      case Tok::identifier: {
        const Token& id = next();
        if (peek().kind == Tok::lparen) return call(id);
        auto n = std::make_shared<Node>();
        n->op = Op::identifier;
        n->column = id.column;
        n->name = id.text;
        return NodePtr(n);
      }
      case Tok::lparen: {
        int col = next().column;
        auto e = ternary();
        if (!e) return e;
        if (peek().kind != Tok::rparen) {
          return error_at(peek().column,
                          fmt::format("expected ')' to close the '(' at column {}, found {}", col,
                                      describe(peek())));
        }
        next();
        return e;
      }
      case Tok::end:
        return error_at(t.column, "expected an expression, found end of input");
      default:
        return error_at(t.column, fmt::format("expected an expression, found {}", describe(t)));
    }
  }

  Result<NodePtr> call(const Token& id) {
    const FunctionInfo* f = find_function(id.text);
    if (!f) {
      return error_at(id.column, fmt::format("unknown function '{}' (known functions: {})", id.text,
                                             known_functions()));
    }
    next();  // '('
    std::vector<NodePtr> args;
    if (peek().kind != Tok::rparen) {
      for (;;) {
        auto a = ternary();
        if (!a) return a;
        args.push_back(*a);
        if (peek().kind == Tok::comma) {
          next();
          continue;
        }
        break;
      }
    }
    if (peek().kind != Tok::rparen) {
      return error_at(peek().column, fmt::format("expected ')' after arguments of {}, found {}",
                                                 id.text, describe(peek())));
    }
    next();
    int n = static_cast<int>(args.size());
    if (n < f->min_args || (f->max_args >= 0 && n > f->max_args)) {
      std::string want =
          f->max_args < 0
              ? fmt::format("at least {} argument{}", f->min_args, f->min_args == 1 ? "" : "s")
              : fmt::format("{} argument{}", f->min_args, f->min_args == 1 ? "" : "s");
      return error_at(id.column, fmt::format("{} takes {}, got {}", id.text, want, n));
    }
    auto node = std::make_shared<Node>();
    node->op = Op::call;
    node->column = id.column;
    node->name = id.text;
    node->args = std::move(args);
    return NodePtr(node);
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
};

// ---- Evaluator ----

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Error overflow(const Node& n) {
  return error_at(n.column,
                  fmt::format("'{}' overflows 64-bit integers",
                              n.op == Op::call ? n.name : std::string(op_spelling(n.op))));
}

int64_t floor_div_unchecked(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ceil_div_unchecked(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  return q;
}

Result<int64_t> eval_node(const Node& n, const Env& env);

Result<int64_t> eval_call(const Node& n, const Env& env) {
  std::vector<int64_t> v;
  v.reserve(n.args.size());
  for (const auto& a : n.args) {
    auto r = eval_node(*a, env);
    if (!r) return r;
    v.push_back(*r);
  }
  const std::string& f = n.name;
  if (f == "min") return *std::min_element(v.begin(), v.end());
  if (f == "max") return *std::max_element(v.begin(), v.end());
  if (f == "abs") {
    if (v[0] == kMin) return overflow(n);
    return v[0] < 0 ? -v[0] : v[0];
  }
  if (f == "is_pow2") return int64_t{v[0] > 0 && (v[0] & (v[0] - 1)) == 0};
  if (f == "log2") {
    if (v[0] <= 0)
      return error_at(n.column, fmt::format("log2 of {} (needs a positive value)", v[0]));
    int64_t r = 0;
    for (uint64_t x = static_cast<uint64_t>(v[0]); x > 1; x >>= 1) ++r;
    return r;
  }
  if (f == "ceil_div" || f == "floor_div" || f == "round_up") {
    if (v[1] == 0) return error_at(n.column, fmt::format("division by zero in {}", f));
    if (v[0] == kMin && v[1] == -1) return overflow(n);
    if (f == "floor_div") return floor_div_unchecked(v[0], v[1]);
    int64_t q = ceil_div_unchecked(v[0], v[1]);
    if (f == "ceil_div") return q;
    int64_t r;
    if (__builtin_mul_overflow(q, v[1], &r)) return overflow(n);
    return r;
  }
  if (f == "pow") {
    if (v[1] < 0) return error_at(n.column, fmt::format("pow with a negative exponent ({})", v[1]));
    int64_t result = 1, base = v[0];
    int64_t e = v[1];
    // Exponentiation by squaring; the base is squared only while more bits remain.
    while (e > 0) {
      if (e & 1) {
        if (__builtin_mul_overflow(result, base, &result)) return overflow(n);
      }
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(base, base, &base)) return overflow(n);
    }
    return result;
  }
  return error_at(n.column, fmt::format("unknown function '{}'", f));
}

Result<int64_t> eval_node(const Node& n, const Env& env) {
  switch (n.op) {
    case Op::number:
      return n.value;
    case Op::identifier: {
      auto it = env.find(n.name);
      if (it == env.end()) {
        std::string known;
        for (const auto& [k, v] : env) {
          if (!known.empty()) known += ", ";
          known += k;
        }
        return error_at(n.column, fmt::format("unknown identifier '{}' (known: {})", n.name,
                                              known.empty() ? "none" : known));
      }
      return it->second;
    }
    case Op::call:
      return eval_call(n, env);
    case Op::ternary: {
      auto c = eval_node(*n.args[0], env);
      if (!c) return c;
      return eval_node(*n.args[*c != 0 ? 1 : 2], env);
    }
    case Op::logical_and:
    case Op::logical_or: {
      auto a = eval_node(*n.args[0], env);
      if (!a) return a;
      bool av = *a != 0;
      if (n.op == Op::logical_and && !av) return int64_t{0};
      if (n.op == Op::logical_or && av) return int64_t{1};
      auto b = eval_node(*n.args[1], env);
      if (!b) return b;
      return int64_t{*b != 0};
    }
    case Op::neg:
    case Op::logical_not: {
      auto a = eval_node(*n.args[0], env);
      if (!a) return a;
      if (n.op == Op::logical_not) return int64_t{*a == 0};
      if (*a == kMin) return overflow(n);
      return -*a;
    }
    default:
      break;
  }
  auto ra = eval_node(*n.args[0], env);
  if (!ra) return ra;
  auto rb = eval_node(*n.args[1], env);
  if (!rb) return rb;
  int64_t a = *ra, b = *rb, r = 0;
  switch (n.op) {
    case Op::add:
      if (__builtin_add_overflow(a, b, &r)) return overflow(n);
      return r;
    case Op::sub:
      if (__builtin_sub_overflow(a, b, &r)) return overflow(n);
      return r;
    case Op::mul:
      if (__builtin_mul_overflow(a, b, &r)) return overflow(n);
      return r;
    case Op::div:
    case Op::mod:
      if (b == 0) {
        return error_at(n.column, fmt::format("division by zero ('{}' by 0)", op_spelling(n.op)));
      }
      if (a == kMin && b == -1) return overflow(n);
      return n.op == Op::div ? a / b : a % b;
    case Op::shl:
    case Op::shr: {
      if (b < 0 || b > 63) {
        return error_at(n.column, fmt::format("shift count {} is outside 0..63", b));
      }
      if (n.op == Op::shr) return a >> b;
      if (b == 63) {  // 2^63 itself does not fit; only 0 and -1 can be shifted that far
        if (a == 0 || a == -1) return a == 0 ? int64_t{0} : kMin;
        return overflow(n);
      }
      if (__builtin_mul_overflow(a, int64_t{1} << b, &r)) return overflow(n);
      return r;
    }
    case Op::lt:
      return int64_t{a < b};
    case Op::le:
      return int64_t{a <= b};
    case Op::gt:
      return int64_t{a > b};
    case Op::ge:
      return int64_t{a >= b};
    case Op::eq:
      return int64_t{a == b};
    case Op::ne:
      return int64_t{a != b};
    default:
      break;
  }
  return error_at(n.column, "internal error: unknown operator");
}

void collect_identifiers(const Node& n, std::set<std::string>& out) {
  if (n.op == Op::identifier) out.insert(n.name);
  for (const auto& a : n.args) collect_identifiers(*a, out);
}

}  // namespace

// ---- Expression ----

Expression::Expression() = default;
Expression::~Expression() = default;
Expression::Expression(const Expression&) = default;
Expression& Expression::operator=(const Expression&) = default;
Expression::Expression(Expression&&) noexcept = default;
Expression& Expression::operator=(Expression&&) noexcept = default;

Result<Expression> Expression::parse(std::string_view text) {
  auto toks = tokenize(text);
  if (!toks) return Error{toks.error()};
  Parser p(std::move(*toks));
  auto root = p.parse_all();
  if (!root) return Error{root.error()};
  Expression e;
  e.text_ = std::string(text);
  e.root_ = *root;
  return e;
}

Result<int64_t> Expression::eval(const Env& env) const {
  if (!root_) return make_error("empty expression");
  return eval_node(*root_, env);
}

std::vector<std::string> Expression::identifiers() const {
  std::set<std::string> ids;
  if (root_) collect_identifiers(*root_, ids);
  return {ids.begin(), ids.end()};
}

Result<int64_t> evaluate(std::string_view text, const Env& env) {
  auto e = Expression::parse(text);
  if (!e) return Error{e.error()};
  return e->eval(env);
}

// ---- C ----

namespace {

std::string_view c_function(Op op) {
  switch (op) {
    case Op::mul:
      return "pk_x_mul";
    case Op::div:
      return "pk_x_div";
    case Op::mod:
      return "pk_x_mod";
    case Op::add:
      return "pk_x_add";
    case Op::sub:
      return "pk_x_sub";
    case Op::shl:
      return "pk_x_shl";
    case Op::shr:
      return "pk_x_shr";
    default:
      return "";
  }
}

bool is_comparison(Op op) {
  return op == Op::lt || op == Op::le || op == Op::gt || op == Op::ge || op == Op::eq ||
         op == Op::ne;
}

using CName = std::function<Result<std::string>(const std::string&)>;

Result<std::string> node_c(const Node& n, const CName& name, std::string_view err) {
  std::vector<std::string> a;
  for (const auto& arg : n.args) {
    auto t = node_c(*arg, name, err);
    if (!t) return t;
    a.push_back(std::move(*t));
  }
  switch (n.op) {
    case Op::number:
      return fmt::format("((int64_t){}LL)", n.value);
    case Op::identifier:
      return name(n.name);
    case Op::neg:
      return fmt::format("pk_x_neg({}, {})", err, a[0]);
    case Op::logical_not:
      return fmt::format("((int64_t)(({}) == 0))", a[0]);
    case Op::logical_and:
      return fmt::format("((int64_t)(({}) != 0 && ({}) != 0))", a[0], a[1]);
    case Op::logical_or:
      return fmt::format("((int64_t)(({}) != 0 || ({}) != 0))", a[0], a[1]);
    case Op::ternary:
      return fmt::format("(({}) != 0 ? ({}) : ({}))", a[0], a[1], a[2]);
    case Op::call: {
      if (n.name == "min" || n.name == "max") {
        std::string acc = a[0];
        for (size_t i = 1; i < a.size(); ++i)
          acc = fmt::format("pk_x_{}({}, {})", n.name, acc, a[i]);
        return acc;
      }
      std::string out = fmt::format("pk_x_{}({}", n.name, err);
      for (const auto& x : a) out += ", " + x;
      return out + ")";
    }
    default:
      break;
  }
  // Comparisons are spelled in C as in the expression language.
  if (is_comparison(n.op))
    return fmt::format("((int64_t)(({}) {} ({})))", a[0], op_spelling(n.op), a[1]);
  return fmt::format("{}({}, {}, {})", c_function(n.op), err, a[0], a[1]);
}

}  // namespace

Result<std::string> Expression::to_c(const CName& name, std::string_view err) const {
  if (!root_) return make_error("empty expression");
  return node_c(*root_, name, err);
}

std::string_view c_helpers() {
  return R"C(/* Integer expressions of the launch plan: 64-bit, every failure sets *e and yields 0. */
static inline int64_t pk_x_fail(int* e) { *e = 1; return 0; }
static inline int64_t pk_x_add(int* e, int64_t a, int64_t b) {
  int64_t r; return __builtin_add_overflow(a, b, &r) ? pk_x_fail(e) : r;
}
static inline int64_t pk_x_sub(int* e, int64_t a, int64_t b) {
  int64_t r; return __builtin_sub_overflow(a, b, &r) ? pk_x_fail(e) : r;
}
static inline int64_t pk_x_mul(int* e, int64_t a, int64_t b) {
  int64_t r; return __builtin_mul_overflow(a, b, &r) ? pk_x_fail(e) : r;
}
static inline int pk_x_bad_div(int64_t a, int64_t b) {
  return b == 0 || (a == INT64_MIN && b == -1);
}
static inline int64_t pk_x_div(int* e, int64_t a, int64_t b) {
  return pk_x_bad_div(a, b) ? pk_x_fail(e) : a / b;
}
static inline int64_t pk_x_mod(int* e, int64_t a, int64_t b) {
  return pk_x_bad_div(a, b) ? pk_x_fail(e) : a % b;
}
static inline int64_t pk_x_neg(int* e, int64_t a) { return a == INT64_MIN ? pk_x_fail(e) : -a; }
static inline int64_t pk_x_abs(int* e, int64_t a) {
  return a == INT64_MIN ? pk_x_fail(e) : (a < 0 ? -a : a);
}
static inline int64_t pk_x_shr(int* e, int64_t a, int64_t b) {
  return (b < 0 || b > 63) ? pk_x_fail(e) : (a >> b);
}
static inline int64_t pk_x_shl(int* e, int64_t a, int64_t b) {
  if (b < 0 || b > 63) return pk_x_fail(e);
  if (b == 63) return a == 0 ? 0 : (a == -1 ? INT64_MIN : pk_x_fail(e));
  return pk_x_mul(e, a, (int64_t)1 << b);
}
static inline int64_t pk_x_min(int64_t a, int64_t b) { return b < a ? b : a; }
static inline int64_t pk_x_max(int64_t a, int64_t b) { return b > a ? b : a; }
static inline int64_t pk_x_floor_div(int* e, int64_t a, int64_t b) {
  if (pk_x_bad_div(a, b)) return pk_x_fail(e);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t pk_x_ceil_div(int* e, int64_t a, int64_t b) {
  if (pk_x_bad_div(a, b)) return pk_x_fail(e);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}
static inline int64_t pk_x_round_up(int* e, int64_t a, int64_t b) {
  return pk_x_mul(e, pk_x_ceil_div(e, a, b), b);
}
static inline int64_t pk_x_is_pow2(int* e, int64_t a) {
  (void)e; return a > 0 && (a & (a - 1)) == 0;
}
static inline int64_t pk_x_log2(int* e, int64_t a) {
  if (a <= 0) return pk_x_fail(e);
  int64_t r = 0;
  for (uint64_t x = (uint64_t)a; x > 1; x >>= 1) ++r;
  return r;
}
static inline int64_t pk_x_pow(int* e, int64_t base, int64_t x) {
  if (x < 0) return pk_x_fail(e);
  int64_t r = 1;
  while (x > 0) {
    if (x & 1) r = pk_x_mul(e, r, base);
    x >>= 1;
    if (x > 0) base = pk_x_mul(e, base, base);
  }
  return r;
}
)C";
}

}  // namespace peak::expr
