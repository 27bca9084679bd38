"""The official `anthropic` package against a running `memoria serve` (SmolLM2-135M-Instruct).

Usage: python3 anthropic_api.py BASE_URL API_KEY
Covers messages (whole and streamed, the same text at temperature 0), tools (a forced
`tool_use`, then a `tool_result` answered), `cache_control` (a long system prompt written to
the cache once, then read: `cache_creation_input_tokens` / `cache_read_input_tokens`),
`count_tokens`, the key in `X-Api-Key` (a wrong one refused) and Anthropic's error shape. Prints
`ok` and exits 0 when every check passes.
"""

import sys

import anthropic

WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

# A long system prompt (about 900 tokens), unique to this script, marked as a cache breakpoint.
MANUAL = " ".join(
    f"Rule {i}: when a visitor asks about the museum's room number {i}, answer politely and briefly."
    for i in range(60)
)


def main() -> None:
    base, key = sys.argv[1].rstrip("/"), sys.argv[2]
    client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=300)
    msgs = [{"role": "user", "content": "Tell me a short story about a cat."}]

    m = client.messages.create(model="claude-sonnet-4-5", max_tokens=24, extra_body={"temperature": 0},
                               system="You are a storyteller.", messages=msgs)
    assert m.type == "message" and m.role == "assistant", m
    assert m.content and m.content[0].type == "text" and m.content[0].text, m
    assert m.stop_reason in ("end_turn", "max_tokens"), m.stop_reason
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0, m.usage

    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=24, extra_body={"temperature": 0},
                                system="You are a storyteller.", messages=msgs) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == m.content[0].text, (streamed, m.content[0].text)
    assert final.usage.output_tokens == m.usage.output_tokens, final.usage
    assert final.stop_reason == m.stop_reason, final.stop_reason

    n = client.messages.count_tokens(model="claude-sonnet-4-5", system="You are a storyteller.",
                                     messages=msgs)
    assert n.input_tokens == m.usage.input_tokens, (n, m.usage)

    # Tools: a forced call whose input follows the schema, then its result answered.
    t = client.messages.create(model="claude-sonnet-4-5", max_tokens=128, extra_body={"temperature": 0},
                               tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                               messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert t.stop_reason == "tool_use", t
    use = [b for b in t.content if b.type == "tool_use"]
    assert len(use) >= 1 and use[0].name == "get_weather", t.content
    assert isinstance(use[0].input, dict) and isinstance(use[0].input.get("city"), str), use[0].input
    back = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=24, extra_body={"temperature": 0}, tools=[WEATHER],
        messages=[{"role": "user", "content": "What is the weather in Paris?"},
                  {"role": "assistant", "content": t.content},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use[0].id,
                                                "content": "Sunny, 21 degrees."}]}])
    assert back.content, back
    # Streaming with tools gives the same blocks as events.
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=128, extra_body={"temperature": 0},
                                tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                                messages=[{"role": "user", "content": "What is the weather in Paris?"}]) as s:
        streamed_tool = s.get_final_message()
    assert [b.type for b in streamed_tool.content] == [b.type for b in t.content], streamed_tool.content
    assert streamed_tool.content[-1].input == use[-1].input, streamed_tool.content

    # cache_control: the first request writes the system prompt's prefix, the next reads it.
    system = [{"type": "text", "text": MANUAL, "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(model="claude-sonnet-4-5", max_tokens=8, extra_body={"temperature": 0}, system=system,
                                   messages=[{"role": "user", "content": "Where is room 7?"}])
    assert first.usage.cache_creation_input_tokens > 500, first.usage
    assert first.usage.cache_read_input_tokens == 0, first.usage
    second = client.messages.create(model="claude-sonnet-4-5", max_tokens=8, extra_body={"temperature": 0}, system=system,
                                    messages=[{"role": "user", "content": "Where is room 12?"}])
    assert second.usage.cache_read_input_tokens >= first.usage.cache_creation_input_tokens - 16, second.usage
    assert second.usage.cache_creation_input_tokens < 16, second.usage
    total = second.usage.input_tokens + second.usage.cache_read_input_tokens + second.usage.cache_creation_input_tokens
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", system=system,
                                           messages=[{"role": "user", "content": "Where is room 12?"}])
    assert total == counted.input_tokens, (total, counted)

    # Errors in Anthropic's shape; the key is checked.
    try:
        client.messages.create(model="m", max_tokens=8, messages=[{"role": "robot", "content": "hi"}])
        raise AssertionError("a bad role was accepted")
    except anthropic.BadRequestError as e:
        assert e.body["type"] == "error" and e.body["error"]["type"] == "invalid_request_error", e.body
    wrong = anthropic.Anthropic(base_url=base, api_key="not-the-key", max_retries=0)
    try:
        wrong.messages.create(model="m", max_tokens=8, messages=msgs)
        raise AssertionError("a wrong key was accepted")
    except anthropic.AuthenticationError:
        pass
    print("ok")


if __name__ == "__main__":
    main()
