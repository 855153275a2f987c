// SPDX-License-Identifier: MIT
// Jinja values: construction, truth, Python's str()/repr()/==, JSON output, UTF-8 helpers.
#include "core/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/util/utf8.h"

namespace basalt::jinja {

const Value* DictData::find(const Value& key) const {
  for (const auto& kv : items)
    if (equals(kv.first, key)) return &kv.second;
  return nullptr;
}

namespace {

template <typename Data>
void account(Data& d, const Value& child) {
  d.depth = std::max(d.depth, child.depth() + 1);
  d.has_namespace = d.has_namespace || child.holds_namespace();
  if (d.depth > kMaxValueDepth)
    throw Fault("a value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
}

}  // namespace

int Value::depth() const {
  if (kind_ == Kind::kList) return list().depth;
  if (kind_ == Kind::kDict || kind_ == Kind::kNamespace) return dict().depth;
  return 0;
}

bool Value::holds_namespace() const {
  if (kind_ == Kind::kNamespace) return true;
  if (kind_ == Kind::kList) return list().has_namespace;
  if (kind_ == Kind::kDict) return dict().has_namespace;
  return false;
}

void DictData::set(const Value& key, Value value) {
  account(*this, key);
  account(*this, value);
  for (auto& kv : items)
    if (equals(kv.first, key)) {
      kv.second = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, Seq seq) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->seq = seq;
  for (const Value& item : data->items) account(*data, item);
  Value v;
  v.kind_ = Kind::kList;
  v.p_ = std::move(data);
  return v;
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.b_ = true;
  return v;
}

Value Value::dict(DictData d) {
  d.depth = 1;
  d.has_namespace = false;
  for (const auto& kv : d.items) {
    account(d, kv.first);
    account(d, kv.second);
  }
  Value v;
  v.kind_ = Kind::kDict;
  v.p_ = std::make_shared<DictData>(std::move(d));
  return v;
}

Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.p_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

Value Value::make_namespace(DictData d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::kNamespace;
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  return p_ ? *static_cast<const std::string*>(p_.get()) : empty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !str().empty();
    case Kind::kList: return list().seq == Seq::kGenerator || !list().items.empty();
    case Kind::kDict: return !dict().items.empty();
    case Kind::kFunction:
    case Kind::kNamespace: return true;
  }
  return false;
}

int64_t Value::as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }

double Value::as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList:
      switch (v.list().seq) {
        case Seq::kList: return "list";
        case Seq::kTuple: return "tuple";
        case Seq::kGenerator: return "generator";
        case Seq::kDictItems: return "dict_items";
        case Seq::kDictKeys: return "dict_keys";
        case Seq::kDictValues: return "dict_values";
      }
      return "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kFunction: return "function";
    case Value::Kind::kNamespace: return "Namespace";
  }
  return "?";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout rule: positional when
  // the decimal exponent is in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

namespace {

// Python's str.isprintable() for the code points that matter in practice.
bool is_py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad) return false;
  if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f)) return false;
  if (c == 0x3000 || c == 0xfeff || c == 0x1680 || (c >= 0xd800 && c <= 0xdfff)) return false;
  return true;
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_py_printable(c)) {
      char buf[16];
      if (c >= 0xdc80 && c <= 0xdcff) c -= 0xdc00;  // an undecodable byte
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (ensure_ascii) {
    for (char32_t c : utf8_decode(s)) {
      if (c < 0x80) {
        std::string one(1, static_cast<char>(c));
        std::string esc;
        json_string(esc, one, false);
        out.append(esc, 1, esc.size() - 2);
        continue;
      }
      if (c >= 0xdc80 && c <= 0xdcff) c -= 0xdc00;  // an undecodable byte
      char buf[16];
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 + (v >> 10)),
                      static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    }
    out += '"';
    return;
  }
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

const std::string kComma = ",";
const std::string kCommaSpace = ", ";

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return format_float(k.as_float());
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone: return "null";
    default: throw Fault(std::string("keys must be str, int, float, bool or None, not ") + type_name(k));
  }
}

