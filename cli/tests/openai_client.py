"""The local API through the official `openai` Python client (and the standard library's
http.client for what the client cannot send): run by cli/tests/companion/api.rs against `companion serve` on the
real default model. Prints one line per check and exits non-zero when any fails.

    python3 cli/tests/openai_client.py BASE_URL TOKEN MODEL_ID CONTEXT PICTURE
"""

import base64
import http.client
import json
import sys
from urllib.parse import urlparse

from api_checks import check, conclude, http_to, user

try:
    import openai
    from openai import OpenAI
except ImportError as e:  # a missing client is a failure, never a skip
    print(f"FAIL: the openai Python client is missing ({e}): python3 -m pip install openai")
    sys.exit(2)

base, token, model, context = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
picture = sys.argv[5]
client = OpenAI(base_url=base, api_key=token, max_retries=0, timeout=300)
auth = {"Authorization": f"Bearer {token}"}
server = urlparse(base)
plain_http = http_to(base)


def refused(name, call, error_type, needle):
    try:
        call()
    except error_type as e:
        body = json.dumps(getattr(e, "body", None))
        check(name, needle in str(e) or needle in body, str(e)[:160])
        return
    except Exception as e:  # the wrong exception is a failure with its name
        check(name, False, f"{type(e).__name__}: {e}")
        return
    check(name, False, "was not refused")


# models
ids = [m.id for m in client.models.list().data]
check("GET /v1/models lists the model", ids == [model], str(ids))
check("GET /v1/models/{id}", client.models.retrieve(model).id == model)

# a non-streamed chat completion, then the same streamed: greedy, so the same text
prompt = user("Write one sentence about the sea.")
whole = client.chat.completions.create(model=model, messages=prompt, max_tokens=12, temperature=0)
text = whole.choices[0].message.content
check("non-streamed reply has text", bool(text and text.strip()), repr(text))
check(
    "non-streamed usage",
    whole.usage.prompt_tokens > 5 and 1 <= whole.usage.completion_tokens <= 12
    and whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens,
    str(whole.usage),
)
check("finish reason", whole.choices[0].finish_reason in ("stop", "length"), whole.choices[0].finish_reason)

pieces, finish, usage, roles = [], None, None, []
for chunk in client.chat.completions.create(
    model=model, messages=prompt, max_tokens=12, temperature=0, stream=True,
    stream_options={"include_usage": True},
):
    if chunk.usage:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.role:
            roles.append(choice.delta.role)
        if choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
check("streamed reply arrives in pieces", len(pieces) >= 2, str(len(pieces)))
check("streamed text equals the non-streamed (greedy)", "".join(pieces) == text, repr("".join(pieces)))
check("stream says the role first and a finish", roles == ["assistant"] and finish is not None)
check("stream carries usage", usage is not None and usage.completion_tokens == whole.usage.completion_tokens, str(usage))

# seeded sampling: the same seed twice gives the same text
def sample(seed):
    r = client.chat.completions.create(
        model=model, messages=user("Tell me about your day."), max_tokens=16,
        temperature=1.0, seed=seed,
    )
    return r.choices[0].message.content

first, again, other = sample(1234), sample(1234), sample(99)
check("same seed, same text", first == again, repr(first))
print(f"     (seed 99 gave {other!r})")

# a JSON-schema response that parses and fits the schema
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 24},
        "population": {"type": "integer", "minimum": 0, "maximum": 100000000},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
r = client.chat.completions.create(
    model=model, messages=user("The largest city of Norway and its population, as JSON."),
    max_tokens=64, temperature=0,
    response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}},
)
content = r.choices[0].message.content
try:
    obj = json.loads(content)
    fits = (
        set(obj) == {"city", "population"} and isinstance(obj["city"], str)
        and 1 <= len(obj["city"]) <= 24 and isinstance(obj["population"], int)
        and 0 <= obj["population"] <= 100000000
    )
    check("json_schema reply parses and fits the schema", fits and r.choices[0].finish_reason == "stop", content)
except json.JSONDecodeError as e:
    check("json_schema reply parses and fits the schema", False, f"{e}: {content!r}")
r = client.chat.completions.create(
    model=model, messages=user("Describe a cat as JSON."), max_tokens=96, temperature=0,
    response_format={"type": "json_object"},
)
try:
    check("json_object reply is an object", isinstance(json.loads(r.choices[0].message.content), dict), r.choices[0].message.content)
