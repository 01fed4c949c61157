#!/usr/bin/env bash
# The GPU image's own layers (the Dockerfile with DEVICE=gpu) built where no registry can be reached, on a
# stand-in for its base `vllm/vllm-openai:v0.34.0`: Debian 12 (scripts/container_base.sh), Python 3.11 and
# `pip install vllm==0.34.0` (the CUDA wheel from PyPI, the release the official image carries). Then checks
# what can be checked without a GPU: tini is the entrypoint, the HEALTHCHECK is set, vLLM 0.34.0 imports with
# gradio, the offline model was converted at build time, the app runs as uid 1000.
#   scripts/container_gpu_standin.sh            -> localhost/spec-playground:gpu-standin
# Settings: ENGINE=podman BASE_IMAGE=localhost/debian-base:bookworm STANDIN=localhost/vllm-openai-standin:v0.34.0
#           IMAGE=localhost/spec-playground:gpu-standin  EXTRA_CA=(pip's global.cert)  RUNTIME=runc
# Not built on the development machine: its registry doesn't serve vLLM 0.34.0's pinned flashinfer-python==0.7.3
# (2026-12-07; for 0.32.0 it was torch 2.13.0's nvidia-nccl-cu13==2.29.7), so `pip install vllm==0.34.0` (CUDA)
# can't resolve there (docs/hosting.md).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${ENGINE:-podman}
base=${BASE_IMAGE:-localhost/debian-base:bookworm}
standin=${STANDIN:-localhost/vllm-openai-standin:v0.34.0}
image=${IMAGE:-localhost/spec-playground:gpu-standin}
ca=${EXTRA_CA:-$(python3 -m pip config get global.cert 2>/dev/null || echo /etc/ssl/certs/ca-certificates.crt)}
log() { printf '[container_gpu_standin %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

IMAGE=$base scripts/container_base.sh  # kept when it exists
# runc: crun refuses this hybrid-cgroup host (container_check.sh tries both); the CA bundle for pip's TLS proxy
opts=(--format docker --runtime "${RUNTIME:-runc}" -v "$(realpath "$ca"):/tmp/host-ca.crt:ro")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/Containerfile" <<EOF
FROM $base
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:\$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN pip install --no-cache-dir --cert /tmp/host-ca.crt vllm==0.34.0 \
    && python -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
EOF
t0=$(date +%s)
log "stand-in base: $standin"
"$engine" build "${opts[@]}" -t "$standin" "$work"
t1=$(date +%s)
log "the GPU image on it: $image"
"$engine" build "${opts[@]}" --build-arg DEVICE=gpu --build-arg "GPU_BASE_IMAGE=$standin" \
  --build-arg "PIP_OPTIONS=--cert /tmp/host-ca.crt" -t "$image" .
t2=$(date +%s)

run=("$engine" run --rm --runtime "${RUNTIME:-runc}" --network none)
echo "stand-in build:    $((t1 - t0)) s"
echo "GPU image build:   $((t2 - t1)) s"
echo "image size:        $("$engine" image inspect --format '{{.Size}}' "$image" | awk '{printf "%.2f GB", $1 / 1e9}')"
echo "entrypoint, cmd:   $("$engine" image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' "$image")"
echo "healthcheck:       $("$engine" image inspect --format '{{json .Config.Healthcheck.Test}}' "$image")"
echo "packages:          $("${run[@]}" --entrypoint python3 "$image" -c \
  'import vllm, torch, gradio; print("vllm", vllm.__version__, "torch", torch.__version__, "gradio", gradio.__version__)' 2>/dev/null | tail -n1)"
echo "inside:            $("${run[@]}" --entrypoint sh "$image" -c \
  'echo "$(command -v tini) user=$(id -un) uid=$(id -u) models=$(ls .cache/models | tr "\n" " ")"')"
