#!/usr/bin/env python3
"""llama.cpp's own server test suite against memoria (or, to make the baseline, llama-server).

Fetches the suite from the PyPI sdist `llama-cpp-python==0.3.36` (`pip download`, cached), runs
its non-slow tests unchanged with `tests/conformance/llama_server_wrapper.py` standing in for
`llama-server` (local models for the suite's model-hub presets), and compares the outcome with
`llama-server-passing.txt`: the tests that pass on a real llama-server with the same models.

  run.py --target memoria --bin target/debug/memoria [--check 0.9] [--workers 2]
  run.py --target llama --bin /path/to/llama-server --write-baseline

`conformance_plugin.py` skips the suite's model pre-download (no model hub is reachable; the
wrapper maps presets to local files); every test runs as written, each bounded by
`--timeout` seconds (pytest-timeout) so a hung test fails instead of stalling the run.
`--check F` exits non-zero unless at least F of the baseline's tests (minus `excluded.txt`,
each with its reason) pass. Prints `N passed, N failed` over the baseline's tests as its last
line. Needs python3 with pip; installs the suite's Python packages.
"""

import argparse
import glob
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SDIST = "llama-cpp-python==0.3.36"
SUITE = "vendor/llama.cpp/tools/server/tests"
PACKAGES = ["pytest", "pytest-xdist", "pytest-timeout", "filelock", "wget", "prometheus-client", "aiohttp",
            "openai", "requests", "numpy"]


def fetch_suite(work):
    """The suite's folder, unpacked from the sdist (downloaded once into `work`) with the
    llama.cpp tree's layout kept around it (its tests read `../../../models/templates`)."""
    tree = os.path.join(work, "tree")
    suite = os.path.join(tree, SUITE)
    if os.path.isfile(os.path.join(suite, "utils.py")):
        return suite
    dl = os.path.join(work, "sdist")
    os.makedirs(dl, exist_ok=True)
    if not glob.glob(os.path.join(dl, "*.tar.gz")):
        # pip reads the sdist's metadata, which needs its build backend and CMake.
        subprocess.run([sys.executable, "-m", "pip", "install", "scikit-build-core", "cmake"],
                       check=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", SDIST, "-d", dl], check=True)
    (archive,) = glob.glob(os.path.join(dl, "*.tar.gz"))
    wanted = (f"/{SUITE}/", "/vendor/llama.cpp/models/templates/")
    with tarfile.open(archive) as t:
        members = []
        for m in t.getmembers():
            if m.isfile() and any(w in m.name for w in wanted):
                m.name = m.name.split("/", 1)[1]  # drop the sdist's top folder
                members.append(m)
        t.extractall(tree, members=members, filter="data")
    return suite


def ensure_packages():
    missing = []
    for p in PACKAGES:
        mod = {"pytest-xdist": "xdist", "pytest-timeout": "pytest_timeout",
               "prometheus-client": "prometheus_client"}.get(p, p)
        try:
            __import__(mod)
        except ImportError:
            missing.append(p)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def read_list(name):
    path = os.path.join(HERE, name)
    out = {}
    if not os.path.isfile(path):
        return out
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        test, _, reason = line.partition("  # ")
        out[test.strip()] = reason.strip()
    return out


def run_suite(suite, target, binary, workers, junit, extra, timeout):
    env = dict(os.environ)
    env["LLAMA_SERVER_BIN_PATH"] = os.path.join(HERE, "llama_server_wrapper.py")
    env["CONFORMANCE_TARGET"] = target
    env["MEMORIA_BIN" if target == "memoria" else "LLAMA_SERVER_REAL"] = os.path.abspath(binary)
    env.setdefault("MEMORIA_SHARED", os.path.abspath(os.path.join(HERE, "../../../shared")))
    env["PYTHONPATH"] = os.pathsep.join([HERE, suite, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pytest", "unit", "-m", "not slow", "-q", "-p", "no:cacheprovider",
           "-p", "conformance_plugin", f"--junitxml={junit}", f"--timeout={timeout}"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    cmd += extra
    return subprocess.run(cmd, cwd=suite, env=env).returncode


def outcomes(junit):
    """test id (`unit/test_x.py::test_y[param]`) -> passed / failed / skipped."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls = case.get("classname", "")
        name = case.get("name", "")
        test = cls.replace(".", "/") + ".py::" + name
        if case.find("skipped") is not None:
            out[test] = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            out[test] = "failed"
        else:
            out[test] = "passed"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", choices=["memoria", "llama"], default="memoria")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", default=os.environ.get("CONFORMANCE_DIR", os.path.join(HERE, "../../target/conformance")))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--check", type=float, default=None)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--write-baseline", action="store_true")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    ensure_packages()
    suite = fetch_suite(work)
    junit = os.path.join(work, f"{a.target}.xml")
    run_suite(suite, a.target, a.bin, a.workers, junit, a.pytest_args, a.timeout)
    got = outcomes(junit)
    passed = sorted(t for t, o in got.items() if o == "passed")
    if a.write_baseline:
        with open(os.path.join(HERE, "llama-server-passing.txt"), "w") as f:
            f.write("# Non-slow tests of llama.cpp's server suite (llama-cpp-python==0.3.36) that pass on\n"
                    "# llama-server with this folder's wrapper and local models (run.py --target llama).\n")
            f.writelines(t + "\n" for t in passed)
        print(f"{len(passed)} passed, {len(got) - len(passed)} failed")
        return 0
    baseline = read_list("llama-server-passing.txt")
    excluded = read_list("excluded.txt")
    counted = [t for t in baseline if t not in excluded]
    ok = [t for t in counted if got.get(t) == "passed"]
    bad = [t for t in counted if got.get(t) != "passed"]
    with open(os.path.join(work, f"{a.target}-failing.txt"), "w") as f:
        f.writelines(f"{t}  # {got.get(t, 'not run')}\n" for t in bad)
    for t in bad:
        print(f"FAILED (passes on llama-server): {t} [{got.get(t, 'not run')}]")
    share = len(ok) / len(counted) if counted else 0.0
    print(f"baseline {len(baseline)} tests, {len(baseline) - len(counted)} excluded (excluded.txt), "
          f"{len(ok)}/{len(counted)} pass on {a.target} ({share:.1%})")
    print(f"{len(ok)} passed, {len(bad)} failed")
    if a.check is not None and share < a.check:
        print(f"conformance below {a.check:.0%}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
