// SPDX-License-Identifier: MIT
// Jinja's filters, tests and global functions, as Hugging Face's chat templates use them.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "core/chat/jinja_builtins.h"

namespace basalt::jinja {
namespace {

std::string name_of(const char* kind, const char* name) { return std::string(kind) + " '" + name + "'"; }

Value call_method(const Value& obj, const std::string& name, CallArgs args = {}) {
  Value f = get_attr(obj, name);
  return f.fn().call(args);
}

// A dotted attribute path, as selectattr('a.b') and map(attribute='a.b') take.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_undefined()) return cur;
    bool digits = !part.empty() && part.size() < 19 && part.find_first_not_of("0123456789") == std::string::npos;
    cur = digits ? get_item(cur, Value::integer(std::stoll(part))) : get_item(cur, Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Filters that keep a |safe string safe, as Markup's methods do.
Value same_kind(const Value& in, std::string s) { return in.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s)); }

size_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return utf8_length(v.str());
    case Value::Kind::kList:
      if (v.list().seq == Seq::kGenerator) throw Fault("object of type 'generator' has no len() (add |list)");
      return v.list().items.size();
    case Value::Kind::kDict: return v.dict().items.size();
    case Value::Kind::kNamespace: return v.ns().items.size();
    default: throw Fault(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

// ---- string filters

Value f_trim(const Value& in, CallArgs& c) {
  Args a(c, "filter 'trim'", {"chars"});
  return same_kind(in, str_strip(to_str(in), a.get(0), true, true));
}

Value f_upper(const Value& in, CallArgs& c) {
  Args a(c, "filter 'upper'", {});
  return same_kind(in, str_upper(to_str(in)));
}

Value f_lower(const Value& in, CallArgs& c) {
  Args a(c, "filter 'lower'", {});
  return same_kind(in, str_lower(to_str(in)));
}

Value f_capitalize(const Value& in, CallArgs& c) {
  Args a(c, "filter 'capitalize'", {});
  return same_kind(in, call_method(Value::string(to_str(in)), "capitalize").str());
}

// Jinja's title: words start after '-', whitespace, or one of "({[<".
Value f_title(const Value& in, CallArgs& c) {
  Args a(c, "filter 'title'", {});
  std::string out;
  bool word_start = true;
  for (char32_t ch : utf8_decode(to_str(in))) {
    bool delim = ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<' || is_py_space(ch);
    std::string one;
    utf8_append(one, ch);
    if (delim) out += one;
    else out += word_start ? str_upper(one) : str_lower(one);
    word_start = delim;
  }
  return Value::string(out);
}

Value f_replace(const Value& in, CallArgs& c) {
  Args a(c, "filter 'replace'", {"old", "new", "count"});
  CallArgs m;
  m.args = {a.get(0), a.get(1)};
  if (a.has(2) && !a.get(2).is_none()) m.args.push_back(a.get(2));
  return call_method(Value::string(to_str(in)), "replace", m);
}

Value f_center(const Value& in, CallArgs& c) {
  Args a(c, "filter 'center'", {"width"});
  CallArgs m;
  m.args = {Value::integer(a.integer(0, 80))};
  return same_kind(in, call_method(Value::string(to_str(in)), "center", m).str());
}

Value f_indent(const Value& in, CallArgs& c) {
  Args a(c, "filter 'indent'", {"width", "first", "blank"});
  if (!in.is_string()) throw Fault(std::string("filter 'indent' expects a string, got ") + type_name(in));
  std::string ind;
  if (a.has(0) && a.get(0).is_string()) {
    ind = a.get(0).str();
  } else {
    int64_t width = std::max<int64_t>(0, a.integer(0, 4));
    check_size(static_cast<size_t>(width));
    ind.assign(static_cast<size_t>(width), ' ');
  }
  bool first = a.boolean(1, false), blank = a.boolean(2, false);
  Value lines = call_method(Value::string(to_str(in) + "\n"), "splitlines");
  std::string out;
  const auto& items = lines.list().items;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& line = items[i].str();
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !line.empty())) out += ind;
    out += line;
  }
  if (first) out = ind + out;
  return Value::string(out);
}

