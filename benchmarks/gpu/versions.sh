#!/bin/bash
# The GPU measurements behind docs/benchmarks.md's "vLLM 0.26 against 0.32" and "Tensor parallel 2", for one
# installed vLLM; each engine measured alone (sequential schedule). On the GPU machine, project root:
#   benchmarks/gpu/versions.sh LABEL PYTHONPATH OUTDIR PART...
#   benchmarks/gpu/versions.sh v032 /tmp/site32:/tmp/site /tmp/r/v032 dummy smollm2     # one GPU
#   benchmarks/gpu/versions.sh v032 /tmp/site32:/tmp/site /tmp/r/v032 tp2               # two GPUs
# PARTs: dummy (8B-shaped presets, dummy weights: EAGLE k=3, EAGLE-3 k=5, 1B draft k=3 and k=5 on one
# resident baseline), smollm2 (smollm2-ngram on 11 varied prompts: identity and speed), tp2 (both engines on
# tensor parallel 2 over GPUs 0-1: n-gram for identity, 1B draft at draft TP 1), workloads (the bench lab's
# smollm2-ngram workloads × temperature; run on 0.32), draftsweep and draftsweep7 (draft-model k × acceptance
# × concurrency, k=7 apart to stay within one 10-minute call; run on 0.26, merged with
# `python -m specplay bench --replot OUT/draftsweep OUT/draftsweep7 --out DIR`).
set -uo pipefail
label=$1; export PYTHONPATH=$2; out=$3; shift 3
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the lent machines' rule
mkdir -p "$out"
run() {  # NAME SECONDS COMMAND...: a time limit each; a part that fails doesn't stop the next
  local name=$1 secs=$2; shift 2
  local t0=$(date +%s)
  echo "== $label $name: $*"
  timeout -s INT -k 20 "$secs" "$@" >"$out/$name.log" 2>&1
  echo "== $label $name: rc=$? in $(( $(date +%s) - t0 )) s"; grep -E "speedup median" "$out/$name.log"
}
python3 -c "import vllm, torch; print('$label: vllm', vllm.__version__, 'torch', torch.__version__, 'gpus', torch.cuda.device_count())"
for part in "$@"; do
  case $part in
    dummy) CUDA_VISIBLE_DEVICES=0 run dummy 370 python3 benchmarks/bench_prompts.py --presets \
             dummy-llama8b-eagle-k3,dummy-llama8b-eagle3-k5,dummy-llama8b-draft1b-k3,dummy-llama8b-draft1b-k5 \
             --prompts tokens:2 --max-tokens 128 --out "$out/dummy.json" ;;
    smollm2) CUDA_VISIBLE_DEVICES=0 run smollm2 190 python3 benchmarks/bench_prompts.py --presets smollm2-ngram \
             --prompts examples,code:3,rewrite:2,qa:2 --max-tokens 256 --out "$out/smollm2.json" ;;
    tp2) run tp2 420 python3 benchmarks/bench_prompts.py --presets dummy-llama8b-tp2-ngram,dummy-llama8b-tp2-draft1b \
             --prompts tokens:4 --max-tokens 256 --out "$out/tp2.json" ;;
    workloads) CUDA_VISIBLE_DEVICES=0 run workloads 420 python3 -m specplay bench --preset smollm2-ngram \
             --workloads code,chat,conversations,rewrite,summarize --n 6 --k 4 --temperature 0,0.5,1.0 \
             --max-tokens 128 --no-png --out "$out/workloads" ;;
    draftsweep) CUDA_VISIBLE_DEVICES=0 run draftsweep 540 python3 -m specplay bench --preset dummy-llama8b-draft1b-k3 \
             --k 1,3,5 --acceptance 0.5,0.7,0.9 --concurrency 1,8,32 --n 8 --max-tokens 128 --no-png --out "$out/draftsweep" ;;
    draftsweep7) CUDA_VISIBLE_DEVICES=0 run draftsweep7 300 python3 -m specplay bench --preset dummy-llama8b-draft1b-k3 \
             --k 7 --acceptance 0.5,0.7,0.9 --concurrency 1,8,32 --n 8 --max-tokens 128 --no-png --out "$out/draftsweep7" ;;
  esac
done
