#!/bin/bash
# tests/gpu/run.sh — the GPU checks and the benchmark, in one call on the
# device machine (an H200 with CUDA 13, gcc, PyTorch; no network, no
# OpenBLAS).  Uses what tests/gpu/build.sh built here into build-gpu/:
#
#   1. kernels: every kernel of fourteen models (tiny GPT-2 (and with 2
#      micro-batches a step) and Llama, the MLP at 8 and 8192 rows, GPT-2 with head dim 64, Llama with head dim
#      128 and GQA, all fp32; tiny GPT-2 and Llama (vocabulary padded) in
#      bf16, tiny GPT-2 in fp16; the tensor-core attention in bf16 at head
#      dims 64 (GPT-2, and the same with --no-tc-attention; Llama with GQA)
#      and 128 (Llama)) on the GPU against the C kernel on the CPU, fresh
#      random inputs, poisoned outputs (build-gpu/kcheck_*, tests/gpu/kcheck.c);
#      tiny GPT-2 fp32 twice: with cuBLASLt's GELU, bias-gradient and bias
#      epilogues and with the kernels the runtime runs in their place
#      (TRAINC_CUDA_GELU_EPILOGUE=0 TRAINC_CUDA_BGRAD_EPILOGUE=0
#      TRAINC_CUDA_BIAS_EPILOGUE=0); and a
#      finding: whether cuBLASLt reads C where beta, from the device, is 0
#      (fp16 GPT-2's linear_cross_entropy with TRAINC_CUDA_BETA0_FILL=0);
#   2. end to end: 20 steps of the tiny models on the GPU against the same
#      executable on the CPU: fp32 losses within 1e-4 relative, bf16 and
#      fp16 within 2e-2 (both round to the half dtype at the same places,
#      not always to the same neighbour); the CUDA-graph run equal to the
#      eager one; the step-0 checkpoints (parameters initialised on the
#      GPU, trn_init_f32) the same bytes as the CPU's;
#   3. benchmark: GPT-2 small (124M), B=16 x T=1024, bf16 with every pass
#      on, then PyTorch (AdamW, bf16 autocast, SDPA) under torch.compile
#      (the vocabulary as it is and padded by hand to 50304) and eager
#      (bench/gpt2_torch.py), then a few fp32 steps of trainc: tokens/s,
#      step time, MFU vs 989 TFLOP/s (one FLOP count for every row),
#      device memory in use, time to the first step; the Goal against the
#      faster torch.compile row;
#   4. profile: the device's ceilings measured (tests/gpu/ceilings.py: a
#      device-to-device copy's TB/s, a large bf16 product's TFLOP/s;
#      PyTorch's on a GPT-2 layer's products and attention), then
#      4 steps of the bf16 GPT-2 small with TRAINC_CUDA_PROFILE (every
#      kernel timed with events, no graphs): time per op, the 15 longest
#      kernels, TFLOP/s of the products and attention, GB/s of the others
#      (the bytes of the buffers each reads and writes), and the roofline's
#      bound per op at the datasheet's peaks and at the measured ceilings;
#      then one layer of it with --tc-attention-rows=1: its attention's
#      time a layer beside the default form's (two row tiles a warp).
#
# Every run in a stage has a time limit, and the whole script a budget
# (TRAINC_GPU_BUDGET, 480 s: the device call's 540 s less the table and the
# tar): the kernel and end-to-end checks stop starting runs while less than
# the later stages' reserve is left (275 s for the benchmark and the
# profile; the profile's 65 s in the benchmark), so a check that hangs costs
# its own limit and not the measurements; a run that no longer fits is
# recorded as skipped.  A failure is recorded in the JSON and the next run
# starts.  Results: $OUT/results.json, $OUT/table.txt (also printed last),
# logs in $OUT/logs.tar.gz.  Within the budget; its time on a GPU not yet
# measured (it has not run on one).
#
# From a session with a device (see docs/cuda.md):
#   here:   bash tests/gpu/build.sh      (right before: run.sh checks build-gpu's sources)
#   device: run(command="bash tests/gpu/run.sh", carry=["build-gpu-pack"], timeout_s=540)
#   again, at once, for what failed: TRAINC_GPU_STAGES=bench (or kernels, e2e,
#   profile, comma-separated) with a smaller TRAINC_GPU_BUDGET; then give_back
# Its parsing, tables and budget are checked here, with stand-ins for the
# GPU's programs, by tests/gpu/selftest.sh (CTest: gpu_script).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${TRAINC_GPU_BUILD:-$root/build-gpu}
# the PyTorch reference and the ceilings' measurement (tests/gpu/selftest.sh
# puts stand-ins here)
TORCH_BENCH=${TRAINC_GPU_TORCH:-python3 bench/gpt2_torch.py}
CEILINGS=${TRAINC_GPU_CEILINGS:-python3 tests/gpu/ceilings.py}
OUT=${OUT:-$root/gpu-out}
# the logs are kept outside $OUT (only 8 files come back from it) and
# published with the results after every stage (publish, below): a call cut
# short still brings back what its finished stages found
L=$(mktemp -d /tmp/trainc-gpu.XXXXXX)/logs
mkdir -p "$OUT" "$L"
R=$L/results.jsonl
: > "$R"
cd "$root"
# TRAINC_GPU_STAGES: the stages to run (a second call may rerun only the one
# that failed), comma-separated from kernels, e2e, bench, profile
stages=",${TRAINC_GPU_STAGES:-kernels,e2e,bench,profile},"
want() { case $stages in *",$1,"*) return 0 ;; esac; return 1; }
start=$(date +%s)
rec() { echo "$1" >> "$R"; }
budget=${TRAINC_GPU_BUDGET:-480}
deadline=$(( start + budget ))
# cap WANT RESERVE: a run's time limit, WANT seconds or what the budget has
# left after RESERVE seconds kept for the later stages, at least 1 (under
# 10 the caller skips the run)
cap() {
    local l=$(( deadline - $(date +%s) - $2 ))
    [ "$l" -gt "$1" ] && l=$1
    [ "$l" -lt 1 ] && l=1
    echo "$l"
}
# skipped STAGE KEY NAME: the record of a run the budget had no time for
skipped() { echo "$1 $3: skipped (out of time)"; rec "{\"stage\":\"$1\",\"$2\":\"$3\",\"skipped\":true}"; }
# the last line of a log, quoted for JSON (what the table prints under a failed row)
# (why LOG RC: "timed out" first when RC is timeout's)
# (a run that failed: its last line that says an error, a Python
# exception's "XError: ..." say, where some is, not a hint printed after it;
# one that timed out: its last line, where it was)
why() {
    local l=
    case ${2:-0} in
    124|137) printf 'timed out: ' ;;
    0) ;;
    *) l=$(grep -aE '^[A-Za-z_.]*(Error|Exception|Failed)(:|$)|error: |^FAIL' "$1" 2>/dev/null | tail -n 1) ;;
    esac
    [ -n "$l" ] || l=$(tail -n 1 "$1" 2>/dev/null)
    printf '%s\n' "$l" | tr -d '"\\' | tr -cd '[:print:]' | cut -c1-200
}

