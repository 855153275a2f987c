// SPDX-License-Identifier: MIT
// The syntax tree of a parsed Jinja template: expressions and statements.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chat/jinja_value.h"

namespace basalt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    kLiteral,  // value
    kName,     // name
    kAttr,     // children[0].name
    kItem,     // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]], absent parts null
    kNeg,      // -children[0]
    kPos,      // +children[0]
    kNot,      // not children[0]
    kBinary,   // children[0] name children[1]; name is + - * / // % ** ~
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...; ops are == != < > <= >= in notin
    kAnd,      // children[0] and children[1]
    kOr,       // children[0] or children[1]
    kCond,     // children[1] if children[0] else children[2] (children[2] may be null)
    kList,     // [children...]
    kTuple,    // (children...)
    kDict,     // {children[0]: children[1], children[2]: children[3], ...}
    kCall,     // children[0](children[1:]..., kwargs)
    kFilter,   // children[0] | name(children[1:]..., kwargs); children[0] null in a filter block
    kTest,     // children[0] is [not] name(children[1:]..., kwargs)
  };
  Kind kind;
  size_t pos = 0;  // byte offset in the source
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  int depth = 1;  // 1 + the deepest child's: the parser bounds it (evaluating and freeing recurse this deep)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind : uint8_t {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition, body)...; else_body
    kFor,          // for targets in expr [if cond]: body; else: else_body
    kSet,          // set targets = expr; with attr non-empty: set targets[0].attr = expr
    kSetBlock,     // set targets[0] %}body{% endset
    kMacro,        // macro name(params): body
    kFilterBlock,  // filter expr (a kFilter chain on a null input): body
    kScope,        // a body rendered in its own scope ({% generation %})
    kBreak,
    kContinue,
  };
  Kind kind;
  size_t pos = 0;
  std::string text;  // kText: the text; kMacro: the name
  std::string attr;  // kSet on a namespace attribute
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name and default (may be null)
};

struct Program {
  std::string source;  // normalized, for error positions
  Body body;
};

// Parses a normalized template source (see normalize_newlines); throws
// basalt::Error naming the position of a syntax error.
Program parse_template(std::string source);

}  // namespace basalt::jinja
