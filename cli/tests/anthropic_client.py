"""The local API's Anthropic Messages routes through the official `anthropic` Python client (and
the standard library's http.client for what the client cannot send): run by
cli/tests/companion/api.rs against `companion serve` on the real default model. The model is
a base model that continues text, so no check depends on what it says: only on shapes and
behaviour. Prints one line per check and exits non-zero when any fails.

    python3 cli/tests/anthropic_client.py BASE_URL TOKEN MODEL_ID CONTEXT

BASE_URL is the server's root (the client adds /v1/messages itself).
"""

import base64
import json
import sys
import time

from api_checks import check, conclude, http_to, user

try:
    import anthropic
    from anthropic import Anthropic
except ImportError as e:  # a missing client is a failure, never a skip
    print(f"FAIL: the anthropic Python client is missing ({e}): python3 -m pip install anthropic")
    sys.exit(2)

base, token, model, context = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
picture = sys.argv[5]
client = Anthropic(base_url=base, api_key=token, max_retries=0, timeout=300)
plain_http = http_to(base)
print(f"     (anthropic {anthropic.__version__})")

def error_type(body):
    """Anthropic's error shape: {"type": "error", "error": {"type", "message"}}."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            return None
    if not isinstance(body, dict) or body.get("type") != "error":
        return None
    return (body.get("error") or {}).get("type")


def refused(name, call, exception, kind, needle=""):
    """`call` raises `exception` whose body is Anthropic's error of type `kind`, naming `needle`."""
    try:
        call()
    except exception as e:
        body = getattr(e, "body", None)
        ok = error_type(body) == kind and needle in json.dumps(body)
        check(name, ok, f"{e.status_code}: {json.dumps(body)[:200]}")
        return
    except Exception as e:  # the wrong exception is a failure with its name
        check(name, False, f"{type(e).__name__}: {e}")
        return
    check(name, False, "was not refused")


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def uses_of(message):
    return [b for b in message.content if b.type == "tool_use"]


greedy = {"temperature": 0}

# a whole message
prompt = user("Write one sentence about the sea.")
whole = client.messages.create(model=model, max_tokens=12, messages=prompt, extra_body=greedy)
check(
    "a whole message has Anthropic's shape",
    whole.type == "message" and whole.role == "assistant" and whole.id.startswith("msg_")
    and whole.model == model and [b.type for b in whole.content] == ["text"]
    and whole.stop_reason in ("end_turn", "max_tokens") and whole.stop_sequence is None,
    whole.model_dump_json()[:300],
)
check(
    "its usage",
    whole.usage.input_tokens > 5 and 1 <= whole.usage.output_tokens <= 12,
    str(whole.usage),
)
counted = client.messages.count_tokens(model=model, messages=prompt)
check("count_tokens counts the prompt the reply read", counted.input_tokens == whole.usage.input_tokens,
      f"{counted.input_tokens} vs {whole.usage.input_tokens}")
cut = client.messages.create(model=model, max_tokens=3, messages=user("Count from one to fifty:"), extra_body=greedy)
check("a reply cut by max_tokens says so", cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 3,
      f"{cut.stop_reason} {cut.usage}")

# the system prompt, as a string and as text blocks: the same prompt
as_string = client.messages.count_tokens(model=model, system="You are terse.", messages=prompt)
as_blocks = client.messages.count_tokens(
    model=model, messages=prompt,
    system=[{"type": "text", "text": "You are "}, {"type": "text", "text": "terse."}],
)
check("system as a string or as blocks is one system prompt",
      as_string.input_tokens == as_blocks.input_tokens > counted.input_tokens,
      f"{as_string.input_tokens} {as_blocks.input_tokens}")
s = client.messages.create(
    model=model, max_tokens=8, system="You are terse.", messages=prompt,
    stop_sequences=["\n\n"], metadata={"user_id": "test"}, extra_body=greedy,
)
check("system, stop_sequences and metadata are taken", s.usage.input_tokens == as_string.input_tokens, str(s.usage))

