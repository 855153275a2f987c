#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Renders the chat templates in tests/data/chat/templates/ (and small Jinja
# snippets) with Python's jinja2, exactly as transformers' apply_chat_template
# does, and writes tests/data/chat/cases.json for tests/unit/chat_template_test.cpp.
#
#   python3 tests/python/make_chat_refs.py
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "chat")

# strftime_now() reads this fixed clock, so the expected text does not depend
# on the day the references were made; the C++ test fixes the same time.
NOW = datetime(2024, 9, 5, 14, 30, 0)

# Template file -> (bos_token, eos_token), as the models' tokenizers have them.
TEMPLATES = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),      # HuggingFaceTB/SmolLM2-135M-Instruct (from its GGUF)
    "chatml": ("<s>", "<|im_end|>"),                # teknium/OpenHermes-2.5-Mistral-7B
    "qwen2": ("", "<|im_end|>"),                    # Qwen/Qwen2-7B-Instruct
    "qwen2.5": ("", "<|im_end|>"),                  # Qwen/Qwen2.5-7B-Instruct
    "qwen3": ("", "<|im_end|>"),                    # Qwen/Qwen3-0.6B
    "llama2": ("<s>", "</s>"),                      # meta-llama/Llama-2-7b-chat-hf
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),  # meta-llama/Meta-Llama-3-8B-Instruct
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),  # meta-llama/Llama-3.1-8B-Instruct
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),  # meta-llama/Llama-3.2-3B-Instruct
    "mistral-v0.1": ("<s>", "</s>"),                # mistralai/Mistral-7B-Instruct-v0.1
    "mistral-v0.2": ("<s>", "</s>"),                # mistralai/Mistral-7B-Instruct-v0.2, Mixtral-8x7B-Instruct-v0.1
    "mistral-v0.3": ("<s>", "</s>"),                # mistralai/Mistral-7B-Instruct-v0.3
    "mistral-nemo": ("<s>", "</s>"),                # mistralai/Mistral-Nemo-Instruct-2407
    "gemma": ("<bos>", "<eos>"),                    # google/gemma-7b-it
    "gemma2": ("<bos>", "<eos>"),                   # google/gemma-2-2b-it
    "gemma3": ("<bos>", "<eos>"),                   # google/gemma-3-1b-it
    "zephyr": ("<s>", "</s>"),                      # TinyLlama/TinyLlama-1.1B-Chat-v1.0, HuggingFaceH4/zephyr-7b-beta
    "phi3": ("<s>", "<|endoftext|>"),               # microsoft/Phi-3-mini-4k-instruct
    "phi3.5": ("<s>", "<|endoftext|>"),             # microsoft/Phi-3.5-mini-instruct
    "hermes3-tool-use": ("<|begin_of_text|>", "<|im_end|>"),  # NousResearch/Hermes-3-Llama-3.1-8B (tool_use)
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CONVERSATIONS = {
    "system_user": [SYSTEM, {"role": "user", "content": "Hello! What is 2 + 2?"}],
    "user_only": [{"role": "user", "content": "Hi there"}],
    "multi_turn": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "system_multi_turn": [
        SYSTEM,
        {"role": "user", "content": "Who are you?"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "Another question"},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 日本語もOK 👋"},
        {"role": "user", "content": "  Ünïcödé\nsecond line\n\n  indented  "},
        {"role": "assistant", "content": "Sure — «ok»\ttab\n"},
        {"role": "user", "content": "naïve café 🍰 \"quotes\" and 'apostrophes' \\ backslash\n"},
    ],
}
NOT_ALTERNATING = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]
TOOL_CONVERSATION = [
    SYSTEM,
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
     "content": "{\"temperature\": 18, \"unit\": \"celsius\"}"},
    {"role": "assistant", "content": "It is 18 °C in Paris."},
    {"role": "user", "content": "Thanks! And in Tokyo?"},
]
THINKING = [
    {"role": "user", "content": "What is 1+1?"},
    {"role": "assistant", "content": "<think>\nEasy: one plus one.\n</think>\n\n1+1 = 2."},
    {"role": "user", "content": "And 2+2?"},
]
CONTENT_PARTS = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": [{"type": "text", "text": " Describe this: "}, {"type": "image"}]},
]

