// SPDX-License-Identifier: MIT
// Renders a parsed Jinja template: scopes, statements, expression evaluation, runaway guards.
#include <unordered_map>

#include "core/chat/jinja.h"
#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_lexer.h"
#include "core/error.h"

namespace basalt::jinja {
namespace {

// One scope: the template's top level (with the globals and the context), a
// for loop's iteration, or a macro call.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  const Frame* parent = nullptr;

  const Value* find(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

class Renderer {
 public:
  Renderer(const Program& program, const RenderOptions& options) : prog_(program), opt_(options) {}

  std::string run(Frame& root) {
    root_ = &root;
    std::string out;
    out_ = &out;
    exec(prog_.body, root);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    throw Error("chat template " + describe_position(prog_.source, pos) + ": " + msg);
  }

  [[noreturn]] void rethrow(size_t pos) const {
    try {
      throw;
    } catch (const Raised& r) {
      throw Error("chat template raised an error (raise_exception at " + describe_position(prog_.source, pos) +
                  "): " + r.what());
    } catch (const Fault& f) {
      fail(pos, f.what());
    }
  }

  void emit(const std::string& s, size_t pos) {
    out_->append(s);
    if (out_->size() > opt_.max_output_bytes)
      fail(pos, "the output is over the limit of " + std::to_string(opt_.max_output_bytes) + " bytes");
  }

  void step(size_t pos) {
    if (++steps_ > opt_.max_steps)
      fail(pos, "stopped after " + std::to_string(opt_.max_steps) +
                    " loop iterations and macro calls: the template looks like it runs away");
  }

  // One level of the renderer's recursion, failing past max_nesting.
  struct Nest {
    Renderer& ev;
    Nest(Renderer& e, size_t pos) : ev(e) {
      if (++ev.nesting_ > ev.opt_.max_nesting) {
        --ev.nesting_;
        ev.fail(pos, "statements, expressions and macro calls nest more than " + std::to_string(ev.opt_.max_nesting) +
                         " deep");
      }
    }
    ~Nest() { --ev.nesting_; }
  };

  // ---- statements

  Flow exec(const Body& body, Frame& f) {
    for (const auto& s : body) {
      Flow flow = exec_stmt(*s, f);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, Frame& f) {
    const Nest nest(*this, s.pos);
    switch (s.kind) {
      case Stmt::Kind::kText: emit(s.text, s.pos); return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        Value v = eval(*s.expr, f);
        std::string text;
        try {
          text = to_str(v);
        } catch (...) {
          rethrow(s.expr->pos);
        }
        emit(text, s.pos);
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& branch : s.branches)
          if (eval(*branch.first, f).truthy()) return exec(branch.second, f);
        return exec(s.else_body, f);
      case Stmt::Kind::kFor: return exec_for(s, f);
      case Stmt::Kind::kSet: {
        Value v = eval(*s.expr, f);
        if (!s.attr.empty()) {
          const Value* target = f.find(s.targets[0]);
          if (!target || !target->is_namespace())
            fail(s.pos, "cannot set '" + s.targets[0] + "." + s.attr + "': '" + s.targets[0] +
                            "' is not a namespace() object");
          // Namespaces inside namespaces could form cycles or chains deeper
          // than the nesting limit sees; no chat template needs them.
          if (v.holds_namespace())
            fail(s.pos, "cannot store a namespace() inside the namespace '" + s.targets[0] + "' (not supported)");
          try {
            target->ns().set(Value::string(s.attr), std::move(v));
          } catch (...) {
            rethrow(s.pos);
          }
        } else {
          bind(s.targets, v, f, s.pos);
        }
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: f.vars[s.targets[0]] = Value::string(capture(s.body, f)); return Flow::kNormal;
      case Stmt::Kind::kMacro: f.vars[s.text] = make_macro(s); return Flow::kNormal;
      case Stmt::Kind::kFilterBlock: {
        Value v = Value::string(capture(s.body, f));
        emit(to_str(apply_filters(*s.expr, v, f)), s.pos);
        return Flow::kNormal;
      }
      case Stmt::Kind::kScope: {  // rendered like a call block: its sets stay inside
        Frame inner{{}, &f};
        return exec(s.body, inner);
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void bind(const std::vector<std::string>& targets, const Value& v, Frame& f, size_t pos) {
    if (targets.size() == 1) {
      f.vars[targets[0]] = v;
      return;
    }
    std::vector<Value> items;
    try {
      items = iterate(v);
    } catch (...) {
      rethrow(pos);
    }
    if (v.is_undefined() || items.size() != targets.size())
      fail(pos, "cannot unpack " + std::to_string(items.size()) + " value(s) into " + std::to_string(targets.size()) +
                    " names");
    for (size_t i = 0; i < targets.size(); ++i) f.vars[targets[i]] = items[i];
  }

  std::string capture(const Body& body, Frame& f) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    try {
      exec(body, f);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  Flow exec_for(const Stmt& s, Frame& f) {
    Value seq = eval(*s.expr, f);
    std::vector<Value> items;
    try {
      items = iterate(seq);
    } catch (...) {
      rethrow(s.expr->pos);
    }
    if (s.cond) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        step(s.pos);
        Frame probe{{}, &f};
        bind(s.targets, item, probe, s.pos);
        if (eval(*s.cond, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, f);
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      step(s.pos);
      Frame it{{}, &f};
      bind(s.targets, items[static_cast<size_t>(i)], it, s.pos);
      it.vars["loop"] = loop_object(items, i);
      Flow flow = exec(s.body, it);
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  static Value loop_object(const std::vector<Value>& items, int64_t i) {
    static const char* const kNames[] = {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                                         "depth", "depth0", "previtem", "nextitem", "cycle"};
    static const std::vector<Value> kKeys = [] {
      std::vector<Value> keys;
      for (const char* k : kNames) keys.push_back(Value::string(k));
      return keys;
    }();
    static const Value kNoPrev = Value::undefined("there is no previous item");
    static const Value kNoNext = Value::undefined("there is no next item");
    const int64_t n = static_cast<int64_t>(items.size());
    DictData d;
    d.items.reserve(kKeys.size());
    size_t k = 0;
    auto put = [&](Value v) { d.items.emplace_back(kKeys[k++], std::move(v)); };
    put(Value::integer(i + 1));
    put(Value::integer(i));
    put(Value::integer(n - i));
    put(Value::integer(n - i - 1));
    put(Value::boolean(i == 0));
    put(Value::boolean(i == n - 1));
    put(Value::integer(n));
    put(Value::integer(1));
    put(Value::integer(0));
    put(i > 0 ? items[static_cast<size_t>(i - 1)] : kNoPrev);
    put(i + 1 < n ? items[static_cast<size_t>(i + 1)] : kNoNext);
    put(Value::function("loop.cycle", [i](CallArgs& c) {
      if (c.args.empty()) throw Fault("loop.cycle() needs at least one argument");
      return c.args[static_cast<size_t>(i) % c.args.size()];
    }));
    return Value::dict(std::move(d));
  }

  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::function(s.text, [this, def](CallArgs& call) { return call_macro(*def, call); });
  }

  Value call_macro(const Stmt& def, CallArgs& call) {
    step(def.pos);
    if (++depth_ > opt_.max_call_depth) {
      --depth_;
      throw Fault("macro '" + def.text + "' nested more than " + std::to_string(opt_.max_call_depth) +
                  " calls deep: runaway recursion?");
    }
    struct DepthGuard {
      int& d;
      ~DepthGuard() { --d; }
    } guard{depth_};
    Frame mf{{}, root_};
    std::vector<Value> extra;
    for (size_t i = 0; i < call.args.size(); ++i) {
      if (i < def.params.size()) mf.vars[def.params[i].first] = call.args[i];
      else extra.push_back(call.args[i]);
    }
    DictData extra_kwargs;
    for (auto& kv : call.kwargs) {
      bool known = false;
      for (const auto& p : def.params) known = known || p.first == kv.first;
      if (known) mf.vars[kv.first] = kv.second;
      else extra_kwargs.set(Value::string(kv.first), kv.second);
    }
    for (const auto& p : def.params) {
      if (mf.vars.count(p.first)) continue;
      mf.vars[p.first] = p.second ? eval(*p.second, mf) : Value::undefined("'" + p.first + "' was not passed to macro '" + def.text + "'");
    }
    mf.vars["varargs"] = Value::tuple(std::move(extra));
    mf.vars["kwargs"] = Value::dict(std::move(extra_kwargs));
    return Value::string(capture(def.body, mf));
  }

  // ---- expressions

  Value eval(const Expr& e, Frame& f) {
    const Nest nest(*this, e.pos);
    try {
      return eval_inner(e, f);
    } catch (const Fault&) {
      rethrow(e.pos);
    }
  }

  CallArgs eval_args(const Expr& e, size_t first, Frame& f) {
    CallArgs a;
    for (size_t i = first; i < e.children.size(); ++i) a.args.push_back(eval(*e.children[i], f));
    for (const auto& kv : e.kwargs) a.kwargs.emplace_back(kv.first, eval(*kv.second, f));
    return a;
  }

  // A filter block's chain: the innermost filter has no input expression.
  Value apply_filters(const Expr& e, const Value& input, Frame& f) {
    return apply_filter(e, e.children[0] ? apply_filters(*e.children[0], input, f) : input, f);
  }

  Value apply_filter(const Expr& e, const Value& in, Frame& f) {
    FilterFn fn = find_filter(e.name);
    if (!fn) fail(e.pos, "unknown filter '" + e.name + "'");
    CallArgs a = eval_args(e, 1, f);
    try {
      return fn(in, a);
    } catch (const Fault&) {
      rethrow(e.pos);
    }
  }

  static void check_defined(const Value& v) {
    if (v.is_undefined()) throw Fault(v.undefined_hint().empty() ? "a value is undefined" : v.undefined_hint());
  }

  bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") return !contains(b, a);
    check_defined(a);
    check_defined(b);
    int c = compare(a, b);
    if (op == "<") return c < 0;
    if (op == ">") return c > 0;
    if (op == "<=") return c <= 0;
    return c >= 0;
  }

  Value eval_inner(const Expr& e, Frame& f) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::kLiteral: return e.value;
      case K::kName: {
        const Value* v = f.find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case K::kAttr: return get_attr(eval(*e.children[0], f), e.name);
      case K::kItem: {
        Value obj = eval(*e.children[0], f);
        return get_item(obj, eval(*e.children[1], f));
      }
      case K::kSlice: {
        Value obj = eval(*e.children[0], f);
        Value part[3];
        for (int k = 0; k < 3; ++k) part[k] = e.children[k + 1] ? eval(*e.children[k + 1], f) : Value::none();
        return get_slice(obj, part[0], part[1], part[2]);
      }
      case K::kNeg: return negate(eval(*e.children[0], f));
      case K::kPos: {
        Value v = eval(*e.children[0], f);
        check_defined(v);
        if (!v.is_number()) throw Fault(std::string("bad operand type for unary +: '") + type_name(v) + "'");
        return v.is_bool() ? Value::integer(v.as_int()) : v;
      }
      case K::kNot: return Value::boolean(!eval(*e.children[0], f).truthy());
      case K::kBinary: {
        Value a = eval(*e.children[0], f);
        return binary_op(e.name, a, eval(*e.children[1], f));
      }
      case K::kCompare: {
        Value left = eval(*e.children[0], f);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.children[i + 1], f);
          if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case K::kAnd: {
        Value l = eval(*e.children[0], f);
        return l.truthy() ? eval(*e.children[1], f) : l;
      }
      case K::kOr: {
        Value l = eval(*e.children[0], f);
        return l.truthy() ? l : eval(*e.children[1], f);
      }
      case K::kCond:
        if (eval(*e.children[0], f).truthy()) return eval(*e.children[1], f);
        return e.children[2] ? eval(*e.children[2], f) : Value::undefined("the condition was false and there is no else");
      case K::kList:
      case K::kTuple: {
        std::vector<Value> items;
        for (const auto& c : e.children) items.push_back(eval(*c, f));
        return Value::list(std::move(items), e.kind == K::kTuple ? Seq::kTuple : Seq::kList);
      }
      case K::kDict: {
        DictData d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = eval(*e.children[i], f);
          if (k.is_list() || k.is_dict() || k.is_undefined())
            throw Fault(std::string("a dict key cannot be of type ") + type_name(k));
          d.set(k, eval(*e.children[i + 1], f));
        }
        return Value::dict(std::move(d));
      }
      case K::kCall: {
        Value callee = eval(*e.children[0], f);
        CallArgs a = eval_args(e, 1, f);
        if (callee.is_undefined()) check_defined(callee);
        if (!callee.is_function()) throw Fault(std::string("'") + type_name(callee) + "' object is not callable");
        return callee.fn().call(a);
      }
      case K::kFilter: return apply_filter(e, eval(*e.children[0], f), f);
      case K::kTest: {
        Value in = eval(*e.children[0], f);
        TestFn t = find_test(e.name);
        if (!t) throw Fault("unknown test '" + e.name + "'");
        CallArgs a = eval_args(e, 1, f);
        return Value::boolean(t(in, a) != e.negated);
      }
    }
    throw Fault("unknown expression");
  }

  const Program& prog_;
  const RenderOptions& opt_;
  std::string* out_ = nullptr;
  Frame* root_ = nullptr;
  size_t steps_ = 0;
  int depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

Template::Template(const std::string& source)
    : program_(std::make_shared<Program>(parse_template(normalize_newlines(source)))) {}

std::string Template::render(const DictData& context, const RenderOptions& options) const {
  set_build_limits(BuildLimits{options.max_output_bytes, options.max_items});
  DictData globals;
  add_globals(globals, options.now);
  Frame root;
  for (auto& kv : globals.items) root.vars[kv.first.str()] = kv.second;
  for (auto& kv : context.items) {
    if (!kv.first.is_string()) throw Error("chat template context: variable names must be strings");
    root.vars[kv.first.str()] = kv.second;
  }
  Renderer r(*program_, options);
  try {
    return r.run(root);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("chat template: ") + e.what());
  }
}

}  // namespace basalt::jinja
