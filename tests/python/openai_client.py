"""The official `openai` package against a running `memoria serve`.

Usage: python3 openai_client.py BASE_URL   (e.g. http://127.0.0.1:8080)
Covers models, chat, streaming chat, completions, embeddings, cached_tokens on a repeated
prompt and the error format; prints `ok` and exits 0 when every check passes.
"""

import math
import sys

import openai


def main() -> None:
    base = sys.argv[1].rstrip("/")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="no-key-needed", max_retries=0, timeout=120)

    models = client.models.list().data
    assert len(models) == 1, models
    model = models[0].id

    chat = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "You tell short stories."},
                  {"role": "user", "content": "Once upon a time"}],
        max_tokens=16, temperature=0, seed=7)
    choice = chat.choices[0]
    assert chat.object == "chat.completion", chat
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length"), choice.finish_reason
    assert chat.usage.prompt_tokens > 0 and chat.usage.completion_tokens > 0, chat.usage

    pieces, finish, usage = [], None, None
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Tell me about a cat"}],
        max_tokens=16, temperature=0, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert finish in ("stop", "length"), finish
    assert usage is not None and usage.completion_tokens > 0, usage
    assert "".join(pieces) or usage.completion_tokens > 0

    comp = client.completions.create(model=model, prompt="Once upon a time", max_tokens=16, temperature=0)
    assert comp.object == "text_completion"
    assert isinstance(comp.choices[0].text, str) and comp.usage.completion_tokens > 0, comp

    emb = client.embeddings.create(model=model, input=["hello world", "a little cat"])
    assert len(emb.data) == 2
    for d in emb.data:
        norm = math.sqrt(sum(x * x for x in d.embedding))
        assert len(d.embedding) > 0 and abs(norm - 1.0) < 1e-3, norm
    assert emb.data[0].embedding != emb.data[1].embedding
    again = client.embeddings.create(model=model, input="hello world", encoding_format="float")
    assert again.data[0].embedding == emb.data[0].embedding

    long_system = " ".join(["Lily and Tim went to the park to play with a big red ball."] * 6)
    messages = [{"role": "system", "content": long_system}, {"role": "user", "content": "What happened?"}]
    first = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    second = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached > 0, second.usage
    assert second.usage.prompt_tokens == first.usage.prompt_tokens

    try:
        client.chat.completions.create(model=model, messages=[], max_tokens=4)
        raise AssertionError("an empty conversation was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400
        assert "messages" in str(e), e

    print("ok")


if __name__ == "__main__":
    main()