# (name, template, messages, add_generation_prompt, extra variables)
EXTRA_CASES = [
    ("qwen2.5/tools", "qwen2.5", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("qwen2.5/tool_calls_without_tools", "qwen2.5", TOOL_CONVERSATION, False, {}),
    ("qwen3/tools", "qwen3", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("qwen3/thinking", "qwen3", THINKING, True, {}),
    ("qwen3/no_thinking", "qwen3", CONVERSATIONS["multi_turn"], True, {"enable_thinking": False}),
    ("llama3.1/tools", "llama3.1", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("llama3.1/date_string", "llama3.1", CONVERSATIONS["system_user"], True, {"date_string": "01 Jan 2025"}),
    ("llama3.1/builtin_tools", "llama3.1", CONVERSATIONS["system_user"], True,
     {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
    ("llama3.2/tools", "llama3.2", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("llama3.2/tools_in_system", "llama3.2", TOOL_CONVERSATION, True, {"tools": TOOLS, "tools_in_user_message": False}),
    ("mistral-v0.3/tools", "mistral-v0.3", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("mistral-nemo/tools", "mistral-nemo", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("hermes3-tool-use/tools", "hermes3-tool-use", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("gemma3/content_parts", "gemma3", CONTENT_PARTS, True, {}),
    ("llama2/not_alternating", "llama2", NOT_ALTERNATING, True, {}),
    ("mistral-v0.3/not_alternating", "mistral-v0.3", NOT_ALTERNATING, True, {}),
    ("gemma3/not_alternating", "gemma3", NOT_ALTERNATING, True, {}),
    ("hermes3-tool-use/no_tools", "hermes3-tool-use", CONVERSATIONS["user_only"], True, {}),
]

DICT = {"a": 1, "b": "two", "c": [1, 2, 3], "d": None, "e": {"x": True}}
# (name, template, context): the interpreter's semantics, one construct at a time.
SNIPPETS = [
    ("text", "plain text", {}),
    ("comment", "a{# gone #}b{#- x -#}  c", {}),
    ("trim_blocks", "{% if true %}\nx\n{% endif %}\ny", {}),
    ("lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", {}),
    ("lstrip_comment", "a\n  {# c #}\nb", {}),
    ("plus_disables_lstrip", "a\n  {%+ if true %}b{% endif %}", {}),
    ("plus_disables_trim", "{% if true +%}\nx{% endif %}", {}),
    ("minus", "a   {{- 'b' -}}   c  {%- if true -%}  d  {%- endif %}", {}),
    ("var_keeps_newline", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("trailing_newline_dropped", "x\n", {}),
    ("crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("numbers", "{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 * 3 - 1 }} {{ 7 / 2 }} {{ 4 / 2 }} "
     "{{ 2 ** 10 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0e-5 }} {{ 0.0001 }} {{ 1e16 }} {{ 123456789.0 }} "
     "{{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 1_000 }} {{ 0x1f }}", {}),
    ("bools_none", "{{ true }} {{ false }} {{ none }} {{ True + 1 }} {{ true == 1 }}", {}),
    ("strings", "{{ 'a\\nb\\t\"c\"' }}|{{ \"it's\" }}|{{ 'a' 'b' }}|{{ '\\u00e9\\x41' }}", {}),
    ("concat", "{{ 'n=' ~ 3 ~ true ~ none ~ missing }}", {}),
    ("compare", "{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 'a' != 'a' }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ [1,2] == [1,2] }}", {}),
    ("logic", "{{ true and false }}|{{ true or false }}|{{ not true }}|{{ 0 or 'x' }}|{{ 'y' and 0 }}|{{ none or [] }}", {}),
    ("in", "{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'a' in d }}{{ 'q' not in d }}{{ not 'a' in d }}", {"d": DICT}),
    ("condexpr", "{{ 'yes' if flag else 'no' }}|{{ 'a' if false }}|{{ 1 if false else 2 if true else 3 }}", {"flag": True}),
    ("print_values", "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }} {{ d }} {{ (1, 2) }} {{ (1,) }} {{ xs }}",
     {"d": DICT, "xs": ["\u00e9", "\n"]}),
    ("attr_item", "{{ d.a }}{{ d['b'] }}{{ d.c[1] }}{{ d.c[-1] }}{{ d.e.x }}{{ d.zz }}|{{ d.c[9] }}|{{ d.c.0 }}", {"d": DICT}),
    ("slices", "{{ xs[1:] }}{{ xs[:2] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[-2:] }}{{ xs[1:-1] }}{{ 'hello'[1:3] }}"
     "{{ 'héllo'[::-1] }}{{ xs[5:] }}", {"xs": [1, 2, 3, 4, 5]}),
    ("undefined", "[{{ missing }}]{{ missing is defined }}{{ missing is undefined }}{{ d.zz is defined }}"
     "{{ n.foo is defined }}{{ missing | default('dflt') }}{{ '' | default('e', true) }}", {"d": DICT, "n": None}),
    ("for_loop", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
     "{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", {"xs": ["a", "b", "c"]}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ loop.length }}{% if not loop.last %},{% endif %}{% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
     {"d": DICT}),
    ("for_dict", "{% for k in d %}{{ k }}{% endfor %}{% for k, v in d | items %}{{ v is none }}{% endfor %}", {"d": DICT}),
    ("for_string", "{% for ch in 'hé!' %}[{{ ch }}]{% endfor %}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("break_continue", "{% for n in [1, 2, 3, 4, 5] %}{% if n == 2 %}{% continue %}{% endif %}{% if n == 4 %}{% break %}{% endif %}{{ n }}{% endfor %}", {}),
    ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("scoping", "{% set a = 0 %}{% for x in [1, 2] %}{{ a }}{% set a = x %}{{ a }}{% endfor %}{{ a }}"
     "{% if true %}{% set b = 3 %}{% endif %}{{ b }}", {}),
    ("namespace", "{% set ns = namespace(total=0, seen=false) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}"
     "{% if x == 2 %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.total }} {{ ns.seen }}"
     "{% set ns2 = namespace() %}{% set ns2.a = 'x' %}{{ ns2.a }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]", {}),
    ("macro", "{% macro f(x, y=2) %}[{{ x }}{{ y }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ f(1) }}{{ f(1, 3, 4, z=5) }}"
     "{{ f(y='k', x='j') }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("string_filters", "{{ '  x  ' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ 'hello world-wide (x)' | title }}|"
     "{{ 'hELLO' | capitalize }}|{{ 'abc' | replace('b', 'X') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'ab' | center(6) }}|"
     "{{ 'one two  three' | wordcount }}|{{ '<a href=\"x\">' | e }}|{{ 'xxhixx' | trim('x') }}", {}),
    ("length_filters", "{{ xs | length }}{{ 'héllo' | length }}{{ d | length }}{{ missing | length }}{{ xs | count }}",
     {"xs": [1, 2, 3], "d": DICT}),
    ("first_last", "{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}{{ d | first }}{{ [] | first }}", {"xs": [1, 2, 3], "d": DICT}),
    ("list_filters", "{{ d | list }}{{ 'ab' | list }}{{ xs | reverse | list }}{{ 'abc' | reverse }}{{ [3, 1, 2] | sort }}"
     "{{ ['b', 'A', 'c'] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}{{ [1, 1, 2] | unique | list }}{{ [1, 2] | sum }}"
     "{{ [4, 9, 2] | max }}{{ [4, 9, 2] | min }}", {"xs": [1, 2, 3], "d": DICT}),
    ("join", "{{ xs | join }}|{{ xs | join(', ') }}|{{ msgs | join(',', attribute='role') }}", {"xs": [1, 2, 3], "msgs": CONVERSATIONS["multi_turn"]}),
    ("selectattr", "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }}|"
     "{{ (msgs | selectattr('role', 'equalto', 'user') | list)[-1].content }}|"
     "{{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|"
     "{{ items | selectattr('on') | map(attribute='n') | join }}|{{ items | selectattr('on', 'undefined') | list | length }}",
     {"msgs": CONVERSATIONS["multi_turn"], "items": [{"n": 1, "on": True}, {"n": 2, "on": False}, {"n": 3}]}),
    ("select_map", "{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3, 4] | reject('even') | list }}"
     "{{ ['a', 'b'] | map('upper') | join }}{{ [1, 2] | map('string') | list }}{{ items | map(attribute='zz', default=0) | list }}",
     {"items": [{"n": 1}]}),
    ("conversion_filters", "{{ 42 | string | length }} {{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.7' | int }} {{ '3.7' | float }}"
     " {{ 3.7 | int }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3 | float }}", {}),
    ("tojson", "{{ xs | tojson }} {{ d | tojson }} {{ 'é\\n\"<>' | tojson }} {{ d | tojson(indent=2) }} {{ [] | tojson(indent=2) }}"
     " {{ d | tojson(sort_keys=true) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ 1.5 | tojson }} {{ none | tojson }}",
     {"xs": [1, "x", None, True, 2.5], "d": DICT}),
    ("items_dictsort", "{{ d | items | list }}{{ d2 | dictsort }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.items() | list }}",
     {"d": {"x": 1, "y": 2}, "d2": {"b": 1, "a": 2}}),
    ("dict_get", "{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 'dflt') }}{{ {'k': 1}['k'] }}{{ dict(a=1, b=2) }}", {"d": DICT}),
    ("string_methods", "{{ ' x '.strip() }}|{{ ' x '.lstrip() }}|{{ ' x '.rstrip() }}|{{ 'abc'.startswith('ab') }}"
     "{{ 'abc'.endswith('x') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|"
     "{{ 'hello world'.title() }}|{{ \"they're bill's\".title() }}|{{ 'abc'.replace('b', 'X') }}|"
     "{{ 'a-b-c'.find('b') }}{{ 'abc'.count('b') }}|{{ 'hEllo'.capitalize() }}|{{ '42'.isdigit() }}{{ 'ab'.isalpha() }}|"
     "{{ 'x'.center(5) }}|{{ '{} and {}'.format('a', 1) }}|{{ '-'.join(['a', 'b']) }}|{{ 'héllo wörld'.upper() }}", {}),
    ("strip_chars", "[{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xxay'.lstrip('x') }}][{{ 'ayyx'.rstrip('xy') }}][{{ ' a '.strip(none) }}]"
     "[{{ '\\u00a0 x\\u3000'.strip() }}]", {}),
    ("split", "{{ 'a<b>c<b>'.split('<b>') }}{{ ' a  b '.split() }}{{ 'x'.split(',') }}{{ 'r</think>a'.split('</think>')[-1] }}"
     "{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ 'l1\\nl2\\r\\nl3'.splitlines() }}", {}),
    ("tests", "{{ x is defined }}{{ n is none }}{{ s is string }}{{ d is mapping }}{{ xs is sequence }}{{ s is sequence }}"
     "{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ xs is iterable }}{{ 1 is iterable }}"
     "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ 2 is eq 3 }}{{ 'x' is in 'xy' }}"
     "{{ x is not none }}{{ 'ab' is lower }}{{ none is sameas none }}{{ 5 is gt 3 }}{{ range is callable }}",
     {"x": 1, "n": None, "s": "s", "d": DICT, "xs": [1]}),
    ("range", "{{ range(3) | list }}{{ range(1, 8, 3) | list }}{{ range(3, -1, -1) | list }}{{ range(0, 3, -1) | list }}", {}),
    ("strftime", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%A') }}", {}),
    ("operators_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 1 * 2 }} "
     "{{ not 1 == 2 }} {{ 'a' + ' b ' | trim + 'c' }} {{ -1 | abs }}", {}),
    ("generators", "{{ xs | select('odd') | list }}{% if [] | select('odd') %}T{% endif %}{{ none | map('upper') | list }}"
     "{{ (xs | select('odd')) is sequence }}{{ xs | reverse | join }}{{ d.items() }}{{ d.keys() | list }}"
     "{% for k, v in d | items %}{{ k }}{% endfor %}{{ xs | unique | list | length }}", {"xs": [1, 2, 3, 1], "d": {"a": 1}}),
    ("markup", "{{ 'a' | safe + '<b>' }} {{ '<b>' + 'a' | safe }} {{ ('a' | safe + '<') ~ '>' }} {{ '<' | e }}"
     " {{ ('<' | e) | e }} {{ ('x' | safe).upper() + '<' }} {{ ('<' | safe) is escaped }} {{ '<' is escaped }}"
     " {{ ('<p>' | safe).replace('p', '&') }} {{ ('a' | safe | trim) + '&' }}", {}),
    ("generation_block", "{% set x = 1 %}{% generation %}{% set x = 2 %}[{{ x }}]{% endgeneration %}{{ x }}", {}),
    ("in_undefined", "{{ 'x' in missing }}{{ missing in [1] }}", {}),
    ("bad_subscripts", "[{{ (xs | select('odd'))[0] }}][{{ five[0] }}][{{ n[0] }}][{{ xs[1.5] }}][{{ s['x'] }}]",
     {"xs": [1, 2], "five": 5, "n": None, "s": "ab"}),
    ("whitespace_mixed", "<ul>\n{% for x in xs %}\n  <li>{{ x }}</li>\n{% endfor %}\n</ul>\n  {%- if true %} tail {% endif -%}\n", {"xs": [1, 2]}),
]

# (name, template, context): jinja2 refuses these; the C++ renderer must too.
ERROR_SNIPPETS = [
    ("unknown_filter", "{{ 'x' | no_such_filter }}", {}),
    ("unknown_test", "{% if x is no_such_test %}{% endif %}", {}),
    ("undefined_attribute_of_undefined", "{{ missing.attr }}", {}),
    ("add_str_int", "{{ 'a' + 1 }}", {}),
    ("division_by_zero", "{{ 1 // 0 }}", {}),
    ("raise_exception", "{{ raise_exception('custom failure') }}", {}),
    ("call_non_callable", "{{ 'abc'() }}", {}),
    ("iterate_number", "{% for x in 5 %}{% endfor %}", {}),
    ("set_attr_on_dict", "{% set d = {} %}{% set d.a = 1 %}", {}),
    ("list_append_sandbox", "{% set xs = [] %}{{ xs.append(1) }}", {}),
    ("order_mixed", "{{ 1 < 'a' }}", {}),
    ("concat_binds_tighter_than_plus", "{{ 'a' ~ 1 + 2 }}", {}),
    ("slice_a_number", "{{ five[1:] }}", {"five": 5}),
    ("slice_with_a_string", "{{ xs['a':] }}", {"xs": [1, 2]}),
    ("slice_a_generator", "{{ (xs | select('odd'))[1:] }}", {"xs": [1, 2]}),
    ("generator_has_no_length", "{{ [1, 2] | select('odd') | length }}", {}),
    ("generator_not_json", "{{ [1, 2] | map('string') | tojson }}", {}),
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' own tojson: no HTML escaping, keys in their order.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(Extension):
    """{% generation %}...{% endgeneration %}, which transformers defines to find
    the assistant's tokens; when not tracking them it renders its body, as a
    call block (so a set inside does not leak out)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_env():
    # As transformers.utils.chat_template_utils._compile_jinja_template.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[Generation, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def render(env, source, context):
    try:
        return {"expected": env.from_string(source).render(**context)}
    except Exception as e:  # the C++ side must fail too, with this message where it is the template's own
        return {"error": str(e), "error_type": type(e).__name__}


def chat_context(bos, eos, messages, add_generation_prompt, extra):
    # As apply_chat_template: tools and documents are passed, as None when absent.
    ctx = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": add_generation_prompt,
           "bos_token": bos, "eos_token": eos}
    ctx.update(extra)
    return ctx


def main():
    env = make_env()
    templates = {}
    for name, (bos, eos) in TEMPLATES.items():
        path = os.path.join(DATA, "templates", name + ".jinja")
        with open(path, encoding="utf-8", newline="") as f:
            source = f.read()
        templates[name] = {"file": "templates/" + name + ".jinja", "source": source, "bos_token": bos, "eos_token": eos}

    cases = []
    for name, t in templates.items():
        if name == "hermes3-tool-use":
            continue  # needs tools: see EXTRA_CASES
        for conv_name, messages in CONVERSATIONS.items():
            for agp in (True, False):
                case = {"name": f"{name}/{conv_name}/{'gen' if agp else 'nogen'}", "template": name,
                        "messages": messages, "add_generation_prompt": agp, "extra": {}}
                case.update(render(env, t["source"], chat_context(t["bos_token"], t["eos_token"], messages, agp, {})))
                cases.append(case)
    for name, tname, messages, agp, extra in EXTRA_CASES:
        t = templates[tname]
        case = {"name": name, "template": tname, "messages": messages, "add_generation_prompt": agp, "extra": extra}
        case.update(render(env, t["source"], chat_context(t["bos_token"], t["eos_token"], messages, agp, extra)))
        cases.append(case)

    snippets = []
    for name, source, context in SNIPPETS + ERROR_SNIPPETS:
        s = {"name": name, "source": source, "context": context}
        s.update(render(env, source, context))
        snippets.append(s)
    for s in snippets:
        expect_error = any(s["name"] == e[0] for e in ERROR_SNIPPETS)
        if expect_error != ("error" in s):
            sys.exit(f"snippet {s['name']}: expected {'an error' if expect_error else 'output'}, got {s}")

    out = {
        "generator": "tests/python/make_chat_refs.py with jinja2 " + jinja2.__version__,
        "now": {"year": NOW.year, "month": NOW.month, "day": NOW.day, "hour": NOW.hour, "minute": NOW.minute,
                "second": NOW.second},
        "templates": templates,
        "cases": cases,
        "snippets": snippets,
    }
    path = os.path.join(DATA, "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"wrote {path}: {len(templates)} templates, {len(cases)} cases ({errors} rejected by their template), "
          f"{len(snippets)} snippets")


if __name__ == "__main__":
    main()
