// SPDX-License-Identifier: MIT
// Splits a Jinja template into text and tag tokens, with Jinja's whitespace control.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace basalt::jinja {

enum class TokenType : uint8_t {
  kText,        // template text, already whitespace-trimmed
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // text holds the decoded value
  kInt,
  kFloat,
  kOp,          // text holds the operator: + - * / // % ** ~ == != < > <= >= = . , : | ( ) [ ] { }
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  size_t pos = 0;  // byte offset in the source, for messages
  int64_t int_value = 0;
  double float_value = 0;
};

// Jinja's source preparation: \r\n and \r become \n, and one trailing newline
// is dropped (keep_trailing_newline=False).
std::string normalize_newlines(const std::string& source);

// Tokens of a normalized source, rendered as Hugging Face does
// (trim_blocks=True, lstrip_blocks=True). Comments are dropped. Throws
// basalt::Error for an unclosed tag or comment, or a character that starts
// no token.
std::vector<Token> tokenize(const std::string& source);

// "line 3, column 7" for a byte offset.
std::string describe_position(const std::string& source, size_t pos);

}  // namespace basalt::jinja
