#!/bin/bash
# tests/cuda/emu/run.sh — every kernel of a model, in its CUDA form, run on
# the CPU by the emulation of tests/cuda/emu and compared with the C
# backend's kernel by tests/gpu/kcheck.c (the GPU check's own program and
# tolerances), without a GPU:
#   run.sh CUDA_EMIT RTLIB WORKDIR MODEL.model NAME SYMBOL [cuda_emit args...]
# CUDA_EMIT: build*/tests/cuda_emit; RTLIB: the runtime's libtrainc_rt.a;
# SYMBOL: the model's descriptor (trn_model_gpt2).  The CUDA C is built for
# the host with g++ (cuda_emu.h: a block's threads are fibers), the C
# backend's with cc; prints kcheck's summary, exits 1 when a kernel differs.
# With EMU_STEPS=N (and EMU_DATA=tokens.bin) it also trains N steps with
# --device cuda on the emulated GPU and --device cpu, and prints both
# losses (EMU_LIMIT, default 1e-4: the largest relative difference allowed).
set -u
emit=$1 rtlib=$2 dir=$3 model=$4 name=$5 sym=$6
shift 6
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/tests/cuda/emu
mkdir -p "$dir" && cd "$dir" || exit 2
"$emit" "$model" "$name" cuda "$@" > emit.log 2>&1 || { cat emit.log; echo "FAIL: cuda_emit cuda"; exit 1; }
"$emit" "$model" "$name" lib "$@" >> emit.log 2>&1 || { cat emit.log; echo "FAIL: cuda_emit lib"; exit 1; }
# a wrapper per __global__ function: its pointer arguments from void *a[]
awk -f "$here/dispatch.awk" "$name.cu" > "$name.emu.h" || exit 1
cxx=${CXX:-g++}
cc=${CC:-cc}
$cxx -std=c++17 -O1 -w -I"$root/runtime" -I"$here" -I. -DEMU_KERNELS="\"$name.cu\"" -DEMU_DISPATCH="\"$name.emu.h\"" \
    -c "$here/emu_device.cpp" -o emu_device.o || { echo "FAIL: g++ on the CUDA C"; exit 1; }
$cc -std=c11 -O1 -fopenmp -D_GNU_SOURCE -I"$root/runtime" -c "$name.c" -o model.o || { echo "FAIL: cc on the C"; exit 1; }
$cc -std=c11 -O1 -D_GNU_SOURCE -I"$root/runtime" -include "$here/emu_rename.h" -DTRN_MODEL="$sym" -c "$root/tests/gpu/kcheck.c" -o kcheck.o ||
    { echo "FAIL: cc on kcheck"; exit 1; }
$cxx -fopenmp kcheck.o model.o emu_device.o "$rtlib" -lm -lpthread -ldl -o ekcheck || { echo "FAIL: link"; exit 1; }
./ekcheck "$name.jsonl" 1234
rc=$?
grep '"ok":false' "$name.jsonl" | head -20
if [ -n "${EMU_STEPS:-}" ]; then
    printf '#include "trainc_rt.h"\nextern const TrnModel %s;\nint main(int argc, char **argv) { return trn_main(argc, argv, &%s, NULL); }\n' \
        "$sym" "$sym" > main.c
    $cc -std=c11 -O1 -I"$root/runtime" -c main.c -o main.o || exit 1
    $cxx -fopenmp main.o model.o emu_device.o "$rtlib" -lm -lpthread -ldl -o train || { echo "FAIL: link train"; exit 1; }
    args="--data $EMU_DATA --steps $EMU_STEPS --lr 1e-3 --warmup 0 --schedule constant --seed 7 --quiet"
    ./train $args --device cpu --metrics cpu.jsonl > cpu.log 2>&1 || { cat cpu.log; exit 1; }
    ./train $args --device cuda --metrics emu.jsonl > emu.log 2>&1 || { cat emu.log; exit 1; }
    c=$(grep -o '"loss":[^,]*' cpu.jsonl | cut -d: -f2 | tr '\n' ' ')
    e=$(grep -o '"loss":[^,]*' emu.jsonl | cut -d: -f2 | tr '\n' ' ')
    echo "losses, cpu:      $c"
    echo "losses, emulated: $e"
    awk -v c="$c" -v e="$e" -v lim="${EMU_LIMIT:-1e-4}" 'BEGIN {
        n = split(c, a, " "); m = split(e, b, " "); w = 0
        for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; r = d / (a[i] < 0 ? -a[i] : a[i]); if (r > w) w = r }
        printf "end to end: %d steps, max relative difference %.3g (limit %g)\n", n, w, lim
        exit !(n > 0 && n == m && w <= lim) }' || rc=1
fi
exit $rc
