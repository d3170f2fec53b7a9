#!/bin/bash
# tests/cuda/fake/run.sh — runtime/cuda.c against a fake CUDA driver and
# cuBLASLt (fake_cuda.cpp: the libraries' documented behaviour on the CPU,
# the model's kernels run by the emulation of tests/cuda/emu):
#   run.sh CUDA_EMIT RTLIB TOKENIZE WORKDIR MODEL.model NAME SYMBOL STEPS LIMIT [cuda_emit args...]
# 1. every kernel through trn_cuda_run_kernel against the C backend's
#    (tests/gpu/kcheck.c, the GPU check's program and tolerances), so the
#    launches and the cuBLASLt descriptors runtime/cuda.c makes are checked
#    against what the libraries do with them (with FAKE_KCHECK_INF_CONTROL,
#    also the control that an infinity on the GPU alone fails a kernel);
# 2. with STEPS > 0: the model's executable trains STEPS steps with
#    --device cpu, --device cuda, and --device cuda with TRAINC_CUDA_GRAPH=0
#    (on the project's docs, evaluating every 2 steps): the losses on the
#    fake GPU are within LIMIT (relative) of the CPU's, and the same with
#    and without graphs, bit for bit, and so when the graph capture fails
#    (FAKE_CUDA_CAPTURE_FAIL: the run warns and goes on without graphs),
#    but not when a kernel's fault made it fail (FAKE_CUDA_FAULT_AT_CAPTURE:
#    the run stops with that error); a cubin the driver refuses
#    (FAKE_CUDA_CUBIN_FAIL): the PTX is loaded, and PTX it refuses too
#    (FAKE_CUDA_PTX_FAIL) is an error with the JIT's log (and before that, the step-0
#    checkpoints of the CPU and of the fake GPU, which initialises the
#    parameters itself, are the same bytes); a run on the fake GPU resumed from
#    the step-2 checkpoint of the graph run continues it bit for bit; with
#    TRAINC_CUDA_PROFILE, a 2-step run lists every kernel of the schedules
#    that ran, each schedule's first run left out where it ran again (the
#    fake's first launch of a function costs a millisecond), and its losses
#    are the same; a 1-step run's profile counts the runs it has, marked
#    cold; the losses of a --poison run are the same
#    (every temporary filled with NaN bytes after its last reader).
set -u
emit=$1 rtlib=$2 tokenize=$3 dir=$4 model=$5 name=$6 sym=$7 steps=$8 limit=$9
shift 9
root=$(cd "$(dirname "$0")/../../.." && pwd)
here=$root/tests/cuda/fake emu=$root/tests/cuda/emu
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 2
# CC, CXX: the compilers; CUDA_INCLUDE: where cuda.h and cublasLt.h are;
# FAKE_LDFLAGS: what linking with RTLIB needs (the sanitizers).
cxx=${CXX:-g++} cc=${CC:-cc} inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
"$emit" "$model" "$name" cuda "$@" > emit.log 2>&1 || { cat emit.log; echo "FAIL: cuda_emit cuda"; exit 1; }
"$emit" "$model" "$name" lib "$@" >> emit.log 2>&1 || { cat emit.log; echo "FAIL: cuda_emit lib"; exit 1; }
awk -f "$emu/dispatch.awk" "$name.cu" > "$name.emu.h" || exit 1
$cxx -std=c++17 -O1 -w -fPIC -I"$root/runtime" -I"$emu" -I. -DEMU_KERNELS="\"$name.cu\"" -DEMU_DISPATCH="\"$name.emu.h\"" \
    -c "$here/fake_kernels.cpp" -o fake_kernels.o || { echo "FAIL: g++ on the CUDA C"; exit 1; }