# a stop sequence taken from the greedy reply ends that same reply there, and is named
full = "".join(b.text for b in whole.content if b.type == "text")
cut_at = max(1, len(full) // 2)
stop = full[cut_at:cut_at + 3]
if stop.strip():
    stopped = client.messages.create(model=model, max_tokens=12, messages=prompt, stop_sequences=[stop], extra_body=greedy)
    text = "".join(b.text for b in stopped.content if b.type == "text")
    check(
        "a stop sequence is reported as stop_sequence, with which",
        stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == stop and full.startswith(text) and stop not in text,
        f"{stop!r}: {stopped.model_dump_json()[:300]}",
    )
else:
    check("the greedy reply has text to take a stop sequence from", False, repr(full))

# the same streamed: Anthropic's event order, the same text (greedy)
types, pieces, start_usage, delta, blocks = [], [], None, None, {}
for event in client.messages.create(model=model, max_tokens=12, messages=prompt, stream=True, extra_body=greedy):
    types.append(event.type)
    if event.type == "message_start":
        start_usage = event.message.usage
        check("message_start carries an empty message", event.message.content == [] and event.message.id.startswith("msg_"))
    elif event.type == "content_block_start":
        blocks[event.index] = event.content_block.type
    elif event.type == "content_block_delta" and event.delta.type == "text_delta":
        pieces.append(event.delta.text)
    elif event.type == "message_delta":
        delta = event
collapsed = [t for i, t in enumerate(types) if i == 0 or t != types[i - 1]]
check(
    "stream events in Anthropic's order",
    collapsed == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                  "message_delta", "message_stop"] and blocks == {0: "text"},
    str(collapsed),
)
check("streamed text arrives in pieces", len(pieces) >= 2, str(len(pieces)))
check("streamed text equals the whole one (greedy)", "".join(pieces) == text_of(whole), repr("".join(pieces)))
check("message_start names the input tokens", start_usage is not None and start_usage.input_tokens == whole.usage.input_tokens, str(start_usage))
check(
    "message_delta has the stop reason and the output tokens",
    delta is not None and delta.delta.stop_reason == whole.stop_reason
    and delta.usage.output_tokens == whole.usage.output_tokens,
    str(delta),
)

# the raw events, as the server wrote them: every one named, its name its data's type
with client.messages.with_streaming_response.create(
    model=model, max_tokens=6, messages=prompt, stream=True, extra_body=greedy
) as response:
    raw, name = [], None
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data = json.loads(line[len("data:"):].strip())
            raw.append((name, data.get("type")))
            name = None
check("every raw event is named as its data's type", raw and all(n == t for n, t in raw), str(raw[:4]))
check("a ping is among the raw events", ("ping", "ping") in raw, str([n for n, _ in raw]))
check("the raw stream ends with message_stop", raw and raw[-1][0] == "message_stop", str(raw[-2:]))

# the client's own stream helper accumulates the same message
with client.messages.stream(model=model, max_tokens=12, messages=prompt, extra_body=greedy) as stream:
    final = stream.get_final_message()
check("messages.stream() accumulates the same message", text_of(final) == text_of(whole) and final.stop_reason == whole.stop_reason,
      repr(text_of(final)))


# seeded sampling: the same seed twice gives the same text
def sample(seed):
    r = client.messages.create(
        model=model, max_tokens=16, messages=user("Tell me about your day."),
        extra_body={"temperature": 1.0, "top_k": 40, "top_p": 0.95, "seed": seed},
    )
    return text_of(r)


first, again, other = sample(1234), sample(1234), sample(99)
check("same seed, same text", first == again, repr(first))
print(f"     (seed 99 gave {other!r})")

# a forced tool call whose input is an object, then its result sent back
tools = [{
    "name": "get_weather",
    "description": "The current weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 40}},
        "required": ["city"],
        "additionalProperties": False,
    },
}]
ask = user("What is the weather in Oslo right now?")
forced = {"type": "tool", "name": "get_weather"}
r = client.messages.create(model=model, max_tokens=64, messages=ask, tools=tools, tool_choice=forced, extra_body=greedy)
uses = uses_of(r)
check("a forced tool_choice gives a tool_use", r.stop_reason == "tool_use" and len(uses) == 1, r.model_dump_json()[:300])
check("count_tokens counts a forced call's prompt as the reply did",
      client.messages.count_tokens(model=model, messages=ask, tools=tools, tool_choice=forced).input_tokens == r.usage.input_tokens)
