#!/bin/bash
# Runs ON the GPU machine: vLLM 0.32 and the torch 2.13 stack into /tmp/site32 (put first on PYTHONPATH,
# before /tmp/site, which holds the vLLM 0.26 set and the playground's other wheels), for measuring both
# versions on one machine (benchmarks/gpu/versions.sh). The parts .gpu32/q00.. are a tar of these wheels, split
# at 61 MiB: apache-tvm-ffi==0.1.11 cuda-bindings==13.4.4 cuda-core==1.2.2 cuda-pathfinder==1.9.1 cuda-python==13.4.4 cuda-tile==1.7.0 flashinfer-python==0.7.0.post1 nccl4py==0.6.0 nccl-extensions==0.1.0 nvidia-cudnn-frontend==1.32.0 nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-nccl-cu13==2.29.7 oss-harmony==0.0.11 torch==2.13.0 torchvision==0.28.0 triton==3.7.1 vllm==0.32.0 xgrammar==0.2.8
# (22 parts, 1.3 GB; 0.26 alone: ../shared/gpu/stage-wheels, 9 parts).
set -euo pipefail
mkdir -p /tmp/gpu-parts32
cp .gpu32/q[0-9]* /tmp/gpu-parts32/ 2>/dev/null || true
if [ ! -f /tmp/site32/.installed ]; then
  t0=$(date +%s)
  mkdir -p /tmp/gpu-parts32/whl
  cat /tmp/gpu-parts32/q[0-9]* | tar xf - -C /tmp/gpu-parts32/whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site32 /tmp/gpu-parts32/whl/*.whl
  touch /tmp/site32/.installed
  echo "site32 installed in $(( $(date +%s) - t0 )) s"
fi