$cxx -std=c++17 -O1 -Wall -fPIC -I"$inc" -c "$here/fake_cuda.cpp" -o fake_cuda.o || { echo "FAIL: g++ on fake_cuda.cpp"; exit 1; }
$cxx -shared -Wl,--version-script="$here/exports.map" fake_cuda.o fake_kernels.o -o libfakecuda.so || { echo "FAIL: link libfakecuda.so"; exit 1; }
$cc -std=c11 -O1 -fopenmp -D_GNU_SOURCE -I"$root/runtime" -c "$name.c" -o model.o || { echo "FAIL: cc on the C"; exit 1; }
$cc -std=c11 -O1 -D_GNU_SOURCE -I"$root/runtime" -DTRN_MODEL="$sym" -c "$root/tests/gpu/kcheck.c" -o kcheck.o || { echo "FAIL: cc on kcheck"; exit 1; }
$cc -fopenmp ${FAKE_LDFLAGS:-} kcheck.o model.o "$rtlib" -lm -lpthread -ldl -o kcheck || { echo "FAIL: link kcheck"; exit 1; }
export TRAINC_LIBCUDA=$PWD/libfakecuda.so TRAINC_CUBLASLT=$PWD/libfakecuda.so
./kcheck "$name.jsonl" 1234 > kcheck.log 2>&1
rc=$?
cat kcheck.log
grep '"ok":false' "$name.jsonl" | head -20
# FAKE_CUBLASLT_BETA0_READS_C: the fake cuBLASLt reads C where beta, read
# on the device, is 0 (linear_cross_entropy's dx and first dw products);
# the runtime zeroes C first (TrnCudaGemm.zero_c), and without that
# (TRAINC_CUDA_BETA0_FILL=0) the kernel check's poison comes through: the
# control that shows the check would see it
if [ -n "${FAKE_CUBLASLT_BETA0_READS_C:-}" ] && grep -q linear_cross_entropy "$name.c"; then
    TRAINC_CUDA_BETA0_FILL=0 TRAINC_KCHECK_ONLY=linear_cross_entropy ./kcheck nofill.jsonl 1234 > nofill.log 2>&1
    if grep -q '"kernel":"[^"]*linear_cross_entropy[^"]*".*"ok":false' nofill.jsonl; then
        echo "control: without zeroing C, $(grep -c '"ok":false' nofill.jsonl) linear_cross_entropy kernel(s) fail the check, as they should"
    else cat nofill.log; echo "FAIL: the control (TRAINC_CUDA_BETA0_FILL=0 under FAKE_CUBLASLT_BETA0_READS_C) passed the check"; rc=1; fi
fi
# FAKE_KCHECK_INF_CONTROL: with FAKE_CUBLASLT_INF, every product's first
# element infinite on the GPU alone: kcheck must fail those kernels
# (inf_mismatch) and still write JSON (no "inf" in its numbers)
if [ -n "${FAKE_KCHECK_INF_CONTROL:-}" ]; then
    FAKE_CUBLASLT_INF=1 TRAINC_KCHECK_ONLY=matmul ./kcheck inf.jsonl 1234 > inf.log 2>&1
    if grep -q '"nan_mismatch":0,"inf_mismatch":[1-9][0-9]*,.*"ok":false' inf.jsonl && python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if rows and rows[-1].get("summary") and rows[-1]["failed"] > 0 else 1)' inf.jsonl; then
        echo "control: an infinity from cuBLASLt alone fails $(grep -c '"ok":false' inf.jsonl) product kernel(s); the JSON parses"
    else cat inf.log inf.jsonl; echo "FAIL: the control (FAKE_CUBLASLT_INF) did not fail as JSON"; rc=1; fi
fi
# products with a GELU epilogue (their fallback kernels, k.._epi, are in the
# .cu): all in cuBLASLt, or with FAKE_CUBLASLT_NO_GELU (or
# TRAINC_CUDA_GELU_EPILOGUE=0) all run plain with the kernel after
if grep -q '_epi(' "$name.cu"; then
    if [ -n "${FAKE_CUBLASLT_NO_GELU:-}" ] || [ "${TRAINC_CUDA_GELU_EPILOGUE:-}" = 0 ]; then want='GELU epilogues: 0 in cuBLASLt, [1-9][0-9]* as kernels'
    elif [ -n "${FAKE_CUBLASLT_NO_BIAS:-}" ]; then want='GELU epilogues: [0-9]* in cuBLASLt, [1-9][0-9]* as kernels' # those with a bias
    else want='GELU epilogues: [1-9][0-9]* in cuBLASLt, 0 as kernels'; fi
    grep -q "$want" kcheck.log || { echo "FAIL: the device does not say '$want'"; rc=1; }
