// SPDX-License-Identifier: MIT
// Jinja tokenizer: text, {{ }}, {% %}, {# #}, raw blocks, '-'/'+' whitespace control, trim/lstrip_blocks.
#include "core/chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "core/chat/jinja_value.h"
#include "core/error.h"

namespace basalt::jinja {

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string describe_position(const std::string& source, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xc0) != 0x80) {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        push_text(src_.substr(pos), pos);
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      std::string text = src_.substr(pos, tag - pos);
      apply_left_strip(text, sign, kind != '{', line_starting);
      push_text(std::move(text), pos);
      size_t body = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(tag, body);
      } else if (kind == '%' && is_raw(body, &pos)) {
        pos = lex_raw(tag, pos);
      } else {
        pos = lex_tag(tag, body, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{TokenType::kEof, "", src_.size()});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    throw Error("chat template " + describe_position(src_, pos) + ": " + msg);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void push_text(std::string text, size_t pos) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::kText, std::move(text), pos});
  }

  // '-' strips all whitespace before the tag; lstrip_blocks strips the
  // spaces between a line start and a block or comment tag.
  static void apply_left_strip(std::string& text, char sign, bool is_block, bool line_starting) {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_ws(text[end - 1])) --end;
      text.resize(end);
    } else if (sign != '+' && is_block) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        bool only_ws = true;
        for (size_t i = l_pos; i < text.size(); ++i) only_ws = only_ws && is_ws(text[i]);
        if (only_ws) text.resize(l_pos);
      }
    }
  }

  // After '%}' or '#}': '-' eats all following whitespace, '+' nothing, and
  // otherwise trim_blocks eats one newline.
  size_t after_block_end(size_t pos, char sign) const {
    if (sign == '-') {
      while (pos < src_.size() && is_ws(src_[pos])) ++pos;
    } else if (sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  size_t lex_comment(size_t tag, size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) fail(tag, "unclosed comment: no '#}' before the end of the template");
    char sign = end > body && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    return after_block_end(end + 2, sign);
  }

  // {% raw %} ... {% endraw %}: the text between is output as it is.
  bool is_raw(size_t body, size_t* after) const {
    size_t p = body;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    *after = p;
    return true;
  }

  size_t lex_raw(size_t tag, size_t pos) {
    for (size_t i = src_.find("{%", pos); i != std::string::npos; i = src_.find("{%", i + 2)) {
      char sign = i + 2 < src_.size() && (src_[i + 2] == '-' || src_[i + 2] == '+') ? src_[i + 2] : 0;
      size_t p = i + 2 + (sign ? 1 : 0);
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && is_ws(src_[p])) ++p;
      char end_sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (src_.compare(p + (end_sign ? 1 : 0), 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, i - pos);
      apply_left_strip(text, sign, true, false);
      push_text(std::move(text), pos);
      return after_block_end(p + (end_sign ? 1 : 0) + 2, end_sign);
    }
    fail(tag, "unclosed 'raw' block: no '{% endraw %}' before the end of the template");
  }

  size_t lex_tag(size_t tag, size_t pos, bool block) {
    tokens_.push_back(Token{block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", tag});
    std::string balance;
    const char* closer = block ? "%}" : "}}";
    while (true) {
      if (pos >= src_.size())
        fail(tag, std::string("unclosed '") + (block ? "{%" : "{{") + "' tag: no '" + closer +
                      "' before the end of the template");
      if (balance.empty()) {
        if (block && src_.compare(pos, 3, "+%}") == 0) {
          tokens_.push_back(Token{TokenType::kBlockEnd, "", pos});
          return pos + 3;
        }
        if (src_.compare(pos, 3, std::string("-") + closer) == 0) {
          tokens_.push_back(Token{block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos});
          return after_block_end(pos + 3, '-');
        }
        if (src_.compare(pos, 2, closer) == 0) {
          tokens_.push_back(Token{block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", pos});
          return block ? after_block_end(pos + 2, 0) : pos + 2;
        }
      }
      char c = src_[pos];
      if (is_ws(c)) {
        ++pos;
      } else if (is_digit(c)) {
        pos = lex_number(pos);
      } else if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        tokens_.push_back(Token{TokenType::kName, src_.substr(pos, end - pos), pos});
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        pos = lex_operator(pos, balance);
      }
    }
  }

  size_t lex_number(size_t pos) {
    size_t start = pos;
    auto digits = [&](auto ok) {
      std::string d;
      while (pos < src_.size() && (ok(src_[pos]) || (src_[pos] == '_' && pos + 1 < src_.size() && ok(src_[pos + 1])))) {
        if (src_[pos] != '_') d += src_[pos];
        ++pos;
      }
      return d;
    };
    if (src_[pos] == '0' && pos + 1 < src_.size() && std::string("xXoObB").find(src_[pos + 1]) != std::string::npos) {
      char b = static_cast<char>(src_[pos + 1] | 0x20);
      int base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      pos += 2;
      std::string d = digits([&](char ch) {
        int v = is_digit(ch) ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : 99;
        return v < base;
      });
      if (d.empty()) fail(start, "malformed number");
      Token t{TokenType::kInt, src_.substr(start, pos - start), start};
      t.int_value = static_cast<int64_t>(std::strtoull(d.c_str(), nullptr, base));
      tokens_.push_back(std::move(t));
      return pos;
    }
    std::string text = digits(is_digit);
    bool is_float = false;
    if (pos + 1 < src_.size() && src_[pos] == '.' && is_digit(src_[pos + 1])) {
      ++pos;
      text += '.';  // not "." + string: gcc 12 misreads it (-Wrestrict, its bug 105329)
      text += digits(is_digit);
      is_float = true;
    }
    if (pos < src_.size() && (src_[pos] == 'e' || src_[pos] == 'E')) {
      size_t p = pos + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        text += 'e';
        text += src_.substr(pos + 1, p - pos - 1);
        pos = p;
        text += digits(is_digit);
        is_float = true;
      }
    }
    Token t{is_float ? TokenType::kFloat : TokenType::kInt, text, start};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal " + text + " does not fit in 64 bits");
    }
    tokens_.push_back(std::move(t));
    return pos;
  }

  // A quoted string, with Python's escapes (\n, \t, \xhh, \uXXXX, ...).
  size_t lex_string(size_t pos) {
    char quote = src_[pos];
    size_t start = pos++;
    std::string out;
    while (true) {
      if (pos >= src_.size()) fail(start, "unterminated string literal");
      char c = src_[pos++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= src_.size()) fail(start, "unterminated string literal");
      char e = src_[pos++];
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos + n > src_.size()) fail(pos - 2, std::string("truncated \\") + e + " escape in a string");
          std::string hex = src_.substr(pos, n);
          char* end = nullptr;
          unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail(pos - 2, std::string("truncated \\") + e + " escape in a string");
          if (cp > 0x10ffff) fail(pos - 2, "escape \\" + std::string(1, e) + hex + " is not a code point");
          utf8_append(out, static_cast<char32_t>(cp));
          pos += n;
          break;
        }
        case 'N': fail(pos - 2, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            unsigned cp = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && pos < src_.size() && src_[pos] >= '0' && src_[pos] <= '7'; ++k)
              cp = cp * 8 + static_cast<unsigned>(src_[pos++] - '0');
            utf8_append(out, static_cast<char32_t>(cp));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(Token{TokenType::kString, std::move(out), start});
    return pos;
  }

  size_t lex_operator(size_t pos, std::string& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo)
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back(Token{TokenType::kOp, op, pos});
        return pos + 2;
      }
    char c = src_[pos];
    if (std::string("+-*/%~<>=.,:|()[]{};").find(c) == std::string::npos) {
      if (static_cast<unsigned char>(c) < 0x20) fail(pos, "unexpected control character inside a tag");
      fail(pos, "unexpected character '" + std::string(1, c) + "' inside a tag");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(pos, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    tokens_.push_back(Token{TokenType::kOp, std::string(1, c), pos});
    return pos + 1;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace basalt::jinja
