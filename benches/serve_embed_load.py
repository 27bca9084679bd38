#!/usr/bin/env python3
"""Chat decoding beside an embedding load, against a running `memoria serve` on 127.0.0.1.

Two phases of `--seconds` each on the same server: `--chat` streaming completion clients alone,
then the same clients while `--embed` clients send `/v1/embeddings` requests of `--inputs` texts
that were never embedded before (so each one is computed). Prints, per phase, the chat clients'
generated tokens/s and inter-token latency p50/p95 (ms), and the embedding inputs/s: what an
embedding load costs the sessions decoding beside it. Run it against two builds to compare them:

    memoria serve -m MODEL --port 8181 &
    python3 benches/serve_embed_load.py --url http://127.0.0.1:8181 [--chat 4] [--embed 2]
"""

import argparse
import json
import random
import statistics
import threading
import time
import urllib.request

WORDS = (
    "river stone light garden window summer paper music winter forest ocean letter table "
    "mountain silver dream morning candle village bridge orange story market cloud"
).split()


def post(url, body, stream=False):
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    return urllib.request.urlopen(req, timeout=120)


def chat_worker(base, deadline, seed, out):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        prompt = "Tell me a story about " + " ".join(rng.choice(WORDS) for _ in range(6))
        body = {
            "prompt": prompt,
            "max_tokens": 48,
            "stream": True,
            "temperature": 0,
            "ignore_eos": True,
        }
        last = None
        with post(base + "/v1/completions", body) as r:
            for line in r:
                if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                    continue
                now = time.monotonic()
                if last is not None:
                    out["gaps"].append(now - last)
                last = now
                out["tokens"] += 1


def embed_worker(base, deadline, seed, inputs, words, out):
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        texts = [
            " ".join(rng.choice(WORDS) for _ in range(words)) + f" {rng.random()}"
            for _ in range(inputs)
        ]
        t0 = time.monotonic()
        with post(base + "/v1/embeddings", {"input": texts}) as r:
            data = json.loads(r.read())
        assert len(data["data"]) == inputs, data
        out["latency"].append(time.monotonic() - t0)
        out["inputs"] += inputs


def phase(args, embed_clients):
    deadline = time.monotonic() + args.seconds
    chats = [{"tokens": 0, "gaps": []} for _ in range(args.chat)]
    embeds = [{"inputs": 0, "latency": []} for _ in range(embed_clients)]
    threads = [
        threading.Thread(target=chat_worker, args=(args.url, deadline, i, c))
        for i, c in enumerate(chats)
    ] + [
        threading.Thread(
            target=embed_worker,
            args=(args.url, deadline, 1000 + i, args.inputs, args.words, e),
        )
        for i, e in enumerate(embeds)
    ]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    gaps = sorted(g for c in chats for g in c["gaps"])
    q = lambda p: gaps[min(len(gaps) - 1, int(p * len(gaps)))] * 1000 if gaps else 0.0
    lat = [x for e in embeds for x in e["latency"]]
    return {
        "embed_clients": embed_clients,
        "chat_tokens_per_s": round(sum(c["tokens"] for c in chats) / wall, 1),
        "itl_p50_ms": round(q(0.50), 1),
        "itl_p95_ms": round(q(0.95), 1),
        "embed_inputs_per_s": round(sum(e["inputs"] for e in embeds) / wall, 1),
        "embed_request_p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--chat", type=int, default=4)
    ap.add_argument("--embed", type=int, default=2)
    ap.add_argument("--inputs", type=int, default=8, help="texts per embedding request")
    ap.add_argument("--words", type=int, default=60, help="words per text")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    if not args.url.startswith(("http://127.0.0.1", "http://localhost")):
        raise SystemExit("only a server on 127.0.0.1 is loaded")
    results = [phase(args, 0), phase(args, args.embed)]
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