fi
# products that sum a bias gradient (fallback kernels k.._bgrad): the same,
# with FAKE_CUBLASLT_NO_BGRAD (or TRAINC_CUDA_BGRAD_EPILOGUE=0)
if grep -q '_bgrad(' "$name.cu"; then
    if [ -n "${FAKE_CUBLASLT_NO_BGRAD:-}" ] || [ "${TRAINC_CUDA_BGRAD_EPILOGUE:-}" = 0 ]; then want='bias gradients: 0 in cuBLASLt, [1-9][0-9]* as kernels'
    else want='bias gradients: [1-9][0-9]* in cuBLASLt, 0 as kernels'; fi
    grep -q "$want" kcheck.log || { echo "FAIL: the device does not say '$want'"; rc=1; }
fi
# products with a bias and no GELU (fallback kernels k.._bias): the
# device names them only when some run plain: with FAKE_CUBLASLT_NO_BIAS
# (or TRAINC_CUDA_BIAS_EPILOGUE=0) all do
if grep -q '_bias(' "$name.cu"; then
    if [ -n "${FAKE_CUBLASLT_NO_BIAS:-}" ] || [ "${TRAINC_CUDA_BIAS_EPILOGUE:-}" = 0 ]; then
        grep -q 'bias epilogues: 0 in cuBLASLt, [1-9][0-9]* as kernels' kcheck.log || { echo "FAIL: the device does not say 'bias epilogues: 0 in cuBLASLt'"; rc=1; }
    elif [ -z "${FAKE_CUBLASLT_EPI_RUN_REFUSE:-}" ] && grep -q 'bias epilogues:' kcheck.log; then
        echo "FAIL: some bias epilogue did not run in cuBLASLt"; rc=1
    fi
fi
# FAKE_CUBLASLT_EPI_RUN_REFUSE: the heuristic offers the epilogues, the
# matmul refuses them; the runtime says so once a product and runs it plain
# with the kernel after (the kernel check passing with the results): each
# kind the .cu has a fallback kernel for
if [ -n "${FAKE_CUBLASLT_EPI_RUN_REFUSE:-}" ]; then
    for what in GELU:_epi bias-gradient:_bgrad bias:_bias; do
        grep -q "${what#*:}(" "$name.cu" || continue
        what=${what%%:*}
        n=$(grep -c "warning: cublasLtMatmul(.*) refused its $what epilogue (CUBLAS_STATUS_NOT_SUPPORTED): the product runs plain" kcheck.log)
        echo "refused at run time: $n product(s) with a $what epilogue"
        [ "$n" -gt 0 ] || { echo "FAIL: no $what epilogue refused at run time and run plain"; rc=1; }
    done
fi
[ "$steps" -gt 0 ] || exit $rc
printf '#include "trainc_rt.h"\nextern const TrnModel %s;\nint main(int argc, char **argv) { return trn_main(argc, argv, &%s, NULL); }\n' \
    "$sym" "$sym" > main.c
