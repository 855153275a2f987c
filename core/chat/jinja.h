// SPDX-License-Identifier: MIT
// A compact Jinja2 interpreter for chat templates: parse once, render with a context.
//
// It covers what Hugging Face chat templates use (if/for/set/macro/filter
// blocks, namespace(), loop.*, filters, tests, Python string methods) and
// renders as transformers does (trim_blocks, lstrip_blocks, a read-only
// sandbox, its tojson). Anything else is a basalt::Error naming the construct
// and its line and column, never a silent wrong output.
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "core/chat/jinja_value.h"

namespace basalt::jinja {

struct Program;

// Guards against runaway templates.
struct RenderOptions {
  size_t max_output_bytes = 32u << 20;  // the rendered text, and any one string built on the way
  size_t max_items = 1u << 20;          // the length of any one list built (range(), list * n)
  size_t max_steps = 2'000'000;         // loop iterations and macro calls, all together
  int max_call_depth = 64;              // nested macro calls
  // Statements and expressions being evaluated inside one another, macro
  // calls included: bounds the renderer's use of the stack.
  int max_nesting = 2000;
  std::optional<std::tm> now;           // the time strftime_now() formats; the local time when unset
};

class Template {
 public:
  // Parses the template; a basalt::Error for a syntax error.
  explicit Template(const std::string& source);
  // Renders with these variables (besides the globals range, namespace,
  // dict, raise_exception and strftime_now); a basalt::Error on failure,
  // including a raise_exception() from the template.
  std::string render(const DictData& context, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace basalt::jinja
