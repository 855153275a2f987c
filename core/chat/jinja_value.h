// SPDX-License-Identifier: MIT
// The values a Jinja template computes with, with Python's semantics for str(), repr() and ==.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace basalt::jinja {

// An error found while evaluating, before the evaluator knows where in the
// template it happened; the evaluator turns it into a basalt::Error that
// names the line and column.
class Fault : public std::runtime_error {
 public:
  explicit Fault(const std::string& message) : std::runtime_error(message) {}
};

// raise_exception(message) from inside a template.
class Raised : public Fault {
 public:
  explicit Raised(const std::string& message) : Fault(message) {}
};

class Value;

// The Python sequence types a template meets. Jinja's select/map/... filters
// return generators (always true, no len(), not printable, not JSON), and
// dict.items()/keys()/values() return views.
enum class Seq : uint8_t { kList, kTuple, kGenerator, kDictItems, kDictKeys, kDictValues };

// Lists and dicts nest at most this deep, so that printing, comparing and
// freeing them cannot exhaust the stack.
constexpr int kMaxValueDepth = 512;

struct ListData {
  std::vector<Value> items;
  Seq seq = Seq::kList;
  int depth = 1;             // 1 + the deepest item's depth
  bool has_namespace = false;  // some item is or holds a namespace()
  bool indexable() const { return seq == Seq::kList || seq == Seq::kTuple; }
};

// A dict keeps insertion order, as Python's does.
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  bool has_namespace = false;
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

using NativeFunction = std::function<Value(CallArgs&)>;

struct Function {
  std::string name;
  NativeFunction call;
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction, kNamespace };

  Value() = default;  // undefined
  static Value undefined(std::string hint);  // hint: why, for error messages
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, Seq seq = Seq::kList);
  static Value tuple(std::vector<Value> items) { return list(std::move(items), Seq::kTuple); }
  static Value markup(std::string s);  // a string |safe made: '+' escapes what is added to it
  static Value dict(DictData d);
  static Value function(std::string name, NativeFunction fn);
  static Value make_namespace(DictData d);  // namespace(): a dict whose attributes can be set

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && b_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }

  bool truthy() const;
  bool as_bool() const { return b_; }
  int64_t as_int() const;  // int or bool
  double as_float() const;  // any number
  const std::string& str() const { return *static_cast<const std::string*>(p_.get()); }
  const ListData& list() const { return *static_cast<const ListData*>(p_.get()); }
  const DictData& dict() const { return *static_cast<const DictData*>(p_.get()); }
  DictData& ns() const { return *static_cast<DictData*>(p_.get()); }
  const Function& fn() const { return *static_cast<const Function*>(p_.get()); }
  const std::string& undefined_hint() const;
  const void* identity() const { return p_.get(); }
  int depth() const;             // 0 for a scalar
  bool holds_namespace() const;  // is or contains a namespace()

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<void> p_;  // string, ListData, DictData, Function, or the undefined hint
};

// Python's type names, for messages: "str", "int", "list", "dict"...
const char* type_name(const Value& v);

// Python's str() and repr(); an undefined value prints as "".
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
// Python's repr of a float: shortest round trip, "1.0", "1e-05", "1e+16".
std::string format_float(double d);
// How json.dumps lays out its output; the defaults are transformers' tojson.
struct JsonStyle {
  int indent = -1;  // < 0: all on one line
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX
  std::string item_sep;       // empty: ", " without indent, "," with
  std::string key_sep = ": ";
};
std::string to_json(const Value& v, const JsonStyle& style = {});

// Python's ==, and ordering for <, <=, >, >= (a Fault for incomparable types).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// UTF-8 helpers: Python strings count and slice code points.
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(const std::string& s);
bool is_py_space(char32_t c);  // str.isspace()

}  // namespace basalt::jinja