Value f_escape(const Value& in, CallArgs& c) {
  Args a(c, "filter 'escape'", {});
  return in.is_markup() ? in : Value::markup(html_escape(to_str(in)));
}

Value f_forceescape(const Value& in, CallArgs& c) {
  Args a(c, "filter 'forceescape'", {});
  return Value::markup(html_escape(to_str(in)));
}

Value f_safe(const Value& in, CallArgs& c) {
  Args a(c, "filter 'safe'", {});
  return Value::markup(to_str(in));
}

Value f_wordcount(const Value& in, CallArgs& c) {
  Args a(c, "filter 'wordcount'", {});
  int64_t n = 0;  // runs of \w characters, as Jinja's regex counts them
  bool in_word = false;
  for (char32_t ch : utf8_decode(to_str(in))) {
    bool w = ch == '_' || (ch >= '0' && ch <= '9') || (ch | 0x20) - 'a' < 26u || (ch >= 0x80 && !is_py_space(ch));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_string(const Value& in, CallArgs& c) {
  Args a(c, "filter 'string'", {});
  return in.is_string() ? in : Value::string(to_str(in));  // a |safe string stays safe
}

// ---- conversion filters

Value f_int(const Value& in, CallArgs& c) {
  Args a(c, "filter 'int'", {"default", "base"});
  if (in.is_undefined()) throw Fault(in.undefined_hint().empty() ? "filter 'int' of an undefined value" : in.undefined_hint());
  Value dflt = a.has(0) ? a.get(0) : Value::integer(0);
  if (in.is_int() || in.is_bool()) return Value::integer(in.as_int());
  if (in.is_float()) {
    double d = in.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(d));
  }
  if (!in.is_string()) return dflt;
  std::string s = str_strip(in.str(), Value(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return dflt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, static_cast<int>(a.integer(1, 10)));
  if (end == s.c_str() + s.size() && errno == 0) return Value::integer(v);
  double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18)
    return Value::integer(static_cast<int64_t>(d));
  return dflt;
}

Value f_float(const Value& in, CallArgs& c) {
  Args a(c, "filter 'float'", {"default"});
  if (in.is_undefined()) throw Fault(in.undefined_hint().empty() ? "filter 'float' of an undefined value" : in.undefined_hint());
  Value dflt = a.has(0) ? a.get(0) : Value::number(0.0);
  if (in.is_number()) return Value::number(in.as_float());
  if (!in.is_string()) return dflt;
  std::string s = str_strip(in.str(), Value(), true, true);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return dflt;
  return Value::number(d);
}

Value f_abs(const Value& in, CallArgs& c) {
  Args a(c, "filter 'abs'", {});
  if (in.is_float()) return Value::number(std::fabs(in.as_float()));
  if (in.is_int() || in.is_bool()) return in.as_int() < 0 ? negate(in) : Value::integer(in.as_int());
  throw Fault(std::string("bad operand type for abs(): '") + type_name(in) + "'");
}

Value f_round(const Value& in, CallArgs& c) {
  Args a(c, "filter 'round'", {"precision", "method"});
  if (!in.is_number()) throw Fault(std::string("filter 'round': expected a number, got ") + type_name(in));
  int64_t p = a.integer(0, 0);
  std::string method = a.str(1, "common");
  double x = in.as_float(), scale = std::pow(10.0, static_cast<double>(p));
  if (method == "floor") return Value::number(std::floor(x * scale) / scale);
  if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
  if (method != "common") a.fail("method must be 'common', 'ceil' or 'floor'");
  if (!in.is_float() && p >= 0) return Value::integer(in.as_int());  // Python's round(int, n) is the int
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(p, 0, 300)), x);  // round half even
  return Value::number(std::strtod(buf, nullptr));
}

