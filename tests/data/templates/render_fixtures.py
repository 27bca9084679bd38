#!/usr/bin/env python3
"""Renders the model families' chat templates in this folder with Python jinja2, set up as HF
transformers' `apply_chat_template` sets it up (trim_blocks, lstrip_blocks, loop controls,
`raise_exception`, `strftime_now`, `tojson` as `json.dumps`), over a fixed set of conversations,
and writes the inputs with the expected texts (or the exception a template raises) to
`fixtures.json` beside this script. memoria's chat tests render the same inputs and compare byte
for byte. `strftime_now` reads a fixed clock (FIXED_NOW, also in the Rust test) so the files are
stable. Run: python3 tests/data/templates/render_fixtures.py
"""

import datetime
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
# 2026-01-15 09:30:00 UTC, as a Unix time (the Rust test sets the same clock).
FIXED_NOW = 1768469400


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(FIXED_NOW, datetime.timezone.utc).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def sorted_keys(v):
    """`v` with every object's keys in sorted order: memoria holds request JSON (tool
    parameters, call arguments, kwargs) in objects that iterate sorted, so the fixtures give the
    templates objects in that order."""
    if isinstance(v, dict):
        return {k: sorted_keys(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sorted_keys(x) for x in v]
    return v


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": sorted_keys({"type": "object",
                               "properties": {"city": {"type": "string",
                                                       "description": "City name"},
                                              "unit": {"type": "string", "enum": ["c", "f"]},
                                              "days": {"type": "integer"}},
                               "required": ["city"]})}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time",
    "parameters": {"properties": {}, "type": "object"}}}


def msg(role, content, **extra):
    m = {"role": role, "content": content}
    m.update(extra)
    return m


def call(id_, name, arguments):
    return {"id": id_, "type": "function",
            "function": {"name": name, "arguments": sorted_keys(arguments)}}


PLAIN = [msg("user", "Hello!")]
SYSTEM = [msg("system", "You are terse."), msg("user", "Hi"), msg("assistant", "Hello."),
          msg("user", "What is 2+2?")]
NO_SYSTEM = [msg("user", "Hi"), msg("assistant", "Hello."), msg("user", "What is 2+2?")]
TOOL_TURNS = [
    msg("user", "Weather in Oslo?"),
    msg("assistant", "", tool_calls=[call("c1", "get_weather", {"city": "Oslo", "unit": "c"})]),
    msg("tool", "{\"temp\": -3}", tool_call_id="c1", name="get_weather"),
]
TWO_CALLS = [
    msg("system", "Use tools."),
    msg("user", "Weather and time in Oslo?"),
    msg("assistant", "", tool_calls=[call("c1", "get_weather", {"city": "Oslo"}),
                                     call("c2", "get_time", {})]),
    msg("tool", "{\"temp\": -3}", tool_call_id="c1", name="get_weather"),
    msg("tool", "12:00", tool_call_id="c2", name="get_time"),
    msg("assistant", "It is -3 and noon."),
    msg("user", "Thanks"),
]
REASONED = [
    msg("user", "What is 2+2?"),
    msg("assistant", "4", reasoning_content="Add two and two."),
    msg("user", "And 3+3?"),
    msg("assistant", "6", reasoning_content="Three plus three."),
]
THINK_IN_CONTENT = [
    msg("user", "What is 2+2?"),
    msg("assistant", "<think>\nAdd them.\n</think>\n\n4"),
]
HARMONY_CALL = [
    msg("system", "Be brief."),
    msg("user", "Weather in Oslo?"),
    msg("assistant", "", thinking="Need the weather tool.",
        tool_calls=[call("c1", "get_weather", {"city": "Oslo"})]),
    msg("tool", "{\"temp\": -3}", tool_call_id="c1", name="get_weather"),
]
HARMONY_DONE = HARMONY_CALL + [msg("assistant", "It is -3."), msg("user", "Thanks")]
GEMMA_SYSTEM = [msg("system", "Be brief."), msg("user", "Hi")]

