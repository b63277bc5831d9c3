"""The Kubernetes Python client, re-exported as ``Any`` on purpose.

The one Kubernetes client of the tests, the harness, the demo and the benchmarks: import
it from here, not from ``kubernetes``. The only other one is
:class:`e2e.harness.rawapi.RawApi`, kept for the fake kubelet's writes by a measurement in
its docstring; the extender's own client appears only where the extender itself is under
test.

The harness calls the client with ``_preload_content=False`` (raw JSON, no model
deserialisation, which costs milliseconds per object at hundreds of pods) and passes plain
dicts as bodies. The client's annotations model neither, so checking calls against them
would only produce noise; the harness's own code stays strictly typed.
"""

from typing import Any

import kubernetes as _kubernetes
import kubernetes.client as _client
import kubernetes.config as _config
import kubernetes.dynamic as _dynamic
import kubernetes.watch as _watch

client: Any = _client
config: Any = _config
dynamic: Any = _dynamic
watch: Any = _watch
kubernetes: Any = _kubernetes
ApiException: Any = _client.ApiException
