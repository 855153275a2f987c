// SPDX-License-Identifier: MIT
// Jinja's operators, attribute and item access, Python string/dict/list methods, filters, tests and globals.
#pragma once

#include <ctime>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/chat/jinja_value.h"

namespace basalt::jinja {

// Binds a call's positional and keyword arguments to parameter names, as
// Python does; a Fault for an unknown keyword or too many arguments.
class Args {
 public:
  Args(CallArgs& call, std::string what, std::initializer_list<const char*> names, bool variadic = false);
  bool has(size_t i) const { return i < vals_.size() && !vals_[i].is_undefined(); }
  const Value& get(size_t i) const { return vals_[i]; }
  std::string str(size_t i, const std::string& dflt) const;
  int64_t integer(size_t i, int64_t dflt) const;
  bool boolean(size_t i, bool dflt) const;
  const std::vector<Value>& rest() const { return rest_; }  // extra positionals when variadic
  const std::vector<std::pair<std::string, Value>>& rest_kwargs() const { return rest_kwargs_; }
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  std::string what_;
  std::vector<Value> vals_;
  std::vector<Value> rest_;
  std::vector<std::pair<std::string, Value>> rest_kwargs_;
};

// Limits that builtins which build big values (range, *, join) must honor.
struct BuildLimits {
  size_t max_bytes = 32u << 20;
  size_t max_items = 1u << 20;
};
void set_build_limits(const BuildLimits& limits);  // for the current thread's render
const BuildLimits& build_limits();
void check_size(size_t bytes);  // a Fault past max_bytes

// obj.name and obj[key], with Jinja's rules: a missing key or attribute is
// undefined; reading from an undefined value is a Fault.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// item in container.
bool contains(const Value& container, const Value& item);
// The items a for loop visits: a list's items, a dict's keys, a string's characters.
std::vector<Value> iterate(const Value& v);
// + - * / // % ** ~ on two values; -x.
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
// s.name as a bound method of a string (Markup's when s is |safe), or
// undefined when str has no such method.
Value str_method(const Value& s, const std::string& name);
// Python's str methods used outside method calls.
std::string str_upper(const std::string& s);
std::string str_lower(const std::string& s);
std::string str_strip(const std::string& s, const Value& chars, bool left, bool right);
// Markup's escaping: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

using FilterFn = Value (*)(const Value& input, CallArgs& args);
using TestFn = bool (*)(const Value& input, CallArgs& args);
FilterFn find_filter(const std::string& name);  // null if unknown
TestFn find_test(const std::string& name);

// The globals every template sees: range, namespace, dict, raise_exception,
// strftime_now (formatting `now`, or the local time when unset).
void add_globals(DictData& globals, std::optional<std::tm> now);

}  // namespace basalt::jinja
