"""Question: how much of the server's CPU per verb POST is uvicorn's per-request machinery
rather than the verb? Answer: lab/history/performance-history.md, "The lever left: uvicorn's
per-request machinery".

Server CPU per extender verb POST: uvicorn as the CLI runs it, against a bare protocol.

    .venv/bin/python -m lab.experiments.http_server [--requests 4000] [--reps 4]

Why: kube-scheduler makes two HTTP calls per pod (filter, bind), and the question for
the next lever is how much of a call is uvicorn's per-request machinery (its request
cycle, ASGI messages, one task per request, keep-alive timer) rather than the verb.
Each server runs in a child process and answers a filter-sized request (a captured
kube-scheduler pod with 200 node names) with a fixed reply, doing no verb work:

* ``uvicorn``: `uvicorn.Server` with uvloop and httptools, as `serve.py` configures it,
  around an ASGI app that reads the body and sends the reply as `with_fast_verbs` does;
* ``uvicorn-lean``: the same without the proxy-headers middleware and the Server and
  Date headers;
* ``bare``: an `asyncio.Protocol` on uvloop feeding httptools' parser and writing the
  reply in one piece (the floor: the kernel, the parser, the loop).

One keep-alive connection from this process sends the POSTs (after 50 unmeasured
ones); the server's CPU (/proc) over them is divided by their number. The servers
alternate within each repetition. Prints min and median with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from bench.common import cpu_seconds, print_min_median

MODES = ("uvicorn", "uvicorn-lean", "bare")
REPLY = orjson.dumps({"NodeNames": ["node-00001"], "Nodes": None, "FailedNodes": {},
                      "FailedAndUnresolvableNodes": {}, "Error": ""})
# A filter body kube-scheduler really sent (tests/wire, recorded by e2e.capture_wire).
SAMPLE = Path(__file__).resolve().parents[2] / "tests" / "wire" / (
    "nodecachecapable-true.filter.request.json")


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(REPLY))]})
    await send({"type": "http.response.body", "body": REPLY})


def serve(mode: str, port: int) -> None:
    """The child process: one server until terminated."""
    import uvloop

    if mode == "bare":
        import httptools

        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        reply = head + b"content-length: %d\r\n\r\n" % len(REPLY) + REPLY

        class Bare(asyncio.Protocol):
            def connection_made(self, transport: Any) -> None:
                self.transport = transport  # uvloop's, not an asyncio.Transport subclass
                self.parser = httptools.HttpRequestParser(self)

            def data_received(self, data: bytes) -> None:
                self.parser.feed_data(data)

            def on_message_complete(self) -> None:
                self.transport.write(reply)

        async def main() -> None:
            server = await asyncio.get_running_loop().create_server(Bare, "127.0.0.1", port)
            print("ready", flush=True)
            await server.serve_forever()

        uvloop.run(main())
        return
    import uvicorn

    full = mode != "uvicorn-lean"
    config = uvicorn.Config(_app, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False, lifespan="off", loop="uvloop",
                            http="httptools", timeout_keep_alive=120, proxy_headers=full,
                            server_header=full, date_header=full)
    print("ready", flush=True)
    uvicorn.Server(config).run()


def body(nodes: int) -> bytes:
    req = orjson.loads(SAMPLE.read_bytes()) if SAMPLE.is_file() else {
        "Pod": {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {}}}
    req["NodeNames"] = [f"node-{i:05d}" for i in range(nodes)]
    return orjson.dumps(req)


def measure(mode: str, port: int, payload: bytes, requests: int) -> float:
    child = subprocess.Popen([sys.executable, "-m", "lab.experiments.http_server", "--serve",
                              mode, str(port)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        child.stdout.readline()
        conn = None
        for _ in range(100):  # until it listens
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                conn.connect()
                break
            except OSError:
                time.sleep(0.05)
        assert conn is not None
        headers = {"Content-Type": "application/json"}

        def post() -> None:
            conn.request("POST", "/filter", payload, headers)
            conn.getresponse().read()

        for _ in range(50):
            post()
        c0 = cpu_seconds(child.pid)
        for _ in range(requests):
            post()
        return (cpu_seconds(child.pid) - c0) * 1e6 / requests
    finally:
        child.terminate()
        child.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--serve", nargs=2, metavar=("MODE", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve[0], int(args.serve[1]))
        return 0
    payload = body(args.nodes)
    out: dict[str, list[float]] = {m: [] for m in MODES}
    port = 18700 + os.getpid() % 500
    for rep in range(args.reps):
        for mode in MODES[rep % 3:] + MODES[:rep % 3]:
            port += 1
            out[mode].append(measure(mode, port, payload, args.requests))
    print_min_median(f"server CPU µs per POST ({len(payload)} byte body, one keep-alive "
                     f"connection, {args.requests} requests)", args.reps, out, width=13)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