# build-gpu/ travels packed (build.sh: build-gpu-pack/build-gpu.tar.gz,
# a fifth of its bytes): where the pack is, build-gpu/ is made from it
# afresh (a warm machine may keep an older one from an earlier call)
P=${TRAINC_GPU_PACK:-$root/build-gpu-pack/build-gpu.tar.gz}
if [ -f "$P" ]; then
    rm -rf "$B" && mkdir -p "$B" && tar -xzf "$P" -C "$B" || { echo "could not unpack $P into $B"; exit 1; }
    echo "unpacked $P: $(du -sb "$B" | cut -f1) bytes"
fi
chmod +x "$B"/* 2>/dev/null # (in case the transfer dropped the modes)
[ -x "$B/gpt2_tiny" ] || { echo "build-gpu/ is missing: run tests/gpu/build.sh here and carry build-gpu-pack"; exit 1; }
# built from this tree? (build.sh's checksums of the sources)
stale=null
if [ -f "$B/sources.sha256" ]; then
    sha256sum --quiet -c "$B/sources.sha256" > "$L/stale.txt" 2>/dev/null
    stale=$(grep -c ': FAILED' "$L/stale.txt" || true)
    [ "$stale" -gt 0 ] && echo "WARNING: build-gpu was built from other sources ($stale files differ): rerun tests/gpu/build.sh" && sed -n 's/: FAILED.*//p' "$L/stale.txt" | head -5
fi
# what the executables need at load time and this machine lacks
missing=$(ldd "$B/gpt2_tiny" "$B/kcheck_gpt2_tiny" 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
[ -n "$missing" ] && echo "WARNING: build-gpu's executables need what is not here: $missing"

# cuBLASLt: the toolkit's, else the one PyTorch's wheels carry
if [ -z "${TRAINC_CUBLASLT:-}" ]; then
    for c in $(ldconfig -p 2>/dev/null | awk '/libcublasLt.so.13 /{print $NF}') /usr/local/cuda/lib64/libcublasLt.so.13 \
             /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13 \
             $(timeout 60 python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib/libcublasLt.so.13") for p in nvidia.__path__ for d in ("cu13", "cublas")))' 2>/dev/null); do
        [ -f "$c" ] && { export TRAINC_CUBLASLT=$c; break; }
    done
fi
# (their versions: trainc's and the one PyTorch's wheels carry, where
# there is one: the products are most of a step)
ltver() { timeout 30 python3 -c 'import ctypes, sys; print(int(ctypes.CDLL(sys.argv[1]).cublasLtGetVersion()))' "$1" 2>/dev/null || echo null; }
lt_version=$(ltver "${TRAINC_CUBLASLT:-libcublasLt.so.13}")
torch_lt=$(timeout 60 python3 -c 'import nvidia, os; print(next((q for p in nvidia.__path__ for d in ("cu13", "cublas") for q in [os.path.join(p, d, "lib/libcublasLt.so.13")] if os.path.exists(q)), ""))' 2>/dev/null)
torch_lt_version=null
[ -n "$torch_lt" ] && torch_lt_version=$(ltver "$torch_lt")
echo "cuBLASLt: ${TRAINC_CUBLASLT:-(default search)}, version $lt_version; PyTorch's: ${torch_lt:-(none of its own)}, version $torch_lt_version"
# the card as found (nothing here changes its settings): persistence and
# MIG modes, the clocks now and at most
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,persistence_mode,mig.mode.current \
    --format=csv,noheader > "$L/gpu.txt" 2>&1
cat "$L/gpu.txt"
# the card's memory bandwidth as its datasheet gives it, for the roofline's
# bounds (TRAINC_GPU_PEAK_TB sets it): an H200's HBM3e 4.8 TB/s, an H100
# SXM's HBM3 3.35, an H100 PCIe's 2.0 (MFU is against 989 TFLOP/s, the
# issue's figure, on either)
if [ -z "${TRAINC_GPU_PEAK_TB:-}" ]; then
    case "$(head -1 "$L/gpu.txt")" in
    *H100*PCIe*) TRAINC_GPU_PEAK_TB=2.0 ;;
    *H100*NVL*) TRAINC_GPU_PEAK_TB=3.9 ;;
    *H100*) TRAINC_GPU_PEAK_TB=3.35 ;;
    *) TRAINC_GPU_PEAK_TB=4.8 ;;
    esac
