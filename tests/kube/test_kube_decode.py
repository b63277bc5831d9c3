"""One object that cannot be decoded costs only itself: a list page or a watch stream with
an object nested deeper than orjson reads (a Volcano PodGroup's `spec` 3,000 levels deep,
which kube-apiserver stores) is read whole but for that object, which comes as an
`Undecodable` naming it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest

from extender.kube import decode, protobuf
from extender.kube.client import Kube
from extender.kube.decode import UNDECODABLE, Undecodable
from tests.kube.watch_wire import Chunks, fill_proto, watch_frame

DEPTH = 3000


def _deep(name: str, depth: int = DEPTH) -> bytes:
    """A PodGroup whose spec nests `depth` levels, as the API server writes it."""
    return (b'{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"PodGroup","metadata":'
            b'{"name":"' + name.encode() + b'","namespace":"tenant","uid":"u-deep",'
            b'"resourceVersion":"5"},"spec":' + b'{"a":' * depth + b'1' + b'}' * depth
            + b'}')


def _group(name: str) -> dict[str, Any]:
    # Strings with brackets, quotes and escapes: the scanner must not count them.
    return {"metadata": {"name": name, "namespace": "tenant", "resourceVersion": "4",
                         "annotations": {"x": 'a "}]" \\ [{'}},
            "spec": {"minMember": 2, "queue": "q[0]"}}


def _page(items: list[bytes], cont: str = "") -> bytes:
    meta = {"resourceVersion": "77", **({"continue": cont} if cont else {})}
    return (b'{"kind":"PodGroupList","apiVersion":"scheduling.volcano.sh/v1beta1",'
            b'"metadata":' + orjson.dumps(meta) + b',"items":[' + b",".join(items) + b"]}")


def test_a_page_with_one_object_3000_levels_deep_keeps_the_others() -> None:
    """The page was decoded whole: orjson's "depth limit exceeded" failed the list, and
    the Volcano informer listed again, forever."""
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(_deep("deep"))  # what the whole page met
    pages = [_page([orjson.dumps(_group("g1")), _deep("deep"), orjson.dumps(_group("g2"))],
                   cont="next"),
             _page([orjson.dumps(_group("g3"))])]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=pages[1 if request.url.params.get("continue")
                                                 else 0])

    async def go() -> list[tuple[list[dict[str, Any]], str]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            return [p async for p in Kube(http).list_pages("/apis/v/podgroups")]

    got = asyncio.run(go())
    assert [rv for _, rv in got] == ["77", "77"]
    first = got[0][0]
    assert [o["metadata"]["name"] for o in first if o] == ["g1", "g2"]
    assert first[0] == _group("g1") and first[2] == _group("g2")
    bad = first[1]
    assert type(bad) is Undecodable and bad == {}
    assert bad.name == "tenant/deep" and "depth limit exceeded" in bad.why
    assert [o["metadata"]["name"] for o in got[1][0]] == ["g3"]


def test_a_page_orjson_reads_is_never_split() -> None:
    """The fallback is for failures only: an ordinary page is one orjson call."""
    page = _page([orjson.dumps(_group(f"g{i}")) for i in range(3)])
    called: list[bytes] = []
    real = decode.split_items

    def spy(body: bytes) -> tuple[bytes, list[bytes]] | None:
        called.append(body)
        return real(body)

    decode.split_items = spy
    try:
        assert decode.page(page) == orjson.loads(page)
    finally:
        decode.split_items = real
    assert called == []


def test_a_page_whose_envelope_is_broken_still_fails() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        decode.page(b'{"metadata":{"resourceVersion":"1"},"items":[{"a":1}')
    with pytest.raises(ValueError):
        decode.page(b"[1, 2]")


def test_the_items_scanner_finds_each_item_whatever_its_strings_hold() -> None:
    items = [orjson.dumps(_group("g1")), b'{"k":"}]\\"[{","l":[{"m":[]}]}', b"{}"]
    envelope, raws = decode.split_items(_page(items)) or (b"", [])
    assert raws == items
    assert orjson.loads(envelope)["items"] == []
    assert decode.split_items(b'{"items":[{"a":1}') is None  # never ends


def test_a_watch_line_that_cannot_be_decoded_is_one_skipped_event() -> None:
    """One line orjson refused ended the watch; the relist after it met the object
    again."""
    lines = [orjson.dumps({"type": "ADDED", "object": _group("g1")}),
             b'{"type":"MODIFIED","object":' + _deep("deep") + b"}",
             b"[1]",
             orjson.dumps({"type": "ADDED", "object": _group("g2")})]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Chunks([b"\n".join(lines) + b"\n"]))

    async def go() -> list[tuple[str, dict[str, Any]]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            return [e async for e in Kube(http).watch("/apis/v/podgroups", "1")]

    got = asyncio.run(go())
    assert [t for t, _ in got] == ["ADDED", UNDECODABLE, UNDECODABLE, "ADDED"]
    assert got[0][1] == _group("g1") and got[3][1] == _group("g2")
    deep, not_an_event = got[1][1], got[2][1]
    assert isinstance(deep, Undecodable) and deep.name == "tenant/deep"
    assert "depth limit exceeded" in deep.why
    assert isinstance(not_an_event, Undecodable) and "not an event" in not_an_event.why


def test_a_protobuf_frame_that_cannot_be_decoded_is_one_skipped_event() -> None:
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "7"},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    good = watch_frame("ADDED", "Pod", fill_proto(protobuf.Pod(), pod).SerializeToString())
    bad = watch_frame("ADDED", "Pod", b"\xff\xff\xff\xff")
    wire = good + bad + good

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Chunks([wire]), headers={
            "content-type": "application/vnd.kubernetes.protobuf;stream=watch"})

    async def go() -> list[tuple[str, dict[str, Any]]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                     base_url="http://t") as http:
            return [e async for e in Kube(http).watch(
                "/api/v1/pods", "1", proto=(protobuf.Pod, protobuf.pod_dict))]

    got = asyncio.run(go())
    assert [t for t, _ in got] == ["ADDED", UNDECODABLE, "ADDED"]
    assert got[0][1]["metadata"]["name"] == "p" == got[2][1]["metadata"]["name"]
    assert isinstance(got[1][1], Undecodable)


def test_the_undecodable_object_is_named_as_kube_apiserver_writes_a_custom_resource() -> None:
    """A custom resource's keys come sorted: `managedFields` (as deep as the object, in
    `fieldsV1`) before `name` and `namespace`. Looked for right after `"metadata":{`, the
    name was missing from the log of the e2e run."""
    fields = b'{"f:a":' * DEPTH + b"{}" + b"}" * DEPTH
    raw = (b'{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"PodGroup","metadata":'
           b'{"creationTimestamp":"2026-11-28T23:53:00Z","generation":1,"managedFields":'
           b'[{"apiVersion":"v","fieldsType":"FieldsV1","fieldsV1":' + fields + b','
           b'"manager":"m","name":"not-this"}],"name":"deep","namespace":"tenant",'
           b'"resourceVersion":"5","uid":"u"},"spec":' + b'{"a":' * DEPTH + b"1"
           + b"}" * DEPTH + b"}")
    got = decode.page(_page([orjson.dumps(_group("g1")), raw]))["items"]
    assert got[0] == _group("g1")
    assert type(got[1]) is Undecodable and got[1].name == "tenant/deep"
    assert decode.name_of(b'{"metadata":{"name":"a"}}') == "a"
    assert decode.name_of(b"[1]") == decode.name_of(b'{"metadata":{"name":') == ""