except json.JSONDecodeError as e:
    # only a reply cut by max_tokens may be unfinished JSON
    check("json_object reply is an object", r.choices[0].finish_reason == "length", f"cut by max_tokens: {e}")

# an integer field never runs away: every sampled reply closes (the grammar bounds digits as
# llama.cpp's JSON-schema grammar does; an unbounded one let "35000000…" run to max_tokens)
person = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
unparsed = []
for seed in range(20):
    r = client.chat.completions.create(
        model=model, messages=user("A person, as JSON with their name and age."),
        max_tokens=64, temperature=1.0, seed=seed,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": person}},
    )
    try:
        obj = json.loads(r.choices[0].message.content)
        if not (isinstance(obj.get("age"), int) and isinstance(obj.get("name"), str)):
            unparsed.append(r.choices[0].message.content)
    except json.JSONDecodeError:
        unparsed.append(r.choices[0].message.content)
check("20 sampled replies with an integer field all parse", not unparsed, repr(unparsed[:3]))

# a tool call that parses, then its result back in the conversation
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 40}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}]
ask = user("What is the weather in Oslo right now?")
r = client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required", max_tokens=64, temperature=0)
calls = r.choices[0].message.tool_calls or []
check("tool_choice required gives a call", r.choices[0].finish_reason == "tool_calls" and len(calls) == 1, str(r.choices[0]))
if calls:
    call = calls[0]
    args = json.loads(call.function.arguments)
    check("the call parses against the tool's schema", call.function.name == "get_weather" and isinstance(args.get("city"), str) and set(args) == {"city"}, call.function.arguments)
    followup = ask + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 18 degrees."},
    ]
    r2 = client.chat.completions.create(model=model, messages=followup, tools=tools, tool_choice="none", max_tokens=16, temperature=0)
    check("the tool's result goes back in", r2.choices[0].message.tool_calls is None and r2.usage.prompt_tokens > r.usage.prompt_tokens, str(r2.usage))
streamed_calls, streamed_finish = [], None
for chunk in client.chat.completions.create(model=model, messages=ask, tools=tools, tool_choice="required", max_tokens=64, temperature=0, stream=True):
    for choice in chunk.choices:
        streamed_calls.extend(choice.delta.tool_calls or [])
        streamed_finish = choice.finish_reason or streamed_finish
check(
    "a streamed call arrives whole, as the non-streamed one",
    streamed_finish == "tool_calls" and len(streamed_calls) == 1 and calls
    and streamed_calls[0].function.name == calls[0].function.name
    and json.loads(streamed_calls[0].function.arguments) == json.loads(calls[0].function.arguments),
    str(streamed_calls),
)
named = client.chat.completions.create(
    model=model, messages=ask, tools=tools, max_tokens=64, temperature=0,
    tool_choice={"type": "function", "function": {"name": "get_weather"}},
)
check("a named tool_choice calls that tool", (named.choices[0].message.tool_calls or [None])[0] is not None)

