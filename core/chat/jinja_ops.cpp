// SPDX-License-Identifier: MIT
// Jinja operators, attribute/item access and slicing, and Python's str, dict and list methods.
#include <clocale>
#include <cmath>
#include <cwctype>
#include <limits>
#include <locale.h>
#include <wctype.h>

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

void check_size(size_t bytes) {
  if (bytes > g_limits.max_bytes)
    throw Fault("a value of " + std::to_string(bytes) + " bytes is over the template's limit of " +
                std::to_string(g_limits.max_bytes));
}

[[noreturn]] void undefined_fault(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw Fault(hint.empty() ? "a value is undefined" : hint);
}
}  // namespace

void set_build_limits(const BuildLimits& limits) { g_limits = limits; }
const BuildLimits& build_limits() { return g_limits; }

// ---------------------------------------------------------------- case mapping

namespace {

locale_t utf8_locale() {
  static locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    if (!l) l = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", static_cast<locale_t>(nullptr));
    return l;
  }();
  return loc;
}

char32_t cp_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  locale_t loc = utf8_locale();
  return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c;
}

char32_t cp_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  locale_t loc = utf8_locale();
  return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c;
}

bool cp_is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  locale_t loc = utf8_locale();
  return loc && iswupper_l(static_cast<wint_t>(c), loc);
}

bool cp_is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  locale_t loc = utf8_locale();
  return loc && iswlower_l(static_cast<wint_t>(c), loc);
}

bool cp_is_alpha(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  locale_t loc = utf8_locale();
  return loc && iswalpha_l(static_cast<wint_t>(c), loc);
}

bool cp_is_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool cp_is_cased(char32_t c) { return cp_is_upper(c) || cp_is_lower(c); }

void append_upper(std::string& out, char32_t c) {
  if (c == 0xdf) out += "SS";  // Python's full case mapping of sharp s
  else utf8_append(out, cp_upper(c));
}

void append_lower(std::string& out, char32_t c) {
  if (c == 0x130) out += "i\xcc\x87";  // capital I with dot above
  else utf8_append(out, cp_lower(c));
}

std::string str_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (prev_cased) append_lower(out, c);
    else append_upper(out, c);
    prev_cased = cp_is_cased(c);
  }
  return out;
}

std::string str_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    if (first) append_upper(out, c);
    else append_lower(out, c);
    first = false;
  }
  return out;
}

}  // namespace

std::string str_upper(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) append_upper(out, c);
  return out;
}

std::string str_lower(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) append_lower(out, c);
  return out;
}

