// SPDX-License-Identifier: MIT
// Grammars of JSON output: any JSON object or value (OpenAI's response_format
// "json_object"), or the JSON text a JSON Schema describes ("json_schema").
//
// Whitespace between tokens is bounded (nothing, a space, or a newline and up
// to 24 spaces or tabs), and numbers have at most 16 digits before and after
// the point: a small model held to JSON otherwise falls into endless blanks
// or digits. Strings are valid UTF-8 with JSON's escapes.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/grammar/grammar.h"

namespace basalt {

Grammar json_grammar(bool object_only);

// The schema's keywords that are enforced: type (one or a list), enum, const,
// anyOf, oneOf (as anyOf), allOf of one schema, $ref (a JSON pointer into the
// document: "#", "#/$defs/X", "#/definitions/X"; recursion allowed);
// objects: properties (in the schema's order; those not in required may be
// left out), required, additionalProperties (false, or beside no properties
// true or a schema); arrays: items, prefixItems, minItems, maxItems; strings:
// minLength, maxLength, format (date, time, date-time, uuid). Annotations
// (title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly) are ignored. Any other keyword (pattern,
// minimum, multipleOf, ...) throws an Error naming it and where it is: a
// constraint that cannot be enforced is refused, not dropped.
// The schema as parsed with its members' order kept (ordered_json).
Grammar json_schema_grammar_parsed(const nlohmann::ordered_json& schema);
Grammar json_schema_grammar(std::string_view schema_text);  // Error if it is not JSON

}  // namespace basalt
