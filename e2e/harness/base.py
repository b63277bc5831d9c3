"""Names every part of the harness shares: the checkout root and the harness's own error.

Why apart: the binaries finder, the CRD installer and the cluster classes all raise
:class:`HarnessError` and find files from the checkout root; defined in the control plane's
module, each of them would have to import the control plane, which imports them.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout root, found from this file so the harness works from any cwd."""

E2E_DIR = REPO_ROOT / "e2e"


class HarnessError(RuntimeError):
    """The control plane could not be set up (missing binaries, a component failed)."""
