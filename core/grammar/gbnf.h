// SPDX-License-Identifier: MIT
// GBNF, llama.cpp's grammar notation (llama-server's "grammar" field,
// llama-cli's --grammar-file), compiled to a byte-level Grammar, so the
// grammars llama.cpp users have keep working:
//
//   root   ::= answer "\n"
//   answer ::= "yes" | "no" | [0-9]{1,3} ("." [0-9]+)?   # comments to the end of a line
//
// Rules are `name ::= alternatives`; a name is letters, digits, '-' and '_'.
// Terms: "literals" and [character classes] (ranges, [^...] for the
// complement) with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
// \UHHHHHHHH; `.` for any character; rule names; ( groups ); postfix * + ?
// {m} {m,} {m,n}. A rule ends at a newline, except inside parentheses or
// after a '|'. Characters are Unicode code points, matched as their UTF-8
// bytes (a class becomes the byte sequences of its ranges). `root` is the
// start. Errors name the line and column.
#pragma once

#include <string_view>

#include "core/grammar/grammar.h"

namespace basalt {

Grammar gbnf_grammar(std::string_view text);

}  // namespace basalt
