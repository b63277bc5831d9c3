"""Extender wire types (k8s.io/kube-scheduler/extender/v1), spelled exactly as upstream.

The Go structs have no json tags, so keys are the Go field names; kube-scheduler
decodes replies case-insensitively but we always answer with the exact spelling.
Pod and Node bodies stay plain dicts: only a few of their fields are read.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class NodeList(_Wire):
    items: list[dict[str, Any]] | None = None


class ExtenderArgs(_Wire):
    Pod: dict[str, Any]
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None

    def node_names(self) -> list[str]:
        """Candidate node names whichever way they came (nodeCacheCapable or not)."""
        if self.NodeNames is not None:
            return self.NodeNames
        names: list[str] = []
        for item in (self.Nodes.items or []) if self.Nodes else []:
            meta = item.get("metadata") if isinstance(item, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str) or not name:
                raise ValueError("Nodes.items[] entry without metadata.name")
            names.append(name)
        return names


class ExtenderBindingArgs(_Wire):
    PodName: str = Field(min_length=1)
    PodNamespace: str = Field(min_length=1)
    PodUID: str = Field(min_length=1)
    Node: str = Field(min_length=1)