# (name, messages, tools, add_generation_prompt, kwargs)
COMMON = [
    ("plain", PLAIN, None, True, {}),
    ("system_multi_turn", SYSTEM, None, True, {}),
    ("no_generation_prompt", SYSTEM, None, False, {}),
    ("no_system", NO_SYSTEM, None, True, {}),
]
TOOLS = [
    ("tools", [msg("user", "Weather in Oslo?")], [WEATHER, TIME], True, {}),
    ("tools_with_system", [msg("system", "Be brief."), msg("user", "Weather?")], [WEATHER], True,
     {}),
    ("tool_call_and_result", TOOL_TURNS, [WEATHER], True, {}),
    ("two_calls_then_answer", TWO_CALLS, [WEATHER, TIME], True, {}),
]
TEMPLATES = {
    "Qwen-Qwen3-0.6B.jinja": ("", "<|im_end|>", COMMON + TOOLS + [
        ("reasoning_content", REASONED, None, True, {}),
        ("reasoning_content_last", REASONED, None, False, {}),
        ("think_in_content", THINK_IN_CONTENT, None, False, {}),
        ("enable_thinking_false", PLAIN, None, True, {"enable_thinking": False}),
        ("enable_thinking_true", PLAIN, None, True, {"enable_thinking": True}),
    ]),
    "HuggingFaceTB-SmolLM3-3B.jinja": ("", "<|im_end|>", COMMON + TOOLS + [
        ("enable_thinking_false", SYSTEM, None, True, {"enable_thinking": False}),
        ("no_think_in_system", [msg("system", "Be brief. /no_think"), msg("user", "Hi")], None,
         True, {}),
        ("think_in_system", [msg("system", "/think"), msg("user", "Hi")], None, True,
         {"enable_thinking": False}),
    ]),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>", [
        ("plain", PLAIN, None, True, {}),
        ("no_system", NO_SYSTEM, None, True, {}),
        ("no_generation_prompt", NO_SYSTEM, None, False, {}),
        ("system_refused", GEMMA_SYSTEM, None, True, {}),
        ("roles_must_alternate", [msg("user", "a"), msg("user", "b")], None, True, {}),
    ]),
    "microsoft-Phi-3.5-mini-instruct.jinja": ("<s>", "<|endoftext|>", COMMON + [
        ("empty_system", [msg("system", ""), msg("user", "Hi")], None, True, {}),
    ]),
    "ibm-granite-granite-3.3-2B-Instruct.jinja": ("", "<|end_of_text|>", COMMON + TOOLS + [
        ("thinking", PLAIN, None, True, {"thinking": True}),
        ("controls", PLAIN, None, True, {"controls": {"length": "short"}}),
        ("documents", PLAIN, None, True,
         {"documents": [{"doc_id": 1, "text": "Oslo is cold."}]}),
    ]),
    "ibm-granite-granite-4.0.jinja": ("", "<|end_of_text|>", COMMON + TOOLS),
    "openai-gpt-oss-120b.jinja": ("<|startoftext|>", "<|return|>", COMMON + TOOLS[:2] + [
        ("tool_call_with_thinking", HARMONY_CALL, [WEATHER], True, {}),
        ("after_tool_call_final", HARMONY_DONE, [WEATHER], True, {}),
        ("reasoning_effort_low", PLAIN, None, True, {"reasoning_effort": "low"}),
        ("builtin_tools", PLAIN, [WEATHER], True,
         {"builtin_tools": ["browser", "python"], "model_identity": "You are Memo."}),
        ("final_with_thinking", [msg("user", "Hi"), msg("assistant", "Hello.", thinking="Greet.")],
         None, False, {}),
        ("channel_tags_refused",
         [msg("user", "Hi"), msg("assistant", "<|channel|>final<|message|>x")], None, True, {}),
    ]),
    "olmo2.jinja": ("<|endoftext|>", "<|endoftext|>", COMMON),
}


def main():
    env = environment()
    out = []
    for file, (bos, eos, cases) in TEMPLATES.items():
        with open(os.path.join(HERE, file), encoding="utf-8") as f:
            template = env.from_string(f.read())
        for name, messages, tools, add_generation_prompt, kwargs in cases:
            kwargs = sorted_keys(kwargs)
            ctx = dict(kwargs)
            ctx.update(messages=messages, add_generation_prompt=add_generation_prompt,
                       bos_token=bos, eos_token=eos)
            if tools is not None:
                ctx["tools"] = tools
            case = {"template": file, "case": name, "bos_token": bos, "eos_token": eos,
                    "messages": messages, "tools": tools,
                    "add_generation_prompt": add_generation_prompt, "kwargs": kwargs}
            try:
                case["expected"] = template.render(**ctx)
            except Raised as e:
                case["raises"] = str(e)
            out.append(case)
    with open(os.path.join(HERE, "fixtures.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} cases written")


if __name__ == "__main__":
    main()
