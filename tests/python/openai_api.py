"""The official `openai` package against `memoria serve` running SmolLM2-135M-Instruct: the parts
of the API applications send beyond messages and max_tokens.

Usage: python3 openai_api.py BASE_URL MODEL_FILE_NAME (features|invariance)
  features:   validation (any model name answered by the served one, 404 on retrieving another,
              unknown fields ignored, 400s as OpenAI), logit_bias forcing and
              banning, logprobs shapes (chat and completions, plain and streamed; `echo` with
              `logprobs` scoring the prompt), n=4 from one
              prompt computation, best_of, prompt arrays.
  invariance: a request with logit_bias and logprobs gives identical tokens and log-probs alone
              and among 15 concurrent others.
Prints `ok` and exits 0 when every check passes.
"""

import json
import sys
import threading

import urllib.error
import urllib.request

import openai

CHAT_KEYS = {"token", "logprob", "bytes", "top_logprobs"}
TOP_KEYS = {"token", "logprob", "bytes"}


def expect_error(status, code_or_param, fn):
    try:
        fn()
    except openai.APIStatusError as e:
        assert e.status_code == status, (e.status_code, e)
        body = e.body if isinstance(e.body, dict) else {}
        seen = {body.get("code"), body.get("param")}
        assert code_or_param in seen, (code_or_param, body)
        return str(e)
    raise AssertionError(f"expected HTTP {status} ({code_or_param})")