$cc -std=c11 -O1 -I"$root/runtime" -c main.c -o main.o || exit 1
$cc -fopenmp ${FAKE_LDFLAGS:-} main.o model.o "$rtlib" -lm -lpthread -ldl -o train || { echo "FAIL: link train"; exit 1; }
cat "$root/README.md" "$root"/docs/*.md > text.txt
"$tokenize" text.txt tok > /dev/null || { echo "FAIL: tokenize"; exit 1; }
args="--data tok_train.bin --val tok_val.bin --eval-every 2 --eval-steps 2 --steps $steps --lr 1e-3 --warmup 0 --schedule constant --seed 7 --quiet"
# the parameters and states initialised on the fake GPU (trn_init_f32) are
# the host's bit for bit: the two step-0 checkpoints are the same bytes
./train --steps 0 --seed 7 --device cpu --save init_cpu.safetensors > init_cpu.log 2>&1 || { cat init_cpu.log; echo "FAIL: --steps 0 --device cpu"; exit 1; }
./train --steps 0 --seed 7 --device cuda --save init_fake.safetensors > init_fake.log 2>&1 ||
    { cat init_fake.log; echo "FAIL: --steps 0 --device cuda"; exit 1; }
grep -q "initialised on the device" init_fake.log || { cat init_fake.log; echo "FAIL: nothing initialised on the fake GPU"; exit 1; }
cmp init_cpu.safetensors init_fake.safetensors || { echo "FAIL: the step-0 checkpoints of the CPU and the fake GPU differ"; exit 1; }
# a device too small for the memory plan: the runtime says what the arena
# needs and what the device has
FAKE_CUDA_MEM_MIB=0 ./train --steps 1 --device cuda > oom.log 2>&1 && { cat oom.log; echo "FAIL: --device cuda on a device with no memory ran"; exit 1; }
grep -q "the memory plan does not fit on Fake GPU.*: its arena is [0-9]* bytes ([0-9.]* MiB), the device has 0 B free of 0 B; .*grad_accum, checkpoint = blocks or memory_budget" oom.log ||
    { cat oom.log; echo "FAIL: no clear message for a memory plan that does not fit"; exit 1; }
# ... and --device auto runs on the CPU, saying why (a GPU that is there and fails)
FAKE_CUDA_MEM_MIB=0 ./train --steps 0 --device auto > oom_auto.log 2>&1 || { cat oom_auto.log; echo "FAIL: --device auto, the GPU too small"; exit 1; }
grep -q "warning: --device auto: the GPU failed (the memory plan does not fit on Fake GPU.*); running on the CPU" oom_auto.log && grep -q "device cpu" oom_auto.log ||
    { cat oom_auto.log; echo "FAIL: --device auto did not say why it took the CPU"; exit 1; }
# a cubin the driver refuses: the runtime says so and loads the PTX
FAKE_CUDA_CUBIN_FAIL=1 ./train --steps 0 --seed 7 --device cuda --save init_ptx.safetensors > init_ptx.log 2>&1 ||
    { cat init_ptx.log; echo "FAIL: --device cuda, the cubin refused"; exit 1; }
grep -q "warning: the sm_90 cubin did not load (CUDA_ERROR_NO_BINARY_FOR_GPU); compiling the compute_[0-9]* PTX instead" init_ptx.log ||
    { cat init_ptx.log; echo "FAIL: no fallback to the PTX reported"; exit 1; }
cmp init_cpu.safetensors init_ptx.safetensors || { echo "FAIL: the step-0 checkpoint from the PTX module differs"; exit 1; }
# ... and PTX the driver's JIT refuses too: an error with the JIT's log on its line
FAKE_CUDA_CUBIN_FAIL=1 FAKE_CUDA_PTX_FAIL=1 ./train --steps 0 --seed 7 --device cuda > ptx_fail.log 2>&1 &&
    { cat ptx_fail.log; echo "FAIL: --device cuda ran with the cubin and the PTX refused"; exit 1; }
grep -q "cuModuleLoadDataEx(compute_[0-9]*) failed at runtime/cuda.c:[0-9]*: CUDA_ERROR_INVALID_PTX: .*\[the driver's log: ptxas application ptx input, line 7; error : Unknown symbol 'trn_fake_missing' (FAKE_CUDA_PTX_FAIL); ptxas fatal : Ptx assembly aborted due to errors\]" ptx_fail.log ||
    { cat ptx_fail.log; echo "FAIL: the PTX refused without the JIT's log in the error"; exit 1; }
# ... by a driver older than CUDA 13 (FAKE_CUDA_DRIVER=12080): the error
# says so where CUDA 13's NVRTC made the images (CUDA_MAJOR: the toolkit's)
FAKE_CUDA_DRIVER=12080 FAKE_CUDA_CUBIN_FAIL=1 FAKE_CUDA_PTX_FAIL=1 ./train --steps 0 --seed 7 --device cuda > ptx_old.log 2>&1
hint="the driver supports CUDA 12.8, and CUDA 13's NVRTC compiled the images: a CUDA 13 driver (r580 or later) takes them; "
if [ "${CUDA_MAJOR:-13}" -ge 13 ]; then grep -qF "$hint" ptx_old.log; else ! grep -qF "$hint" ptx_old.log; fi ||
    { cat ptx_old.log; echo "FAIL: a driver older than CUDA 13 named in the error where it is (CUDA ${CUDA_MAJOR:-13}'s images) or not"; exit 1; }
echo "initialisation: the step-0 checkpoints of the CPU and the fake GPU are the same $(wc -c < init_cpu.safetensors) bytes"
./train $args --device cpu --metrics cpu.jsonl > cpu.log 2>&1 || { cat cpu.log; echo "FAIL: --device cpu"; exit 1; }
./train $args --device cuda --metrics fake.jsonl --save 'ck_{step}.safetensors' --save-every 2 > fake.log 2>&1 ||
    { cat fake.log; echo "FAIL: --device cuda"; exit 1; }
if [ -n "${FAKE_CUBLASLT_EPI_RUN_REFUSE:-}" ]; then
    w=$(grep -c "refused its .* epilogue" fake.log) u=$(grep "refused its .* epilogue" fake.log | sort -u | wc -l)
    echo "training: $w product(s) refused their epilogue, each said once"
    [ "$w" -gt 0 ] && [ "$w" = "$u" ] || { cat fake.log; echo "FAIL: the refused epilogues not said once a product"; rc=1; }
fi
# the start's phases: the CUDA device's within the device's, the CPU's without them
ph=$(grep -o '"start_phases":{[^}]*}' fake.jsonl)
echo "start: $ph"
echo "$ph" | awk -F'[:,{}]' '{ for (i = 1; i < NF; i++) { if ($i == "\"device\"") d = $(i + 1); if ($i ~ /^"cuda_(driver|module|arena|gemm)"$/) { s += $(i + 1); n++ } }
    exit !(n == 4 && d >= 0 && s <= d + 0.004) }' && grep -q '"start_phases":{"device":[0-9.]*,"init"' cpu.jsonl ||
    { echo "FAIL: the start's phases"; rc=1; }
TRAINC_CUDA_GRAPH=0 ./train $args --device cuda --metrics nograph.jsonl > nograph.log 2>&1 || { cat nograph.log; echo "FAIL: --device cuda, no graphs"; exit 1; }
# a graph capture that fails (the fake drops it, as a GPU drops one that
# captured something it cannot): the run says so and goes on without graphs
FAKE_CUDA_CAPTURE_FAIL=1 ./train $args --device cuda --metrics capfail.jsonl > capfail.log 2>&1 ||
    { cat capfail.log; echo "FAIL: --device cuda, the graph capture failing"; exit 1; }
grep -q "warning: CUDA graph capture failed (.*CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.*); running without graphs" capfail.log ||
    { cat capfail.log; echo "FAIL: a failed graph capture not reported"; exit 1; }
# ... unless a kernel queued before it faulted (FAKE_CUDA_FAULT_AT_CAPTURE:
# the capture is the first call to see the sticky error): the run stops with
# the synchronisation's error, not the eager run's next, unrelated call
FAKE_CUDA_FAULT_AT_CAPTURE=1 ./train $args --device cuda > fault.log 2>&1 &&
    { cat fault.log; echo "FAIL: --device cuda went on after a kernel's fault"; exit 1; }
if grep -q "cuStreamSynchronize(compute stream) failed at runtime/cuda.c:[0-9]*: CUDA_ERROR_ILLEGAL_ADDRESS: .*\[a kernel or copy queued before this point faulted on the device; TRAINC_CUDA_SYNC=1 names the kernel; the graph capture before it failed: cuStreamBeginCapture() failed at runtime/cuda.c:[0-9]*: CUDA_ERROR_ILLEGAL_ADDRESS" fault.log &&
    ! grep -q "running without graphs" fault.log; then echo "fault before a capture: $(grep -o 'cuStreamSynchronize(compute stream) failed at [^:]*:[0-9]*: [A-Z_]*' fault.log)"
else cat fault.log; echo "FAIL: a kernel's fault that failed the graph capture not reported as such"; rc=1; fi
# a kernel that faults as it runs (FAKE_CUDA_FAULT_AT_LAUNCH=N: the N-th
# launch), without graphs: whichever call hears of it first (a launch, a
# product, a copy, a synchronisation) says that work queued before it
# faulted, and a product never takes the fault for a refused epilogue.
# N = 2, or every N up to the launches of a step with FAKE_FAULT_SWEEP=1
nmax=2
[ "${FAKE_FAULT_SWEEP:-0}" = 1 ] && nmax=$(FAKE_CUDA_KILL_AT=0 ./train $args --steps 1 --device cuda 2>&1 | sed -n 's/^fake-cuda: \([0-9]*\) launches$/\1/p')
for n in $(seq 2 "${nmax:-2}"); do
  TRAINC_CUDA_GRAPH=0 FAKE_CUDA_FAULT_AT_LAUNCH=$n ./train $args --device cuda > lfault.log 2>&1 &&
      { cat lfault.log; echo "FAIL: --device cuda went on after launch $n faulted"; rc=1; break; }
  if ! grep -q "error: .*CUDA_ERROR_ILLEGAL_ADDRESS.*a kernel or copy queued before this point faulted on the device; TRAINC_CUDA_SYNC=1 names the kernel" lfault.log ||
      grep -q "refused its" lfault.log; then
    cat lfault.log; echo "FAIL: launch $n's fault not reported as a fault of work queued before"; rc=1; break
  fi
done
echo "a fault at launches 2 to ${nmax:-2}, the last: $(grep -o 'cu[A-Za-z]*([^)]*) failed' lfault.log | head -1)"
./train $args --device cuda --metrics resumed.jsonl --resume ck_2.safetensors > resumed.log 2>&1 ||
    { cat resumed.log; echo "FAIL: --device cuda --resume"; exit 1; }
# --poison: the arena starts as NaN bytes and every temporary is filled with
# them after its last reader (captured into the graph too): the same losses
./train $args --device cuda --poison --metrics poison.jsonl > poison.log 2>&1 || { cat poison.log; echo "FAIL: --device cuda --poison"; exit 1; }
# TRAINC_CUDA_PROFILE: a line per kernel of the schedules that ran (micro, eval), each called
# as often as its schedule ran after its first run; the losses unchanged
# (a file of the user's at the name an older profile wrote first is left alone)
echo mine > profile.jsonl.tmp
FAKE_CUDA_KILL_AT=0 TRAINC_CUDA_PROFILE=profile.jsonl ./train $args --steps 2 --device cuda --metrics prof.jsonl > prof.log 2>&1 ||
    { cat prof.log; echo "FAIL: --device cuda, TRAINC_CUDA_PROFILE"; exit 1; }
# a 3-step run sent SIGTERM at the last launch of the 2-step run's (the
# fake counted them), as a time limit stops it: step 2 finishes, the run
# stops before step 3 (status 143), and the profile of the schedules' runs
# before is there
nl=$(sed -n 's/^fake-cuda: \([0-9]*\) launches$/\1/p' prof.log)
FAKE_CUDA_KILL_AT=$nl TRAINC_CUDA_PROFILE=killed.jsonl ./train $args --steps 3 --device cuda > killed.log 2>&1
k=$?
echo "profile of the run stopped at launch $nl of $nl (status $k): $(cat killed.jsonl 2>/dev/null | wc -l) kernels"
[ -n "$nl" ] && [ "$nl" -gt 0 ] && [ $k -eq 143 ] && [ -s killed.jsonl ] && [ -z "$(ls killed.jsonl.*tmp 2>/dev/null)" ] &&
    [ "$(grep -c '^{"schedule":"[a-z]*","kernel":.*"calls":[1-9][0-9]*,"ms":.*,"bytes":[0-9]*}$' killed.jsonl)" -eq "$(wc -l < killed.jsonl)" ] &&
    [ "$(wc -l < killed.jsonl)" -le "$(wc -l < profile.jsonl)" ] && grep -q 'stopped by SIGTERM at step 2 of 3' killed.log ||
    { cat killed.log; echo "FAIL: no profile from a run stopped by SIGTERM"; rc=1; }
[ "$(cat profile.jsonl.tmp)" = mine ] && [ -z "$(ls profile.jsonl.*.tmp 2>/dev/null)" ] ||
    { echo "FAIL: the profile wrote into profile.jsonl.tmp or left a file of its own"; rc=1; }
# into a pipe (not a file to rename over): once, when the device closes
TRAINC_CUDA_PROFILE=/dev/stdout ./train $args --steps 2 --device cuda 2> piped.log | cat > piped.jsonl
[ "$(wc -l < piped.jsonl)" -eq "$(wc -l < profile.jsonl)" ] && [ "$(grep -c '^{"schedule":' piped.jsonl)" -eq "$(wc -l < profile.jsonl)" ] ||
    { cat piped.log; echo "FAIL: the profile into a pipe: $(wc -l < piped.jsonl) lines, not $(wc -l < profile.jsonl)"; rc=1; }
# grad_accum micro-batches a step, then (grad_accum > 1) the update schedule
# once; each schedule's first run not counted (two steps: the micro-batch's
# 2 grad_accum - 1 runs, one of the update and of evaluation), but for one
# that ran once only, whose line says it is of that cold run
accum=$(echo " $* " | sed -n 's/.*grad_accum=\([0-9][0-9]*\).*/\1/p'); accum=${accum:-1}
np=$(grep -c "\"schedule\":\"micro\".*\"cold\":false,\"calls\":$((2 * accum - 1))," profile.jsonl) ne=$(grep -c '"schedule":"eval".*"cold":false,"calls":1,' profile.jsonl)
nu=$(grep -c '"schedule":"update".*"cold":false,"calls":1,' profile.jsonl || true)
nr=$(grep -c '"schedule":"refresh".*"cold":true,"calls":1,' profile.jsonl || true) # the half copies, once at the start
echo "profile: $(wc -l < profile.jsonl) kernels ($np of the micro-batch, $nu of the update, $ne of evaluation, $nr of the copies' refresh); the longest: $(head -1 profile.jsonl)"
[ "$np" -gt 0 ] && [ "$ne" -gt 0 ] && { [ "$accum" -eq 1 ] || [ "$nu" -gt 0 ]; } && [ "$(wc -l < profile.jsonl)" -eq $((np + nu + ne + nr)) ] ||
    { echo "FAIL: the profile"; rc=1; }
