// SPDX-License-Identifier: MIT
// Jinja parser: statements and expressions, with Jinja's operator precedence.
#include <algorithm>
#include <initializer_list>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"
#include "core/error.h"

namespace basalt::jinja {
namespace {

constexpr int kMaxNesting = 200;  // expression and block nesting, to bound the parser's recursion
// The depth of an expression's tree, whatever built it: chains parsed in a
// loop (a + b + ..., a.b.c..., x | f | g ..., not not ...) make trees deeper
// than their brackets, and evaluating and freeing a tree recurse through it.
constexpr int kMaxExprDepth = 256;

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> tokens) : src_(src), toks_(std::move(tokens)) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, 0, "", &end);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    throw Error("chat template " + describe_position(src_, pos) + ": " + msg);
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kText: return "text";
      case TokenType::kVarBegin: return "'{{'";
      case TokenType::kVarEnd: return "'}}'";
      case TokenType::kBlockBegin: return "'{%'";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kName: return "'" + t.text + "'";
      case TokenType::kString: return "a string";
      case TokenType::kInt:
      case TokenType::kFloat: return "the number " + t.text;
      case TokenType::kOp: return "'" + t.text + "'";
      case TokenType::kEof: return "the end of the template";
    }
    return "?";
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur().pos, std::string("expected '") + op + "', found " + describe(cur()));
  }
  void expect_block_end(const char* stmt) {
    if (cur().type != TokenType::kBlockEnd)
      fail(cur().pos, std::string("expected '%}' to end the '") + stmt + "' statement, found " + describe(cur()));
    next();
  }
  std::string expect_name(const char* what) {
    if (cur().type != TokenType::kName) fail(cur().pos, std::string("expected ") + what + ", found " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }

  void enter(size_t pos) {
    if (++depth_ > kMaxNesting) fail(pos, "the template nests expressions or blocks too deeply");
  }
  void leave() { --depth_; }

  static std::unique_ptr<Stmt> stmt(Stmt::Kind kind, size_t pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }

  // ---- statements ----

  // Parses until a block tag named in `ends`; leaves the name of that tag in
  // *end with the cursor just after the name.
  Body parse_body(std::initializer_list<const char*> ends, size_t open_pos, const char* opener, std::string* end) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) {
        if (ends.size() == 0) return body;
        fail(open_pos, std::string("unclosed '") + opener + "' block: expected '" + *ends.begin() +
                           "' before the end of the template");
      }
      if (t.type == TokenType::kText) {
        auto s = stmt(Stmt::Kind::kText, t.pos);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::kVarBegin) {
        next();
        auto s = stmt(Stmt::Kind::kOutput, t.pos);
        s->expr = parse_tuple();
        if (cur().type != TokenType::kVarEnd) fail(cur().pos, "expected '}}', found " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        const Token& name = peek();
        if (name.type != TokenType::kName) fail(name.pos, "expected a statement name after '{%', found " + describe(name));
        for (const char* e : ends)
          if (name.text == e) {
            next();
            next();
            *end = e;
            return body;
          }
        next();
        body.push_back(parse_statement(t.pos, ends, opener));
      } else {
        fail(t.pos, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement(size_t pos, std::initializer_list<const char*> ends, const char* opener) {
    enter(pos);
    std::string name = cur().text;
    next();
    std::unique_ptr<Stmt> s;
    if (name == "if") s = parse_if(pos);
    else if (name == "for") s = parse_for(pos);
    else if (name == "set") s = parse_set(pos);
    else if (name == "macro") s = parse_macro(pos);
    else if (name == "filter") s = parse_filter_block(pos);
    else if (name == "generation") s = parse_scope(pos, "generation", "endgeneration");
    else if (name == "break" || name == "continue") {
      if (loops_ == 0) fail(pos, "'" + name + "' outside of a for loop");
      s = stmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, pos);
      expect_block_end(name.c_str());
    } else if (name == "call" || name == "include" || name == "import" || name == "from" || name == "extends" ||
               name == "block" || name == "with" || name == "do" || name == "autoescape" || name == "trans") {
      fail(pos, "the '" + name + "' statement is not supported");
    } else if (name.rfind("end", 0) == 0 || name == "elif" || name == "else") {
      if (ends.size() == 0) fail(pos, "unexpected '" + name + "': no block is open");
      fail(pos, "unexpected '" + name + "': the innermost open block is '" + opener + "', closed by '" +
                    *ends.begin() + "'");
    } else {
      fail(pos, "unknown statement '" + name + "'");
    }
    leave();
    return s;
  }

  std::unique_ptr<Stmt> parse_if(size_t pos) {
    auto s = stmt(Stmt::Kind::kIf, pos);
    ExprPtr cond = parse_expression();
    while (true) {
      expect_block_end("if");
      std::string end;
      Body body = parse_body({"endif", "elif", "else"}, pos, "if", &end);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "elif") {
        cond = parse_expression();
        continue;
      }
      if (end == "else") {
        expect_block_end("else");
        s->else_body = parse_body({"endif"}, pos, "if", &end);
      }
      expect_block_end("endif");
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    do {
      names.push_back(expect_name("a variable name"));
    } while (skip_op(",") && cur().type == TokenType::kName);
    if (paren) expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> parse_for(size_t pos) {
    auto s = stmt(Stmt::Kind::kFor, pos);
    s->targets = parse_targets();
    if (!skip_name("in")) fail(cur().pos, "expected 'in' in the for loop, found " + describe(cur()));
    s->expr = parse_tuple(/*with_condexpr=*/false);
    if (skip_name("if")) s->cond = parse_expression();
    if (is_name("recursive")) fail(cur().pos, "recursive for loops are not supported");
    expect_block_end("for");
    std::string end;
    ++loops_;
    s->body = parse_body({"endfor", "else"}, pos, "for", &end);
    --loops_;
    if (end == "else") {
      expect_block_end("else");
      s->else_body = parse_body({"endfor"}, pos, "for", &end);
    }
    expect_block_end("endfor");
    return s;
  }

  std::unique_ptr<Stmt> parse_set(size_t pos) {
    auto s = stmt(Stmt::Kind::kSet, pos);
    if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().text == ".") {
      s->targets.push_back(cur().text);
      next();
      next();
      s->attr = expect_name("an attribute name");
    } else {
      s->targets = parse_targets();
    }
    if (skip_op("=")) {
      s->expr = parse_tuple();
      expect_block_end("set");
      return s;
    }
    if (!s->attr.empty() || s->targets.size() != 1) fail(cur().pos, "expected '=' in the set statement");
    if (is_op("|")) fail(cur().pos, "filters on a set block are not supported");
    expect_block_end("set");
    s->kind = Stmt::Kind::kSetBlock;
    std::string end;
    s->body = parse_body({"endset"}, pos, "set", &end);
    expect_block_end("endset");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(size_t pos) {
    auto s = stmt(Stmt::Kind::kMacro, pos);
    s->text = expect_name("a macro name");
    expect_op("(");
    while (!is_op(")")) {
      std::string param = expect_name("a parameter name");
      ExprPtr dflt;
      if (skip_op("=")) dflt = parse_expression();
      s->params.emplace_back(param, std::move(dflt));
      if (!skip_op(",")) break;
    }
    expect_op(")");
    expect_block_end("macro");
    std::string end;
    int loops = loops_;
    loops_ = 0;
    s->body = parse_body({"endmacro"}, pos, "macro", &end);
    loops_ = loops;
    if (cur().type == TokenType::kName) next();  // {% endmacro name %}
    expect_block_end("endmacro");
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block(size_t pos) {
    auto s = stmt(Stmt::Kind::kFilterBlock, pos);
    ExprPtr chain;
    do {
      chain = parse_filter(std::move(chain));
    } while (skip_op("|"));
    s->expr = std::move(chain);
    expect_block_end("filter");
    std::string end;
    s->body = parse_body({"endfilter"}, pos, "filter", &end);
    expect_block_end("endfilter");
    return s;
  }

  std::unique_ptr<Stmt> parse_scope(size_t pos, const char* name, const char* end_name) {
    auto s = stmt(Stmt::Kind::kScope, pos);
    expect_block_end(name);
    std::string end;
    s->body = parse_body({end_name}, pos, name, &end);
    expect_block_end(end_name);
    return s;
  }

  // ---- expressions ----

  static ExprPtr node(Expr::Kind kind, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }
  // Appends child (may be null) to parent's children, or a keyword
  // argument's value to its kwargs; fails where the tree gets too deep.
  void adopt(Expr& parent, ExprPtr child, const std::string* keyword = nullptr) {
    if (child && child->depth + 1 > parent.depth) {
      parent.depth = child->depth + 1;
      if (parent.depth > kMaxExprDepth)
        fail(parent.pos, "the expression is nested too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)");
    }
    if (keyword) parent.kwargs.emplace_back(*keyword, std::move(child));
    else parent.children.push_back(std::move(child));
  }
  ExprPtr binary(Expr::Kind kind, size_t pos, ExprPtr a, ExprPtr b, std::string op = "") {
    ExprPtr e = node(kind, pos);
    e->name = std::move(op);
    adopt(*e, std::move(a));
    adopt(*e, std::move(b));
    return e;
  }

  // expr, expr, ... as a tuple (where Jinja allows one: {{ }}, set, for).
  ExprPtr parse_tuple(bool with_condexpr = true) {
    size_t pos = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    ExprPtr t = node(Expr::Kind::kTuple, pos);
    adopt(*t, std::move(first));
    while (skip_op(",")) {
      if (cur().type == TokenType::kVarEnd || cur().type == TokenType::kBlockEnd || is_name("if")) break;
      adopt(*t, parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr = true) {
    enter(cur().pos);
    ExprPtr e = with_condexpr ? parse_condexpr() : parse_or();
    leave();
    return e;
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      size_t pos = cur().pos;
      next();
      ExprPtr test = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) {
        enter(pos);  // a chain of else-ifs recurses here
        otherwise = parse_condexpr();
        leave();
      }
      ExprPtr c = node(Expr::Kind::kCond, pos);
      adopt(*c, std::move(test));
      adopt(*c, std::move(expr));
      adopt(*c, std::move(otherwise));
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kOr, pos, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kAnd, pos, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      size_t pos = cur().pos;
      next();
      enter(pos);
      ExprPtr e = node(Expr::Kind::kNot, pos);
      adopt(*e, parse_not());
      leave();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    size_t pos = cur().pos;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TokenType::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::kCompare, pos);
        adopt(*cmp, std::move(first));
      }
      cmp->ops.push_back(op);
      adopt(*cmp, parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kBinary, pos, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kBinary, pos, std::move(left), parse_math2(), "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kBinary, pos, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary();
    while (is_op("**")) {
      size_t pos = cur().pos;
      next();
      left = binary(Expr::Kind::kBinary, pos, std::move(left), parse_unary(), "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    size_t pos = cur().pos;
    enter(pos);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      Expr::Kind kind = is_op("-") ? Expr::Kind::kNeg : Expr::Kind::kPos;
      next();
      e = node(kind, pos);
      adopt(*e, parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    leave();
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    size_t pos = t.pos;
    ExprPtr e;
    switch (t.type) {
      case TokenType::kName: {
        e = node(Expr::Kind::kLiteral, pos);
        if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        next();
        return e;
      }
      case TokenType::kString: {
        std::string s;
        while (cur().type == TokenType::kString) {  // 'a' 'b' is 'ab'
          s += cur().text;
          next();
        }
        e = node(Expr::Kind::kLiteral, pos);
        e->value = Value::string(std::move(s));
        return e;
      }
      case TokenType::kInt:
        e = node(Expr::Kind::kLiteral, pos);
        e->value = Value::integer(t.int_value);
        next();
        return e;
      case TokenType::kFloat:
        e = node(Expr::Kind::kLiteral, pos);
        e->value = Value::number(t.float_value);
        next();
        return e;
      case TokenType::kOp:
        if (t.text == "(") {
          next();
          if (skip_op(")")) return node(Expr::Kind::kTuple, pos);
          ExprPtr inner = parse_expression();
          if (is_op(",")) {
            ExprPtr tup = node(Expr::Kind::kTuple, pos);
            adopt(*tup, std::move(inner));
            while (skip_op(",") && !is_op(")")) adopt(*tup, parse_expression());
            inner = std::move(tup);
          }
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          next();
          e = node(Expr::Kind::kList, pos);
          while (!is_op("]")) {
            adopt(*e, parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          next();
          e = node(Expr::Kind::kDict, pos);
          while (!is_op("}")) {
            adopt(*e, parse_expression());
            expect_op(":");
            adopt(*e, parse_expression());
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return e;
        }
        break;
      default: break;
    }
    fail(pos, "unexpected " + describe(t) + " in an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      size_t pos = cur().pos;
      if (skip_op(".")) {
        if (cur().type == TokenType::kInt) {
          ExprPtr idx = node(Expr::Kind::kLiteral, cur().pos);
          idx->value = Value::integer(cur().int_value);
          next();
          e = binary(Expr::Kind::kItem, pos, std::move(e), std::move(idx));
        } else {
          ExprPtr a = node(Expr::Kind::kAttr, pos);
          a->name = expect_name("an attribute name after '.'");
          adopt(*a, std::move(e));
          e = std::move(a);
        }
      } else if (skip_op("[")) {
        e = parse_subscript(std::move(e), pos);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, size_t pos) {
    ExprPtr parts[3];
    bool is_slice = false;
    for (int k = 0; k < 3; ++k) {
      if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
      if (k < 2 && skip_op(":")) {
        is_slice = true;
        continue;
      }
      break;
    }
    if (is_op(",")) fail(cur().pos, "tuple subscripts are not supported");
    expect_op("]");
    if (!is_slice) {
      if (!parts[0]) fail(pos, "empty subscript");
      return binary(Expr::Kind::kItem, pos, std::move(obj), std::move(parts[0]));
    }
    ExprPtr s = node(Expr::Kind::kSlice, pos);
    adopt(*s, std::move(obj));
    for (auto& p : parts) adopt(*s, std::move(p));
    return s;
  }

  // Arguments in parentheses, into e's children (after what is there) and kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail(cur().pos, "*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        adopt(e, parse_expression(), &key);
      } else {
        if (!e.kwargs.empty()) fail(cur().pos, "a positional argument after a keyword argument");
        adopt(e, parse_expression());
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr c = node(Expr::Kind::kCall, cur().pos);
    adopt(*c, std::move(callee));
    parse_args(*c);
    return c;
  }

  std::string parse_dotted_name(const char* what) {
    std::string name = expect_name(what);
    while (is_op(".") && peek().type == TokenType::kName) {
      next();
      name += "." + cur().text;
      next();
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr input) {
    ExprPtr f = node(Expr::Kind::kFilter, cur().pos);
    f->name = parse_dotted_name("a filter name");
    adopt(*f, std::move(input));
    if (is_op("(")) parse_args(*f);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_test(ExprPtr input) {
    ExprPtr t = node(Expr::Kind::kTest, cur().pos);
    next();  // is
    t->negated = skip_name("not");
    t->name = parse_dotted_name("a test name after 'is'");
    adopt(*t, std::move(input));
    const Token& c = cur();
    if (is_op("(")) {
      parse_args(*t);
    } else if ((c.type == TokenType::kName && c.text != "else" && c.text != "or" && c.text != "and" &&
                c.text != "if") ||
               c.type == TokenType::kString || c.type == TokenType::kInt || c.type == TokenType::kFloat ||
               (c.type == TokenType::kOp && (c.text == "[" || c.text == "{"))) {
      if (is_name("is")) fail(c.pos, "tests cannot be chained with 'is'");
      adopt(*t, parse_postfix(parse_primary()));
    }
    return t;
  }

  const std::string& src_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Program parse_template(std::string source) {
  Program p;
  p.source = std::move(source);
  p.body = Parser(p.source, tokenize(p.source)).parse();
  return p;
}

}  // namespace basalt::jinja
