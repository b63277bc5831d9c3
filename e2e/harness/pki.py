"""Certificates and keys for the local control plane, made with the ``openssl`` CLI.

Why openssl and not the ``cryptography`` package: the latter is not a dependency of the
project (the kubernetes client does not pull it in), while openssl is present on every CI
image and developer machine. Keys are ECDSA P-256 for the TLS certificates (generated in
milliseconds) and RSA 2048 for the service-account signing key, the algorithm every
Kubernetes token consumer accepts.

Layout (all in one directory):

* ``ca.crt`` / ``ca.key``: the cluster CA; also the client CA of the API server.
* ``apiserver.crt`` / ``.key``: serving certificate, SANs 127.0.0.1, localhost and the
  in-cluster names of the ``kubernetes`` service.
* ``admin.crt`` / ``.key``: O=system:masters, used by the tests and the controllers.
* ``kube-scheduler.crt``, ``kube-controller-manager.crt``: the identities the stock RBAC
  bootstrap policy grants to those components, for tests that want least privilege.
* ``sa.key`` / ``sa.pub``: service-account token signing pair.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml


class PKIError(RuntimeError):
    """openssl is missing or failed."""


def _openssl(*args: str | Path, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise PKIError("openssl not found on PATH; install the openssl package")
    res = subprocess.run(
        [exe, *(str(a) for a in args)], cwd=cwd, capture_output=True, text=True, check=False
    )
    if res.returncode != 0:
        raise PKIError(f"openssl {' '.join(map(str, args))} failed:\n{res.stderr}")


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class PKI:
    """Paths of everything :func:`generate_pki` wrote."""

    dir: Path
    ca: CertPair
    apiserver: CertPair
    admin: CertPair
    scheduler: CertPair
    controller_manager: CertPair
    sa_key: Path
    sa_pub: Path


def _new_ec_key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", path, cwd=cwd)


def _signed_cert(
    d: Path, name: str, subject: str, ca: CertPair, ext_lines: list[str], days: int
) -> CertPair:
    """Key + CSR + CA-signed certificate carrying the given v3 extensions."""
    key, csr, crt, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt", d / f"{name}.ext"
    _new_ec_key(key, d)
    _openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr, cwd=d)
    ext.write_text("\n".join(ext_lines) + "\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
             "-days", str(days), "-sha256", "-extfile", ext, "-out", crt, cwd=d)
    csr.unlink()
    ext.unlink()
    return CertPair(crt, key)


def _client_cert(d: Path, name: str, subject: str, ca: CertPair, days: int) -> CertPair:
    return _signed_cert(d, name, subject, ca, [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=clientAuth",
    ], days)


def generate_pki(d: Path, service_ip: str = "10.0.0.1", days: int = 30) -> PKI:
    """Create a fresh CA and every certificate/key the control plane needs in ``d``.

    A fresh set per cluster keeps runs independent; 30 days is ample for a test run.
    """
    d.mkdir(parents=True, exist_ok=True)
    ca = CertPair(d / "ca.crt", d / "ca.key")
    _new_ec_key(ca.key, d)
    _openssl("req", "-x509", "-new", "-key", ca.key, "-subj", "/CN=gang-extender-e2e-ca",
             "-days", str(days), "-sha256",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             "-out", ca.cert, cwd=d)
    sans = ",".join([
        "IP:127.0.0.1", f"IP:{service_ip}", "DNS:localhost", "DNS:kubernetes",
        "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ])
    apiserver = _signed_cert(d, "apiserver", "/CN=kube-apiserver", ca, [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth",
        f"subjectAltName={sans}",
    ], days)
    admin = _client_cert(d, "admin", "/O=system:masters/CN=kubernetes-admin", ca, days)
    scheduler = _client_cert(d, "kube-scheduler", "/CN=system:kube-scheduler", ca, days)
    kcm = _client_cert(
        d, "kube-controller-manager", "/CN=system:kube-controller-manager", ca, days
    )
    sa_key, sa_pub = d / "sa.key", d / "sa.pub"
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", sa_key, cwd=d)
    _openssl("pkey", "-in", sa_key, "-pubout", "-out", sa_pub, cwd=d)
    return PKI(d, ca, apiserver, admin, scheduler, kcm, sa_key, sa_pub)


def generate_serving_pki(d: Path, name: str, sans: list[str],
                         days: int = 30) -> tuple[CertPair, CertPair]:
    """A CA of its own and one serving certificate it signs (``tls.crt`` / ``tls.key`` in
    ``d``, the names controller-runtime's webhook server reads), for a webhook server the
    API server calls by URL. A separate CA rather than the cluster's: the caBundle handed
    to the API server then trusts this one server and nothing the cluster CA signed.
    ``sans`` are openssl SAN entries, e.g. ``IP:127.0.0.1``."""
    d.mkdir(parents=True, exist_ok=True)
    ca = CertPair(d / "ca.crt", d / "ca.key")
    _new_ec_key(ca.key, d)
    _openssl("req", "-x509", "-new", "-key", ca.key, "-subj", f"/CN={name}-ca",
             "-days", str(days), "-sha256",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             "-out", ca.cert, cwd=d)
    pair = _signed_cert(d, "tls", f"/CN={name}", ca, [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth",
        f"subjectAltName={','.join(sans)}",
    ], days)
    return ca, pair


def write_kubeconfig(path: Path, server: str, ca: Path, client: CertPair, user: str) -> Path:
    """Write a kubeconfig that uses file references (absolute paths) to the PKI.

    File references rather than embedded data keep the file short and readable when a
    developer points kubectl at it (``KUBECONFIG=<workdir>/admin.kubeconfig``).
    """
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {
            "server": server, "certificate-authority": str(ca.resolve())}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(client.cert.resolve()),
            "client-key": str(client.key.resolve())}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path