void json_value(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  if (depth > 256) throw Fault("tojson: value nested too deeply");
  auto newline = [&](int level) {
    if (st.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(st.indent) * static_cast<size_t>(level), ' ');
  };
  const std::string& item_sep = !st.item_sep.empty() ? st.item_sep : st.indent < 0 ? kCommaSpace : kComma;
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += format_float(d);
      return;
    }
    case Value::Kind::kString: json_string(out, v.str(), st.ensure_ascii); return;
    case Value::Kind::kList: {
      if (!v.list().indexable())
        throw Fault(std::string("tojson: a value of type ") + type_name(v) + " is not JSON serializable (add |list)");
      const auto& items = v.list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value(out, items[i], st, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& kv : v.dict().items) items.emplace_back(json_key(kv.first), &kv.second);
      if (st.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, items[i].first, st.ensure_ascii);
        out += st.key_sep;
        json_value(out, *items[i].second, st, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw Fault(std::string("tojson: a value of type ") + type_name(v) + " is not JSON serializable" +
                  (v.is_undefined() && !v.undefined_hint().empty() ? " (" + v.undefined_hint() + ")" : ""));
  }
}

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kString: return v.is_markup() ? "Markup(" + repr_string(v.str()) + ")" : repr_string(v.str());
    case Value::Kind::kList: {
      const auto& l = v.list();
      if (l.seq == Seq::kGenerator) throw Fault("cannot print a generator (the result of select, map...): add |list");
      bool tuple = l.seq == Seq::kTuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += to_repr(l.items[i]);
      }
      if (tuple && l.items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      if (!l.indexable()) out = std::string(type_name(v)) + "(" + out + ")";
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& kv : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(kv.first) + ": " + to_repr(kv.second);
      }
      return out + "}";
    }
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return format_float(v.as_float());
    case Value::Kind::kString: return v.str();
    case Value::Kind::kList:
    case Value::Kind::kDict: return to_repr(v);
    case Value::Kind::kNamespace: {
      Value plain = Value::dict(v.ns());
      return "<Namespace " + to_repr(plain) + ">";
    }
    case Value::Kind::kFunction: throw Fault("cannot print the function '" + v.fn().name + "' (call it?)");
  }
  return "";
}

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_value(out, v, style, 0);
  return out;
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.str() == b.str();
    case K::kList: {
      const auto& x = a.list();
      const auto& y = b.list();
      if (!x.indexable() || !y.indexable()) return a.identity() == b.identity();
      if (x.seq != y.seq || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case K::kDict: {
      const auto& x = a.dict().items;
      const auto& y = b.dict();
      if (x.size() != y.items.size()) return false;
      for (const auto& kv : x) {
        const Value* other = y.find(kv.first);
        if (!other || !equals(kv.second, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().seq == b.list().seq && a.list().indexable()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw Fault(std::string("cannot order a value of type ") + type_name(a) + " against one of type " + type_name(b));
}

// Bytes that are not valid UTF-8 decode to U+DC80..U+DCFF and encode back
// unchanged (Python's surrogateescape), so odd input round-trips.
std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    char32_t cp = n == 0 ? c : n == 1 ? (c & 0x1f) : n == 2 ? (c & 0x0f) : (c & 0x07);
    bool ok = n >= 0 && i + static_cast<size_t>(n) < s.size();
    for (int k = 1; ok && k <= n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (ok && n > 0) {
      static const char32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
      if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) ok = false;
    }
    if (!ok) {
      out += static_cast<char32_t>(0xdc00 + c);
      ++i;
      continue;
    }
    out += cp;
    i += static_cast<size_t>(n) + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c >= 0xdc80 && c <= 0xdcff) out += static_cast<char>(c - 0xdc00);  // an undecodable byte, restored
  else basalt::utf8_append(out, static_cast<uint32_t>(c));
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t utf8_length(const std::string& s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? s.size() : utf8_decode(s).size();
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

}  // namespace basalt::jinja