fi
export TRAINC_GPU_PEAK_TB
echo "datasheet bandwidth for the bounds: $TRAINC_GPU_PEAK_TB TB/s"
# where the loader finds the driver (runtime/cuda.c opens libcuda.so.1 by
# name; TRAINC_LIBCUDA names another)
libcuda=$(ldconfig -p 2>/dev/null | grep -m1 'libcuda\.so\.1 ' | sed 's/.*=> //')
# (not there, nor on LD_LIBRARY_PATH: the driver's own folder, where the
# device machines mount it, named outright)
if [ -z "$libcuda" ] && [ -z "${TRAINC_LIBCUDA:-}" ]; then
    llp=${LD_LIBRARY_PATH:-}
    for d in ${llp//:/ }; do [ -f "$d/libcuda.so.1" ] && libcuda=$d/libcuda.so.1 && break; done
    for c in /usr/local/nvidia/lib64/libcuda.so.1 /usr/local/nvidia/lib/libcuda.so.1; do
        [ -z "$libcuda" ] && [ -f "$c" ] && { export TRAINC_LIBCUDA=$c; libcuda=$c; }
    done
fi
echo "libcuda.so.1: ${libcuda:-(not in the ldconfig cache)}; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
# one monitor for the whole call (memory, clocks, temperature each second):
# it also keeps the driver's state loaded between the ~50 processes below,
# where persistence mode is off
nvidia-smi --query-gpu=timestamp,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv,noheader -lms 1000 > "$L/monitor.txt" 2>&1 &
monitor=$!
# (torch.compile's Triton builds a C launcher against Python.h: without it
# the compile rows fail where eager runs)
pyh=$(timeout 60 python3 -c 'import os, sysconfig; print(str(os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))).lower())' 2>/dev/null || echo null)
rec "{\"stage\":\"env\",\"budget_s\":$budget,\"gpu\":\"$(head -1 "$L/gpu.txt" | tr -d '"')\",\"cublaslt\":\"${TRAINC_CUBLASLT:-}\",\"python_h\":$pyh,\"build_stale_files\":$stale,\"build_commit\":\"$(head -1 "$B/COMMIT" 2>/dev/null)\",\"missing_libs\":\"$missing\",\"libcuda\":\"$libcuda\",\"peak_tb_per_s\":$TRAINC_GPU_PEAK_TB,\"cublaslt_version\":$lt_version,\"torch_cublaslt_version\":$torch_lt_version,\"stages\":\"${stages:1:-1}\"}"

# publish: results.json, table.txt and logs.tar.gz in $OUT from what the
# stages recorded so far (after each stage and at the end)
publish() {
python3 - "$R" "$OUT/results.json" "$OUT/table.txt" $(( $(date +%s) - start )) <<'EOF'
import json, math, re, sys
# a record is one line of JSON; a number C's printf wrote as inf or nan
# (not JSON) is read as null, and a line that still does not parse is kept
# as an "unparsed" record: one bad line loses no other figure
sys.path.insert(0, "tests/gpu")
from records import loads
def record(l):
    try:
        r = loads(l)
        if isinstance(r, dict) and "stage" in r:
            return r
    except ValueError:
        pass
    return {"stage": "unparsed", "line": l.strip()[:300]}
rows = [record(l) for l in open(sys.argv[1]) if l.strip()]
res = {"seconds": int(sys.argv[4]), "stages": rows}
env = next((r for r in rows if r["stage"] == "env"), {})
peak_tb = env.get("peak_tb_per_s") or 4.8
# the issue's Goal, from this run's own figures: trainc bf16 against
# torch.compile, the faster of its two rows (the vocabulary as it is, and
# padded by hand to 50304 as trainc pads it), speed and memory from that row
# (a reference row only where its run ended well)
brow = {r["impl"]: r for r in rows if r["stage"] == "bench" and not r.get("skipped")}
bench = {k: r.get("result") or {} for k, r in brow.items()}
tc = bench.get("trainc-gpt2_124m_bf16", {})
ref = max(("pytorch-compile", "pytorch-compile-v50304"),
          key=lambda k: (bench.get(k, {}).get("tokens_per_s") or 0) if brow.get(k, {}).get("rc") == 0 else 0)
pc = bench.get(ref, {}) if brow.get(ref, {}).get("rc") == 0 else {}
def ratio(a, b):
    return a / b if a is not None and b else None
goal = {"speedup_vs_compile": ratio(tc.get("tokens_per_s"), pc.get("tokens_per_s")),
        "device_memory_vs_compile": ratio(tc.get("device_used_bytes"), pc.get("device_used_bytes")),
        "mfu": tc.get("mfu"), "start_s": tc.get("start_s")}
met = {"speedup_vs_compile": lambda x: x >= 1.3, "device_memory_vs_compile": lambda x: x <= 1.0,
       "mfu": lambda x: x >= 0.45, "start_s": lambda x: x <= 2.0}
# the Goal is judged only from a trainc run that ran every step with status
# 0, every loss finite and falling, at an MFU that can be: a run that failed
# part way, or whose kernels did less than the model, has figures but
# meets nothing
invalid = []
trow = brow.get("trainc-gpt2_124m_bf16")
if trow:
    if trow.get("rc") != 0:
        invalid.append(f"trainc's run ended with status {trow.get('rc')}")
    if not tc.get("complete") and tc.get("steps_wanted"):
        invalid.append(f"trainc ran {tc.get('steps')} of {tc.get('steps_wanted')} steps")
    if tc.get("steps") and not tc.get("losses_finite"):
        invalid.append("a loss not finite")
    elif tc.get("steps") and not tc.get("loss_fell"):
        invalid.append(f"the loss did not fall ({tc.get('first_loss')} -> {tc.get('last_loss')})")
    if (tc.get("mfu") or 0) > 1:
        invalid.append(f"an MFU of {100 * tc['mfu']:.0f}%")
goal["met"] = {k: (met[k](v) if v is not None and not invalid else None) for k, v in goal.items() if k in met}
goal["reference"] = ref if pc.get("tokens_per_s") else None
goal["invalid"] = "; ".join(invalid) or None
goal["build_stale_files"] = env.get("build_stale_files")
res["goal"] = goal
# the finding of gpt2_tiny_fp16_nofill (above kmodels): None when it did not run
# (yes: the poison, NaN, came through a kernel; no says so for these sizes
# only: at GPT-2 small's K = 50304 cuBLASLt may split K and apply beta apart)
nfr = next((r for r in rows if r["stage"] == "kernels" and r.get("model") == "gpt2_tiny_fp16_nofill"), {})
nf = nfr.get("summary") or {}
res["cublaslt_reads_c_beta0"] = nfr.get("nan_kernels", 0) > 0 if nf.get("kernels") else None
# which GELU cuBLASLt's epilogues compute: the worst relative error of those
# products in the fp32 models against the C kernel's tanh form, forward and
# backward apart (erf's: small forward, large backward; an approximate
# tanh's: the other way round)
def worst(key):
    v = [r[key] for r in rows if r["stage"] == "kernels" and r.get(key) is not None and not re.search(r"bf16|fp16|plain|nofill", r["model"])]
    return max(v) if v else None
res["gelu_epilogue_rel_err_fp32"] = {"gelu": worst("gelu_worst"), "dgelu": worst("dgelu_worst")}
# (strict JSON: a non-finite number Python computed, a NaN loss's ratio
# say, is written as null)
def finite(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v
json.dump(finite(res), open(sys.argv[2], "w"), indent=1, allow_nan=False)
# first what ran where: the card, the build, the libraries
t = [f"env      {env.get('gpu') or '-'} | build {env.get('build_commit') or '-'}"
     + (f" ({env['build_stale_files']} source files differ from this tree)" if env.get("build_stale_files") else "")
     + f" | cuBLASLt {env.get('cublaslt_version')} (PyTorch's {env.get('torch_cublaslt_version')}) | Python.h {env.get('python_h')}"
     + (f" | missing: {env['missing_libs'].strip()}" if (env.get("missing_libs") or "").strip() else "")]
e2 = lambda v: "-" if v is None else f"{v:.2e}"
for r in rows:
    if r.get("skipped"):
        t.append(f"{r['stage']:<8} {r.get('model') or r.get('impl') or r.get('name')} skipped: {r.get('why') or 'out of time (TRAINC_GPU_BUDGET)'}")
        continue
    if r["stage"] == "kernels" and r["model"] == "gpt2_tiny_fp16_nofill":
        s = r.get("summary") or {}
        reads = res["cublaslt_reads_c_beta0"]
        t.append(f"finding  cuBLASLt reads C where beta, from the device, is 0: {'-' if reads is None else 'yes' if reads else 'no (at this size)'}"
                 f" ({s.get('kernels', '?')} kernels checked without zeroing C, {s.get('failed', '?')} failed, {r.get('nan_kernels', 0)} with NaNs; rc {r['rc']})")
    elif r["stage"] == "kernels":
        s = r.get("summary") or {}
        t.append(f"kernels  {r['model']:<15} {'ok ' if r['rc'] == 0 else 'FAIL'} {s.get('kernels', '?')} kernels, {s.get('failed', '?')} failed, worst {e2(s.get('worst'))} ({s.get('worst_kernel', '')})")
        epi = re.findall(r"(?:GELU epilogues|bias gradients|bias epilogues): \d+ in cuBLASLt, \d+ as kernels", r.get("first_line", ""))
        if epi:
            t.append("           " + "; ".join(epi))
    elif r["stage"] == "e2e":
        x = r.get("result") or {}
        t.append(f"e2e      {r['model']:<15} {'ok ' if x.get('ok') else 'FAIL'} {x.get('steps')} steps, max rel {x.get('max_rel')} (limit {x.get('limit')}), graph==eager {x.get('graph_equals_eager')}, loss {x.get('cpu_first')} -> {x.get('gpu_last')}"
                 f", init on device {r.get('init_on_device')} same bytes {r.get('init_same')}")
    elif r["stage"] == "bench":
        x = r.get("result") or {}
        f = lambda k, s=1, d=1: f"{x[k] / s:.{d}f}" if x.get(k) is not None else "-"
        t.append(f"bench    {r['impl']:<22} step {f('step_ms')} ms  {f('tokens_per_s', 1, 0)} tok/s  MFU {f('mfu', 0.01, 1)}%  device {f('device_used_bytes', 2**30, 1)} GiB"
                 f"  allocated {f('peak_mem_bytes', 2**30, 1)} GiB  first step at {f('start_s', 1, 2)} s  rc {r['rc']}")
        ph = x.get("start_phases")
        if isinstance(ph, dict) and ph:   # trainc's: where the start went, and its first step
            t.append("           start: " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items() if isinstance(v, (int, float)))
                     + (f"; the first step {x['first_step_ms'] / 1e3:.2f} s" if x.get("first_step_ms") is not None else ""))
    elif r["stage"] == "unparsed":
        t.append(f"unparsed {r['line']}")
    elif r["stage"] == "profile" and r["model"] != "gpt2_124m_bf16":
        # the one-layer build with another attention form: its attention
        # ops a layer (ms over kernels: one a layer) beside GPT-2 small's
        x = r.get("result") or {}
        main = next((q.get("result") or {} for q in rows if q["stage"] == "profile" and q.get("model") == "gpt2_124m_bf16"), {})
        def per(res, name):
            o = next((o for o in res.get("by_op", []) if o["op"] == name), None)
            return o["ms"] / o["kernels"] if o and o.get("kernels") else None
        parts = []
        for name in ("attention", "attention_grad"):
            one, two = per(x, name), per(main, name)
            parts.append(f"{name} {one:.3f} ms a layer" if one is not None else f"{name} -")
            parts[-1] += f" (the default's {two:.3f} ms: {one / two:.2f}x)" if one is not None and two else " (the default's -)"
        t.append(f"profile  {r['model']} (--tc-attention-rows=1, rc {r['rc']}): " + "; ".join(parts))
    elif r["stage"] == "profile":
        x = r.get("result") or {}
        ms, c = x.get("step_ms_sum"), x.get("ceilings")
        near = lambda b, ms: f"{b:.2f} ms ({100 * b / ms:.0f}% of it)" if b and ms else "-"
        t.append(f"profile  {r['model']}: {x.get('kernels')} kernels, {ms or 0:.2f} ms a micro-batch summed over kernels (eager, rc {r['rc']}"
                 + ("; cold: its first run only" if x.get("cold") else "") + ");"
                 f" the roofline's bound at 989 TFLOP/s and {peak_tb} TB/s {near(x.get('bound_ms'), ms)}"
                 + (f", at the measured {c['tflops']:.0f} TFLOP/s and {c['tb_per_s']:.2f} TB/s {near(x.get('bound_measured_ms'), ms)}" if c else ""))
        for o in x.get("by_op", []):
            tf = f"  {o['tflops']:.0f} TFLOP/s" if o.get("tflops") else ""
            gb = f"  {o['gbps']:.0f} GB/s" if o.get("gbps") and o["op"] != "gemm" else ""
            bd = f"  bound {o['bound_ms']:.3f} ms ({100 * o['bound_ms'] / o['ms']:.0f}%)" if o.get("bound_ms") and o["ms"] else ""
            if bd and o.get("bound_measured_ms"):
                bd += f", measured {o['bound_measured_ms']:.3f} ms ({100 * o['bound_measured_ms'] / o['ms']:.0f}%)"
            if o["op"] == "gemm" and c:
                bd += f"; PyTorch on a layer's products {c['layer_products_tflops']:.0f} TFLOP/s"
            elif o["op"] in ("attention", "attention_grad") and c:
                bd += f"; PyTorch's SDPA {c['attention_' + ('fwd' if o['op'] == 'attention' else 'bwd') + '_tflops']:.0f} TFLOP/s"
            t.append(f"  {o['op']:<40} {o['ms']:8.3f} ms {100 * (o['share'] or 0):5.1f}%  ({o['kernels']} kernels){tf}{gb}{bd}")
    elif r["stage"] == "ceilings":
        x = r.get("result") or {}
        t.append(f"ceilings a device-to-device copy {x['copy_tb_per_s']:.2f} TB/s (read + written), a {x['matmul_n']}^3 bf16 product {x['bf16_tflops']:.0f} TFLOP/s"
                 f" (datasheet {peak_tb} and 989); GPT-2 small's 12 products of a layer {x['layer_products_tflops']:.0f} TFLOP/s, its causal attention"
                 f" {x['attention_fwd_tflops']:.0f} forward, {x['attention_bwd_tflops']:.0f} backward (PyTorch {x.get('torch')})"
                 if x else f"ceilings not measured (rc {r['rc']})")
    # under a failed row, why (the last line of its log)
    if r.get("why"):
        t.append("           why: " + r["why"])
    elif r["stage"] == "kernels" and r["rc"] != 0 and not r.get("summary"):
        t.append("           why: " + r.get("last_line", ""))
ge = res["gelu_epilogue_rel_err_fp32"]
if ge["gelu"] is not None or ge["dgelu"] is not None:
    t.append(f"finding  cuBLASLt's GELU epilogues, fp32, worst relative error against the C kernel's tanh form: GELU {e2(ge['gelu'])}, DGELU {e2(ge['dgelu'])}"
             " (the tanh form in f32: about 1e-6 both; erf's: up to 4e-5, 4e-4; a tanh with 2^-11 error: up to 2.4e-4, 6.5e-5; tol 2e-3)")
def g(k, fmt, want):
    v = goal[k]
    m = goal["met"][k]
    return f"{fmt(v) if v is not None else '-'} ({want}: {'-' if m is None else 'yes' if m else 'no'})"
t.append(f"goal     trainc bf16 against {goal['reference'] or 'torch.compile (no result)'}: " + ", ".join((
    g("speedup_vs_compile", lambda v: f"{v:.2f}x torch.compile's tokens/s", ">= 1.3"),
    g("device_memory_vs_compile", lambda v: f"{v:.2f}x its device memory", "<= 1"),
    g("mfu", lambda v: f"MFU {100 * v:.1f}%", ">= 45%"),
    g("start_s", lambda v: f"first step at {v:.2f} s", "<= 2 s"))))
if goal["invalid"]:
    t.append(f"goal     INVALID, nothing above is met: {goal['invalid']}")
if goal["build_stale_files"]:
    t.append(f"goal     (measured on a build of other sources: {goal['build_stale_files']} files differ; rerun tests/gpu/build.sh)")
t.append(f"total {sys.argv[4]} s")
open(sys.argv[3], "w").write("\n".join(t) + "\n")
EOF
tar czf "$OUT/logs.tar.gz" -C "$(dirname "$L")" logs
}

# the time each stage keeps for the selected stages after it
r_prof=0 r_bench=0 r_e2e=0
want profile && r_prof=65
r_bench=$r_prof
want bench && r_bench=$(( r_prof + 210 ))
r_e2e=$r_bench
want e2e && r_e2e=$(( r_bench + 60 ))
# tl WANT RESERVE LOG CMD...: CMD with the budget's limit (cap), its output
# to LOG; not run (rc 125, said in LOG) when under 10 s are left
tl() {
    local w=$1 r=$2 log=$3 lim
    shift 3
    lim=$(cap "$w" "$r")
    [ "$lim" -lt 10 ] && { echo "not run: out of time (TRAINC_GPU_BUDGET)" > "$log"; return 125; }
    timeout -k 5 "$lim" "$@" > "$log" 2>&1
}

# ---- 1. kernels ----
# (gpt2_tiny_plain: GPT-2's products with GELU and bias-gradient epilogues
# run without them, the module's kernels after; every other one with
# cuBLASLt's where its heuristic has them, which kcheck's first line counts.
# gpt2_tiny_fp16_nofill is a finding, not a check: fp16 GPT-2's
# linear_cross_entropy alone, its products whose beta, read from the
# device, is 0 run without the runtime zeroing C first
# (TRAINC_CUDA_BETA0_FILL=0): poisoned C coming through means that
# cuBLASLt reads C there, and the zeroing is needed)
kmodels="gpt2_tiny gpt2_tiny_plain gpt2_tiny_fp16_nofill gpt2_tiny_accum llama_tiny mlp mlp_rows gpt2_d64 llama_d128 gpt2_tiny_bf16 llama_tiny_bf16 gpt2_tiny_fp16 gpt2_d64_bf16
         gpt2_d64_bf16_notc llama_d64_bf16 llama_d128_bf16"
want kernels || kmodels=
# worst EPILOGUE JSONL: the largest rel_err of kcheck's lines marked
# "gelu_epilogue":EPILOGUE (gelu or dgelu), or nothing
worst() { grep "\"gelu_epilogue\":\"$1\"" "$2" 2>/dev/null | sed -n 's/.*"rel_err":\([^,]*\),.*/\1/p' | sort -g | tail -1; }
for m in $kmodels; do
    lim=$(cap 75 $r_e2e)
    [ "$lim" -lt 10 ] && { skipped kernels model $m; continue; }
    t0=$(date +%s%N)
    exe=$m plain= fill= only=
    [ "$m" = gpt2_tiny_plain ] && exe=gpt2_tiny plain=0
    [ "$m" = gpt2_tiny_fp16_nofill ] && exe=gpt2_tiny_fp16 fill=0 only=linear_cross_entropy
    # (TRAINC_KCHECK_TRACE: each kernel named before it runs, so that one
    # that hangs is the log's last line)
    TRAINC_CUDA_GELU_EPILOGUE=$plain TRAINC_CUDA_BGRAD_EPILOGUE=$plain TRAINC_CUDA_BIAS_EPILOGUE=$plain TRAINC_CUDA_BETA0_FILL=$fill TRAINC_KCHECK_ONLY=$only TRAINC_KCHECK_TRACE=1 \
        timeout -k 5 $lim "$B/kcheck_$exe" "$L/kcheck_$m.jsonl" 1234 > "$L/kcheck_$m.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    tail -3 "$L/kcheck_$m.log"
    summ=$(grep '"summary"' "$L/kcheck_$m.jsonl" 2>/dev/null | tail -1)
    # (C's inf and nan read as null; a summary that is still not JSON, one
    # cut short say, is left out: the record keeps its other fields)
    [ -n "$summ" ] && summ=$(python3 -c '
import json, sys
sys.path.insert(0, "tests/gpu")
from records import loads
try:
    print(json.dumps(loads(sys.argv[1])))
except ValueError:
    pass' "$summ" 2>/dev/null)
    msg=$(why "$L/kcheck_$m.log" $rc)
    dev=$(head -1 "$L/kcheck_$m.log" | tr -d '"\\' | cut -c1-300)
    # the worst errors of the products with cuBLASLt's GELU and DGELU
    # epilogues (kcheck.c), and the kernels whose poison came through
    gw=$(worst gelu "$L/kcheck_$m.jsonl") dw=$(worst dgelu "$L/kcheck_$m.jsonl") nm=$(grep -c '"nan_mismatch":[1-9]' "$L/kcheck_$m.jsonl" 2>/dev/null)
    rec "{\"stage\":\"kernels\",\"model\":\"$m\",\"rc\":$rc,\"ms\":$(( (t1 - t0) / 1000000 )),\"summary\":${summ:-null},\"gelu_worst\":${gw:-null},\"dgelu_worst\":${dw:-null},\"nan_kernels\":${nm:-0},\"first_line\":\"$dev\",\"last_line\":\"$msg\"}"
    nk=$((${nk:-0} + 1)); [ $((nk % 4)) = 0 ] && publish   # (a call cut short in this stage keeps what it checked)
done
want kernels && publish

# ---- 2. end to end ----
steps=20
emodels="gpt2_tiny llama_tiny gpt2_tiny_bf16 gpt2_tiny_bf16_lora llama_tiny_bf16 llama_tiny_bf16_ckpt gpt2_tiny_fp16"
want e2e || emodels=
for m in $emodels; do
    # five runs: the CPU, the GPU with and without graphs, two step-0 saves
    # (each run not started when under 10 s are left: rc 125)
    t=$(cap 120 $r_bench)
    [ "$t" -lt 40 ] && { skipped e2e model $m; continue; }
    case $m in *_bf16*|*_fp16*) lim=2e-2 ;; *) lim=1e-4 ;; esac
    args="--data $B/data/ts_train.bin --steps $steps --lr 1e-3 --warmup 0 --schedule constant --seed 7 --quiet"
    # (the CPU's two runs beside the GPU's: they need none of it)
    tl 120 $r_bench "$L/e2e_${m}_cpu.log" "$B/$m" $args --device cpu --metrics "$L/e2e_${m}_cpu.jsonl" &
    pcpu=$!
    tl 60 $r_bench "$L/init_${m}_cpu.log" "$B/$m" --steps 0 --seed 7 --device cpu --save "$L/init_${m}_cpu.safetensors" &
    pinit=$!
    tl 120 $r_bench "$L/e2e_${m}_cuda.log" "$B/$m" $args --device cuda --metrics "$L/e2e_${m}_cuda.jsonl"
    rc2=$?
    tl 120 $r_bench "$L/e2e_${m}_eager.log" env TRAINC_CUDA_GRAPH=0 "$B/$m" $args --device cuda --metrics "$L/e2e_${m}_eager.jsonl"
    rc3=$?
    wait $pcpu
    rc1=$?
    cmp=$(python3 - "$L/e2e_${m}_cpu.jsonl" "$L/e2e_${m}_cuda.jsonl" "$L/e2e_${m}_eager.jsonl" $steps $lim <<'EOF'
import json, sys
def losses(p):
    try:
        return [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
    except Exception:
        return []
c, g, e = (losses(p) for p in sys.argv[1:4])
n = min(len(c), len(g))
rel = max((abs(a - b) / max(abs(a), 1e-12) for a, b in zip(c, g)), default=None)
same = len(g) > 0 and g == e
lim = float(sys.argv[5])
print(json.dumps({"steps": n, "max_rel": rel, "limit": lim, "graph_equals_eager": same, "cpu_first": c[0] if c else None,
                  "cpu_last": c[-1] if c else None, "gpu_last": g[-1] if g else None,
                  "ok": bool(n == int(sys.argv[4]) and rel is not None and rel <= lim)}))
EOF
)
    # the parameters the GPU initialised itself (trn_init_f32) are the host's
    # bit for bit: the step-0 checkpoints are the same bytes
    tl 60 $r_bench "$L/init_${m}_cuda.log" "$B/$m" --steps 0 --seed 7 --device cuda --save "$L/init_${m}_cuda.safetensors"
    wait $pinit
    init_same=false init_dev=false
    cmp -s "$L/init_${m}_cpu.safetensors" "$L/init_${m}_cuda.safetensors" && init_same=true
    grep -q "initialised on the device" "$L/init_${m}_cuda.log" && init_dev=true
    rm -f "$L/init_${m}_cpu.safetensors" "$L/init_${m}_cuda.safetensors"
    echo "e2e $m: $cmp; step-0 checkpoints equal: $init_same (initialised on the device: $init_dev)"
    w=
    [ $rc2 -ne 0 ] && w=$(why "$L/e2e_${m}_cuda.log" $rc2)
    [ $rc1 -ne 0 ] && w="cpu: $(why "$L/e2e_${m}_cpu.log" $rc1)"
    rec "{\"stage\":\"e2e\",\"model\":\"$m\",\"rc_cpu\":$rc1,\"rc_cuda\":$rc2,\"rc_eager\":$rc3,\"init_same\":$init_same,\"init_on_device\":$init_dev,\"why\":\"$w\",\"result\":${cmp:-null}}"
done
want e2e && publish

# ---- 3. benchmark ----
# (each run's limit capped by the budget, 65 s kept for the ceilings and the
# profiles; in
# order of what the Goal needs: trainc bf16, torch.compile, eager, fp32)
bench_trainc() {   # NAME STEPS LIMIT [RESERVE]
    local name=$1 n=$2 lim
    lim=$(cap $3 $(( r_prof + ${4:-0} )))
    # (RESERVE kept for what follows, unless that leaves under 30 s: a
    # budget too small for both, as a rerun's, measures trainc)
    [ "$lim" -lt 30 ] && lim=$(cap 30 $r_prof)
    [ "$lim" -lt 10 ] && { skipped bench impl trainc-$name; return; }
    local base smi
    mem_start "$L/mem_$name.txt"
    timeout -k 5 "$lim" "$B/$name" --data "$B/data/ts_train.bin" --steps "$n" --lr 6e-4 --warmup 0 --device cuda \
        --metrics "$L/bench_$name.jsonl" > "$L/bench_$name.log" 2>&1
    local rc=$?
    kill $smi 2>/dev/null
    local res
    res=$(python3 - "$L/bench_$name.jsonl" "$L/mem_$name.txt" "$L/bench_$name.log" $rc "$n" "$base" <<'EOF'
import json, math, re, sys
sys.path.insert(0, "tests/gpu")
from records import loads   # (a NaN loss as C writes it read as null)
rows = []
try:
    for l in open(sys.argv[1]):
        try:
            if '"ms"' in l:
                rows.append(loads(l))
        except ValueError:
            pass
except OSError:
    pass
try:
    mem = [int(x) for x in open(sys.argv[2]).read().split() if x.isdigit()]
except Exception:
    mem = []
# the arena, as the run's first line gives it ("device cuda (23.41 GiB)"):
# samples that never saw it (a monitor that started late) give no figure
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
try:
    m = re.search(r"device cuda \(([0-9.]+) (B|KiB|MiB|GiB|TiB)\)", open(sys.argv[3], errors="replace").read())
except OSError:
    m = None
arena = float(m.group(1)) * units[m.group(2)] if m else None
used = max(mem) * 2**20 if mem else None
if used is not None and arena is not None and used < arena:
    used = None
# whether the run is one to judge by: every step run, its status 0, every
# loss finite and the last below the first (a run that failed, or whose
# kernels do less than the model, gives no Goal)
loss = [r.get("loss") for r in rows]
finite = bool(loss) and all(isinstance(x, (int, float)) and math.isfinite(x) for x in loss)
complete = int(sys.argv[4]) == 0 and len(rows) == int(sys.argv[5])
learned = finite and len(loss) > 1 and loss[-1] < loss[0]
# model FLOPs (one count for both sides: run.sh's torch rows too): 6 N a
# token for N = GPT-2 small's 123,653,376 weights that multiply (the
# vocabulary unpadded, no wpe: a lookup), and 6 L T C for attention (QK^T
# and PV, forward and backward, causal: half)
N, tok, T, C, L = 123653376, 16 * 1024, 1024, 768, 12
flops = 6 * N * tok + 6 * L * T * C * tok
ms = sorted(r["ms"] for r in rows[2:]) or sorted(r["ms"] for r in rows)
med = ms[len(ms) // 2] if ms else None
print(json.dumps({"steps": len(rows), "steps_wanted": int(sys.argv[5]), "complete": complete, "losses_finite": finite, "loss_fell": learned,
                  "step_ms": med, "tokens_per_s": tok / med * 1e3 if med else None,
                  "mfu": flops / (med / 1e3) / 989e12 if med else None, "device_used_bytes": used, "device_samples": len(mem),
                  "device_before_bytes": int(sys.argv[6]) * 2**20 if sys.argv[6].isdigit() else None, "arena_bytes": arena,
                  "start_s": rows[0].get("start_s") if rows else None, "start_phases": rows[0].get("start_phases") if rows else None,
                  "first_step_ms": rows[0]["ms"] if rows else None, "first_loss": loss[0] if loss else None, "last_loss": loss[-1] if loss else None}))
EOF
)
    echo "bench $name: $res"
    local w=
    [ $rc -ne 0 ] && w=$(why "$L/bench_$name.log" $rc)
    rec "{\"stage\":\"bench\",\"impl\":\"trainc-$name\",\"rc\":$rc,\"why\":\"$w\",\"result\":${res:-null}}"
    publish
}
bench_torch() {   # MODE LIMIT [VOCAB]
    local mode=$1${3:+-v$3} lim smi rc res w
    lim=$(cap $2 $r_prof)
    [ "$lim" -lt 10 ] && { skipped bench impl pytorch-$mode; return; }
    local base
    mem_start "$L/mem_torch_$mode.txt"
    PYTHONUNBUFFERED=1 timeout -k 5 $lim $TORCH_BENCH --mode $1 ${3:+--vocab $3} --batch 16 --steps 15 --data "$B/data/ts_train.bin" \
        > "$L/torch_$mode.out" 2> "$L/torch_$mode.err"
    rc=$?
    torch_rc=$rc
    kill $smi 2>/dev/null
    # the device memory in use, sampled as for trainc (the context and
    # PyTorch's cache included), beside its max_memory_allocated
    res=$(python3 - "$L/torch_$mode.out" "$L/mem_torch_$mode.txt" "$base" <<'EOF'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception:
    print("null"); sys.exit()
try:
    mem = [int(x) for x in open(sys.argv[2]).read().split() if x.isdigit()]
except Exception:
    mem = []
r["device_used_bytes"] = max(mem) * 2**20 if mem else None
# (samples that never saw what PyTorch allocated give no figure)
if r["device_used_bytes"] is not None and r["device_used_bytes"] < (r.get("peak_mem_bytes") or 0):
    r["device_used_bytes"] = None
r["device_samples"] = len(mem)
r["device_before_bytes"] = int(sys.argv[3]) * 2**20 if sys.argv[3].isdigit() else None
# the MFU from its tokens/s with trainc's FLOP count (its own, from its
# parameter count, kept as mfu_script)
r["mfu_script"] = r.get("mfu")
r["mfu"] = r["tokens_per_s"] * (6 * 123653376 + 6 * 12 * 1024 * 768) / 989e12 if r.get("tokens_per_s") else None
print(json.dumps(r))
EOF
)
    echo "bench torch $mode: $res"
    w=
    [ $rc -ne 0 ] && w=$(why "$L/torch_$mode.err" $rc)
    rec "{\"stage\":\"bench\",\"impl\":\"pytorch-$mode\",\"rc\":$rc,\"why\":\"$w\",\"result\":${res:-null}}"
    publish
}
# mem_start FILE: the device memory in use now (base) and a sampler of it
# every 200 ms into FILE (smi), started a second ahead of the run it
# watches, so that a monitor slow to start does not miss it
mem_start() {
    base=$(timeout 20 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -cd 0-9)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$1" 2>/dev/null &
    smi=$!
    sleep 1
}
if want bench; then
    # (60 s at most, about 10 guessed, and 120 kept for torch.compile's
    # first row: a trainc run that hangs does not cost the Goal its
    # reference)
    torch_rc=0
    bench_trainc gpt2_124m_bf16 14 60 120
    bench_torch compile 200
    # torch.compile with the vocabulary padded by hand (as nanoGPT does;
    # trainc pads it by itself): the Goal's reference is the faster of the
    # two (not where the first timed out: the second would hang as well,
    # and cost eager and fp32 their time)
    case $torch_rc in
    124|137) echo "bench torch compile-v50304: not run (torch.compile timed out)"
             rec '{"stage":"bench","impl":"pytorch-compile-v50304","skipped":true,"why":"not run: the torch.compile row above timed out"}' ;;
    *) bench_torch compile 200 50304 ;;
    esac
    bench_torch eager 120
    bench_trainc gpt2_124m_fp32 6 120
