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
#
# Every input is pinned (docs/install.md, "The image's pinned inputs"):
# * the base image by exact version tag and by digest. The digest is the multi-platform
#   index of python:3.12.14-slim-bookworm as published in the public record of the official
#   images (docker-library/repo-info, repos/python/remote/3.12.14-slim-bookworm.md, built
#   2026-08-25). It was not pulled where this file was written (no registry reachable);
#   if your registry mirror rewrites digests, override BASE_IMAGE with your mirror's.
# * Python packages by requirements.lock: exact versions and sha256 hashes of every
#   dependency and of the build backend, installed with --require-hashes (pip refuses
#   anything unlisted or whose hash differs); the package itself is then built offline,
#   with no build isolation, so nothing outside the lock is fetched.

ARG BASE_IMAGE=python:3.12.14-slim-bookworm@sha256:b64e9d3a71eddaa1b3f80c04abf292b3139e3b7c4dd272d19c31dc1f91194d1b

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/gang-extender
WORKDIR /src
# Dependencies first (their layer is reused while only the sources change).
COPY requirements.lock ./
RUN /opt/gang-extender/bin/pip install --require-hashes --only-binary=:all: --no-deps \
      -r requirements.lock
COPY pyproject.toml README.md ./
COPY extender ./extender
# Byte-compile once here: the root filesystem is read-only at runtime.
RUN /opt/gang-extender/bin/pip install --no-deps --no-build-isolation --no-index . \
 && /opt/gang-extender/bin/pip check \
 && /opt/gang-extender/bin/python -m pip uninstall -y pip setuptools wheel \
 && /opt/gang-extender/bin/python -m compileall -q /opt/gang-extender/lib

FROM ${BASE_IMAGE}
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
