"""List pages and watch lines decoded one object at a time when decoding them whole fails.

Why: a page or a watch line used to be decoded whole, before any per-object isolation, so
one object that could not be decoded failed the list (or the watch, then the list that
followed it) for every object of its kind, forever. kube-apiserver accepts what orjson
refuses: orjson stops at 1,024 levels of nesting, and kube-apiserver stores a custom
resource nested 3,000 or 9,000 levels deep wherever its CRD keeps unknown fields (as
the e2e tests' stand-in for Volcano's PodGroup CRD does). One tenant's such object
stopped gang scheduling for all.

orjson stays the decoder (it is the fast path, and the page's bytes are read once): only
when it fails on a page is the page cut into its `items` by a scanner that follows strings
and brackets (no recursion, so no depth limit), and each item decoded alone; an item that
still fails stands in the page as an `Undecodable`, which the informer logs, counts and
skips. A watch line is one event: when it fails it becomes one `UNDECODABLE` event. The
deep object is not read by another decoder: any decoder with a recursion would have a
limit (Python's `json` one as deep as the C stack lets it, which is a crash, not an
error), and nothing the extender does needs an object it cannot read.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# The type of a watch event whose line (or protobuf frame) could not be decoded.
UNDECODABLE = "UNDECODABLE"

# A JSON string (escapes included) or a bracket: all the scanner needs to find where each
# item of a page begins and ends.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
# A key's string value, right after the key.
_VALUE = re.compile(rb'\s*:\s*"([^"\\]{1,253})"')


class Undecodable(dict[str, Any]):
    """An object that could not be decoded, where the decoded one would be: empty, so a
    reader that does not look for it finds an object without fields; `why` says what
    failed and `name` which object it was, as far as its bytes tell ("" if not)."""

    __slots__ = ("name", "why")

    def __init__(self, why: str, name: str = "") -> None:
        super().__init__()
        self.why = why
        self.name = name

    def __repr__(self) -> str:
        return f"Undecodable({self.why!r}, {self.name!r})"


def name_of(raw: bytes) -> str:
    """"namespace/name" (or "name") of the first object in `raw`, "" if not found: the
    `name` and `namespace` keys of its first `metadata`, wherever they are in it (a
    custom resource's keys come sorted, after `managedFields`, which can nest as deep as
    the object does)."""
    at = raw.find(b'"metadata"')
    opened = raw.find(b"{", at) if at >= 0 else -1
    if opened < 0:
        return ""
    found: dict[bytes, str] = {}
    depth = 0
    for m in _TOKEN.finditer(raw, opened):
        tok = m.group()
        if tok[0] == 0x22:  # a string: at depth 1, maybe a key of the metadata
            if depth == 1 and tok in (b'"name"', b'"namespace"'):
                value = _VALUE.match(raw, m.end())
                if value is not None:
                    found[tok] = value.group(1).decode("utf-8", "replace")
            continue
        depth += 1 if tok[0] in (0x7B, 0x5B) else -1
        if depth == 0:
            break
    name, ns = found.get(b'"name"', ""), found.get(b'"namespace"', "")
    return f"{ns}/{name}" if ns and name else name


def _undecodable(raw: bytes, exc: Exception) -> Undecodable:
    return Undecodable(f"{type(exc).__name__}: {exc}", name_of(raw))


def event(line: bytes) -> tuple[str, dict[str, Any]]:
    """(type, object) of one watch line; (UNDECODABLE, an `Undecodable`) when orjson
    cannot decode it or it is not an event."""
    try:
        decoded = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return UNDECODABLE, _undecodable(line, exc)
    if not isinstance(decoded, dict):
        return UNDECODABLE, Undecodable(f"a watch line that is not an event: "
                                        f"{type(decoded).__name__}")
    obj = decoded.get("object") or {}
    if not isinstance(obj, dict):
        return UNDECODABLE, Undecodable(f"an event whose object is a {type(obj).__name__}")
    return str(decoded.get("type", "")), obj


def page(body: bytes) -> dict[str, Any]:
    """A list page as orjson decodes it whole; if that fails, decoded item by item, each
    item that fails an `Undecodable` in `items`. Raises ValueError if the page itself (its
    envelope) cannot be read, with orjson's reason."""
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        cut = split_items(body)
        if cut is None:
            raise
        envelope, raws = cut
        try:
            decoded = orjson.loads(envelope)
        except orjson.JSONDecodeError:
            raise exc from None
        if not isinstance(decoded, dict):
            raise exc from None
        items: list[dict[str, Any]] = []
        for raw in raws:
            try:
                item = orjson.loads(raw)
            except orjson.JSONDecodeError as item_exc:
                items.append(_undecodable(raw, item_exc))
                continue
            items.append(item if isinstance(item, dict) else Undecodable(
                f"a list item that is not an object: {type(item).__name__}"))
        decoded["items"] = items
        return decoded
    if not isinstance(decoded, dict):
        raise ValueError(f"a list page that is not an object: {type(decoded).__name__}")
    return decoded


def split_items(body: bytes) -> tuple[bytes, list[bytes]] | None:
    """(the page with `"items": []`, the bytes of each item) of a list page, found by
    following its strings and brackets, never by decoding; None if it has no top-level
    `items` array of objects that ends."""
    depth = 0
    key = b""  # the last string seen at the top level: the key of what follows it
    items_at = -1  # where the items array opened, once it did
    item_at = -1
    raws: list[bytes] = []
    for m in _TOKEN.finditer(body):
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # a string
            if depth == 1:
                key = tok
            continue
        if c in (0x7B, 0x5B):  # { [
            if depth == 1 and c == 0x5B and key == b'"items"' and items_at < 0:
                items_at = m.start()
            elif depth == 2 and items_at >= 0 and item_at < 0 and c == 0x7B:
                item_at = m.start()
            depth += 1
            continue
        depth -= 1
        if depth < 0:
            return None
        if depth == 2 and item_at >= 0:
            raws.append(body[item_at:m.end()])
            item_at = -1
        elif depth == 1 and items_at >= 0 and c == 0x5D:
            return body[:items_at] + b"[]" + body[m.end():], raws
    return None
