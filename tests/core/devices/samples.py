"""Valid resource.k8s.io/v1 objects as the API server returns them, shared by the device
model's tests: test_model.py reads what each field becomes, and test_model_hostile.py
starts its mutations from them, so a field the model learns to read is both checked and
mutated from one object. A test that changes one works on a deep copy."""

from __future__ import annotations

from typing import Any

SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 3, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [
            {"name": "gpu-0",
             "attributes": {"model": {"string": "a100"}, "numa.example.com/node": {"int": 0},
                            "links": {"strings": ["nvl-0", "nvl-1"]}},
             "capacity": {"memory": {"value": "40Gi"}},
             "taints": [{"key": "maintenance", "effect": "NoSchedule"}]},
            {"name": "gpu-1", "allowMultipleAllocations": True},
        ],
    },
}

CLAIM: dict[str, Any] = {
    "metadata": {"name": "trainer-0-gpu", "namespace": "ml", "uid": "u-1"},
    "spec": {"devices": {
        "requests": [
            {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": 2,
                                         "selectors": [{"cel": {"expression": "true"}}]}},
            {"name": "nic", "firstAvailable": [
                {"name": "fast", "deviceClassName": "nic-fast"},
                {"name": "any", "deviceClassName": "nic", "allocationMode": "All"}]},
        ],
        "constraints": [{"requests": ["gpus"], "matchAttribute": "numa.example.com/node"}],
    }},
    "status": {
        "allocation": {
            "devices": {"results": [
                {"request": "gpus", "driver": "gpu.example.com", "pool": "node-1",
                 "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "p-1"}],
    },
}
