// SPDX-License-Identifier: MIT
// Python's str methods (and Markup's), with Unicode case mapping, for Jinja templates.
#include <locale.h>
#include <wctype.h>

#include "core/chat/jinja_builtins.h"

namespace basalt::jinja {

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

enum class Align { kLeft, kCenter, kRight };  // where the text sits

std::string pad(const std::string& s, int64_t width, const std::string& fill, Align align) {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (utf8_length(fill) != 1) throw Fault("the fill character must be exactly one character long");
  if (width <= len) return s;
  check_size(static_cast<size_t>(width) * fill.size());
  int64_t marg = width - len;
  int64_t left = align == Align::kCenter ? marg / 2 + (marg & width & 1) : (align == Align::kLeft ? 0 : marg);
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
    } else if (field.size() < 10 && field.find_first_not_of("0123456789") == std::string::npos) {
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
    return Value::string(pad(s, a.integer(0, 0), a.str(1, " "),
                             name == "center" ? Align::kCenter : name == "ljust" ? Align::kLeft : Align::kRight));
  }
  if (name == "zfill") {
    Args a(call, what, {"width"});
    std::string body = s, sign;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      sign = body.substr(0, 1);
      body.erase(0, 1);
    }
    return Value::string(sign + pad(body, a.integer(0, 0) - static_cast<int64_t>(sign.size()), "0", Align::kRight));
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


}  // namespace

Value str_method(const Value& self, const std::string& name) {
  if (!is_str_method(name)) return Value();
  std::string s = self.str();
  if (self.is_markup())
    return Value::function("str." + name, [s, name](CallArgs& call) { return call_markup_method(s, name, call); });
  return Value::function("str." + name, [s, name](CallArgs& call) { return call_str_method(s, name, call); });
}

}  // namespace basalt::jinja