case " $* " in *precision=bf16*|*precision=fp16*) [ "$nr" -gt 0 ] || { echo "FAIL: no refresh of the half copies on the GPU"; rc=1; } ;; esac
# the first runs left out: the fake's first launch of a function costs 1
# ms (lazy loading), a warm call microseconds, so no line of warm runs
# reaches 1 ms
ms_at_least_1() { grep "$1" "$2" | sed 's/.*"ms":\([0-9.]*\),.*/\1/' | awk '$1 >= 1 { n++ } END { print n + 0 }'; }
[ "$(ms_at_least_1 '"cold":false' profile.jsonl)" -eq 0 ] ||
    { grep '"cold":false' profile.jsonl | head -3; echo "FAIL: a schedule's first run (the fake's loading) counted in the profile"; rc=1; }
# one step: something to show all the same, the runs there were, cold ones
# said (and their loading in them)
TRAINC_CUDA_PROFILE=one.jsonl ./train $args --steps 1 --device cuda > one.log 2>&1 || { cat one.log; echo "FAIL: --device cuda, TRAINC_CUDA_PROFILE, 1 step"; exit 1; }
echo "profile of 1 step: $(wc -l < one.jsonl) kernels, $(grep -c '"cold":true,"calls":1,' one.jsonl) of them of a cold run only, $(ms_at_least_1 '"cold":true' one.jsonl) with 1 ms or more"
[ "$(grep -c '"schedule":"micro"' one.jsonl)" -eq "$(grep -c '"schedule":"micro"' profile.jsonl)" ] &&
    [ "$(grep -c '"cold":true,"calls":1,' one.jsonl)" -eq "$(grep -c '"cold":true' one.jsonl)" ] && [ "$(ms_at_least_1 '"cold":true' one.jsonl)" -gt 0 ] ||
    { cat one.log one.jsonl; echo "FAIL: the profile of a 1-step run"; rc=1; }