fi

# ---- 4. where the time goes: GPT-2 small bf16, every kernel timed with events ----
# first the device's two ceilings, measured (tests/gpu/ceilings.py: a
# device-to-device copy's TB/s, an 8192^3 bf16 product's TFLOP/s through
# PyTorch, and PyTorch's rates on one GPT-2 small layer's products and on
# its attention, forward and backward), for the roofline's bound at what the device does beside the one at its
# datasheet's peaks (25 s at most: about 10 guessed; 40 kept for the
# profiles)
if want profile; then
    lim=$(cap 25 40)
    if [ "$lim" -lt 10 ]; then
        skipped ceilings name device
    else
        PYTHONUNBUFFERED=1 timeout -k 5 $lim $CEILINGS > "$L/ceilings.out" 2> "$L/ceilings.err"
        rc=$?
        # a result only with every figure the table and the bounds use,
        # finite and positive, and the products' outputs finite
        ceil=$(python3 - "$L/ceilings.out" <<'EOF'
import json, math, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    good = all(isinstance(r.get(k), (int, float)) and math.isfinite(r[k]) and r[k] > 0
               for k in ("copy_tb_per_s", "bf16_tflops", "matmul_n", "layer_products_tflops", "attention_fwd_tflops", "attention_bwd_tflops"))
    good = good and r.get("matmul_finite") is True
    print(json.dumps(r) if good else "null")
except Exception:
    print("null")
EOF
)
        echo "ceilings: $ceil" | cut -c1-300
        w=
        [ "${ceil:-null}" = null ] && w=$(why "$L/ceilings.err" $rc)
        [ "${ceil:-null}" = null ] && [ -z "${w#timed out: }" ] && w="$w$(why "$L/ceilings.out" 0)"
        rec "{\"stage\":\"ceilings\",\"name\":\"device\",\"rc\":$rc,\"why\":\"$w\",\"result\":${ceil:-null}}"
        [ "${ceil:-null}" != null ] && echo "$ceil" > "$L/ceilings.json"
    fi
