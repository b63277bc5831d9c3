"""The Kubernetes Python client, re-exported as ``Any`` on purpose.

The harness calls the client with ``_preload_content=False`` (raw JSON, no model
deserialisation, which costs milliseconds per object at hundreds of pods) and passes plain
dicts as bodies. The client's annotations model neither, so checking calls against them
would only produce noise; the harness's own code stays strictly typed.
"""

from typing import Any

import kubernetes as _kubernetes
import kubernetes.client as _client
import kubernetes.config as _config

client: Any = _client
config: Any = _config
kubernetes: Any = _kubernetes
ApiException: Any = _client.ApiException
