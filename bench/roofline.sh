#!/usr/bin/env bash
# bench/roofline.sh — how much work a training step of GPT-2 small (batch
# 16 x 1024, bf16, every pass on, the cuda target) is, from its compiled
# CUDA module, and the roofline's bound on its time at a GPU's peaks:
# FLOPs of the products and of attention, bytes of the buffers its kernels
# read and write, and the sum over kernels of the larger of FLOPs / peak
# FLOP/s and bytes / peak bandwidth (bench/roofline.c).  A bound at the
# datasheet's peaks, known at compile time: nothing runs on a GPU, and no
# step is that fast.  With it, the MFU that the bound allows (6 N + 6 L T C
# FLOPs a token over 989 TFLOP/s, as tests/gpu/run.sh counts, whatever the
# peaks given) and the step time that 45% MFU needs; and the bound per op
# (named as run.sh's profile names them).
#
#   bench/roofline.sh [PEAK_TFLOPS=989] [PEAK_TB_PER_S=4.8] [trainc compile options...]
#   (the defaults: an H200's dense bf16 and its HBM3e; options such as
#   `--set fusion=0` show the traffic without a pass; the MFU line counts
#   16 x 1024 tokens and one micro-batch a step)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pf=${1:-989} pb=${2:-4.8}
shift $(( $# < 2 ? $# : 2 ))
for v in "$pf" "$pb"; do   # the peaks come first: `bench/roofline.sh 989 4.8 --set fusion=0`
    [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "bench/roofline.sh: the peaks (TFLOP/s, TB/s) come first, as numbers: not '$v'" >&2; exit 2; }
done
build=${TRAINC_BUILD:-$root/build}
[ -x "$build/tools/trainc" ] || "$root/scripts/build.sh" "$build" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$build/tools/trainc" compile "$root/examples/gpt2.model" -D batch=16 --target=cuda --precision=bf16 --arch=sm_90 "$@" --emit=c -o g >/dev/null 2> compile.err ||
    { grep -v ': note: ' compile.err >&2; exit 1; }
cc -O0 -w -I"$root/runtime" -Dmain=trn_generated_main -c g.c -o g.o
cc -O1 -I"$root/runtime" -DTRN_MODULE=trn_cuda_module_gpt2 "$root/bench/roofline.c" g.o "$build/runtime/libtrainc_rt.a" -fopenmp -lm -ldl -lpthread -o roofline
./roofline "$pf" "$pb" kernels > all.jsonl
grep -v '"kernel"' all.jsonl
python3 - all.jsonl "$pf" "$pb" "$root/tests/gpu" <<'PY'
import json, sys
allrows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in allrows if "kernel" not in r]
# per op, as tests/gpu/run.sh's profile names them (products together)
sys.path.insert(0, sys.argv[4])
from records import op
ops = {}
for r in allrows:
    if "kernel" in r:
        o = ops.setdefault((r["schedule"], op(r)), [0, 0.0, 0.0, 0.0])
        o[0] += 1; o[1] += r["flops"]; o[2] += r["bytes"]; o[3] += r["bound_ms"]
print(f"{'schedule':<8} {'op':<36} {'kernels':>7} {'TFLOP':>8} {'GB':>8} {'bound ms':>9}")
for (s, name), o in sorted(ops.items(), key=lambda x: -x[1][3]):
    print(f"{s:<8} {name:<36} {o[0]:7d} {o[1] / 1e12:8.3f} {o[2] / 1e9:8.3f} {o[3]:9.3f}")
ms = sum(r["bound_ms"] for r in rows)   # the micro-batch and, with grad_accum > 1, the update
# GPT-2 small: N = 123,653,376 weights that multiply, L = 12, T = 1024, C = 768; 16,384 tokens a step
flops = (6 * 123653376 + 6 * 12 * 1024 * 768) * 16384
# MFU as the issue counts it: against the H200's 989 TFLOP/s whatever the
# peaks given for the bound (the measured ceilings, say)
need = flops / (0.45 * 989e12) * 1e3
print(f"step: at least {ms:.2f} ms at {sys.argv[2]} TFLOP/s and {sys.argv[3]} TB/s; MFU (of 989 TFLOP/s) at most {100 * flops / (ms / 1e3) / 989e12:.1f}%; "
      f"45% MFU needs a step of {need:.2f} ms ({need / ms:.2f}x the bound)")
PY