Value f_tojson(const Value& in, CallArgs& c) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  Args a(c, "filter 'tojson'", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  st.ensure_ascii = a.boolean(0, false);
  st.indent = a.has(1) && !a.get(1).is_none() ? static_cast<int>(std::clamp<int64_t>(a.integer(1, 0), 0, 64)) : -1;
  if (a.has(2) && !a.get(2).is_none()) {
    const Value& sep = a.get(2);
    if (!sep.is_list() || sep.list().items.size() != 2 || !sep.list().items[0].is_string() ||
        !sep.list().items[1].is_string())
      a.fail("separators must be a pair of strings");
    st.item_sep = sep.list().items[0].str();
    st.key_sep = sep.list().items[1].str();
  }
  st.sort_keys = a.boolean(3, false);
  return Value::string(to_json(in, st));
}

// ---- sequence filters

Value f_length(const Value& in, CallArgs& c) {
  Args a(c, "filter 'length'", {});
  return Value::integer(static_cast<int64_t>(length_of(in)));
}

Value f_list(const Value& in, CallArgs& c) {
  Args a(c, "filter 'list'", {});
  return Value::list(iterate(in));
}

Value f_first(const Value& in, CallArgs& c) {
  Args a(c, "filter 'first'", {});
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value::undefined("filter 'first': the sequence is empty") : items.front();
}

Value f_last(const Value& in, CallArgs& c) {
  Args a(c, "filter 'last'", {});
  if (in.is_list() && in.list().seq == Seq::kGenerator) throw Fault("'generator' object is not reversible (add |list)");
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value::undefined("filter 'last': the sequence is empty") : items.back();
}

Value f_reverse(const Value& in, CallArgs& c) {
  Args a(c, "filter 'reverse'", {});
  if (in.is_string()) return get_slice(in, Value::none(), Value::none(), Value::integer(-1));
  std::vector<Value> items = iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items), Seq::kGenerator);  // Python's reversed(): an iterator
}

Value f_items(const Value& in, CallArgs& c) {
  Args a(c, "filter 'items'", {});
  if (in.is_undefined()) return Value::list({});
  if (!in.is_dict()) throw Fault(std::string("filter 'items': expected a mapping, got ") + type_name(in));
  return Value::list(call_method(in, "items").list().items, Seq::kGenerator);
}

Value f_join(const Value& in, CallArgs& c) {
  Args a(c, "filter 'join'", {"d", "attribute"});
  std::string sep = a.str(0, "");
  std::string attr = a.has(1) ? to_str(a.get(1)) : "";
  std::string out;
  bool first = true;
  for (const Value& v : iterate(in)) {
    if (!first) out += sep;
    out += to_str(a.has(1) ? attr_path(v, attr) : v);
    first = false;
    if (out.size() > build_limits().max_bytes) throw Fault("filter 'join': the result is over the size limit");
  }
  return Value::string(out);
}

Value f_default(const Value& in, CallArgs& c) {
  Args a(c, "filter 'default'", {"default_value", "boolean"});
  Value dflt = a.has(0) ? a.get(0) : Value::string("");
  if (in.is_undefined() || (a.boolean(1, false) && !in.truthy())) return dflt;
  return in;
}

bool run_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  TestFn t = find_test(name);
  if (!t) throw Fault("unknown test '" + name + "'");
  CallArgs call;
  call.args = args;
  return t(v, call);
}

