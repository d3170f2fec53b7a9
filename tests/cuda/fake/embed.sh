#!/bin/bash
# tests/cuda/fake/embed.sh — the embedding path on the cuda target:
# examples/embed (its own CMake build, -DTRAINC_TARGET=cuda: `trainc
# compile --emit=lib --target=cuda` of examples/mlp.model, 300 AdamW steps
# through trn_create/trn_step, accuracy by trn_predict, a checkpoint saved
# and loaded into a second session) run
#   1. on this machine, no driver: device "auto" trains on the CPU with the
#      losses of device "cpu", bit for bit and without a warning; device
#      "cuda" exits 1 saying there is no CUDA driver (where a driver and a
#      GPU are there, the "cuda" run succeeds and these checks are skipped);
#   2. on the fake driver and cuBLASLt (run.sh's, built with the kernels of
#      `trainc compile --emit=cuda` of the same model): device "cuda" trains,
#      its kernels launched on the fake GPU, with the CPU's losses within
#      LIMIT (relative).
# usage: embed.sh TRAINC WORKDIR LIMIT
# CC, CXX: the compilers; CUDA_INCLUDE: where cuda.h and cublasLt.h are;
# FAKE_LDFLAGS: what linking with the runtime needs (the sanitizers).
set -u
trainc=$1 dir=$2 limit=$3
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/tests/cuda/fake emu=$root/tests/cuda/emu
cxx=${CXX:-g++} inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 2
[ -f "$inc/cuda.h" ] || { echo "no cuda.h in $inc: skipped"; exit 77; }
unset TRAINC_LIBCUDA TRAINC_CUBLASLT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }
cmake -S "$root/examples/embed" -B embed -DTRAINC="$trainc" -DTRAINC_TARGET=cuda ${CC:+-DCMAKE_C_COMPILER="$CC"} \
    -DCMAKE_EXE_LINKER_FLAGS="${FAKE_LDFLAGS:-}" > build.log 2>&1 && cmake --build embed >> build.log 2>&1 ||
    { cat build.log; echo "FAIL: examples/embed with -DTRAINC_TARGET=cuda"; exit 1; }
check "grep -q 'trn_cuda_module_mlp = ' embed/gen/mlp.c && [ -f embed/gen/trainc_cuda.h ]" "the library holds the CUDA module, trainc_cuda.h beside it"
losses() { sed -n 's/^step *[0-9]*  loss //p' "$1" | tr '\n' ' '; }

# 1. no driver here
./embed/embed cpu.safetensors cpu > cpu.out 2> cpu.err
check "[ $? -eq 0 ]" "device cpu trains (exit 0)"
cat cpu.out
./embed/embed cuda.safetensors cuda > cuda.out 2> cuda.err
rc=$?
if [ $rc -eq 0 ]; then
    echo "a CUDA driver and GPU are here: the no-driver checks skipped"
else
    cat cuda.err
    check "[ $rc -eq 1 ] && grep -q '^embed: device cuda: no CUDA driver on this machine' cuda.err" "device cuda fails cleanly: exit 1 (got $rc), no driver said"
    ./embed/embed auto.safetensors auto > auto.out 2> auto.err
    check "[ $? -eq 0 ]" "device auto trains (exit 0)"
    check "! grep -q warning auto.err" "device auto says nothing of a GPU this machine does not have"
    check "grep -q '^embed: training on cpu (device auto)' auto.err && grep -q '^embed: training on cpu (device cpu)' cpu.err" "trn_device: auto chose the CPU"
    check "[ -n \"\$(losses cpu.out)\" ] && [ \"\$(losses auto.out)\" = \"\$(losses cpu.out)\" ] && cmp -s auto.out <(sed s/cpu.safetensors/auto.safetensors/ cpu.out) && cmp -s auto.safetensors cpu.safetensors" \
        "device auto: the CPU's losses, accuracy and checkpoint, bit for bit"
fi

# 2. the fake driver and cuBLASLt, with this model's kernels
"$trainc" compile --emit=cuda --target=cuda "$root/examples/mlp.model" -o mlp > emit.log 2>&1 || { cat emit.log; echo "FAIL: --emit=cuda"; exit 1; }
awk -f "$emu/dispatch.awk" mlp.cu > mlp.emu.h || exit 1
$cxx -std=c++17 -O1 -w -fPIC -I"$root/runtime" -I"$emu" -I. -DEMU_KERNELS='"mlp.cu"' -DEMU_DISPATCH='"mlp.emu.h"' \
    -c "$here/fake_kernels.cpp" -o fake_kernels.o || { echo "FAIL: g++ on the CUDA C"; exit 1; }
$cxx -std=c++17 -O1 -Wall -fPIC -I"$inc" -c "$here/fake_cuda.cpp" -o fake_cuda.o || { echo "FAIL: g++ on fake_cuda.cpp"; exit 1; }
$cxx -shared -Wl,--version-script="$here/exports.map" fake_cuda.o fake_kernels.o -o libfakecuda.so || { echo "FAIL: link libfakecuda.so"; exit 1; }
FAKE_CUDA_KILL_AT=0 TRAINC_LIBCUDA=$PWD/libfakecuda.so TRAINC_CUBLASLT=$PWD/libfakecuda.so ./embed/embed fake.safetensors cuda > fake.out 2> fake.err
rc=$?
cat fake.out fake.err
check "[ $rc -eq 0 ]" "device cuda on the fake GPU trains, reaches the accuracy and reloads its checkpoint (exit 0, got $rc)"
check "grep -q '^fake-cuda: [1-9][0-9]* launches$' fake.err" "its kernels ran on the fake GPU"
check "grep -q '^embed: training on cuda (device cuda)' fake.err" "trn_device says cuda"
c=$(losses cpu.out) f=$(losses fake.out)
awk -v c="$c" -v e="$f" -v lim="$limit" 'BEGIN {
    n = split(c, a, " "); m = split(e, b, " "); w = 0
    for (i = 1; i <= n; i++) { d = a[i] - b[i]; if (d < 0) d = -d; r = d / (a[i] < 0 ? -a[i] : a[i]); if (r > w) w = r }
    printf "losses, cpu:      %s\nlosses, fake GPU: %s\nmax relative difference %.3g (limit %g)\n", c, e, w, lim
    exit !(n > 0 && n == m && w <= lim) }'
check "[ $? -eq 0 ]" "the fake GPU's losses are the CPU's within $limit"
exit $fail
