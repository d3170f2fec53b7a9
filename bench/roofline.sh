#!/usr/bin/env bash
# bench/roofline.sh — how much work a training step of GPT-2 small (batch
# 16 x 1024, bf16, every pass on, the cuda target) is, from its compiled
# CUDA module, and the roofline's bound on its time at a GPU's peaks:
# FLOPs of the products and of attention, bytes of the buffers its kernels
# read and write, and the sum over kernels of the larger of FLOPs / peak
# FLOP/s and bytes / peak bandwidth (bench/roofline.c).  A bound at the
# datasheet's peaks, known at compile time: nothing runs on a GPU, and no
# step is that fast.  With it, the MFU that the bound allows (6 N + 6 L T C
# FLOPs a token, as tests/gpu/run.sh counts) and the step time that 45%
# MFU needs.
#
#   bench/roofline.sh [PEAK_TFLOPS=989] [PEAK_TB_PER_S=4.8] [trainc compile options...]
#   (the defaults: an H200's dense bf16 and its HBM3e; options such as
#   `--set fusion=0` show the traffic without a pass; the MFU line counts
#   16 x 1024 tokens and one micro-batch a step)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pf=${1:-989} pb=${2:-4.8}
shift $(( $# < 2 ? $# : 2 ))
build=${TRAINC_BUILD:-$root/build}
[ -x "$build/tools/trainc" ] || "$root/scripts/build.sh" "$build" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$build/tools/trainc" compile "$root/examples/gpt2.model" -D batch=16 --target=cuda --precision=bf16 --arch=sm_90 "$@" --emit=c -o g >/dev/null 2>&1
cc -O0 -w -I"$root/runtime" -Dmain=trn_generated_main -c g.c -o g.o
cc -O1 -I"$root/runtime" -DTRN_MODULE=trn_cuda_module_gpt2 "$root/bench/roofline.c" g.o "$build/runtime/libtrainc_rt.a" -fopenmp -lm -ldl -lpthread -o roofline
./roofline "$pf" "$pb" | tee rows.jsonl
python3 - rows.jsonl "$pf" "$pb" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
pf = float(sys.argv[2]) * 1e12
ms = sum(r["bound_ms"] for r in rows)   # the micro-batch and, with grad_accum > 1, the update
# GPT-2 small: N = 123,653,376 weights that multiply, L = 12, T = 1024, C = 768; 16,384 tokens a step
flops = (6 * 123653376 + 6 * 12 * 1024 * 768) * 16384
need = flops / (0.45 * pf) * 1e3
print(f"step: at least {ms:.2f} ms at {sys.argv[2]} TFLOP/s and {sys.argv[3]} TB/s; MFU at most {100 * flops / (ms / 1e3) / pf:.1f}%; "
      f"45% MFU needs a step of {need:.2f} ms ({need / ms:.2f}x the bound)")
PY
