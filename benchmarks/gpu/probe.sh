#!/bin/bash
# The issue-17 table on the H200 (docs/benchmarks.md, "Every speculator on the H200"): runs
# benchmarks/gpu/probe_table.py (waves of benchmarks/gpu/spec_probe.py engines, measured one at a time) for one
# installed vLLM. On the GPU machine, project root, after ../shared/gpu/stage-wheels' install:
#   benchmarks/gpu/probe.sh LABEL PYTHONPATH OUTDIR WAVE [WAVE ...]
#   benchmarks/gpu/probe.sh v032 /tmp/site $OUT baseline,draft-k3-v2,draft-k3-v1,draft-k3-v1-during-start,pard-k5,eagle-k3
#   benchmarks/gpu/probe.sh v033 /tmp/site33:/tmp/site $OUT baseline,draft-k3-v2,...
# WAVE: spec_probe.py config names (spec_probe.py --list), started together. Results accumulate in
# /tmp/probe-LABEL/LABEL.json over the calls on one machine; every call copies them to
# OUTDIR/h200-LABEL-probe.json (after each config) and its logs to OUTDIR/h200-LABEL-logs-N.tar.gz.
# DEADLINE_S (default 550): seconds after which the driver starts nothing more (keep it under the call's limit).
# PROBE_ARGS: extra spec_probe.py arguments for every config, e.g. PROBE_ARGS="--warmups 3".
set -uo pipefail
label=$1; export PYTHONPATH=$2; outdir=$3; shift 3
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}  # several engines compile at once
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1  # the lent machines' rule
work=/tmp/probe-$label
mkdir -p "$work" "$outdir"
n=$(find "$work" -maxdepth 1 -name 'logs-*' -type d | wc -l)
waves=()
for w in "$@"; do waves+=(--wave "$w"); done
python3 -c "import vllm, torch; print('$label: vllm', vllm.__version__, 'torch', torch.__version__)" 2>&1 | tail -1
python3 benchmarks/gpu/probe_table.py --label "$label" --out "$work/$label.json" --copy-to "$outdir/h200-$label-probe.json" \
  --work "$work" --logs "$work/logs-$n" --pack-logs "$outdir/h200-$label-logs-$n.tar.gz" \
  --deadline-s "${DEADLINE_S:-550}" --probe-args "${PROBE_ARGS:-}" "${waves[@]}"
