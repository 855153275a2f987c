// SPDX-License-Identifier: MIT
// Jinja operators, attribute/item access and slicing, call arguments, and Python's dict and list methods.
#include <cmath>
#include <limits>

#include "core/chat/jinja_builtins.h"

namespace basalt::jinja {

// ---------------------------------------------------------------- arguments

Args::Args(CallArgs& call, std::string what, std::initializer_list<const char*> names, bool variadic)
    : what_(std::move(what)), vals_(names.size()) {
  std::vector<const char*> params(names);
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (i < params.size()) vals_[i] = call.args[i];
    else if (variadic) rest_.push_back(call.args[i]);
    else fail("takes at most " + std::to_string(params.size()) + " positional argument(s), got " +
              std::to_string(call.args.size()));
  }
  for (auto& kv : call.kwargs) {
    size_t k = 0;
    while (k < params.size() && kv.first != params[k]) ++k;
    if (k == params.size()) {
      if (variadic) {
        rest_kwargs_.push_back(kv);
        continue;
      }
      fail("got an unexpected keyword argument '" + kv.first + "'");
    }
    if (k < call.args.size()) fail("got multiple values for argument '" + kv.first + "'");
    vals_[k] = kv.second;
  }
}

void Args::fail(const std::string& msg) const { throw Fault(what_ + ": " + msg); }

std::string Args::str(size_t i, const std::string& dflt) const {
  if (!has(i) || vals_[i].is_none()) return dflt;
  if (!vals_[i].is_string()) fail(std::string("expected a string argument, got ") + type_name(vals_[i]));
  return vals_[i].str();
}

int64_t Args::integer(size_t i, int64_t dflt) const {
  if (!has(i) || vals_[i].is_none()) return dflt;
  if (!vals_[i].is_int() && !vals_[i].is_bool())
    fail(std::string("expected an integer argument, got ") + type_name(vals_[i]));
  return vals_[i].as_int();
}

bool Args::boolean(size_t i, bool dflt) const { return has(i) ? vals_[i].truthy() : dflt; }

namespace {
thread_local BuildLimits g_limits;
}  // namespace

void check_size(size_t bytes) {
  if (bytes > g_limits.max_bytes)
    throw Fault("a value of " + std::to_string(bytes) + " bytes is over the template's limit of " +
                std::to_string(g_limits.max_bytes));
}

namespace {

[[noreturn]] void undefined_fault(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw Fault(hint.empty() ? "a value is undefined" : hint);
}
}  // namespace

void set_build_limits(const BuildLimits& limits) { g_limits = limits; }
const BuildLimits& build_limits() { return g_limits; }

// ---------------------------------------------------------------- dict and list methods

namespace {

Value read_only_method(const std::string& type, const std::string& name) {
  return Value::function(type + "." + name, [type, name](CallArgs&) -> Value {
    throw Fault(type + "." + name + "() is not allowed: templates render in a read-only sandbox");
  });
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "get") {
    return Value::function("dict.get", [self](CallArgs& call) {
      Args a(call, "dict.get()", {"key", "default"});
      const Value* v = self.dict().find(a.get(0));
      return v ? *v : (a.has(1) ? a.get(1) : Value::none());
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function("dict." + name, [self, name](CallArgs& call) {
      Args a(call, "dict." + name + "()", {});
      std::vector<Value> out;
      for (const auto& kv : self.dict().items) {
        if (name == "items") out.push_back(Value::tuple({kv.first, kv.second}));
        else out.push_back(name == "keys" ? kv.first : kv.second);
      }
      return Value::list(std::move(out), name == "items"  ? Seq::kDictItems
                                         : name == "keys" ? Seq::kDictKeys
                                                          : Seq::kDictValues);
    });
  }
  if (name == "copy") {
    return Value::function("dict.copy", [self](CallArgs& call) {
      Args a(call, "dict.copy()", {});
      return Value::dict(self.dict());
    });
  }
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear")
    return read_only_method("dict", name);
  return Value();
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index" || name == "count") {
    return Value::function("list." + name, [self, name](CallArgs& call) {
      Args a(call, "list." + name + "()", {"value"});
      int64_t n = 0;
      const auto& items = self.list().items;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!equals(items[i], a.get(0))) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") throw Fault("list.index(): the value is not in the list");
      return Value::integer(n);
    });
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
      name == "reverse" || name == "sort" || name == "clear")
    return read_only_method("list", name);
  return Value();
}

}  // namespace

