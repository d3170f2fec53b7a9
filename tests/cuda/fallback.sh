#!/bin/bash
# tests/cuda/fallback.sh — an executable compiled with --target=cuda on this
# machine (no GPU, no driver):
#   - has no load-time dependency on libcuda or cuBLASLt (readelf -d);
#   - trains on the CPU with --device=auto, exactly as the CPU-target build;
#   - fails cleanly with --device=cuda (exit 1, a message saying why), and
#     so with the toolkit's stub libcuda in the driver's place.
# usage: fallback.sh CUDA_EMIT TOKENIZE WORKDIR
set -u
emit=$1 tokenize=$2 dir=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir" && cd "$dir" || exit 1
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
tiny="-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4"
"$emit" "$root/examples/gpt2.model" gpt2_cuda exe $tiny || { echo "FAIL: cuda-target build"; exit 1; }
"$emit" "$root/examples/gpt2.model" gpt2_cpu exe $tiny --cpu || { echo "FAIL: cpu-target build"; exit 1; }
readelf -d gpt2_cuda > deps.txt || { echo "FAIL: readelf"; exit 1; }
check "grep -q NEEDED deps.txt && ! grep -qE 'NEEDED.*(libcuda|cublas|cudart|nvrtc)' deps.txt" "no CUDA library is a load-time dependency"
check "grep -q trn_cuda_module_gpt2 <(nm gpt2_cuda)" "the executable embeds its CUDA module"
text="$root/../shared/data/tinyshakespeare.txt"
[ -f "$text" ] || { cat "$root"/examples/*.model "$root"/docs/*.md > corpus.txt; text=corpus.txt; }
"$tokenize" "$text" tok > /dev/null || exit 1
./gpt2_cuda --data tok_train.bin --steps 4 --warmup 2 --device auto --metrics auto.jsonl > auto.out 2> auto.err
check "[ $? -eq 0 ]" "--device=auto trains (exit 0)"
check "grep -q 'device cpu' auto.err" "--device=auto fell back to the CPU"
check "! grep -q warning auto.err" "--device=auto says nothing of a GPU this machine does not have"
./gpt2_cpu --data tok_train.bin --steps 4 --warmup 2 --device cpu --metrics cpu.jsonl > /dev/null 2>&1
check "[ $? -eq 0 ]" "the CPU-target executable trains (exit 0)"
check "[ \$(grep -c '\"loss\":[0-9]' auto.jsonl) -eq 4 ] && cmp -s <(grep -o '\"loss\":[^,]*' auto.jsonl) <(grep -o '\"loss\":[^,]*' cpu.jsonl)" "the same 4 finite losses as the CPU-target executable"
./gpt2_cuda --data tok_train.bin --steps 4 --device cuda > cuda.out 2> cuda.err
rc=$?
cat cuda.err
check "[ $rc -eq 1 ]" "--device=cuda exits with status 1 (got $rc)"
check "grep -q 'device cuda: ' cuda.err" "--device=cuda says why"
TRAINC_LIBCUDA=/nonexistent/libcuda.so.1 ./gpt2_cuda --data tok_train.bin --steps 1 --device cuda > /dev/null 2> cuda2.err
check "[ $? -eq 1 ] && grep -q 'no CUDA driver\|no CUDA device' cuda2.err" "a missing driver is reported, not a crash"
# the toolkit's stub libcuda (what a machine without a driver may find on
# its library path): no driver, said so; --device auto silent
stub=${CUDA_HOME:-/usr/local/cuda}/lib64/stubs/libcuda.so
if [ -f "$stub" ]; then
    TRAINC_LIBCUDA=$stub ./gpt2_cuda --steps 0 --device cuda > /dev/null 2> stub.err
    check "[ $? -eq 1 ] && grep -q 'no CUDA driver on this machine (cuInit: CUDA_ERROR_STUB_LIBRARY' stub.err" "the toolkit's stub libcuda is no driver"
    TRAINC_LIBCUDA=$stub ./gpt2_cuda --steps 0 --device auto > /dev/null 2> stub_auto.err
    check "[ $? -eq 0 ] && grep -q 'device cpu' stub_auto.err && ! grep -q warning stub_auto.err" "--device=auto with the stub: the CPU, without a warning"
fi
./gpt2_cpu --data tok_train.bin --steps 1 --device cuda > /dev/null 2> cpu.err
check "[ $? -eq 1 ] && grep -q 'without a CUDA module' cpu.err" "a CPU-target executable says it has no CUDA module"
[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
