"""Tool calls through the official `openai` package against `memoria serve` (SmolLM2): a weather
tool round trip (the call, the `tool` message, the final answer) in plain and streaming mode, with
`tool_choice` required, a named function, auto and none.

Usage: python3 openai_tools.py BASE_URL MODEL
Prints `ok` and exits 0 when every check passes.
"""

import json
import sys

import openai

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Local time",
                                         "parameters": {"type": "object", "properties": {
                                             "city": {"type": "string", "maxLength": 20}},
                                             "required": ["city"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_call(call, name):
    assert call.type == "function" and call.id, call
    assert call.function.name == name, call
    args = json.loads(call.function.arguments)
    assert isinstance(args, dict), args
    if name == "get_weather":
        assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit"), args
    return args


def round_trip(client, model):
    r = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME],
                                       tool_choice="required", parallel_tool_calls=False,
                                       max_tokens=80, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.content is None and len(c.message.tool_calls) == 1, c.message
    call = c.message.tool_calls[0]
    args = check_call(call, call.function.name)
    # The tool answers; the model gets the result on the next turn and may answer in text.
    msgs = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, **args})},
    ]
    final = client.chat.completions.create(model=model, messages=msgs, tools=[WEATHER, TIME],
                                           tool_choice="none", max_tokens=40, temperature=0)
    f = final.choices[0]
    assert f.finish_reason in ("stop", "length") and isinstance(f.message.content, str), f
    assert f.message.tool_calls is None, f.message
    # The call and its result are part of the next turn's prompt.
    bare = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME],
                                          tool_choice="none", max_tokens=1, temperature=0)
    assert final.usage.prompt_tokens > bare.usage.prompt_tokens + 20, (final.usage, bare.usage)


def named_and_streamed(client, model):
    named = {"type": "function", "function": {"name": "get_time"}}
    r = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME],
                                       tool_choice=named, max_tokens=200, temperature=0)
    check_call(r.choices[0].message.tool_calls[0], "get_time")
    # The same request streamed: the deltas assemble to the same call.
    stream = client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER, TIME],
                                            tool_choice=named, max_tokens=200, temperature=0,
                                            stream=True)
    calls, finish, pieces = {}, None, 0
    for chunk in stream:
        for ch in chunk.choices:
            for d in ch.delta.tool_calls or []:
                pieces += 1
                entry = calls.setdefault(d.index, {"id": d.id, "name": "", "arguments": ""})
                entry["name"] += d.function.name or ""
                entry["arguments"] += d.function.arguments or ""
            finish = ch.finish_reason or finish
    assert finish == "tool_calls", finish
    # Token by token: the header, then the arguments in several pieces.
    assert pieces > 2, pieces
    plain = r.choices[0].message.tool_calls[0]
    assert calls[0]["name"] == plain.function.name, calls
    assert calls[0]["arguments"] == plain.function.arguments, calls


def auto(client, model):
    # Either a call or a direct answer, always well formed.
    for i, q in enumerate(["What is the weather in Lima?", "Say hello.", "Time in Tokyo?"]):
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": q}],
                                           tools=[WEATHER, TIME], max_tokens=250, temperature=0,
                                           seed=i, parallel_tool_calls=i != 1)
        c = r.choices[0]
        assert c.finish_reason in ("tool_calls", "stop", "length"), c
        if c.finish_reason == "tool_calls":
            check_call(c.message.tool_calls[0], c.message.tool_calls[0].function.name)
        else:
            # A direct answer is plain text, also when the budget cut it short.
            assert isinstance(c.message.content, str) and c.message.tool_calls is None, c
            assert not c.message.content.lstrip().startswith("{"), c
    try:
        client.chat.completions.create(model=model, messages=ASK, tools=[WEATHER],
                                       tool_choice={"type": "function", "function": {"name": "x"}},
                                       max_tokens=5)
    except openai.BadRequestError as e:
        assert "tool_choice" in str(e), e
    else:
        raise AssertionError("an unknown named tool was accepted")


def main():
    base, model = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)
    round_trip(client, model)
    named_and_streamed(client, model)
    auto(client, model)
    print("ok")


if __name__ == "__main__":
    main()
