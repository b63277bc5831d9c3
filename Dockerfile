# syntax=docker/dockerfile:1
# gang-extender image: the HTTP scheduler extender that runs as a sidecar of a stock
# kube-scheduler (see deploy/ and charts/gang-scheduler).
#
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t registry.example.com/gang-extender:0.1.0 .
#
# Two stages on the same slim Python base: the first builds a virtualenv with the package
# and its (wheel-only) dependencies, the second copies just that virtualenv, so the final
# image has no pip cache, no build tools and no sources.

ARG PYTHON_VERSION=3.12
ARG DEBIAN_RELEASE=bookworm

FROM python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/gang-extender
WORKDIR /src
# Dependencies first (their layer is reused while only the sources change): install what
# pyproject.toml declares, then the package itself without re-resolving.
COPY pyproject.toml README.md ./
RUN mkdir extender && touch extender/__init__.py \
 && /opt/gang-extender/bin/pip install --only-binary=:all: . \
 && /opt/gang-extender/bin/pip uninstall -y gang-extender
COPY extender ./extender
# Byte-compile once here: the root filesystem is read-only at runtime.
RUN /opt/gang-extender/bin/pip install --no-deps . \
 && /opt/gang-extender/bin/python -m pip uninstall -y pip setuptools \
 && /opt/gang-extender/bin/python -m compileall -q /opt/gang-extender/lib

FROM python:${PYTHON_VERSION}-slim-${DEBIAN_RELEASE}
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gang-extender" \
      org.opencontainers.image.description="All-or-nothing gang scheduling for Kubernetes as a kube-scheduler HTTP extender" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/gang-extender/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GANG_EXTENDER_VERSION=${VERSION}
COPY --from=build /opt/gang-extender /opt/gang-extender
# Non-root, numeric so Kubernetes can verify runAsNonRoot without an /etc/passwd lookup.
# 65532 is the conventional "nonroot" uid of distroless images (the kube-scheduler image
# runs as the same uid in deploy/).
USER 65532:65532
# 8888: extender verbs, loopback only (the kube-scheduler in the same pod calls it);
# 8080: /metrics, /healthz, /readyz on the pod IP.
EXPOSE 8080
# One process, one uvicorn server (no worker pool): the extender's state (reservations,
# held binds) lives in this process and must not be split across workers.
ENTRYPOINT ["gang-extender"]
CMD ["serve", "--listen=127.0.0.1:8888", "--metrics-listen=0.0.0.0:8080"]