fi
# profile NAME LIMIT: 4 steps (the first not counted: runtime/cuda.c) of build-gpu/NAME with TRAINC_CUDA_PROFILE,
# its kernels per op and the roofline's bound beside them
profile() {
    local name=$1 lim=$2 rc res w=
    TRAINC_CUDA_PROFILE=$L/profile-$name.jsonl timeout -k 5 $lim "$B/$name" --data "$B/data/ts_train.bin" --steps 4 --lr 6e-4 --warmup 0 \
        --device cuda --quiet > "$L/profile-$name.log" 2>&1
    rc=$?
    res=$(python3 - "$L/profile-$name.jsonl" "$L/ceilings.json" <<'EOF'
import json, os, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except Exception:
    print("null"); sys.exit()
try:
    ceil = json.load(open(sys.argv[2]))
except Exception:
    ceil = None
rows = [r for r in rows if r["schedule"] == "micro"]
tot = sum(r["ms"] for r in rows) or 1.0
sys.path.insert(0, "tests/gpu")
from records import op   # the ops as bench/roofline.sh names them
# per call: flops (products, attention) and the bytes of the buffers read
# and written (a lower bound of the traffic: GB/s for the memory-bound),
# and the roofline's bound, as bench/roofline.sh sums it: each kernel at
# least max(flops / 989 TFLOP/s, bytes / TRAINC_GPU_PEAK_TB), the dense
# bf16 peak and the card's memory bandwidth (above; bound / ms: how near
# the kernels of an op come to it); and the same at the ceilings measured
# above, where they were
def bound(r, pf=989e12, pb=float(os.environ.get("TRAINC_GPU_PEAK_TB", "4.8")) * 1e12):
    return max(r["flops"] / pf, (r.get("bytes") or 0) / pb) * 1e3
mbound = (lambda r: bound(r, ceil["bf16_tflops"] * 1e12, ceil["copy_tb_per_s"] * 1e12)) if ceil else None
ops = {}
for r in rows:
    o = ops.setdefault(op(r), [0.0, 0, 0.0, 0.0, 0.0, 0.0])
    o[0] += r["ms"] / r["calls"]; o[1] += 1; o[2] += r["flops"]; o[3] += r.get("bytes") or 0; o[4] += bound(r)
    o[5] += mbound(r) if mbound else 0
step = tot / rows[0]["calls"] if rows else None
top = [{"kernel": r["kernel"], "where": r["where"], "ms": r["ms"] / r["calls"], "share": r["ms"] / tot,
        "tflops": r["flops"] / (r["ms"] / r["calls"]) / 1e9 if r["flops"] and r["ms"] else None,
        "gbps": r["bytes"] / (r["ms"] / r["calls"]) / 1e6 if r.get("bytes") and r["ms"] else None} for r in rows[:15]]
by_op = sorted(({"op": k, "ms": v[0], "kernels": v[1], "share": v[0] / step if step else None,
                 "tflops": v[2] / v[0] / 1e9 if v[2] and v[0] else None,
                 "gbps": v[3] / v[0] / 1e6 if v[3] and v[0] else None, "bound_ms": v[4],
                 "bound_measured_ms": v[5] if mbound else None} for k, v in ops.items()), key=lambda x: -x["ms"])
# (cold: the micro-batch ran once only, its times with the module's
# loading and cuBLASLt's first calls in them: runtime/cuda.c)
print(json.dumps({"kernels": len(rows), "cold": any(r.get("cold") for r in rows), "step_ms_sum": step, "bound_ms": sum(bound(r) for r in rows) if rows else None,
                  "bound_measured_ms": sum(mbound(r) for r in rows) if rows and mbound else None,
                  "ceilings": {"tflops": ceil["bf16_tflops"], "tb_per_s": ceil["copy_tb_per_s"],
                               "layer_products_tflops": ceil["layer_products_tflops"], "attention_fwd_tflops": ceil["attention_fwd_tflops"],
                               "attention_bwd_tflops": ceil["attention_bwd_tflops"]} if ceil else None,
                  "by_op": by_op[:12], "top": top}))
EOF
)
    echo "profile $name: $res" | cut -c1-400
    [ $rc -ne 0 ] && w=$(why "$L/profile-$name.log" $rc)
    rec "{\"stage\":\"profile\",\"model\":\"$name\",\"rc\":$rc,\"why\":\"$w\",\"result\":${res:-null}}"
}
# GPT-2 small as benchmarked; then one layer of it built with
# --tc-attention-rows=1 (the tensor-core attention's forward and dq with one
# tile of 16 query rows a warp, the default's two: docs/cuda.md), whose
# attention rows the table puts beside the default's, a layer each
if want profile; then
    lim=$(cap 120 20)
    if [ "$lim" -lt 10 ]; then skipped profile model gpt2_124m_bf16; else profile gpt2_124m_bf16 $lim; fi
    lim=$(cap 30 0)
    if [ "$lim" -lt 10 ]; then skipped profile model gpt2_1l_bf16_rows1; else profile gpt2_1l_bf16_rows1 $lim; fi
fi

# ---- the end ----
kill $monitor 2>/dev/null
publish
echo "================ results ($OUT/results.json) ================"
cat "$OUT/table.txt"
