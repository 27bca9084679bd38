"""Structured outputs through the official `openai` package against `memoria serve` (SmolLM2):
`client.beta.chat.completions.parse` with a Pydantic model on 20 prompts (every answer parses and
validates), bounded floats (gt/ge/lt/le/multiple_of) on 6, json_schema on /v1/completions,
json_object, a refused keyword named in the 400, and batch invariance: a constrained request alone and among 15 concurrent others gives the same text.

Usage: python3 openai_structured.py BASE_URL MODEL
Prints `ok` and exits 0 when every check passes.
"""

import json
import sys
import threading
from typing import Literal

import openai
from pydantic import BaseModel, Field


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int
    city: Literal["Paris", "London", "Tokyo", "Lima"]
    languages: list[Literal["en", "fr", "es", "ja"]] = Field(max_length=3)
    employed: bool


class Address(BaseModel):
    street: str = Field(max_length=30)
    number: int


class Order(BaseModel):
    id: int
    items: list[Address] = Field(max_length=2)
    note: str | None = Field(max_length=20)


class Product(BaseModel):
    price: float = Field(gt=0, le=99.5)
    discount: float = Field(ge=-1.25, lt=0.5)
    stars: float = Field(ge=1, le=5, multiple_of=0.5)


SUBJECTS = ["a baker", "a pilot", "a student", "a nurse", "a painter", "a farmer", "a chef",
            "a teacher", "a writer", "a sailor", "a doctor", "a singer", "a poet", "a judge",
            "a miner", "a tailor", "a guard", "a clerk", "a dancer", "a coach"]


def parse_people(client, model):
    for i, who in enumerate(SUBJECTS):
        r = client.beta.chat.completions.parse(
            model=model,
            messages=[{"role": "user", "content": f"Describe {who} as JSON."}],
            response_format=Person,
            max_tokens=200,
            temperature=0.7 if i % 2 else 0.0,
            seed=i,
        )
        c = r.choices[0]
        assert c.finish_reason == "stop", (who, c.finish_reason, c.message.content)
        p = c.message.parsed
        assert isinstance(p, Person), (who, c.message.content)
        assert Person.model_validate_json(c.message.content) == p
        assert len(p.name) <= 24 and len(p.languages) <= 3, p


def bounded_numbers(client, model):
    # Pydantic writes exclusiveMinimum / maximum / minimum / exclusiveMaximum / multipleOf; every
    # answer must validate, at greedy and sampled temperatures.
    for i, what in enumerate(["a lamp", "a book", "a kettle", "a bicycle", "a hat", "a clock"]):
        r = client.beta.chat.completions.parse(
            model=model, messages=[{"role": "user", "content": f"Price {what} as JSON."}],
            response_format=Product, max_tokens=120, temperature=0.9 if i % 2 else 0.0, seed=i)
        c = r.choices[0]
        assert c.finish_reason == "stop", (what, c.finish_reason, c.message.content)
        p = c.message.parsed
        assert isinstance(p, Product), (what, c.message.content)
        assert 0 < p.price <= 99.5 and -1.25 <= p.discount < 0.5 and p.stars * 2 == int(p.stars * 2), p


def nested_on_completions(client, model):
    schema = Order.model_json_schema()
    r = client.completions.create(
        model=model, prompt="An order as JSON: ", max_tokens=250, temperature=0,
        extra_body={"response_format": {"type": "json_schema",
                                        "json_schema": {"name": "order", "schema": schema}}})
    c = r.choices[0]
    assert c.finish_reason == "stop", (c.finish_reason, c.text)
    Order.model_validate_json(c.text)


def json_object(client, model):
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hi in JSON."}],
        response_format={"type": "json_object"}, max_tokens=300, temperature=0)
    c = r.choices[0]
    # The text is a JSON object, or a prefix of one when the budget ran out.
    text = c.message.content
    assert text.startswith("{"), text
    if c.finish_reason == "stop":
        assert isinstance(json.loads(text), dict), text


def refused(client, model):
    try:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}], max_tokens=5,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": {
                "type": "object", "patternProperties": {"^a": {"type": "string"}}}}})
    except openai.BadRequestError as e:
        assert "patternProperties" in str(e), e
        return
    raise AssertionError("a schema with `patternProperties` was accepted")


def invariance(client, model):
    def constrained():
        r = client.beta.chat.completions.parse(
            model=model, messages=[{"role": "user", "content": "Describe a fisher as JSON."}],
            response_format=Person, max_tokens=200, temperature=0.8, seed=7)
        return r.choices[0].message.content

    alone = constrained()
    got = [None] * 16

    def worker(i):
        if i == 0:
            got[i] = constrained()
        elif i % 2:
            got[i] = client.beta.chat.completions.parse(
                model=model, messages=[{"role": "user", "content": f"Describe {SUBJECTS[i]}."}],
                response_format=Person, max_tokens=200, temperature=0.5, seed=i
            ).choices[0].message.content
        else:
            got[i] = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Tell a story {i}."}],
                max_tokens=60, temperature=0.9, seed=i).choices[0].message.content

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert got[0] == alone, (alone, got[0])
    for i in range(1, 16, 2):
        Person.model_validate_json(got[i])


def main():
    base, model = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)
    parse_people(client, model)
    bounded_numbers(client, model)
    nested_on_completions(client, model)
    json_object(client, model)
    refused(client, model)
    invariance(client, model)
    print("ok")


if __name__ == "__main__":
    main()