// ---------------------------------------------------------------- access

Value get_attr(const Value& obj, const std::string& name) {
  auto missing = [&] { return Value::undefined(std::string("'") + type_name(obj) + " object' has no attribute '" + name + "'"); };
  switch (obj.kind()) {
    case Value::Kind::kUndefined: undefined_fault(obj);
    case Value::Kind::kDict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.dict().find(Value::string(name));
      return v ? *v : missing();
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.ns().find(Value::string(name));
      return v ? *v : missing();
    }
    case Value::Kind::kString: {
      Value m = str_method(obj, name);
      return m.is_undefined() ? missing() : m;
    }
    case Value::Kind::kList: {
      Value m = list_method(obj, name);
      return m.is_undefined() ? missing() : m;
    }
    default: return missing();
  }
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: undefined_fault(obj);
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const Value* v = obj.is_dict() ? obj.dict().find(key) : obj.ns().find(key);
      if (v) return *v;
      if (key.is_string()) return get_attr(obj, key.str());
      return Value::undefined(std::string("'") + type_name(obj) + " object' has no item " + to_repr(key));
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      // As Jinja: where Python's obj[key] fails, the result is undefined.
      if (key.is_string()) return get_attr(obj, key.str());
      if ((obj.is_list() && !obj.list().indexable()) || (!key.is_int() && !key.is_bool()))
        return Value::undefined(std::string("'") + type_name(obj) + " object' has no item " + to_repr(key));
      int64_t i = key.as_int();
      if (obj.is_list()) {
        int64_t n = static_cast<int64_t>(obj.list().items.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(std::string(type_name(obj)) + " index " + std::to_string(key.as_int()) + " out of range");
        return obj.list().items[static_cast<size_t>(i)];
      }
      std::u32string u = utf8_decode(obj.str());
      int64_t n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index " + std::to_string(key.as_int()) + " out of range");
      std::string out;
      utf8_append(out, u[static_cast<size_t>(i)]);
      return obj.is_markup() ? Value::markup(out) : Value::string(out);
    }
    default:
      return Value::undefined(std::string("'") + type_name(obj) + " object' has no item " + to_repr(key));
  }
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_fault(obj);
  // Jinja slices with Python's obj[a:b:c] directly (unlike obj[key]): a type error is an error.
  if ((!obj.is_list() || !obj.list().indexable()) && !obj.is_string())
    throw Fault(std::string("'") + type_name(obj) + "' object is not subscriptable");
  auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;  // an omitted part
    if (!v.is_int() && !v.is_bool()) throw Fault("slice indices must be integers or none");
    return v.as_int();
  };
  std::optional<int64_t> a = bound(start), b = bound(stop), s = bound(step);
  int64_t st = s.value_or(1);
  if (st == 0) throw Fault("slice step cannot be zero");
  std::u32string u;
  int64_t n;
  if (obj.is_string()) {
    u = utf8_decode(obj.str());
    n = static_cast<int64_t>(u.size());
  } else {
    n = static_cast<int64_t>(obj.list().items.size());
  }
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = adjust(a, st < 0 ? n - 1 : 0);
  int64_t hi = adjust(b, st < 0 ? -1 : n);
  std::vector<size_t> idx;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) idx.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    std::u32string out;
    for (size_t i : idx) out += u[i];
    return obj.is_markup() ? Value::markup(utf8_encode(out)) : Value::string(utf8_encode(out));
  }
  std::vector<Value> out;
  for (size_t i : idx) out.push_back(obj.list().items[i]);
  return Value::list(std::move(out), obj.list().seq);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;  // as Jinja: it iterates as empty
    case Value::Kind::kString:
      if (!item.is_string())
        throw Fault(std::string("'in <string>' requires a string as left operand, not ") + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list().items)
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if ((item.is_list() && item.list().seq != Seq::kTuple) || item.is_dict() || item.is_namespace())
        throw Fault(std::string("unhashable type: '") + type_name(item) + "'");
      return (container.is_dict() ? container.dict() : container.ns()).find(item) != nullptr;
    default: throw Fault(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> out;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        utf8_append(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    }
    default: throw Fault(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

// ---------------------------------------------------------------- arithmetic

namespace {

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw Fault("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value repeat(const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_list() && !seq.list().indexable())
    throw Fault(std::string("unsupported operand types for *: '") + type_name(seq) + "' and 'int'");
  if (seq.is_string()) {
    check_size(seq.str().size() * static_cast<size_t>(times));
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::string(out);
  }
  const auto& items = seq.list().items;
  if (items.size() * static_cast<size_t>(times) > g_limits.max_items) throw Fault("list repetition is too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.list().seq);
}

void float_divmod(double x, double y, double* div, double* mod) {
  double m = std::fmod(x, y);
  double d = (x - m) / y;
  if (m != 0) {
    if ((y < 0) != (m < 0)) {
      m += y;
      d -= 1.0;
    }
  } else {
    m = std::copysign(0.0, y);
  }
  double fd;
  if (d != 0) {
    fd = std::floor(d);
    if (d - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, x / y);
  }
  *div = fd;
  *mod = m;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    check_size(s.size());
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) undefined_fault(a);
  if (b.is_undefined()) undefined_fault(b);
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) throw Fault("integer overflow in +");
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_size(a.str().size() + b.str().size());
      if (a.is_markup() || b.is_markup())  // Markup escapes a plain string added to it
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      return Value::string(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list().seq == b.list().seq && a.list().indexable()) {
      std::vector<Value> out = a.list().items;
      out.insert(out.end(), b.list().items.begin(), b.list().items.end());
      if (out.size() > g_limits.max_items) throw Fault("list concatenation is too large");
      return Value::list(std::move(out), a.list().seq);
    }
    if (a.is_string()) throw Fault(std::string("can only concatenate str (not \"") + type_name(b) + "\") to str");
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  }
  if (op == "%" && a.is_string()) throw Fault("printf-style '%' string formatting is not supported");
  if (!nums) bad_operands(op, a, b);
  if (op == "-") {
    if (!ints) return Value::number(a.as_float() - b.as_float());
    int64_t r;
    if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) throw Fault("integer overflow in -");
    return Value::integer(r);
  }
  if (op == "*") {
    if (!ints) return Value::number(a.as_float() * b.as_float());
    int64_t r;
    if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) throw Fault("integer overflow in *");
    return Value::integer(r);
  }
  if (op == "/") {
    if (b.as_float() == 0) throw Fault("division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) throw Fault(op == "//" ? "integer division by zero" : "integer modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) throw Fault("integer overflow in " + op);
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        r += y;
        --q;
      }
      return Value::integer(op == "//" ? q : r);
    }
    if (b.as_float() == 0) throw Fault("float division by zero");
    double d, m;
    float_divmod(a.as_float(), b.as_float(), &d, &m);
    return Value::number(op == "//" ? d : m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      if (base == 0 || base == 1) return Value::integer(e == 0 ? 1 : base);
      if (base == -1) return Value::integer(e % 2 ? -1 : 1);
      for (; e > 0; --e)  // |base| >= 2 overflows within 64 steps
        if (__builtin_mul_overflow(r, base, &r)) throw Fault("integer overflow in **");
      return Value::integer(r);
    }
    if (a.as_float() == 0 && b.as_float() < 0) throw Fault("0.0 cannot be raised to a negative power");
    if (a.as_float() < 0 && std::floor(b.as_float()) != b.as_float())
      throw Fault("a negative number raised to a fractional power is complex, which templates do not support");
    double r = std::pow(a.as_float(), b.as_float());
    if (std::isinf(r) && std::isfinite(a.as_float()) && std::isfinite(b.as_float()))
      throw Fault("numerical result out of range in **");
    return Value::number(r);
  }
  throw Fault("unknown operator " + op);
}

Value negate(const Value& v) {
  if (v.is_undefined()) undefined_fault(v);
  if (v.is_float()) return Value::number(-v.as_float());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) throw Fault("integer overflow in unary -");
    return Value::integer(-v.as_int());
  }
  throw Fault(std::string("bad operand type for unary -: '") + type_name(v) + "'");
}

}  // namespace basalt::jinja
