#!/usr/bin/env python3
"""Stands in for `llama-server` in llama.cpp's server test suite (`LLAMA_SERVER_BIN_PATH`).

It reads llama-server's command line, replaces the model flags (`--hf-repo`, `--hf-file`,
`--model`, `--model-url`) by a local file (no model hub is reachable here), and execs the real
program in its place with every other flag unchanged:

  CONFORMANCE_TARGET=memoria  (default) `memoria serve ARGS` ($MEMORIA_BIN)
  CONFORMANCE_TARGET=llama    the real llama-server ($LLAMA_SERVER_REAL), to establish which tests
                              pass with these models

Flags whose meaning differs are mapped for memoria only: llama-server's `-c N --parallel P`
gives each slot N/P tokens (unless `--kv-unified`), memoria's `-c` is the context one request
may use, so memoria gets `-c N/P` (or `-c N` with `--kv-unified`). A model that is not
available here exits with status 3 and says so (the test then fails for both programs).
"""

import os
import sys

SHARED = os.environ.get("MEMORIA_SHARED") or os.path.join(os.path.dirname(__file__), "../../../shared")
MODELS = os.environ.get("MEMORIA_MODELS") or os.path.expanduser("~/.cache/memoria/models")

STORIES = os.path.join(SHARED, "models/stories260K-f32.gguf")
SMOLLM2 = os.path.join(SHARED, "models/SmolLM2-135M-Instruct.Q4_1.gguf")

# (hf repo, hf file or None) -> local file; the suite's presets in tests/utils.py.
LOCAL = {
    ("ggml-org/test-model-stories260K", None): STORIES,
    ("ggml-org/models", "tinyllamas/stories260K.gguf"): STORIES,
    # The suite's infill preset is a stories260K with FIM tokens; SmolLM2 is the local model
    # that has them.
    ("ggml-org/test-model-stories260K-infill", None): SMOLLM2,
}


def local_model(repo, hf_file):
    path = LOCAL.get((repo, hf_file))
    if path is None:
        sys.stderr.write(f"conformance wrapper: model {repo} {hf_file or ''} is not available here\n")
        sys.exit(3)
    return path


def main(argv):
    args = list(argv)
    out = []
    repo = hf_file = model = None
    ctx = parallel = None
    unified = "--kv-unified" in args or "-kvu" in args
    i = 0
    while i < len(args):
        a = args[i]
        val = args[i + 1] if i + 1 < len(args) else None
        if a in ("--hf-repo", "-hf", "-hfr"):
            repo = val
            i += 2
        elif a in ("--hf-file", "-hff"):
            hf_file = val
            i += 2
        elif a in ("--model", "-m"):
            model = val
            i += 2
        elif a in ("--model-url", "-mu"):
            sys.stderr.write(f"conformance wrapper: model URL {val} is not reachable here\n")
            sys.exit(3)
        elif a in ("--ctx-size", "-c"):
            ctx = int(val)
            i += 2
        elif a in ("--parallel", "-np"):
            parallel = int(val)
            out += [a, val]
            i += 2
        else:
            out.append(a)
            i += 1
    if model is None and repo is not None:
        model = local_model(repo.split(":")[0], hf_file)
    if model is not None:
        out = ["--model", model] + out
    target = os.environ.get("CONFORMANCE_TARGET", "memoria")
    if ctx is not None:
        if target == "memoria" and not unified and parallel:
            ctx = max(1, ctx // parallel)
        out += ["--ctx-size", str(ctx)]
    if target == "llama":
        exe = os.environ["LLAMA_SERVER_REAL"]
        os.execv(exe, [exe] + out)
    exe = os.environ["MEMORIA_BIN"]
    os.execv(exe, [exe, "serve"] + out)


if __name__ == "__main__":
    main(sys.argv[1:])
