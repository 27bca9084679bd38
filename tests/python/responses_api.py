"""The official `openai` package's Responses API against a running `memoria serve`
(SmolLM2-135M-Instruct).

Usage: python3 responses_api.py BASE_URL (all | before | after RESPONSE_ID INPUT_TOKENS OUTPUT_TOKENS)
  all:    create (whole and streamed, the same text at temperature 0), function tools (a forced
          call, its output sent back with previous_response_id), `previous_response_id`
          continuing with at least 95% of the earlier context cached, an unknown id refused.
  before: creates a long response and prints its id (a restart follows).
  after:  continues RESPONSE_ID: at least 95% of its context must come from the cache.
Prints `ok` last and exits 0 when every check passes.
"""

import json
import sys

import openai

STORY = " ".join(f"On day {i} the little robot counted {i} apples in the orchard and smiled." for i in range(40))
TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def client_for(base):
    return openai.OpenAI(base_url=f"{base}/v1", api_key="no-key-needed", max_retries=0, timeout=300)


def long_response(client):
    r = client.responses.create(model="gpt-4o", instructions="You summarise stories.",
                                input=STORY + "\nSummarise the story in one sentence.",
                                max_output_tokens=32, temperature=0)
    assert r.status in ("completed", "incomplete"), r.status
    assert r.output_text, r
    return r


def continued(client, r):
    """Continues `r`; checks the earlier context came from the cache."""
    earlier = r.usage.input_tokens + r.usage.output_tokens
    r2 = client.responses.create(model="gpt-4o", previous_response_id=r.id, instructions="You summarise stories.",
                                 input="Now say it in five words.", max_output_tokens=16, temperature=0)
    cached = r2.usage.input_tokens_details.cached_tokens
    assert r2.previous_response_id == r.id, r2
    assert r2.usage.input_tokens > earlier, (r2.usage, earlier)
    assert cached >= 0.95 * earlier, f"cached {cached} of an earlier context of {earlier} tokens"
    print(f"continuation: {cached} of {earlier} earlier tokens cached ({r2.usage.input_tokens} in the prompt)")
    return r2


def everything(client):
    r = client.responses.create(model="gpt-4o", input="Tell me a short story about a cat.",
                                max_output_tokens=24, temperature=0)
    assert r.object == "response" and r.output[0].type == "message", r
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0, r.usage
    deltas, final = [], None
    for ev in client.responses.create(model="gpt-4o", input="Tell me a short story about a cat.",
                                      max_output_tokens=24, temperature=0, stream=True):
        if ev.type == "response.output_text.delta":
            deltas.append(ev.delta)
        elif ev.type in ("response.completed", "response.incomplete"):
            final = ev.response
    assert final is not None, "no response.completed event"
    assert "".join(deltas) == r.output_text == final.output_text, (deltas, r.output_text)
    assert final.usage.output_tokens == r.usage.output_tokens, final.usage

    # A function tool, forced; its output goes back as the next turn.
    t = client.responses.create(model="gpt-4o", input="What is the weather in Paris?", tools=[TOOL],
                                tool_choice="required", parallel_tool_calls=False,
                                max_output_tokens=128, temperature=0)
    calls = [o for o in t.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather", t.output
    assert isinstance(json.loads(calls[0].arguments).get("city"), str), calls[0].arguments
    back = client.responses.create(model="gpt-4o", previous_response_id=t.id, tools=[TOOL],
                                   input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                                           "output": "Sunny, 21 degrees."}],
                                   max_output_tokens=24, temperature=0)
    assert back.output, back

    continued(client, long_response(client))
    try:
        client.responses.create(model="gpt-4o", previous_response_id="resp_does_not_exist", input="hi")
        raise AssertionError("an unknown previous_response_id was accepted")
    except openai.NotFoundError:
        pass


def main() -> None:
    base, mode = sys.argv[1].rstrip("/"), sys.argv[2]
    client = client_for(base)
    if mode == "all":
        everything(client)
    elif mode == "before":
        r = long_response(client)
        print(f"id {r.id} {r.usage.input_tokens} {r.usage.output_tokens}")
    elif mode == "after":
        rid, n_in, n_out = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

        class Prev:
            id = rid

            class usage:
                input_tokens = n_in
                output_tokens = n_out
        continued(client, Prev)
    print("ok")


if __name__ == "__main__":
    main()
