"""The official `openai` package against `memoria serve` running SmolLM2-135M-Instruct.

Usage: python3 openai_paris.py BASE_URL
Asks for the capital of France at temperature 0 (plain and streamed) and checks the answer names
Paris; prints the answers and `ok`, exits non-zero otherwise. The prompt is a question: on the
opening "The capital of France is" llama.cpp's own greedy reply from this model never says Paris.
"""

import sys

import openai


def main() -> None:
    base = sys.argv[1].rstrip("/")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="no-key-needed", max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0)
    text = chat.choices[0].message.content
    print("chat:", repr(text))
    assert "Paris" in text, text
    pieces = []
    for chunk in client.chat.completions.create(
            model=model, messages=messages, max_tokens=24, temperature=0, stream=True):
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
    streamed = "".join(pieces)
    print("stream:", repr(streamed))
    assert streamed == text, (streamed, text)
    print("ok")


if __name__ == "__main__":
    main()