# every line with the bytes its kernel reads and writes; attention (forward
# and backward) with its FLOP count, the products with theirs
[ "$(grep -c '"bytes":[1-9]' profile.jsonl)" -eq "$(wc -l < profile.jsonl)" ] || { echo "FAIL: a profile line without its bytes"; rc=1; }
if grep -q '_attention' profile.jsonl; then
    ! grep '_attention' profile.jsonl | grep -q '"flops":0,' || { echo "FAIL: an attention kernel without its FLOPs in the profile"; rc=1; }
fi
[ "$(grep -o '"[a-z_]*loss":[^,}]*' prof.jsonl)" = "$(grep -v '"step":[3-9]' fake.jsonl | grep -o '"[a-z_]*loss":[^,}]*' | head -n $(grep -c loss prof.jsonl))" ] ||
    { echo "FAIL: profiling changed the losses"; rc=1; }
losses() { grep -o '"[a-z_]*loss":[^,}]*' "$1" | tr '\n' ' '; }
after2() { grep -v '"step":[12],' "$1" | grep -o '"[a-z_]*loss":[^,}]*' | tr '\n' ' '; }
r=$(after2 resumed.jsonl)
echo "losses after step 2, resumed on the fake GPU: $r"
[ -n "$r" ] && [ "$r" = "$(after2 fake.jsonl)" ] || { echo "FAIL: the run resumed from step 2 differs from the uninterrupted one"; rc=1; }
c=$(losses cpu.jsonl) f=$(losses fake.jsonl) n=$(losses nograph.jsonl)
echo "losses, cpu:                $c"
echo "losses, fake GPU:           $f"
echo "losses, fake GPU, no graph: $n"
[ "$f" = "$n" ] || { echo "FAIL: the graph and the eager schedule differ"; rc=1; }
[ "$n" = "$(losses capfail.jsonl)" ] || { echo "FAIL: after a failed graph capture, other losses: $(losses capfail.jsonl)"; rc=1; }
[ "$f" = "$(losses poison.jsonl)" ] || { echo "FAIL: poisoning dead temporaries on the fake GPU changed the losses: $(losses poison.jsonl)"; rc=1; }
awk -v c="$c" -v e="$f" -v lim="$limit" 'BEGIN {
    n = split(c, a, " "); m = split(e, b, " "); w = 0
    for (i = 1; i <= n; i++) {
        split(a[i], x, ":"); split(b[i], y, ":")
        if (x[1] != y[1]) { print "FAIL: metrics differ in kind: " a[i] " vs " b[i]; exit 1 }
        d = x[2] - y[2]; if (d < 0) d = -d; r = d / (x[2] < 0 ? -x[2] : x[2]); if (r > w) w = r
    }
    printf "end to end: %d losses, max relative difference %.3g (limit %g)\n", n, w, lim
    exit !(n > 0 && n == m && w <= lim) }' || rc=1
exit $rc