Value select_impl(const Value& in, CallArgs& c, const char* fname, bool by_attr, bool keep) {
  Args a(c, name_of("filter", fname), {}, true);
  const std::vector<Value>& rest = a.rest();
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (rest.empty()) a.fail("missing the attribute name");
    attr = to_str(rest[k++]);
  }
  std::string test = k < rest.size() ? to_str(rest[k++]) : "";
  std::vector<Value> targs(rest.begin() + static_cast<long>(k), rest.end());
  std::vector<Value> out;
  if (!in.truthy()) return Value::list({}, Seq::kGenerator);  // as Jinja: "if seq:"
  for (const Value& item : iterate(in)) {
    Value v = by_attr ? attr_path(item, attr) : item;
    bool pass = test.empty() ? v.truthy() : run_test(test, v, targs);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Value f_select(const Value& in, CallArgs& c) { return select_impl(in, c, "select", false, true); }
Value f_reject(const Value& in, CallArgs& c) { return select_impl(in, c, "reject", false, false); }
Value f_selectattr(const Value& in, CallArgs& c) { return select_impl(in, c, "selectattr", true, true); }
Value f_rejectattr(const Value& in, CallArgs& c) { return select_impl(in, c, "rejectattr", true, false); }

Value f_map(const Value& in, CallArgs& c) {
  Args a(c, "filter 'map'", {}, true);
  std::string attr;
  Value dflt;
  bool by_attr = false;
  for (const auto& kv : a.rest_kwargs()) {
    if (kv.first == "attribute") {
      attr = to_str(kv.second);
      by_attr = true;
    } else if (kv.first == "default") {
      dflt = kv.second;
    }
  }
  std::vector<Value> out;
  if (!in.truthy()) return Value::list({}, Seq::kGenerator);  // as Jinja: "if value:"
  if (by_attr) {
    for (const Value& item : iterate(in)) {
      Value v = attr_path(item, attr);
      out.push_back(v.is_undefined() && !dflt.is_undefined() ? dflt : v);
    }
    return Value::list(std::move(out), Seq::kGenerator);
  }
  if (a.rest().empty()) a.fail("expects a filter name or attribute=");
  std::string fname = to_str(a.rest()[0]);
  FilterFn f = find_filter(fname);
  if (!f) throw Fault("filter 'map': unknown filter '" + fname + "'");
  for (const Value& item : iterate(in)) {
    CallArgs fc;
    fc.args.assign(a.rest().begin() + 1, a.rest().end());
    fc.kwargs = a.rest_kwargs();
    out.push_back(f(item, fc));
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Value sort_key(const Value& v, bool case_sensitive, const std::string& attr) {
  Value k = attr.empty() ? v : attr_path(v, attr);
  if (!case_sensitive && k.is_string()) return Value::string(str_lower(k.str()));
  return k;
}

Value f_sort(const Value& in, CallArgs& c) {
  Args a(c, "filter 'sort'", {"reverse", "case_sensitive", "attribute"});
  bool rev = a.boolean(0, false), cs = a.boolean(1, false);
  std::string attr = a.has(2) ? to_str(a.get(2)) : "";
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& v : iterate(in)) keyed.emplace_back(sort_key(v, cs, attr), v);
  std::stable_sort(keyed.begin(), keyed.end(), [rev](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return Value::list(std::move(out));
}

Value f_dictsort(const Value& in, CallArgs& c) {
  Args a(c, "filter 'dictsort'", {"case_sensitive", "by", "reverse"});
  if (!in.is_dict()) throw Fault(std::string("filter 'dictsort': expected a mapping, got ") + type_name(in));
  bool cs = a.boolean(0, false), rev = a.boolean(2, false);
  std::string by = a.str(1, "key");
  if (by != "key" && by != "value") a.fail("by must be 'key' or 'value'");
  std::vector<std::pair<Value, Value>> items = in.dict().items;
  auto key = [&](const std::pair<Value, Value>& kv) { return sort_key(by == "key" ? kv.first : kv.second, cs, ""); };
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
  });
  std::vector<Value> out;
  for (auto& kv : items) out.push_back(Value::tuple({kv.first, kv.second}));
  return Value::list(std::move(out));
}

Value f_unique(const Value& in, CallArgs& c) {
  Args a(c, "filter 'unique'", {"case_sensitive", "attribute"});
  bool cs = a.boolean(0, false);
  std::string attr = a.has(1) ? to_str(a.get(1)) : "";
  std::vector<Value> out, seen;
  for (const Value& v : iterate(in)) {
    Value k = sort_key(v, cs, attr);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(k);
    out.push_back(v);
  }
  return Value::list(std::move(out), Seq::kGenerator);
}

Value min_max(const Value& in, CallArgs& c, bool want_max) {
  Args a(c, want_max ? "filter 'max'" : "filter 'min'", {"case_sensitive", "attribute"});
  bool cs = a.boolean(0, false);
  std::string attr = a.has(1) ? to_str(a.get(1)) : "";
  Value best, best_key;
  for (const Value& v : iterate(in)) {
    Value k = sort_key(v, cs, attr);
    if (best.is_undefined() || (want_max ? compare(k, best_key) > 0 : compare(k, best_key) < 0)) {
      best = v;
      best_key = k;
    }
  }
  return best.is_undefined() ? Value::undefined("the sequence is empty") : best;
}

Value f_min(const Value& in, CallArgs& c) { return min_max(in, c, false); }
Value f_max(const Value& in, CallArgs& c) { return min_max(in, c, true); }

Value f_sum(const Value& in, CallArgs& c) {
  Args a(c, "filter 'sum'", {"attribute", "start"});
  Value total = a.has(1) ? a.get(1) : Value::integer(0);
  std::string attr = a.has(0) ? to_str(a.get(0)) : "";
  for (const Value& v : iterate(in)) total = binary_op("+", total, attr.empty() ? v : attr_path(v, attr));
  return total;
}

Value f_attr(const Value& in, CallArgs& c) {
  Args a(c, "filter 'attr'", {"name"});
  return get_attr(in, a.str(0, ""));
}

// ---- tests

bool t_defined(const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(const Value& v, CallArgs&) { return v.is_function(); }
bool t_escaped(const Value& v, CallArgs&) { return v.is_markup(); }
// As Jinja: an undefined value iterates as empty and has a length.
bool t_iterable(const Value& v, CallArgs&) { return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); }
bool t_sequence(const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || (v.is_list() && v.list().indexable()) || v.is_dict();
}

const Value& test_arg(CallArgs& c, const char* name) {
  if (c.args.size() + c.kwargs.size() != 1) throw Fault(std::string("test '") + name + "' takes one argument");
  return c.args.empty() ? c.kwargs[0].second : c.args[0];
}

bool t_eq(const Value& v, CallArgs& c) { return equals(v, test_arg(c, "eq")); }
bool t_ne(const Value& v, CallArgs& c) { return !equals(v, test_arg(c, "ne")); }
bool t_lt(const Value& v, CallArgs& c) { return compare(v, test_arg(c, "lt")) < 0; }
bool t_le(const Value& v, CallArgs& c) { return compare(v, test_arg(c, "le")) <= 0; }
bool t_gt(const Value& v, CallArgs& c) { return compare(v, test_arg(c, "gt")) > 0; }
bool t_ge(const Value& v, CallArgs& c) { return compare(v, test_arg(c, "ge")) >= 0; }
bool t_in(const Value& v, CallArgs& c) { return contains(test_arg(c, "in"), v); }

bool t_sameas(const Value& v, CallArgs& c) {
  const Value& o = test_arg(c, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  if (v.is_int()) return v.as_int() == o.as_int();
  return v.identity() == o.identity();
}

// As Jinja: value % 2 == 1, value % 2 == 0, value % n == 0.
bool t_odd(const Value& v, CallArgs&) { return equals(binary_op("%", v, Value::integer(2)), Value::integer(1)); }
bool t_even(const Value& v, CallArgs&) { return equals(binary_op("%", v, Value::integer(2)), Value::integer(0)); }
bool t_divisibleby(const Value& v, CallArgs& c) {
  return equals(binary_op("%", v, test_arg(c, "divisibleby")), Value::integer(0));
}

// As Jinja: str(value).islower().
bool t_lower(const Value& v, CallArgs&) { return call_method(Value::string(to_str(v)), "islower").truthy(); }
bool t_upper(const Value& v, CallArgs&) { return call_method(Value::string(to_str(v)), "isupper").truthy(); }
bool t_filter(const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

// ---- globals

Value g_range(CallArgs& c) {
  Args a(c, "range()", {"start", "stop", "step"});
  int64_t start = 0, stop, step = a.integer(2, 1);
  if (a.has(1)) {
    start = a.integer(0, 0);
    stop = a.integer(1, 0);
  } else {
    stop = a.integer(0, 0);
  }
  if (step == 0) a.fail("step must not be zero");
  double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  if (n > static_cast<double>(build_limits().max_items))
    throw Fault("range() of " + std::to_string(static_cast<int64_t>(n)) + " items is over the template's limit of " +
                std::to_string(build_limits().max_items));
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
  return Value::list(std::move(out));
}

DictData kwargs_dict(CallArgs& c, const char* what) {
  DictData d;
  if (c.args.size() > 1) throw Fault(std::string(what) + " takes at most one positional argument");
  if (!c.args.empty()) {
    if (!c.args[0].is_dict()) throw Fault(std::string(what) + ": expected a mapping");
    d = c.args[0].dict();
  }
  for (auto& kv : c.kwargs) d.set(Value::string(kv.first), kv.second);
  return d;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  static const std::unordered_map<std::string, FilterFn> kFilters = {
      {"abs", f_abs},           {"attr", f_attr},         {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},      {"d", f_default},
      {"default", f_default},   {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape},     {"first", f_first},       {"float", f_float},
      {"forceescape", f_forceescape}, {"indent", f_indent},    {"int", f_int},
      {"items", f_items},       {"join", f_join},         {"last", f_last},
      {"length", f_length},     {"list", f_list},         {"lower", f_lower},
      {"map", f_map},           {"max", f_max},           {"min", f_min},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

TestFn find_test(const std::string& name) {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"boolean", t_boolean},   {"callable", t_callable}, {"defined", t_defined},   {"divisibleby", t_divisibleby},
      {"eq", t_eq},             {"equalto", t_eq},        {"==", t_eq},             {"escaped", t_escaped},
      {"even", t_even},         {"false", t_false},       {"filter", t_filter},     {"float", t_float},
      {"ge", t_ge},             {">=", t_ge},             {"gt", t_gt},             {"greaterthan", t_gt},
      {">", t_gt},              {"in", t_in},             {"integer", t_integer},   {"iterable", t_iterable},
      {"le", t_le},             {"<=", t_le},             {"lower", t_lower},       {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},              {"mapping", t_mapping},   {"ne", t_ne},
      {"!=", t_ne},             {"none", t_none},         {"number", t_number},     {"odd", t_odd},
      {"sameas", t_sameas},     {"sequence", t_sequence}, {"string", t_string},     {"test", t_test},
      {"true", t_true},         {"undefined", t_undefined}, {"upper", t_upper},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

void add_globals(DictData& g, std::optional<std::tm> now) {
  g.set(Value::string("range"), Value::function("range", g_range));
  g.set(Value::string("namespace"), Value::function("namespace", [](CallArgs& c) {
          return Value::make_namespace(kwargs_dict(c, "namespace()"));
        }));
  g.set(Value::string("dict"), Value::function("dict", [](CallArgs& c) { return Value::dict(kwargs_dict(c, "dict()")); }));
  g.set(Value::string("raise_exception"), Value::function("raise_exception", [](CallArgs& c) -> Value {
          Args a(c, "raise_exception()", {"message"});
          throw Raised(to_str(a.get(0)));
        }));
  g.set(Value::string("strftime_now"), Value::function("strftime_now", [now](CallArgs& c) {
          Args a(c, "strftime_now()", {"format"});
          std::string fmt = a.str(0, "");
          std::tm tm{};
          if (now) {
            tm = *now;
          } else {
            std::time_t t = std::time(nullptr);
            localtime_r(&t, &tm);
          }
          if (fmt.empty()) return Value::string("");
          check_size(fmt.size() * 32);
          std::string buf(64 + fmt.size() * 32, '\0');
          size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
          if (n == 0) throw Fault("strftime_now(): could not format '" + fmt + "'");
          buf.resize(n);
          return Value::string(buf);
        }));
}

}  // namespace basalt::jinja