def http(base, path, body=None):
    """(status, parsed JSON) of a GET (or a POST of `body`) to the server."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stats(base):
    return http(base, "/stats")[1]


def token_ids(base, text):
    status, body = http(base, "/tokenize", {"content": text, "add_special": False})
    assert status == 200, body
    return body["tokens"]


def check_chat_entry(e, k):
    assert set(e) == CHAT_KEYS, e
    assert isinstance(e["token"], str) and isinstance(e["bytes"], list), e
    assert bytes(e["bytes"]).decode("utf-8", "replace") == e["token"], e
    assert e["logprob"] <= 0.0, e
    assert len(e["top_logprobs"]) == k, e
    for t in e["top_logprobs"]:
        assert set(t) == TOP_KEYS, t
    lps = [t["logprob"] for t in e["top_logprobs"]]
    assert lps == sorted(lps, reverse=True), lps


def validation(client, base, model, file_name):
    msgs = [{"role": "user", "content": "Hi"}]
    # One model is served: a placeholder name is answered by it, under its own id; retrieving
    # another model by name is still 404.
    r = client.chat.completions.create(model="gpt-3.5-turbo", messages=msgs, max_tokens=2)
    assert r.choices and r.model == model, r.model
    r = client.completions.create(model="gpt-4o", prompt="Hi", max_tokens=2)
    assert r.choices and r.model == model, r.model
    assert client.embeddings.create(model="nope", input="Hi").data
    expect_error(404, "model_not_found", lambda: client.models.retrieve("nope"))
    # The served id (the file's stem), the file's name and no model at all are all accepted.
    for m in (model, file_name):
        assert client.chat.completions.create(model=m, messages=msgs, max_tokens=2).choices
    status, body = http(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 2})
    assert status == 200, body
    # Fields memoria does not know (newer OpenAI ones, llama.cpp's) are ignored.
    status, body = http(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 2,
                                                       "reasoning_effort": "low", "cache_prompt": True,
                                                       "colour": "blue"})
    assert status == 200, body
    expect_error(400, "stream_options", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, stream_options={"include_usage": True}))
    expect_error(400, "stream_options", lambda: client.completions.create(
        model=model, prompt="Hi", max_tokens=2, stream=False, stream_options={"include_usage": True}))
    # An empty tools list is no tools (as llama-server and vLLM read it; OpenAI refuses it).
    assert client.chat.completions.create(model=model, messages=msgs, max_tokens=2,
                                          tools=[]).choices
    expect_error(400, "stop", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, stop=["a", "b", "c", "d", "e"]))
    assert client.chat.completions.create(model=model, messages=msgs, max_tokens=2,
                                          stop=["a", "b", "c", "d"]).choices
    msg = expect_error(400, "logit_bias", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, logit_bias={"99999999": 5}))
    assert "99999999" in msg, msg
    expect_error(400, "logit_bias", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, logit_bias={"5": 101}))
    expect_error(400, "logit_bias", lambda: client.completions.create(
        model=model, prompt="Hi", max_tokens=2, logit_bias={"abc": 1}))
    expect_error(400, "top_logprobs", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, logprobs=True, top_logprobs=21))
    expect_error(400, "top_logprobs", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, top_logprobs=2))
    expect_error(400, "logprobs", lambda: client.completions.create(
        model=model, prompt="Hi", max_tokens=2, logprobs=6))
    expect_error(400, "n", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=2, n=0))
    expect_error(400, "best_of", lambda: client.completions.create(
        model=model, prompt="Hi", max_tokens=2, n=3, best_of=2))
    expect_error(400, "best_of", lambda: client.completions.create(
        model=model, prompt="Hi", max_tokens=2, best_of=2, stream=True))
    # One request's generations share one context (-c 512): 4 x 200 tokens do not fit.
    expect_error(400, "max_tokens", lambda: client.chat.completions.create(
        model=model, messages=msgs, max_tokens=200, n=4))
    # Without max_tokens the default budget is shared out instead.
    r = client.completions.create(model=model, prompt=["Hi", "Yo"], n=2, temperature=1.0,
                                  extra_body={"ignore_eos": True})
    share = (512 - r.usage.prompt_tokens) // 4
    assert len(r.choices) == 4 and all(c.finish_reason == "length" for c in r.choices), r
    assert r.usage.completion_tokens == 4 * share, (r.usage, share)
    print("validation ok")


def logit_bias(client, base, model):
    msgs = [{"role": "user", "content": "Name a fruit."}]
    plain = client.chat.completions.create(model=model, messages=msgs, max_tokens=6, temperature=0,
                                           logprobs=True)
    first = plain.choices[0].logprobs.content[0]
    # Banning the greedy first token changes it.
    first_id = token_ids(base, first.token)
    assert len(first_id) == 1, (first.token, first_id)
    banned = client.chat.completions.create(model=model, messages=msgs, max_tokens=6, temperature=0,
                                            logprobs=True, logit_bias={str(first_id[0]): -100})
    assert banned.choices[0].logprobs.content[0].token != first.token, banned
    # The log-probs are the raw model's: the banned token's figure is unchanged.
    assert banned.choices[0].logprobs.content[0].logprob <= first.logprob
    # Forcing a token makes every token that token, greedy and sampled.
    banana = token_ids(base, " banana")[0]
    for temperature in (0, 1.0):
        forced = client.completions.create(model=model, prompt="My favourite", max_tokens=5,
                                           temperature=temperature, seed=3, logprobs=1,
                                           logit_bias={str(banana): 100})
        lp = forced.choices[0].logprobs
        assert len(lp.tokens) == 5, lp
        assert all(t == lp.tokens[0] for t in lp.tokens), lp.tokens
        assert token_ids(base, lp.tokens[0]) == [banana], lp.tokens
    print("logit_bias ok")


def chat_logprobs(client, model):
    msgs = [{"role": "user", "content": "Count from one to five."}]
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=msgs, max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    body = json.loads(raw.http_response.text)
    choice = body["choices"][0]
    content = choice["logprobs"]["content"]
    assert len(content) == body["usage"]["completion_tokens"], (len(content), body["usage"])
    for e in content:
        check_chat_entry(e, 3)
        # Greedy: the sampled token is the model's most likely one.
        assert e["top_logprobs"][0]["token"] == e["token"], e
        assert e["top_logprobs"][0]["logprob"] == e["logprob"], e
    assert "".join(e["token"] for e in content).startswith(choice["message"]["content"][:8])
    typed = raw.parse()
    assert typed.choices[0].logprobs.content[0].top_logprobs[0].logprob == content[0]["logprob"]
    # Streamed: the same entries, spread over the chunks.
    streamed = []
    text = []
    for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=12,
                                                temperature=0, logprobs=True, top_logprobs=3,
                                                stream=True):
        for c in chunk.choices:
            if c.delta.content:
                text.append(c.delta.content)
            if c.logprobs is not None and c.logprobs.content:
                streamed.extend(e.model_dump() for e in c.logprobs.content)
    assert "".join(text) == choice["message"]["content"], (text, choice)
    assert [(e["token"], e["logprob"]) for e in streamed] == [(e["token"], e["logprob"]) for e in content]
    for e in streamed:
        check_chat_entry(e, 3)
    # logprobs without top_logprobs: entries with empty alternatives; without logprobs: null.
    r = client.chat.completions.create(model=model, messages=msgs, max_tokens=3, temperature=0,
                                       logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)
    r = client.chat.completions.create(model=model, messages=msgs, max_tokens=3, temperature=0)
    assert r.choices[0].logprobs is None
    print("chat logprobs ok")


def completion_logprobs(client, model):
    prompt = "The three primary colours are"
    raw = client.completions.with_raw_response.create(model=model, prompt=prompt, max_tokens=10,
                                                      temperature=0, logprobs=3)
    body = json.loads(raw.http_response.text)
    choice = body["choices"][0]
    lp = choice["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, lp
    n = body["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    for tok, l, top, off in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], lp["text_offset"]):
        assert isinstance(top, dict) and 3 <= len(top) <= 4, top
        assert top[tok] == l and l == max(top.values()), (tok, l, top)
        assert choice["text"][off:off + len(tok)] == tok or off + len(tok) > len(choice["text"])
    streamed = {"tokens": [], "token_logprobs": [], "text_offset": []}
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=10, temperature=0,
                                           logprobs=3, stream=True):
        for c in chunk.choices:
            if c.logprobs is not None and c.logprobs.tokens:
                for key in streamed:
                    streamed[key].extend(getattr(c.logprobs, key))
    for key in streamed:
        assert streamed[key] == lp[key], (key, streamed[key], lp[key])
    print("completion logprobs ok")


def echo_logprobs(client, base, model):
    """`echo` with `logprobs`: the prompt's tokens come first (the first without a log-prob), and
    a greedy continuation's log-probs, scored back as part of a prompt, are the same numbers."""
    prompt = "The three primary colours are"
    gen = json.loads(client.completions.with_raw_response.create(
        model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=2).http_response.text)
    gen = gen["choices"][0]
    full = prompt + gen["text"]
    body = json.loads(client.completions.with_raw_response.create(
        model=model, prompt=full, max_tokens=1, temperature=0, logprobs=2, echo=True).http_response.text)
    c, n_prompt = body["choices"][0], len(token_ids(base, full))
    lp = c["logprobs"]
    assert c["text"].startswith(full), c
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n_prompt + 1, lp
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, lp
    assert "".join(lp["tokens"][:n_prompt]) == full, lp["tokens"]
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0, lp
    k = len(gen["logprobs"]["tokens"])
    assert lp["tokens"][n_prompt - k:n_prompt] == gen["logprobs"]["tokens"], (lp, gen)
    assert lp["token_logprobs"][n_prompt - k:n_prompt] == gen["logprobs"]["token_logprobs"], (lp, gen)
    for tok, l, top in zip(lp["tokens"][1:], lp["token_logprobs"][1:], lp["top_logprobs"][1:]):
        assert top[tok] == l and 2 <= len(top) <= 3, (tok, l, top)
    # Nothing of a scored prompt comes from the cache (a cached token has no logits).
    assert (body["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0, body["usage"]
    streamed = {"tokens": [], "token_logprobs": [], "text_offset": []}
    for chunk in client.completions.create(model=model, prompt=full, max_tokens=1, temperature=0,
                                           logprobs=2, echo=True, stream=True):
        for ch in chunk.choices:
            if ch.logprobs is not None and ch.logprobs.tokens:
                for key in streamed:
                    streamed[key].extend(getattr(ch.logprobs, key))
    for key in streamed:
        assert streamed[key] == lp[key], (key, streamed[key], lp[key])
    print("echo logprobs ok")


def n_choices(client, base, model):
    system = "You are a helpful assistant who answers in one sentence. " * 4
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Describe the sea."}]
    one = client.chat.completions.create(model=model, messages=msgs, max_tokens=10, temperature=1.0, seed=5)
    before = stats(base)["engine"]
    four = client.chat.completions.create(model=model, messages=msgs, max_tokens=10, temperature=1.0,
                                          seed=5, n=4)
    after = stats(base)["engine"]
    assert [c.index for c in four.choices] == [0, 1, 2, 3], four.choices
    texts = [c.message.content for c in four.choices]
    assert texts[0] == one.choices[0].message.content, (texts, one)
    assert len(set(texts)) > 1, texts
    u = four.usage
    assert u.prompt_tokens == one.usage.prompt_tokens, (u, one.usage)
    # The prompt was cached by the first request; what was left was computed once, not four times.
    assert u.prompt_tokens_details.cached_tokens > 0, u
    computed = after["prefill_tokens"] - before["prefill_tokens"]
    assert computed == u.prompt_tokens - u.prompt_tokens_details.cached_tokens, (computed, u)
    assert after["forks"] - before["forks"] == 3, (before, after)
    assert u.completion_tokens == sum(
        len(client.chat.completions.create(model=model, messages=msgs, max_tokens=10, temperature=1.0,
                                           seed=5 + i, logprobs=True).choices[0].logprobs.content)
        for i in range(4)), u
    # A fresh prompt: computed once for all four.
    fresh = [{"role": "user", "content": "Write a word about the moon, " + "please " * 20}]
    before = stats(base)["engine"]
    r = client.chat.completions.create(model=model, messages=fresh, max_tokens=4, temperature=1.0, n=4)
    after = stats(base)["engine"]
    computed = after["prefill_tokens"] - before["prefill_tokens"]
    assert computed == r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens, (computed, r.usage)
    assert computed < 2 * r.usage.prompt_tokens, (computed, r.usage)
    # Streamed: every index gets its role chunk, its text and its finish.
    seen, finished, usage = {}, set(), None
    for chunk in client.chat.completions.create(model=model, messages=msgs, max_tokens=10,
                                                temperature=1.0, seed=5, n=4, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            seen.setdefault(c.index, []).append(c.delta.content or "")
            if c.finish_reason:
                finished.add(c.index)
    assert finished == {0, 1, 2, 3}, finished
    assert ["".join(seen[i]) for i in range(4)] == texts, (seen, texts)
    assert usage is not None and usage.completion_tokens == u.completion_tokens, usage
    # Completions: n and best_of.
    c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=6, temperature=1.0,
                                  seed=9, n=3)
    assert [x.index for x in c.choices] == [0, 1, 2]
    best = client.completions.create(model=model, prompt="Once upon a time", max_tokens=6,
                                     temperature=1.0, seed=9, n=1, best_of=3, logprobs=0)
    assert len(best.choices) == 1 and best.choices[0].index == 0
    sums = [sum(client.completions.create(model=model, prompt="Once upon a time", max_tokens=6,
                                          temperature=1.0, seed=9 + i, logprobs=0)
                .choices[0].logprobs.token_logprobs) for i in range(3)]
    got = sum(best.choices[0].logprobs.token_logprobs)
    assert abs(got - max(sums)) < 1e-4, (got, sums)
    assert best.usage.completion_tokens == c.usage.completion_tokens, (best.usage, c.usage)
    print("n ok")


def prompt_arrays(client, model):
    prompts = ["The capital of France is", "Two plus two equals", "Red, green and"]
    many = client.completions.create(model=model, prompt=prompts, max_tokens=6, temperature=0)
    assert [c.index for c in many.choices] == [0, 1, 2], many
    singles = [client.completions.create(model=model, prompt=p, max_tokens=6, temperature=0) for p in prompts]
    assert [c.text for c in many.choices] == [s.choices[0].text for s in singles]
    assert many.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    assert many.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    # Token-id lists, with n=2: index = prompt * n + j.
    ids = [[1, 504, 3575], [1, 504, 1345, 314]]
    r = client.completions.create(model=model, prompt=ids, max_tokens=4, temperature=0, n=2)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text and r.choices[2].text == r.choices[3].text
    echo = client.completions.create(model=model, prompt=prompts[:2], max_tokens=3, temperature=0, echo=True)
    assert [c.text[:len(p)] for c, p in zip(echo.choices, prompts)] == prompts[:2]
    print("prompt arrays ok")


def invariance(client, base, model):
    banana = token_ids(base, " banana")[0]

    def probe():
        r = client.completions.create(model=model, prompt="My favourite fruit is", max_tokens=16,
                                      temperature=0.9, seed=11, logprobs=5,
                                      logit_bias={str(banana): 4.0, "13": -100})
        c = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Name a fruit."}],
                                           max_tokens=16, temperature=0.9, seed=12, logprobs=True,
                                           top_logprobs=4, logit_bias={str(banana): 3.0})
        lp = r.choices[0].logprobs
        return (r.choices[0].text, lp.tokens, lp.token_logprobs, lp.top_logprobs,
                [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs])
                 for e in c.choices[0].logprobs.content])

    alone = probe()
    results, errors = {}, []

    def other(i):
        try:
            client.completions.create(model=model, prompt=f"Story number {i}: " + "once " * (i % 5),
                                      max_tokens=24 + i, temperature=0.7, seed=i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def target():
        try:
            results["crowd"] = probe()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=other, args=(i,)) for i in range(15)]
    threads.insert(7, threading.Thread(target=target))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results["crowd"] == alone, (results["crowd"], alone)
    print("invariance ok")


def main():
    base, file_name, mode = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="no-key-needed", max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    if mode == "features":
        validation(client, base, model, file_name)
        logit_bias(client, base, model)
        chat_logprobs(client, model)
        completion_logprobs(client, model)
        echo_logprobs(client, base, model)
        n_choices(client, base, model)
        prompt_arrays(client, model)
    elif mode == "invariance":
        invariance(client, base, model)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print("ok")


if __name__ == "__main__":
    main()