# a forced call under a small max_tokens never comes back empty: whole, or cut short with
# finish_reason "length" and the call as far as it got
empty, cut = [], 0
for seed in range(12):
    r = client.chat.completions.create(
        model=model, messages=ask, tools=tools, max_tokens=6 + seed * 3, temperature=1.0, seed=seed,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = r.choices[0]
    calls = choice.message.tool_calls or []
    if len(calls) != 1 or calls[0].function.name != "get_weather":
        empty.append(str(choice))
    elif choice.finish_reason == "length":
        cut += 1
    elif choice.finish_reason != "tool_calls":
        empty.append(str(choice))
    else:
        json.loads(calls[0].function.arguments)
check("forced calls under a small max_tokens never come back empty", not empty, repr(empty[:2]))
print(f"     ({cut} of 12 were cut short by max_tokens and came back partial)")

# a text completion
t = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
check("text completion", bool(t.choices[0].text) and t.usage.completion_tokens >= 1, repr(t.choices[0].text))
streamed = "".join(c.choices[0].text for c in client.completions.create(
    model=model, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True) if c.choices)
check("streamed text completion equals the whole one", streamed == t.choices[0].text, repr(streamed))

# saved only when asked
raw = client.chat.completions.with_raw_response.create(
    model=model, messages=user("Remember this exchange."), max_tokens=4, temperature=0,
    extra_headers={"X-Companion-Save": "true"},
)
saved = raw.headers.get("x-companion-conversation")
check("X-Companion-Save returns the saved conversation", bool(saved), str(saved))
print(f"saved-conversation {saved}")

# refusals: 401, 400, 404, 403, 413
refused("wrong token: 401", lambda: OpenAI(base_url=base, api_key="not-the-token-0123456789", max_retries=0).models.list(), openai.AuthenticationError, "token")
status, _, body = plain_http("GET", "/models")
check("no token: 401 with an OpenAI error body", status == 401 and json.loads(body)["error"]["type"] == "authentication_error", body[:120])
refused("logprobs: 400", lambda: client.chat.completions.create(model=model, messages=prompt, logprobs=True), openai.BadRequestError, "logprobs")
refused("n=2: 400", lambda: client.chat.completions.create(model=model, messages=prompt, n=2), openai.BadRequestError, "n")
refused("unknown parameter: 400", lambda: client.chat.completions.create(model=model, messages=prompt, extra_body={"mirostat": 2}), openai.BadRequestError, "mirostat")
refused("prompt longer than the context: 400", lambda: client.chat.completions.create(model=model, messages=user("word " * (context + 100)), max_tokens=4), openai.BadRequestError, "context_length_exceeded")
refused("unknown model: 404", lambda: client.chat.completions.create(model="gpt-4o", messages=prompt), openai.NotFoundError, "gpt-4o")
status, headers, body = plain_http("GET", "/models", {**auth, "Origin": "https://evil.example"})
check("another web origin: 403, no CORS header", status == 403 and "access-control-allow-origin" not in headers, body[:120])
status, headers, body = plain_http("OPTIONS", "/chat/completions", {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
check("a CORS preflight is refused", status == 403 and "access-control-allow-origin" not in headers, body[:120])
status, _, body = plain_http("GET", "/models", {**auth, "Host": "evil.example"})
check("another host name (DNS rebinding): 403", status == 403, body[:120])
big = json.dumps({"model": model, "messages": user("a" * (49 * 1024 * 1024))})
status, _, body = plain_http("POST", "/chat/completions", {**auth, "Content-Type": "application/json"}, big)
check("a body over the limit: 413 with an OpenAI error body", status == 413 and "error" in json.loads(body), body[:120])
status, _, body = plain_http("POST", "/chat/completions", {**auth, "Content-Type": "application/json"}, "{not json")
check("a body that is not JSON: 400", status == 400 and "error" in json.loads(body), body[:120])



# a picture as a data URL, read by the projector the server loaded beside the model (random
# weights: what the model says of it is not judged, only that it was read); a URL is refused
with open(picture, "rb") as f:
    data_url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
question = "What is in this picture?"
seen = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[{"role": "user", "content": [
    {"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": data_url, "detail": "auto"}}]}])
unseen = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=user(question))
check("a picture as a data URL is read: its rows and markers count as prompt tokens",
      seen.usage.prompt_tokens > unseen.usage.prompt_tokens + 2 and seen.choices[0].finish_reason in ("stop", "length"),
      f"{seen.usage.prompt_tokens} with the picture, {unseen.usage.prompt_tokens} without")
refused("a picture behind a URL: 400, nothing fetched", lambda: client.chat.completions.create(
    model=model, max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]), openai.BadRequestError, "offline")

# a client that disconnects mid-stream: the server stays healthy, the next request works
conn = http.client.HTTPConnection(server.hostname, server.port, timeout=120)
conn.request("POST", server.path + "/chat/completions", headers={**auth, "Content-Type": "application/json"}, body=json.dumps({
    "model": model, "messages": user("Tell me a very long story about a lighthouse keeper."),
    "max_tokens": 1500, "temperature": 0.8, "seed": 5, "stream": True,
}))
stream = conn.getresponse()
got = 0
while got < 4:
    line = stream.readline().decode()
    if not line:
        break
    if line.startswith("data: ") and '"content"' in line and '"content":""' not in line:
        got += 1
conn.sock.close()  # gone mid-stream, without a word
conn.close()
check("the stream was read before disconnecting", got >= 4, str(got))
after = client.chat.completions.create(model=model, messages=prompt, max_tokens=12, temperature=0)
check("the next request after a disconnect works", after.choices[0].message.content == text, repr(after.choices[0].message.content))

conclude()