if uses:
    use = uses[0]
    check(
        "its input is an object that fits the schema",
        use.name == "get_weather" and use.id.startswith("toolu_") and isinstance(use.input, dict)
        and set(use.input) == {"city"} and isinstance(use.input["city"], str),
        json.dumps(use.input),
    )
    followup = ask + [
        r.to_param(),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                      "content": [{"type": "text", "text": "Sunny, 18 degrees."}]}]},
    ]
    r2 = client.messages.create(model=model, max_tokens=16, messages=followup, tools=tools,
                                tool_choice={"type": "none"}, extra_body=greedy)
    check("its tool_result goes back in", r2.stop_reason in ("end_turn", "max_tokens") and not uses_of(r2)
          and r2.usage.input_tokens > r.usage.input_tokens, str(r2.usage))
    r3 = client.messages.create(model=model, max_tokens=16, tools=tools, extra_body=greedy, messages=followup[:-1] + [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "no such city", "is_error": True}]}])
    check("a failed tool_result goes back in", r3.usage.input_tokens > r.usage.input_tokens, str(r3.usage))
    with client.messages.stream(model=model, max_tokens=64, messages=ask, tools=tools, tool_choice=forced, extra_body=greedy) as stream:
        streamed = stream.get_final_message()
    check("a streamed forced call accumulates to the same tool_use",
          streamed.stop_reason == "tool_use" and [(u.name, u.input) for u in uses_of(streamed)] == [(use.name, use.input)],
          streamed.model_dump_json()[:300])
anyone = client.messages.create(model=model, max_tokens=64, messages=ask, tools=tools, tool_choice={"type": "any"}, extra_body=greedy)
check("tool_choice any gives a tool_use", len(uses_of(anyone)) == 1, anyone.model_dump_json()[:200])
short = client.messages.create(model=model, max_tokens=4, messages=ask, tools=tools, tool_choice=forced, extra_body=greedy)
check("a forced call cut by max_tokens comes back as far as it got",
      short.stop_reason == "max_tokens" and len(uses_of(short)) == 1 and isinstance(uses_of(short)[0].input, dict),
      short.model_dump_json()[:300])

# saved only when asked
raw_reply = client.messages.with_raw_response.create(
    model=model, max_tokens=4, messages=user("Remember this exchange."), extra_body=greedy,
    extra_headers={"X-Companion-Save": "true"},
)
saved = raw_reply.headers.get("x-companion-conversation")
check("X-Companion-Save returns the saved conversation", bool(saved), str(saved))
print(f"saved-conversation {saved}")

# the token from x-api-key as well as from a bearer header; refusals in Anthropic's shape
body = json.dumps({"model": model, "messages": user("hi")})
json_headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
status, _, text = plain_http("POST", "/v1/messages/count_tokens", {**json_headers, "x-api-key": token}, body)
check("x-api-key carries the token", status == 200 and json.loads(text).get("input_tokens", 0) > 0, text[:120])
status, _, text = plain_http("POST", "/v1/messages/count_tokens", {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}, body)
check("a bearer token without anthropic-version", status == 200, text[:120])
status, _, text = plain_http("POST", "/v1/messages/count_tokens", {**json_headers, "x-api-key": "not-the-token-0123456789"}, body)
check("a wrong x-api-key: 401 in Anthropic's shape", status == 401 and error_type(text) == "authentication_error", text[:160])
refused("wrong key: 401", lambda: Anthropic(base_url=base, api_key="not-the-token-0123456789", max_retries=0).messages.create(
    model=model, max_tokens=4, messages=prompt), anthropic.AuthenticationError, "authentication_error")
refused("a system role among the messages: 400", lambda: client.messages.create(
    model=model, max_tokens=4, messages=[{"role": "system", "content": "Be brief."}] + prompt),
    anthropic.BadRequestError, "invalid_request_error", "role")