std::string str_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set;
  bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) {
    if (!chars.is_string()) throw Fault(std::string("strip arg must be None or str, not ") + type_name(chars));
    set = utf8_decode(chars.str());
  }
  auto strip_it = [&](char32_t c) { return whitespace ? is_py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(u.substr(b, e - b));
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

// ---------------------------------------------------------------- string methods

namespace {

std::vector<Value> split_words(const std::u32string& u, int64_t maxsplit) {
  std::vector<Value> out;
  size_t i = 0;
  while (true) {
    while (i < u.size() && is_py_space(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = u.size();
      while (e > i && is_py_space(u[e - 1])) --e;
      out.push_back(Value::string(utf8_encode(u.substr(i, e - i))));
      break;
    }
    size_t j = i;
    while (j < u.size() && !is_py_space(u[j])) ++j;
    out.push_back(Value::string(utf8_encode(u.substr(i, j - i))));
    i = j;
  }
  return out;
}

std::vector<Value> split_on(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw Fault("split: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t hit = s.find(sep, start);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(start, hit - start));
      start = hit + sep.size();
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    std::vector<std::string> rev;
    while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
      if (end < sep.size()) break;
      size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      rev.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    rev.push_back(s.substr(0, end));
    parts.assign(rev.rbegin(), rev.rend());
  }
  std::vector<Value> out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::string str_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < u.size()) utf8_append(out, u[i]);
      check_size(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    check_size(out.size());
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

bool match_affix(const std::string& s, const Value& affix, bool prefix, const char* what) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw Fault(std::string(what) + ": expected a string or a tuple of strings");
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.list().items)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where /*-1 left,0 center,1 right*/) {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (utf8_length(fill) != 1) throw Fault("the fill character must be exactly one character long");
  if (width <= len) return s;
  check_size(static_cast<size_t>(width) * fill.size());
  int64_t marg = width - len;
  int64_t left = where == 0 ? marg / 2 + (marg & width & 1) : (where < 0 ? 0 : marg);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

// str.format with {} / {0} / {name} fields and !s / !r conversions.
std::string str_format(const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else throw Fault("format: single '}' in the format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw Fault("format: single '{' in the format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conv = 0;
    size_t bang = field.find('!');
    if (field.find(':') != std::string::npos) throw Fault("format: format specs are not supported");
    if (bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= a.args.size()) throw Fault("format: not enough arguments");
      v = &a.args[auto_index++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      size_t k = std::stoul(field);
      if (k >= a.args.size()) throw Fault("format: argument index " + field + " out of range");
      v = &a.args[k];
    } else {
      for (auto& kv : a.kwargs)
        if (kv.first == field) v = &kv.second;
      if (!v) throw Fault("format: no argument named '" + field + "'");
    }
    out += conv == 'r' ? to_repr(*v) : to_str(*v);
  }
  return out;
}

Value call_str_method(const std::string& s, const std::string& name, CallArgs& call) {
  std::string what = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args a(call, what, {"chars"});
    return Value::string(str_strip(s, a.get(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "casefold" ||
      name == "swapcase") {
    Args a(call, what, {});
    if (name == "upper") return Value::string(str_upper(s));
    if (name == "lower" || name == "casefold") return Value::string(str_lower(s));
    if (name == "title") return Value::string(str_title(s));
    if (name == "capitalize") return Value::string(str_capitalize(s));
    std::string out;
    for (char32_t c : utf8_decode(s)) {
      if (cp_is_upper(c)) append_lower(out, c);
      else if (cp_is_lower(c)) append_upper(out, c);
      else utf8_append(out, c);
    }
    return Value::string(out);
  }
  if (name == "startswith" || name == "endswith") {
    Args a(call, what, {"prefix", "start", "end"});
    if (a.has(1) || a.has(2)) a.fail("start and end arguments are not supported");
    if (!a.has(0)) a.fail("missing the prefix argument");
    return Value::boolean(match_affix(s, a.get(0), name == "startswith", what.c_str()));
  }
  if (name == "split" || name == "rsplit") {
    Args a(call, what, {"sep", "maxsplit"});
    int64_t maxsplit = a.integer(1, -1);
    if (!a.has(0) || a.get(0).is_none()) {
      std::u32string u = utf8_decode(s);
      if (name == "rsplit" && maxsplit >= 0) {
        std::u32string r(u.rbegin(), u.rend());
        std::vector<Value> parts = split_words(r, maxsplit);
        std::vector<Value> out;
        for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
          std::u32string p = utf8_decode(it->str());
          out.push_back(Value::string(utf8_encode(std::u32string(p.rbegin(), p.rend()))));
        }
        return Value::list(std::move(out));
      }
      return Value::list(split_words(u, maxsplit));
    }
    return Value::list(split_on(s, a.str(0, ""), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    Args a(call, what, {"keepends"});
    bool keep = a.boolean(0, false);
    std::u32string u = utf8_decode(s);
    std::vector<Value> out;
    size_t start = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      char32_t c = u[i];
      bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
                 c == 0x2028 || c == 0x2029;
      if (!brk) continue;
      size_t end = i;
      if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      out.push_back(Value::string(utf8_encode(u.substr(start, (keep ? i + 1 : end) - start))));
      start = i + 1;
    }
    if (start < u.size()) out.push_back(Value::string(utf8_encode(u.substr(start))));
    return Value::list(std::move(out));
  }
  if (name == "replace") {
    Args a(call, what, {"old", "new", "count"});
    if (!a.has(0) || !a.has(1)) a.fail("expects old and new strings");
    return Value::string(str_replace(s, a.str(0, ""), a.str(1, ""), a.integer(2, -1)));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Args a(call, what, {"sub"});
    if (!a.has(0)) a.fail("missing the substring argument");
    std::string sub = a.str(0, "");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = (name[0] == 'r') ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") throw Fault(what + ": substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(s.substr(0, p))));
  }
  if (name == "join") {
    Args a(call, what, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : iterate(a.get(0))) {
      if (!v.is_string()) throw Fault(what + ": expected str items, found " + type_name(v));
      if (!first) out += s;
      out += v.str();
      first = false;
      check_size(out.size());
    }
    return Value::string(out);
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    Args a(call, what, {"width", "fillchar"});
    return Value::string(pad(s, a.integer(0, 0), a.str(1, " "), name == "center" ? 0 : name == "ljust" ? 1 : -1));
  }
  if (name == "zfill") {
    Args a(call, what, {"width"});
    std::string body = s, sign;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      sign = body.substr(0, 1);
      body.erase(0, 1);
    }
    return Value::string(sign + pad(body, a.integer(0, 0) - static_cast<int64_t>(sign.size()), "0", -1));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Args a(call, what, {"affix"});
    std::string x = a.str(0, "");
    bool pre = name == "removeprefix";
    if (match_affix(s, Value::string(x), pre, what.c_str()))
      return Value::string(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    Args a(call, what, {"sep"});
    std::string sep = a.str(0, "");
    if (sep.empty()) a.fail("empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (p == std::string::npos) {
      if (name == "partition") parts = {Value::string(s), Value::string(""), Value::string("")};
      else parts = {Value::string(""), Value::string(""), Value::string(s)};
    } else {
      parts = {Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))};
    }
    return Value::tuple(std::move(parts));
  }
  if (name.rfind("is", 0) == 0) {
    Args a(call, what, {});
    std::u32string u = utf8_decode(s);
    if (name == "isupper" || name == "islower") {
      bool any = false;
      for (char32_t c : u) {
        if (name == "isupper" ? cp_is_lower(c) : cp_is_upper(c)) return Value::boolean(false);
        any = any || cp_is_cased(c);
      }
      return Value::boolean(any);
    }
    if (u.empty()) return Value::boolean(false);
    for (char32_t c : u) {
      bool ok = name == "isspace"                                         ? is_py_space(c)
                : name == "isalpha"                                       ? cp_is_alpha(c)
                : (name == "isdigit" || name == "isdecimal" || name == "isnumeric") ? cp_is_digit(c)
                : name == "isalnum"                                       ? cp_is_alpha(c) || cp_is_digit(c)
                                                                          : throw Fault(what + " is not supported");
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  if (name == "format") return Value::string(str_format(s, call));
  throw Fault(what + " is not supported");
}

bool is_str_method(const std::string& n) {
  static const char* const kNames[] = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
      "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
      "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title",
      "translate", "upper", "zfill"};
  for (const char* k : kNames)
    if (n == k) return true;
  return false;
}

// Markup (a |safe string) keeps being Markup through its methods, and
// escapes the strings passed to most of them.
Value call_markup_method(const std::string& s, const std::string& name, CallArgs call) {
  static const char* const kEscapesArgs[] = {"capitalize", "title",  "lower", "upper",      "replace",
                                             "ljust",      "rjust",  "lstrip", "rstrip",    "center",
                                             "strip",      "swapcase", "zfill", "partition", "rpartition",
                                             "format"};
  auto esc = [](Value& v) {
    if (v.is_string() && !v.is_markup()) v = Value::markup(html_escape(v.str()));
  };
  bool escapes = false;
  for (const char* n : kEscapesArgs) escapes = escapes || name == n;
  if (escapes) {
    for (Value& v : call.args) esc(v);
    for (auto& kv : call.kwargs) esc(kv.second);
  }
  if (name == "join" && !call.args.empty()) {
    std::vector<Value> items = iterate(call.args[0]);
    for (Value& v : items) esc(v);
    call.args[0] = Value::list(std::move(items));
  }
  Value r = call_str_method(s, name, call);
  if (r.is_string()) return Value::markup(r.str());
  if (r.is_list() && (name == "split" || name == "rsplit" || name == "splitlines" || name == "partition" ||
                      name == "rpartition")) {
    std::vector<Value> items;
    for (const Value& v : r.list().items) items.push_back(Value::markup(v.str()));
    return Value::list(std::move(items), r.list().seq);
  }
  return r;
}

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
  auto missing = [&] { return Value::undefined("'" + std::string(type_name(obj)) + " object' has no attribute '" + name + "'"); };
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
    case Value::Kind::kString:
      if (is_str_method(name)) {
        std::string s = obj.str();
        if (obj.is_markup())
          return Value::function("str." + name, [s, name](CallArgs& call) { return call_markup_method(s, name, call); });
        return Value::function("str." + name, [s, name](CallArgs& call) { return call_str_method(s, name, call); });
      }
      return missing();
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
      return Value::undefined("'" + std::string(type_name(obj)) + " object' has no item " + to_repr(key));
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
      return Value::undefined("'" + std::string(type_name(obj)) + " object' has no item " + to_repr(key));
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
    case Value::Kind::kDict: return container.dict().find(item) != nullptr;
    case Value::Kind::kNamespace: return container.ns().find(item) != nullptr;
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
    return Value::number(std::pow(a.as_float(), b.as_float()));
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
