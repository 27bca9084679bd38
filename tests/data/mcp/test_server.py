#!/usr/bin/env python3
"""A small MCP server (newline-delimited JSON-RPC 2.0 on stdio) for memoria's /tools tests.

Tools: echo {message}, add {a, b}, sleep {seconds} (answers late), crash (exits at once),
pid (its process id). Each call is preceded by a progress notification, as real servers send.
"""
import json
import os
import sys
import threading
import time

TOOLS = [
    {"name": "echo", "description": "Echo a message",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "add", "description": "Add two numbers",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
    {"name": "sleep", "description": "Answer after some seconds",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "crash", "description": "Exit at once", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "pid", "description": "The server's process id", "inputSchema": {"type": "object", "properties": {}}},
]

lock = threading.Lock()


def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def text(req_id, t):
    send({"jsonrpc": "2.0", "id": req_id, "result": {"content": [{"type": "text", "text": t}]}})


def call(req_id, name, args):
    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    if name == "echo":
        text(req_id, "echo: " + str(args.get("message", "")))
    elif name == "add":
        text(req_id, str(args.get("a", 0) + args.get("b", 0)))
    elif name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        text(req_id, "slept")
    elif name == "crash":
        os._exit(3)
    elif name == "pid":
        text(req_id, str(os.getpid()))
    else:
        send({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32602, "message": "unknown tool " + name}})


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    req = json.loads(line)
    rid, method = req.get("id"), req.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2024-11-05",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "memoria-test", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        p = req.get("params", {})
        threading.Thread(target=call, args=(rid, p.get("name"), p.get("arguments", {})), daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method " + str(method)}})
