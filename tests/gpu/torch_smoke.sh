#!/bin/bash
# tests/gpu/torch_smoke.sh TRAINC — the benchmark's PyTorch reference
# (bench/gpt2_torch.py) run where there is no GPU (CTest: gpu_torch_smoke):
# on the CPU, eager, at a tiny size, with the vocabulary as it is and padded
# by hand (--vocab 50304), and under torch.compile where the PyTorch has it.
# Checks its JSON line (what tests/gpu/run.sh parses), that its model has
# trainc's parameter count for the same sizes (`trainc ir --stats` of
# examples/gpt2.model), and that the first losses are those of an untrained
# model (near ln(vocab)); and tests/gpu/ceilings.py on the CPU at a small
# size.  The benchmark itself runs only on the device;
# this catches a script that cannot run at all before a GPU session is
# spent on it.  Skips (77) when no python3 can import torch (Debian's
# python3-torch: scripts/setup.sh installs it when it can).
set -u
trainc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/torch/common.sh"
torch_python torch
sizes="--layers 1 --heads 2 --dim 64 --seq 32 --batch 2"
modes=eager
"$py" -c 'import sys, torch; sys.exit(0 if hasattr(torch, "compile") else 1)' && modes="eager compile"
fail=0
for mode in $modes; do
    for v in 50257 50304; do
        out=$("$py" "$root/bench/gpt2_torch.py" --device cpu --mode $mode --vocab $v $sizes --steps 2 --warmup 1 2> /tmp/torch_smoke.$$.err)
        rc=$?
        [ $rc -eq 0 ] || { echo "FAIL: $mode, vocab $v: rc $rc"; tail -5 /tmp/torch_smoke.$$.err; fail=1; continue; }
        want=$("$trainc" ir --stats "$root/examples/gpt2.model" -D vocab=$v -D layers=1 -D heads=2 -D dim=64 -D seq=32 -D batch=2 2>&1 > /dev/null |
               awk '/^params:/ {gsub(",", "", $2); print $2}')
        echo "$mode, vocab $v: $out"
        "$py" - "$out" "$mode" "$v" "$want" <<'PY' || fail=1
import json, math, sys
r = json.loads(sys.argv[1])
mode, v, want = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
errs = []
impl = "pytorch-" + mode + ("" if v == 50257 else f"-v{v}")
if r.get("impl") != impl: errs.append(f"impl {r.get('impl')}, not {impl}")
if r.get("params") != want: errs.append(f"{r.get('params')} parameters, trainc's model has {want}")
for k in ("step_ms", "tokens_per_s", "mfu", "last_loss"):
    if not isinstance(r.get(k), (int, float)) or not math.isfinite(r[k]) or r[k] <= 0: errs.append(f"{k} = {r.get(k)}")
if isinstance(r.get("last_loss"), float) and abs(r["last_loss"] - math.log(min(v, 50257))) > 1: errs.append(f"loss {r['last_loss']} far from ln(vocab)")
for e in errs: print("FAIL:", e)
sys.exit(1 if errs else 0)
PY
    done
done
# --data (run.sh gives it the token file trainc trains on): its batches
# read, the first loss an untrained model's; a file that is not one refused
"$py" -c '
import array, sys
h = array.array("i", [20240520, 1, 5000] + [0] * 253)
t = array.array("H", [(i * 7) % 256 for i in range(5000)])
open(sys.argv[1], "wb").write(h.tobytes() + t.tobytes())
open(sys.argv[2], "wb").write(b"not a token file" * 100)' /tmp/torch_smoke.$$.bin /tmp/torch_smoke.$$.bad
out=$("$py" "$root/bench/gpt2_torch.py" --device cpu --mode eager $sizes --steps 2 --warmup 1 --data /tmp/torch_smoke.$$.bin 2> /tmp/torch_smoke.$$.err)
echo "eager, --data: $out"
"$py" -c '
import json, math, sys
r = json.loads(sys.argv[1])
ok = r.get("data", "").endswith(".bin") and isinstance(r.get("last_loss"), float) and abs(r["last_loss"] - math.log(50257)) < 1
sys.exit(0 if ok else 1)' "$out" || { echo "FAIL: --data"; tail -5 /tmp/torch_smoke.$$.err; fail=1; }
if "$py" "$root/bench/gpt2_torch.py" --device cpu --mode eager $sizes --steps 1 --warmup 0 --data /tmp/torch_smoke.$$.bad > /dev/null 2> /tmp/torch_smoke.$$.err ||
   ! grep -q "is not a token file" /tmp/torch_smoke.$$.err; then
    echo "FAIL: --data of a file that is not a token file"; fail=1
fi
rm -f /tmp/torch_smoke.$$.bin /tmp/torch_smoke.$$.bad
# tests/gpu/ceilings.py (run.sh's ceilings): on the CPU at a small size its
# JSON line has positive figures; without --device, where there is no GPU,
# it says so in an "error" field (run.sh then records no ceilings)
out=$("$py" "$root/tests/gpu/ceilings.py" --device cpu --copy-gib 0.01 --n 128 --tokens 64 --width 32 --heads 2 --seq 32 --reps 3 --inner 2) || { echo "FAIL: ceilings.py --device cpu"; fail=1; }
echo "ceilings, cpu: $out"
"$py" -c '
import json, math, sys
r = json.loads(sys.argv[1])
bad = [k for k in ("copy_tb_per_s", "bf16_tflops", "copy_ms", "matmul_ms", "layer_products_ms", "layer_products_tflops", "attention_fwd_tflops", "attention_bwd_tflops") if not isinstance(r.get(k), float) or not math.isfinite(r[k]) or r[k] <= 0]
bad += [] if r.get("matmul_finite") is True and r.get("copy_equal") is True and r.get("copy_bytes") == 2 * (int(0.01 * 2**30) // 16 * 16) else ["matmul_finite/copy_equal/copy_bytes"]
print("FAIL: ceilings.py:", bad) if bad else None
sys.exit(1 if bad else 0)' "$out" || fail=1
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    out=$("$py" "$root/tests/gpu/ceilings.py")
    echo "ceilings, no GPU: $out"
    case $out in *'"error": "no CUDA device"'*) ;; *) echo "FAIL: ceilings.py without a GPU"; fail=1 ;; esac
fi
rm -f /tmp/torch_smoke.$$.err
[ $fail -eq 0 ] && echo "ok: bench/gpt2_torch.py runs ($modes) and builds trainc's GPT-2; tests/gpu/ceilings.py runs"
exit $fail
