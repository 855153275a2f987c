# SPDX-License-Identifier: MIT
# One Locust user: streamed completions, back to back, of a 128-token prompt
# and 128 output tokens (ignore_eos, as llama-server takes it). Besides the
# HTTP request itself it reports, as Locust events of type "LLM": "ttft" (to
# the first streamed text), "e2e" (the whole request) and "tokens" (whose
# response length is the request's output token count). With LOAD_LOG set, it
# also appends "first_token_time end_time tokens" (Unix seconds) per request to
# that file, from which load_test.py counts the tokens streamed inside its window.
import json
import os
import time

from locust import HttpUser, between, task

PROMPT = os.environ.get("LOAD_PROMPT", (
    "You are a careful assistant. Read the following notes and write a long, detailed report that "
    "explains every point in plain words, with examples, for a reader who knows nothing about the "
    "subject. Notes: rivers carry water from mountains to the sea; they shape valleys, feed farms, "
    "carry boats and goods, and flood when rain is heavy; people build dams, bridges and canals; "
    "cities grow on their banks; fish and birds depend on them; pollution harms them; clean water "
    "matters to everyone. Cover the history of rivers, their future, and what each of us can do to keep "
    "them clean and healthy for all our children. Report:"))  # 128 tokens with SmolLM2's tokenizer
MAX_TOKENS = int(os.environ.get("LOAD_MAX_TOKENS", "128"))
MODEL = os.environ.get("LOAD_MODEL", "")
LOG = os.environ.get("LOAD_LOG", "")


class Completion(HttpUser):  # requests-based: iter_content yields each piece as it arrives
    wait_time = between(0, 0)

    def event(self, name, seconds, length=0, exc=None):
        self.environment.events.request.fire(request_type="LLM", name=name, response_time=seconds * 1000,
                                             response_length=length, exception=exc, context={})

    @task
    def complete(self):
        body = {"prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        if MODEL:
            body["model"] = MODEL
        t0 = time.perf_counter()
        first, pieces, usage = None, 0, None
        # A connection per request: both servers end a keep-alive connection
        # after a few requests, and a pooled one they closed fails the next POST.
        with self.client.post("/v1/completions", json=body, stream=True, catch_response=True,
                              name="/v1/completions", headers={"Connection": "close"}) as r:
            if r.status_code != 200:
                r.failure(f"status {r.status_code}")
                if r.status_code in (429, 503):  # as a well-behaved client does
                    time.sleep(float(r.headers.get("Retry-After", "1")))
                return
            buf = b""
            for chunk in r.iter_content(chunk_size=None):
                buf += chunk
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    if not event.startswith(b"data: ") or event == b"data: [DONE]":
                        continue
                    data = json.loads(event[6:])
                    if data.get("usage"):
                        usage = data["usage"]
                    for c in data.get("choices", []):
                        if c.get("text"):
                            pieces += 1
                            if first is None:
                                first = time.perf_counter()
            r.success()
        end = time.perf_counter()
        tokens = usage["completion_tokens"] if usage else pieces
        if first is not None:
            self.event("ttft", first - t0)
            if LOG:
                now, clock = time.time(), time.perf_counter()
                with open(LOG, "a") as f:
                    f.write(f"{now - (clock - first):.4f} {now - (clock - end):.4f} {tokens}\n")
        self.event("e2e", end - t0)
        self.event("tokens", end - t0, length=tokens)
