"""Dynamic Resource Allocation (`resource.k8s.io/v1`) as the planner needs it: the devices
drivers publish (ResourceSlices), what DeviceClasses and claims ask of them, and what is
already allocated, read once per watch event into frozen values.

Input is untrusted: a malformed object raises `ValueError` naming the object and the
field ("resourceslice node-1-gpu: spec.devices[0].capacity[memory]: invalid quantity
'x'"), never another exception type, as `model/convert.py` does for pods and nodes.

Names are kept fully qualified: an attribute or capacity a driver publishes without a
domain ("model") belongs to the driver's ("gpu.example.com/model"), which is how
Kubernetes reads it in selectors and in `matchAttribute` alike.

Selectors are CEL, compiled and evaluated by an adapter (`extender/cel_selectors.py`)
the core receives as a `SelectorCompiler`: the CEL runtime is a native library, and the
core stays plain Python that any test can run with its own stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from extender.core.model.claims import ClaimRef, PodClaims, read_pod_claims
from extender.core.model.convert import node_selector_terms
from extender.core.model.fields import (
    as_int,
    as_list,
    as_obj,
    as_str,
    guarded,
    required_str,
    sections,
    shared,
    shown,
)
from extender.core.model.quantity import parse_quantity, shorten
from extender.core.model.types import NodeSelectorTerm, Taint

__all__ = [
    "ALL",
    "EXACT_COUNT",
    "MAX_VERSION_CHARS",
    "QUANTITY_KEY",
    "SEMVER_KEY",
    "Allocated",
    "AttributeValue",
    "ClaimRef",
    "ClaimSpec",
    "CompiledSelector",
    "Constraint",
    "Device",
    "DeviceClass",
    "PodClaims",
    "Request",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "SelectorCompiler",
    "SelectorError",
    "SubRequest",
    "claim_from_k8s",
    "claim_template_from_k8s",
    "device_class_from_k8s",
    "pod_claims_from_k8s",
    "quantity_input",
    "resource_slice_from_k8s",
    "semver_input",
    "semver_ok",
]

EXACT_COUNT = "ExactCount"
ALL = "All"
_MODES = frozenset({EXACT_COUNT, ALL})
_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute", "None"})
# A quantity or a version crosses into CEL as a one-entry map whose value is canonical,
# so that CEL's own `==` on two of them compares values ("1Gi" == "1024Mi").
QUANTITY_KEY = "__quantity__"
SEMVER_KEY = "__semver__"
MAX_VERSION_CHARS = 256


# ----- selectors: the interface the core receives ----------------------------------------


class SelectorError(ValueError):
    """A selector that cannot be compiled, is refused as too costly, or failed on a
    device; its message says which, for the user who wrote it. As in kube-scheduler,
    a device a selector fails on is not selected."""


class CompiledSelector(Protocol):
    @property
    def text(self) -> str:
        """The expression as written (read only: a compiled selector is shared)."""
        ...

    def matches(self, device: Mapping[str, Any]) -> bool:
        """Whether the device (`Device.cel`) is selected; `SelectorError` when the
        expression fails or gives something other than true or false."""
        ...


class SelectorCompiler(Protocol):
    def __call__(self, text: str) -> CompiledSelector:
        """The compiled expression, or `SelectorError`; memoized by text."""
        ...


def quantity_input(v: Fraction) -> dict[str, str]:
    """A capacity as a selector sees it (`device.capacity[d].x`, `quantity("1Gi")`)."""
    return {QUANTITY_KEY: f"{v.numerator}/{v.denominator}"}


def semver_ok(text: str) -> bool:
    """Whether `text` is a semantic version (2.0.0), as version attributes must be."""
    if len(text) > MAX_VERSION_CHARS:
        return False
    core, _, rest = text.partition("+")
    if rest and not all(p and all(c.isalnum() or c == "-" for c in p)
                        for p in rest.split(".")):
        return False
    version, _, pre = core.partition("-")
    nums = version.split(".")
    if len(nums) != 3 or not all(n.isascii() and n.isdigit() and (n == "0" or n[0] != "0")
                                 for n in nums):
        return False
    return not pre or all(p and p.isascii() and all(c.isalnum() or c == "-" for c in p)
                          for p in pre.split("."))


def semver_input(text: str) -> dict[str, str]:
    """A version attribute as a selector sees it (semver 2.0.0; build metadata dropped,
    as it takes no part in a version's order or equality)."""
    if not semver_ok(text):
        raise ValueError(f"invalid semantic version {shorten(text)!r}")
    return {SEMVER_KEY: text.split("+", 1)[0]}


# ----- devices -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttributeValue:
    """One typed attribute: `kind` is the API's field name (int, bool, string, version,
    or their list forms ints, bools, strings, versions). Two values match (as in
    `matchAttribute`) only with the same kind and value."""

    kind: str
    value: int | bool | str | tuple[int | bool | str, ...]

    def cel(self) -> Any:
        if self.kind == "version":
            return semver_input(str(self.value))
        if self.kind == "versions":
            return [semver_input(str(v)) for v in self.value]  # type: ignore[union-attr]
        if isinstance(self.value, tuple):
            return list(self.value)
        return self.value

    def elements(self) -> tuple[str, frozenset[Any]]:
        """(scalar kind, values) for `matchAttribute`: Kubernetes compares list
        attributes as sets, a scalar being a one-element list, and values only of the
        same kind ("1" the string is not 1 the int)."""
        base = self.kind[:-1] if self.kind in _LIST_KINDS else self.kind
        vals = self.value if isinstance(self.value, tuple) else (self.value,)
        return base, frozenset(vals)


_LIST_KINDS = frozenset({"ints", "bools", "strings", "versions"})


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a pool. `attributes` and `capacity` are keyed by fully qualified
    name; `cel` is the `device` a selector reads, built once here."""

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Fraction]
    # A node taint's fields (`Taint`); a device's effect is NoSchedule, NoExecute or None.
    taints: tuple[Taint, ...] = ()
    allow_multiple: bool = False
    cel: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """(driver, pool, device): how an allocation result names it."""
        return (self.driver, self.pool, self.name)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """Part of a pool: where its devices can be used is one of `node_name`,
    `node_selector` (terms ORed) or `all_nodes`."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    node_selector: tuple[NodeSelectorTerm, ...] | None
    all_nodes: bool
    devices: tuple[Device, ...]


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


_ATTRIBUTE_KINDS = ("int", "bool", "string", "version", "ints", "bools", "strings",
                    "versions")


def _attribute(v: Any, where: str) -> AttributeValue:
    a = as_obj(v, where)
    set_kinds = [k for k in _ATTRIBUTE_KINDS if a.get(k) is not None]
    if len(set_kinds) != 1:
        raise ValueError(f"{where}: exactly one of {', '.join(_ATTRIBUTE_KINDS)} must be "
                         f"set, got {len(set_kinds)}")
    kind = set_kinds[0]
    raw = a[kind]
    if kind.endswith("s"):
        items = tuple(_scalar(kind[:-1], x, f"{where}.{kind}[{i}]")
                      for i, x in enumerate(as_list(raw, f"{where}.{kind}")))
        return AttributeValue(kind, items)
    return AttributeValue(kind, _scalar(kind, raw, f"{where}.{kind}"))


def _scalar(kind: str, v: Any, where: str) -> int | bool | str:
    if kind == "int":
        return as_int(v, where, 0)
    if kind == "bool":
        if not isinstance(v, bool):
            raise ValueError(f"{where} must be a boolean, got {shown(v)}")
        return v
    s = as_str(v, where)
    if kind == "version" and not semver_ok(s):
        raise ValueError(f"{where}: invalid semantic version {shorten(s)!r}")
    return s


def _device(v: Any, where: str, driver: str, pool: str) -> Device:
    d = as_obj(v, where)
    name = required_str(d.get("name"), f"{where}.name")
    attrs: dict[str, AttributeValue] = {}
    for k, raw in as_obj(d.get("attributes"), f"{where}.attributes").items():
        attrs[_qualified(str(k), driver)] = _attribute(raw, f"{where}.attributes[{k}]")
    caps: dict[str, Fraction] = {}
    for k, raw in as_obj(d.get("capacity"), f"{where}.capacity").items():
        w = f"{where}.capacity[{k}]"
        value = as_obj(raw, w).get("value")
        if value is None:
            raise ValueError(f"{w}.value is missing")
        try:
            caps[_qualified(str(k), driver)] = parse_quantity(value)
        except ValueError as e:
            raise ValueError(f"{w}: {e}") from None
    taints = []
    for i, raw in enumerate(as_list(d.get("taints"), f"{where}.taints")):
        w = f"{where}.taints[{i}]"
        t = as_obj(raw, w)
        effect = as_str(t.get("effect"), f"{w}.effect")
        if effect not in _TAINT_EFFECTS:
            raise ValueError(f"{w}.effect: unknown effect {shorten(effect)!r}")
        taints.append(Taint(as_str(t.get("key"), f"{w}.key"),
                            as_str(t.get("value"), f"{w}.value"), effect))
    multiple = d.get("allowMultipleAllocations")
    if multiple is not None and not isinstance(multiple, bool):
        raise ValueError(f"{where}.allowMultipleAllocations must be a boolean")
    return Device(shared(driver), shared(pool), name, attrs, caps, tuple(taints),
                  bool(multiple), _cel_input(driver, attrs, caps, bool(multiple)))


def _cel_input(driver: str, attrs: Mapping[str, AttributeValue],
               caps: Mapping[str, Fraction], multiple: bool) -> dict[str, Any]:
    by_domain: dict[str, dict[str, Any]] = {}
    for k, a in attrs.items():
        domain, _, ident = k.rpartition("/")
        by_domain.setdefault(domain, {})[ident] = a.cel()
    cap_domain: dict[str, dict[str, Any]] = {}
    for k, q in caps.items():
        domain, _, ident = k.rpartition("/")
        cap_domain.setdefault(domain, {})[ident] = quantity_input(q)
    return {"driver": driver, "attributes": by_domain, "capacity": cap_domain,
            "allowMultipleAllocations": multiple}


def _build_slice(obj: Mapping[str, Any], _ident: str) -> ResourceSlice:
    _meta, spec, _status, name = sections(obj)
    driver = required_str(spec.get("driver"), "spec.driver")
    pool = as_obj(spec.get("pool"), "spec.pool")
    pool_name = required_str(pool.get("name"), "spec.pool.name")
    node_name = spec.get("nodeName")
    if node_name is not None:
        node_name = as_str(node_name, "spec.nodeName")
    selector = spec.get("nodeSelector")
    terms = None if selector is None else node_selector_terms(selector, "spec.nodeSelector")
    all_nodes = spec.get("allNodes")
    if all_nodes is not None and not isinstance(all_nodes, bool):
        raise ValueError("spec.allNodes must be a boolean")
    chosen = sum((bool(node_name), terms is not None, bool(all_nodes),
                  spec.get("perDeviceNodeSelection") is True))
    if chosen != 1:
        raise ValueError("exactly one of spec.nodeName, spec.nodeSelector, spec.allNodes "
                         f"and spec.perDeviceNodeSelection must be set, got {chosen}")
    devices = tuple(_device(d, f"spec.devices[{i}]", driver, pool_name)
                    for i, d in enumerate(as_list(spec.get("devices"), "spec.devices")))
    return ResourceSlice(
        name, shared(driver), shared(pool_name),
        as_int(pool.get("generation"), "spec.pool.generation", 0),
        as_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
        shared(node_name) if node_name else None, terms, bool(all_nodes), devices)


def resource_slice_from_k8s(obj: Any) -> ResourceSlice:
    return guarded("resourceslice", obj, _build_slice)


# ----- device classes and claims ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]  # CEL expressions, all of which must select a device


def _selectors(v: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, raw in enumerate(as_list(v, where)):
        w = f"{where}[{i}]"
        cel = as_obj(as_obj(raw, w).get("cel"), f"{w}.cel")
        expr = as_str(cel.get("expression"), f"{w}.cel.expression")
        if not expr:
            raise ValueError(f"{w}.cel.expression is missing (the only selector kind)")
        out.append(expr)
    return tuple(out)


def _build_class(obj: Mapping[str, Any], _ident: str) -> DeviceClass:
    _meta, spec, _status, name = sections(obj)
    return DeviceClass(name, _selectors(spec.get("selectors"), "spec.selectors"))


def device_class_from_k8s(obj: Any) -> DeviceClass:
    return guarded("deviceclass", obj, _build_class)


@dataclass(frozen=True, slots=True)
class SubRequest:
    """What one request (or one alternative of `firstAvailable`) asks for: `count`
    devices of `device_class` (ExactCount), or every matching device of a pool (All)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class Request:
    """A claim's request: `alternatives` is `(exactly,)` or `firstAvailable`, tried in
    order."""

    name: str
    alternatives: tuple[SubRequest, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    """Devices of `requests` (all of the claim's when empty) share the value of the
    attribute `match_attribute` (fully qualified)."""

    requests: tuple[str, ...]
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...] = ()


def _sub_request(v: Any, where: str, name: str) -> SubRequest:
    r = as_obj(v, where)
    device_class = required_str(r.get("deviceClassName"), f"{where}.deviceClassName")
    mode = as_str(r.get("allocationMode"), f"{where}.allocationMode", EXACT_COUNT)
    if mode not in _MODES:
        # The API says clients must refuse requests with modes they do not know.
        raise ValueError(f"{where}.allocationMode: unknown mode {shorten(mode)!r}")
    count = as_int(r.get("count"), f"{where}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise ValueError(f"{where}.count must be at least 1, got {count}")
    admin = r.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise ValueError(f"{where}.adminAccess must be a boolean")
    return SubRequest(name, shared(device_class),
                      _selectors(r.get("selectors"), f"{where}.selectors"), mode, count,
                      bool(admin))


def _claim_spec(v: Any, where: str) -> ClaimSpec:
    devices = as_obj(as_obj(v, where).get("devices"), f"{where}.devices")
    requests = []
    names: set[str] = set()
    for i, raw in enumerate(as_list(devices.get("requests"), f"{where}.devices.requests")):
        w = f"{where}.devices.requests[{i}]"
        r = as_obj(raw, w)
        name = as_str(r.get("name"), f"{w}.name")
        if not name or name in names:
            raise ValueError(f"{w}.name is missing or repeated")
        names.add(name)
        exactly, first = r.get("exactly"), as_list(r.get("firstAvailable"),
                                                   f"{w}.firstAvailable")
        if (exactly is None) == (not first):
            raise ValueError(f"{w}: exactly one of exactly and firstAvailable must be set")
        alts: tuple[SubRequest, ...]
        if exactly is not None:
            alts = (_sub_request(exactly, f"{w}.exactly", name),)
        else:
            alts = tuple(
                _sub_request(s, f"{w}.firstAvailable[{j}]",
                             f"{name}/{as_str(as_obj(s, w).get('name'), w)}")
                for j, s in enumerate(first))
        requests.append(Request(name, alts))
    constraints = []
    for i, raw in enumerate(as_list(devices.get("constraints"),
                                    f"{where}.devices.constraints")):
        w = f"{where}.devices.constraints[{i}]"
        c = as_obj(raw, w)
        reqs = tuple(as_str(x, f"{w}.requests")
                     for x in as_list(c.get("requests"), f"{w}.requests"))
        unknown = [x for x in reqs if x.split("/", 1)[0] not in names]
        if unknown:
            raise ValueError(f"{w}.requests: no request named {shorten(unknown[0])!r}")
        match = c.get("matchAttribute")
        distinct = c.get("distinctAttribute")
        constraints.append(Constraint(
            reqs,
            None if match is None else as_str(match, f"{w}.matchAttribute"),
            None if distinct is None else as_str(distinct, f"{w}.distinctAttribute")))
    return ClaimSpec(tuple(requests), tuple(constraints))


@dataclass(frozen=True, slots=True)
class Allocated:
    """One allocated device of a claim (`status.allocation.devices.results[]`)."""

    driver: str
    pool: str
    device: str
    request: str
    admin_access: bool = False  # such a result does not keep the device from others

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    allocated: tuple[Allocated, ...] = ()
    # Where the allocation can be used (`status.allocation.nodeSelector`), None when
    # not allocated or usable anywhere.
    allocation_nodes: tuple[NodeSelectorTerm, ...] | None = None
    reserved_for: tuple[str, ...] = ()  # uids of the consumers

    @property
    def is_allocated(self) -> bool:
        return bool(self.allocated) or self.allocation_nodes is not None


def _build_claim(obj: Mapping[str, Any], _ident: str) -> ResourceClaim:
    meta, spec, status, name = sections(obj)
    allocation = status.get("allocation")
    results: list[Allocated] = []
    nodes = None
    if allocation is not None:
        alloc = as_obj(allocation, "status.allocation")
        devices = as_obj(alloc.get("devices"), "status.allocation.devices")
        for i, raw in enumerate(as_list(devices.get("results"),
                                        "status.allocation.devices.results")):
            w = f"status.allocation.devices.results[{i}]"
            r = as_obj(raw, w)
            results.append(Allocated(
                shared(as_str(r.get("driver"), f"{w}.driver")),
                shared(as_str(r.get("pool"), f"{w}.pool")),
                as_str(r.get("device"), f"{w}.device"),
                as_str(r.get("request"), f"{w}.request"),
                r.get("adminAccess") is True))
        if alloc.get("nodeSelector") is not None:
            nodes = node_selector_terms(alloc["nodeSelector"], "status.allocation.nodeSelector")
    reserved = tuple(
        as_str(as_obj(x, f"status.reservedFor[{i}]").get("uid"), f"status.reservedFor[{i}].uid")
        for i, x in enumerate(as_list(status.get("reservedFor"), "status.reservedFor")))
    return ResourceClaim(
        shared(as_str(meta.get("namespace"), "metadata.namespace")), name,
        as_str(meta.get("uid"), "metadata.uid"), _claim_spec(spec, "spec"),
        tuple(results), nodes, reserved)


def claim_from_k8s(obj: Any) -> ResourceClaim:
    return guarded("resourceclaim", obj, _build_claim)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec  # each pod gets a claim of its own with this spec


def _build_template(obj: Mapping[str, Any], _ident: str) -> ResourceClaimTemplate:
    meta, spec, _status, name = sections(obj)
    inner = as_obj(spec.get("spec"), "spec.spec")
    return ResourceClaimTemplate(
        shared(as_str(meta.get("namespace"), "metadata.namespace")), name,
        _claim_spec(inner, "spec.spec"))


def claim_template_from_k8s(obj: Any) -> ResourceClaimTemplate:
    return guarded("resourceclaimtemplate", obj, _build_template)


# ----- a pod's claims -------------------------------------------------------------------


def _build_pod_claims(obj: Mapping[str, Any], _ident: str) -> PodClaims:
    _meta, spec, status, _name = sections(obj)
    return read_pod_claims(spec, status)


def pod_claims_from_k8s(obj: Any) -> PodClaims:
    """The claims of a pod (its `spec.resourceClaims` and their status)."""
    return guarded("pod", obj, _build_pod_claims)
