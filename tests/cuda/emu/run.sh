#!/bin/bash
# tests/cuda/emu/run.sh — every kernel of a model, in its CUDA form, run on
# the CPU by the emulation of tests/cuda/emu and compared with the C
# backend's kernel by tests/gpu/kcheck.c (the GPU check's own program and
# tolerances), without a GPU:
#   run.sh CUDA_EMIT RTLIB WORKDIR MODEL.model NAME SYMBOL [cuda_emit args...]
# CUDA_EMIT: build*/tests/cuda_emit; RTLIB: the runtime's libtrainc_rt.a;
# SYMBOL: the model's descriptor (trn_model_gpt2).  The CUDA C is built for
# the host with g++ (cuda_emu.h: a block's threads are fibers), the C
# backend's with cc; prints kcheck's summary, exits 1 when a kernel differs
# (or when a launch gives other bytes with its blocks, warps and lanes in
# reverse order: emu_device.cpp).  EMU_TSAN=1: under ThreadSanitizer.
# EMU_EXACT=PATTERN: the kernels whose names match (grep -E) must agree
# with the C backend's to the bit (relative error 0), and one at least must.
# (Training on the emulated GPU, through runtime/cuda.c: tests/cuda/fake.)
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
# EMU_TSAN=1: the CUDA C under ThreadSanitizer (cuda_emu.h), which reports
# two threads of a block accessing one element with no barrier between
tsan=""
[ "${EMU_TSAN:-0}" = 1 ] && tsan="-fsanitize=thread -g" && export OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}"
$cxx -std=c++17 -O1 -w $tsan -I"$root/runtime" -I"$here" -I. -DEMU_KERNELS="\"$name.cu\"" -DEMU_DISPATCH="\"$name.emu.h\"" \
    -c "$here/emu_device.cpp" -o emu_device.o || { echo "FAIL: g++ on the CUDA C"; exit 1; }
$cc -std=c11 -O1 -fopenmp -D_GNU_SOURCE -I"$root/runtime" -c "$name.c" -o model.o || { echo "FAIL: cc on the C"; exit 1; }
$cc -std=c11 -O1 -D_GNU_SOURCE -I"$root/runtime" -include "$here/emu_rename.h" -DTRN_MODEL="$sym" -c "$root/tests/gpu/kcheck.c" -o kcheck.o ||
    { echo "FAIL: cc on kcheck"; exit 1; }
$cxx -fopenmp $tsan kcheck.o model.o emu_device.o "$rtlib" -lm -lpthread -ldl -o ekcheck || { echo "FAIL: link"; exit 1; }
./ekcheck "$name.jsonl" 1234
rc=$?
grep '"ok":false' "$name.jsonl" | head -20
if [ -n "${EMU_EXACT:-}" ]; then
  ex=$(grep -E "\"kernel\":\"[^\"]*($EMU_EXACT)" "$name.jsonl")
  [ -n "$ex" ] || { echo "FAIL: no kernel matches EMU_EXACT=$EMU_EXACT"; exit 1; }
  if grep -v '"rel_err":0.000e+00' <<< "$ex"; then echo "FAIL: not bit-identical to the C backend (EMU_EXACT=$EMU_EXACT)"; rc=1
  else echo "bit-identical: $(wc -l <<< "$ex") kernels matching $EMU_EXACT"; fi
fi
exit $rc
