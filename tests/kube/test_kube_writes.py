"""Kube's writes (Binding, merge patch, create) through the transport's raw request path,
against the raw server of tests/kube/raw_server.py: what goes on the wire, and how answers map."""

from __future__ import annotations

import json

import httpx
import pytest

from extender.kube.client import ApiError, Kube, _Writer
from extender.kube.transport import AsyncioTransport
from tests.kube.raw_server import Peer, answer_all, created, kube_for, response, run, serve


def test_binding_goes_out_whole_with_the_clients_headers_on_one_connection() -> None:
    async def go() -> None:
        async with serve(answer_all(created)) as (server, url):
            kube, transport = kube_for(url)
            await kube.bind("ns", "p-0", "u-0", "node-1")
            await kube.bind("ns", "p-1", "u-1", "node-2")
            assert transport.stats.connects == 1
            first = server.requests[0]
            assert first.line == b"POST /api/v1/namespaces/ns/pods/p-0/binding HTTP/1.1"
            assert first.header(b"host") == [f"127.0.0.1:{server.port}".encode()]
            assert first.header(b"authorization") == [b"Bearer t0ken"]
            assert first.header(b"content-type") == [b"application/json"]
            assert first.header(b"content-length") == [str(len(first.body)).encode()]
            assert first.header(b"accept-encoding") == []  # answers must be plain
            assert json.loads(first.body) == {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "p-0", "namespace": "ns", "uid": "u-0"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}

    run(go())


def test_conflict_is_an_api_error_with_the_status_reason() -> None:
    status = {"kind": "Status", "reason": "Conflict",
              "message": 'pod p-0 is already assigned to node "n"'}

    async def go() -> None:
        async with serve(answer_all(lambda r: response(json.dumps(status).encode(), 409,
                                                       b"Conflict"))) as (_, url):
            kube, _ = kube_for(url)
            with pytest.raises(ApiError) as err:
                await kube.bind("ns", "p-0", "u", "n")
            assert (err.value.status, err.value.reason) == (409, "Conflict")
            assert "already assigned" in err.value.message

    run(go())


def test_non_json_error_body_is_kept_readable() -> None:
    async def go() -> None:
        async with serve(answer_all(lambda r: response(b"<html>bad gateway</html>", 502,
                                                       b"Bad Gateway"))) as (_, url):
            kube, _ = kube_for(url)
            with pytest.raises(ApiError) as err:
                await kube.merge_patch("/api/v1/namespaces/ns/pods/p", {"a": 1})
            assert err.value.status == 502
            assert "bad gateway" in err.value.message

    run(go())


def test_merge_patch_and_create_send_their_content_types_and_bodies() -> None:
    async def go() -> None:
        async with serve(answer_all(lambda r: response(b'{"metadata":{"name":"e1"}}'))) as (
                server, url):
            kube, _ = kube_for(url)
            await kube.merge_patch("/api/v1/namespaces/ns/pods/p", {"metadata": {"x": "1"}})
            made = await kube.create("/api/v1/namespaces/ns/events", {"reason": "R"})
            assert made == {"metadata": {"name": "e1"}}
            patch, create = server.requests
            assert patch.method == b"PATCH"
            assert patch.header(b"content-type") == [b"application/merge-patch+json"]
            assert json.loads(patch.body) == {"metadata": {"x": "1"}}
            assert create.method == b"POST"
            assert json.loads(create.body) == {"reason": "R"}

    run(go())


def test_names_are_quoted_so_they_cannot_break_the_request_line() -> None:
    """A /bind body is input: a name with CR/LF or spaces must not inject headers."""

    async def go() -> None:
        async with serve(answer_all(created)) as (server, url):
            kube, _ = kube_for(url)
            await kube.bind("ns", "p 0\r\nX-Evil: 1", "u", "n")
            req = server.requests[0]
            assert req.header(b"x-evil") == []
            assert req.target == b"/api/v1/namespaces/ns/pods/p%200%0D%0AX-Evil:%201/binding"

    run(go())


def test_base_url_path_prefix_is_kept() -> None:
    async def go() -> None:
        async with serve(answer_all(created)) as (server, url):
            kube, _ = kube_for(url, "/k8s/clusters/c-1/")
            await kube.bind("ns", "p", "u", "n")
            assert server.requests[0].target.startswith(b"/k8s/clusters/c-1/api/v1/")

    run(go())


def test_without_a_writer_httpx_carries_the_same_request() -> None:
    """Kube(http) alone (tests, tools) sends the same method, path and body."""

    async def handler(peer: Peer) -> None:
        while (req := await peer.request()) is not None:
            await peer.send(created(req))

    async def go() -> None:
        async with serve(handler) as (server, url):
            http = httpx.AsyncClient(base_url=url, transport=AsyncioTransport(None))
            await Kube(http).bind("ns", "p-0", "u-0", "node-1")
            req = server.requests[0]
            assert req.line == b"POST /api/v1/namespaces/ns/pods/p-0/binding HTTP/1.1"
            assert req.header(b"content-type") == [b"application/json"]
            assert json.loads(req.body)["target"]["name"] == "node-1"

    run(go())


@pytest.mark.parametrize(("base", "host", "key"), [
    ("https://[::1]:6443", b"Host: [::1]:6443", ("https", "::1", 6443)),
    ("https://api.example.com", b"Host: api.example.com", ("https", "api.example.com", 443)),
    ("http://10.0.0.1:8080/", b"Host: 10.0.0.1:8080", ("http", "10.0.0.1", 8080)),
])
def test_host_header_and_pool_key_from_the_base_url(base: str, host: bytes,
                                                    key: tuple[str, str, int]) -> None:
    transport = AsyncioTransport(None)
    writer = _Writer.for_client(httpx.AsyncClient(base_url=base, transport=transport),
                                transport, 2.0)
    assert writer.headers.split(b"\r\n")[0] == host
    assert writer.key == key
    assert (writer.timeout, writer.connect_timeout) == (2.0, 5.0)


def test_binding_read_then_dropped_by_the_server_is_an_error_not_a_second_binding() -> None:
    """The server reads a Binding on a kept-alive connection and closes it unanswered:
    the Binding may have been made, so it is not sent again; `kube.bind` raises (the
    runtime turns that into a failed bind) and the server saw it once."""

    async def handler(peer: Peer) -> None:
        req = await peer.request()
        assert req is not None
        await peer.send(created(req))
        if peer.index == 0:
            await peer.request()
            return  # closes without an answer
        while (req := await peer.request()) is not None:
            await peer.send(created(req))

    async def go() -> None:
        async with serve(handler) as (server, url):
            kube, transport = kube_for(url)
            await kube.bind("ns", "p-0", "u-0", "node-1")
            with pytest.raises(httpx.RemoteProtocolError, match="POST is not resent"):
                await kube.bind("ns", "p-1", "u-1", "node-1")
            await kube.bind("ns", "p-2", "u-2", "node-1")
            assert [(q.conn, json.loads(q.body)["metadata"]["name"])
                    for q in server.requests] == [(0, "p-0"), (0, "p-1"), (1, "p-2")]
            assert transport.stats.retries == 0

    run(go())