refused("a truncated picture: 400, said in a line", lambda: client.messages.create(
    model=model, max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "What is this?"}]}]),
    anthropic.BadRequestError, "invalid_request_error", "cannot be read")
refused("an unknown parameter: 400", lambda: client.messages.create(
    model=model, max_tokens=4, messages=prompt, extra_body={"mirostat": 2}),
    anthropic.BadRequestError, "invalid_request_error", "mirostat")
long_prompt = user("word " * (context + 100))
refused("a prompt longer than the context: 400", lambda: client.messages.create(
    model=model, max_tokens=4, messages=long_prompt), anthropic.BadRequestError, "invalid_request_error", "context")
refused("a streamed prompt longer than the context: 400 before the stream", lambda: list(client.messages.create(
    model=model, max_tokens=4, messages=long_prompt, stream=True)), anthropic.BadRequestError, "invalid_request_error", "context")
over = client.messages.count_tokens(model=model, messages=long_prompt).input_tokens
check("count_tokens counts a prompt over the context", over > context, str(over))
refused("an unknown model: 404", lambda: client.messages.create(
    model="claude-sonnet-4-5", max_tokens=4, messages=prompt), anthropic.NotFoundError, "not_found_error", "claude-sonnet-4-5")
refused("a body over the limit: 413", lambda: client.messages.create(
    model=model, max_tokens=4, messages=user("a" * (49 * 1024 * 1024))), anthropic.ContentTooLargeError, "request_too_large")
status, _, text = plain_http("POST", "/v1/messages", {**json_headers, "x-api-key": token}, "{not json")
check("a body that is not JSON: 400 in Anthropic's shape", status == 400 and error_type(text) == "invalid_request_error", text[:120])
status, _, text = plain_http("POST", "/v1/messages", {**json_headers, "x-api-key": token}, body)
check("max_tokens is required: 400", status == 400 and "max_tokens" in text, text[:120])
status, headers, text = plain_http("POST", "/v1/messages", {**json_headers, "x-api-key": token, "Origin": "https://evil.example"}, body)
check("another web origin: 403 in Anthropic's shape", status == 403 and error_type(text) == "permission_error"
      and "access-control-allow-origin" not in headers, text[:120])

# a picture as a base64 image block, read by the projector beside the model; a URL source is refused
with open(picture, "rb") as f:
    picture_data = base64.b64encode(f.read()).decode()
question = "What is in this picture?"
seen = client.messages.create(model=model, max_tokens=4, extra_body=greedy, messages=[{"role": "user", "content": [
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": picture_data}},
    {"type": "text", "text": question}]}])
unseen = client.messages.create(model=model, max_tokens=4, extra_body=greedy, messages=user(question))
check("a picture in an image block is read: its rows and markers count as input tokens",
      seen.usage.input_tokens > unseen.usage.input_tokens + 2,
      f"{seen.usage.input_tokens} with the picture, {unseen.usage.input_tokens} without")
refused("a picture behind a URL: 400, nothing fetched", lambda: client.messages.create(
    model=model, max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]}]),
    anthropic.BadRequestError, "invalid_request_error", "offline")

# a client that closes the stream mid-way: the generation stops, the next request is served at once
stream = client.messages.create(
    model=model, max_tokens=1500, messages=user("Tell me a very long story about a lighthouse keeper."),
    stream=True, extra_body={"temperature": 0.8, "seed": 5},
)
got = 0
for event in stream:
    if event.type == "content_block_delta" and event.delta.type == "text_delta" and event.delta.text:
        got += 1
        if got >= 4:
            break
stream.close()  # gone mid-stream
check("the stream was read before closing it", got >= 4, str(got))
started = time.monotonic()
after = client.messages.create(model=model, max_tokens=12, messages=prompt, extra_body=greedy)
took = time.monotonic() - started
check("the next request after a disconnect works", text_of(after) == text_of(whole), repr(text_of(after)))
print(f"     (it took {took:.1f} s)")

conclude()
