#!/bin/bash
# tests/gpu/selftest.sh — checks tests/gpu/run.sh itself on a machine with
# no GPU (CTest: gpu_script): its parsing of what the programs write, the
# results.json and table it makes, and its time budget.  The GPU's
# programs are stand-ins (one shell script under every name run.sh calls,
# nvidia-smi and the PyTorch reference included) that write what the real
# ones write (kcheck's summary line, the runtime's metrics lines and
# "initialised on the device", TRAINC_CUDA_PROFILE's lines, the torch
# script's JSON) with numbers chosen here, so that every figure the table
# shows is known:
#   - kcheck_gpt2_tiny passes; the finding's check (gpt2_tiny_fp16
#     without zeroing C) fails: cuBLASLt "reads C"; gpt2_tiny_plain's
#     worst error is C's "inf", gpt2_tiny_accum's summary is cut short and
#     its DGELU error C's "-nan" (the record kept, those fields null);
#     llama_tiny writes a number that is not one (its record kept as
#     unparsed); kcheck_mlp hangs: its run times out
#     at the budget's cap and the kernel checks after it are skipped;
#   - the e2e runs agree but for gpt2_tiny_fp16, whose GPU losses are 5%
#     off (a failed row); llama_tiny's step-0 checkpoints differ;
#   - the benchmark's step times give a known median, tokens/s and MFU;
#   - build-gpu/ comes packed (build-gpu.tar.gz alone); its checksums name
#     one source changed since it was built;
#   - a second call with TRAINC_GPU_STAGES=bench runs the benchmark alone;
#   - a third with TRAINC_GPU_STAGES=profile, whose ceilings come out with
#     a NaN copy rate, records them as not measured and bounds the profile
#     at the datasheet's peaks;
#   - in the second, trainc's run fails after 4 NaN steps and torch.compile
#     times out: the Goal invalid, the padded row not run; a fourth, the
#     benchmark alone, has trainc's losses rising and both sides' memory
#     above what the samples saw: the Goal invalid, no memory figures.
# The real programs' formats are tested where they are made (runtime:
# e2e tests; kcheck: cuda_fake_*); this checks the script's side.
# usage: selftest.sh [WORKDIR]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
w=${1:-$(mktemp -d)}
rm -rf "$w" && mkdir -p "$w/build-gpu/data" "$w/bin" "$w/out"
: > "$w/build-gpu/data/ts_train.bin"

cat > "$w/stub" <<'EOF'
#!/bin/bash
# a stand-in for one of run.sh's programs, by the name it is called under
me=$(basename "$0")
case $me in
nvidia-smi)
    case "$*" in
    *-lms*) while :; do echo 1234; sleep 0.1; done ;;
    *memory.used*) echo 1000 ;;
    *) echo "Stand-in H200, 999.0, 143771 MiB, 1980 MHz" ;;
    esac
    exit 0 ;;
ceilings)
    echo '{"gpu":"Stand-in H200","torch":"0.0-stand-in","copy_bytes":4294967296,"copy_ms":1.0,"copy_tb_per_s":4.0,"matmul_n":8192,"matmul_ms":1.4,"bf16_tflops":800.0,"layer_products_tflops":600.0,"attention_fwd_tflops":400.0,"attention_bwd_tflops":300.0,"matmul_finite":true,"reps":10,"inner":10}'
    exit 0 ;;
torch_bench)
    mode=eager suf= ms=80.0
    while [ $# -gt 0 ]; do
        [ "$1" = --mode ] && mode=$2
        [ "$1" = --vocab ] && suf=-v$2
        shift
    done
    sleep 0.3
    # (STANDIN_TORCH_FAIL=MODE: that mode fails as torch.compile does, the
    # exception's line above Dynamo's hint)
    if [ "${STANDIN_TORCH_FAIL:-}" = $mode ]; then
        printf '%s\n' 'Traceback (most recent call last):' '  File "bench/gpt2_torch.py", line 140, in <module>' \
            "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:" 'RuntimeError: the stand-in failed' '' \
            'Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you are reporting a bug to PyTorch).' >&2
        exit 1
    fi
    # (STANDIN_TORCH_RC124=MODE: that mode ends as a run timeout stopped)
    [ "${STANDIN_TORCH_RC124:-}" = $mode ] && [ -z "$suf" ] && { echo "gpt2_torch: warm-up step 1 of 5 done at 99.0 s" >&2; exit 124; }
    [ $mode = compile ] && ms=50.0
    [ -n "$suf" ] && ms=48.0
    # (eager's loss NaN, as Python's json writes it: results.json must say null)
    loss=7.0
    [ $mode = eager ] && loss=NaN
    echo "{\"impl\":\"pytorch-$mode$suf\",\"torch\":\"0.0-stand-in\",\"step_ms\":$ms,\"tokens_per_s\":$(( 16384000 / ${ms%.0} )),\"mfu\":0.3,\"peak_mem_bytes\":${STANDIN_TORCH_PEAK:-1073741824},\"last_loss\":$loss}"
    exit 0 ;;
kcheck_mlp)
    echo "kcheck mlp on Stand-in: arena 1 bytes"
    [ "${TRAINC_KCHECK_TRACE:-}" = 1 ] && echo "run micro k0_matmul (mlp.model:24)" && echo "run micro k1_relu (mlp.model:25)"
    sleep 1000 ;;
kcheck_gpt2_tiny_fp16)
    # the finding row (TRAINC_CUDA_BETA0_FILL=0, one kernel): C read
    if [ "${TRAINC_CUDA_BETA0_FILL:-}" = 0 ] && [ "${TRAINC_KCHECK_ONLY:-}" = linear_cross_entropy ]; then
        echo "kcheck gpt2_tiny_fp16: 1 kernels, 1 failed, worst relative error 0.000e+00 (k10_linear_cross_entropy)"
        printf '%s\n' '{"kernel":"k10_linear_cross_entropy","rel_err":0.000e+00,"nan_mismatch":4096,"ok":false}' \
            '{"model":"gpt2_tiny_fp16","summary":true,"kernels":1,"failed":1,"worst":0,"worst_kernel":"k10_linear_cross_entropy"}' > "$1"
        exit 1
    fi
    echo '{"model":"gpt2_tiny_fp16","summary":true,"kernels":40,"failed":0,"worst":0,"worst_kernel":""}' > "$1"
    exit 0 ;;
kcheck_gpt2_tiny_accum)
    # a summary cut short (left out of the record), a NaN as C prints it
    echo "kcheck gpt2_tiny_accum on Stand-in H200 (sm_90): arena 4096 bytes"
    printf '%s\n' '{"kernel":"k9_matmul_gelu_grad","rel_err":-nan,"tol":2.0e-03,"nan_mismatch":1,"ok":false,"gelu_epilogue":"dgelu"}' \
        '{"model":"gpt2_tiny_accum","summary":true,"kernels":40,"fai' > "$1"
    exit 1 ;;
kcheck_llama_tiny)
    # a number that is not one: the record is not JSON
    echo "kcheck llama_tiny on Stand-in H200 (sm_90): arena 4096 bytes"
    printf '%s\n' '{"kernel":"k3_matmul_add_gelu","rel_err":1.2.3,"tol":2.0e-03,"nan_mismatch":0,"ok":true,"gelu_epilogue":"gelu"}' \
        '{"model":"llama_tiny","summary":true,"kernels":40,"failed":0,"worst":1.500e-06,"worst_kernel":"k7_matmul"}' > "$1"
    exit 0 ;;
kcheck_*)
    m=${me#kcheck_}
    # gpt2_tiny_plain's worst error infinite, as C's printf writes it
    worst=1.500e-06
    [ "${TRAINC_CUDA_GELU_EPILOGUE:-}" = 0 ] && worst=inf
    echo "kcheck $m on Stand-in H200 (sm_90), GELU epilogues: 2 in cuBLASLt, 0 as kernels: arena 4096 bytes"
    echo "kcheck $m: 40 kernels, 0 failed, worst relative error 1.500e-06 (k7_matmul)"
    # two products with GELU epilogues (an erf-like error in the backward's)
    { [ "${TRAINC_CUDA_GELU_EPILOGUE:-}" = 0 ] || printf '%s\n' '{"kernel":"k3_matmul_add_gelu","rel_err":3.700e-05,"tol":2.0e-03,"nan_mismatch":0,"ok":true,"gelu_epilogue":"gelu"}' \
        '{"kernel":"k9_matmul_gelu_grad","rel_err":4.300e-04,"tol":2.0e-03,"nan_mismatch":0,"ok":true,"gelu_epilogue":"dgelu"}'
      echo "{\"model\":\"$m\",\"summary\":true,\"kernels\":40,\"failed\":0,\"worst\":$worst,\"worst_kernel\":\"k7_matmul\"}"; } > "$1"
    exit 0 ;;
esac
# a training executable: --steps N --device D --metrics F --save F
steps=20 dev=cpu metrics= save=
while [ $# -gt 0 ]; do
    case $1 in
    --steps) steps=$2; shift ;;
    --device) dev=$2; shift ;;
    --metrics) metrics=$2; shift ;;
    --save) save=$2; shift ;;
    esac
    shift
done
[ "$dev" = cuda ] && echo "model '$me': 1 parameters in 1 tensors | device cuda (${STANDIN_ARENA:-1 KiB}) | seed 7, initialised on the device" >&2
if [ -n "$save" ]; then
    if [ "$me" = llama_tiny ] && [ "$dev" = cuda ]; then echo gpu > "$save"; else echo same > "$save"; fi
fi
if [ -n "${TRAINC_CUDA_PROFILE:-}" ]; then
    # (the one-layer build: its attention 1.5 ms a layer, the other's 1.0)
    am=3.0
    [ "$me" = gpt2_1l_bf16_rows1 ] && am=4.5
    {
        echo '{"schedule":"micro","kernel":"k9_matmul_add_gelu_gpt2_model_L33","where":"gpt2.model:33","kind":"gemm","calls":3,"ms":6.0,"flops":3000000000000}'
        echo '{"schedule":"micro","kernel":"k6_attention_gpt2_model_L47","where":"gpt2.model:47","kind":"template","calls":3,"ms":'$am',"flops":600000000000,"bytes":3000000000}'
        echo '{"schedule":"micro","kernel":"k13_attention_gpt2_model_L47","where":"gpt2.model:47","kind":"template","calls":3,"ms":'$am',"flops":600000000000,"bytes":1000000000}'
        echo '{"schedule":"update","kernel":"k229_adamw_cast_x148","where":"","kind":"template","calls":3,"ms":1.0,"flops":0}'
    } > "$TRAINC_CUDA_PROFILE"
fi
[ -n "$metrics" ] || exit 0
: > "$metrics"
# (STANDIN_TRAINC_FAIL: GPT-2 small's bf16 run stops after 4 steps, NaN
# losses at 10 ms each, as a kernel fault would end it)
if [ -n "${STANDIN_TRAINC_FAIL:-}" ] && [ "$me" = gpt2_124m_bf16 ]; then
    for i in 1 2 3 4; do echo "{\"step\":$i,\"loss\":nan,\"ms\":10.000}" >> "$metrics"; done
    echo "error: cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS" >&2
    exit 1
fi
for i in $(seq 1 "$steps"); do
    loss=$(awk -v i=$i -v r=${STANDIN_TRAINC_RISE:-0} 'BEGIN { printf "%.6f", r ? 5.5 + i / 100 : 5.5 - i / 100 }')
    [ "$me" = gpt2_tiny_fp16 ] && [ "$dev" = cuda ] && loss=$(awk -v l=$loss 'BEGIN { printf "%.6f", l * 1.05 }')
    ms=$(( 40 + i % 5 ))      # steps 3..14: 43 44 40 41 42 43 44 40 41 42 43 44: median 43
    start=
    [ $i = 1 ] && start=',"start_s":1.250,"start_phases":{"device":0.9,"cuda_driver":0.5,"cuda_module":0.2,"cuda_arena":0.05,"cuda_gemm":0.15,"init":0.25,"load":0,"data":0.05}'
    echo "{\"step\":$i,\"loss\":$loss,\"lr\":0.001,\"grad_norm\":1,\"tokens_per_s\":1,\"ms\":$ms.000$start}" >> "$metrics"
done
EOF
chmod +x "$w/stub"
for n in gpt2_tiny llama_tiny gpt2_tiny_bf16 gpt2_tiny_bf16_lora llama_tiny_bf16 llama_tiny_bf16_ckpt gpt2_tiny_fp16 \
         gpt2_124m_bf16 gpt2_124m_fp32 gpt2_1l_bf16_rows1 \
         kcheck_gpt2_tiny kcheck_gpt2_tiny_accum kcheck_llama_tiny kcheck_mlp kcheck_mlp_rows kcheck_gpt2_d64 kcheck_llama_d128 kcheck_gpt2_tiny_bf16 \
         kcheck_llama_tiny_bf16 kcheck_gpt2_tiny_fp16 kcheck_gpt2_d64_bf16 kcheck_gpt2_d64_bf16_notc kcheck_llama_d64_bf16 kcheck_llama_d128_bf16; do
    ln -s "$w/stub" "$w/build-gpu/$n"
done
ln -s "$w/stub" "$w/bin/nvidia-smi"
ln -s "$w/stub" "$w/bin/torch_bench"
ln -s "$w/stub" "$w/bin/ceilings"
# build.sh's checksums of the sources: one file as built, one since changed
{ (cd "$root" && sha256sum README.md); echo "0000000000000000000000000000000000000000000000000000000000000000  CMakeLists.txt"; } > "$w/build-gpu/sources.sha256"
# build-gpu/ travels packed: the first call finds the pack alone
tar -C "$w/build-gpu" -czf "$w/build-gpu.tar.gz" . && rm -rf "$w/build-gpu"

# budget 350 s: the kernel checks keep 335 for what follows, so the hanging
# check gets 15 s and the ones after it none
t0=$(date +%s)
PATH=$w/bin:$PATH OUT=$w/out TRAINC_GPU_BUILD=$w/build-gpu TRAINC_GPU_PACK=$w/build-gpu.tar.gz TRAINC_GPU_TORCH=$w/bin/torch_bench TRAINC_GPU_CEILINGS=$w/bin/ceilings TRAINC_GPU_BUDGET=350 \
    TRAINC_CUBLASLT=/nonexistent bash "$root/tests/gpu/run.sh" > "$w/run.log" 2>&1 || { cat "$w/run.log"; echo "run.sh failed"; exit 1; }
echo "run.sh: $(( $(date +%s) - t0 )) s"
cat "$w/out/table.txt"

python3 - "$w/out/results.json" "$w/out/table.txt" <<'EOF'
import json, sys
def strict(c):
    raise ValueError(f"{c} in results.json")
res = json.load(open(sys.argv[1]), parse_constant=strict)
table = open(sys.argv[2]).read()
st = res["stages"]
bad = []
def check(what, ok):
    if not ok:
        bad.append(what)
def one(stage, key, name):
    r = [x for x in st if x["stage"] == stage and x.get(key) == name]
    check(f"one {stage} record for {name}", len(r) == 1)
    return r[0] if r else {}
env = st[0]
check("env first, with the budget and the GPU", env["stage"] == "env" and env["budget_s"] == 350 and env["gpu"].startswith("Stand-in H200"))
check("a build-gpu older than the sources found", env.get("build_stale_files") == 1 and env.get("stages") == "kernels,e2e,bench,profile")
k = one("kernels", "model", "gpt2_tiny")
check("kcheck summary parsed", k.get("rc") == 0 and (k.get("summary") or {}).get("kernels") == 40)
check("epilogue counts in the table", "GELU epilogues: 2 in cuBLASLt, 0 as kernels" in table)
h = one("kernels", "model", "mlp")
check("the hanging check timed out at the cap, the kernel it was running named", h.get("rc") in (124, 137)
      and h.get("last_line", "") == "timed out: run micro k1_relu (mlp.model:25)" and 9000 <= h.get("ms", 0) <= 25000)
check("the card's datasheet bandwidth in the env record", env.get("peak_tb_per_s") == 4.8 and "libcuda" in env)
nf = one("kernels", "model", "gpt2_tiny_fp16_nofill")
check("the finding: cuBLASLt reads C where beta from the device is 0", nf.get("rc") == 1 and res.get("cublaslt_reads_c_beta0") is True
      and "finding  cuBLASLt reads C where beta, from the device, is 0: yes (1 kernels checked without zeroing C, 1 failed, 1 with NaNs; rc 1)" in table)
check("the GELU epilogues' worst errors: gpt2_tiny's, not gpt2_tiny_plain's", one("kernels", "model", "gpt2_tiny").get("dgelu_worst") == 4.3e-4
      and one("kernels", "model", "gpt2_tiny_plain").get("gelu_worst") is None and res.get("gelu_epilogue_rel_err_fp32") == {"gelu": 3.7e-5, "dgelu": 4.3e-4}
      and "finding  cuBLASLt's GELU epilogues, fp32, worst relative error against the C kernel's tanh form: GELU 3.70e-05, DGELU 4.30e-04" in table)
pl = one("kernels", "model", "gpt2_tiny_plain")
check("an infinite worst error read as null", (pl.get("summary") or {}).get("kernels") == 40 and (pl.get("summary") or {}).get("worst", 0) is None
      and "kernels  gpt2_tiny_plain ok  40 kernels, 0 failed, worst - (k7_matmul)" in table)
un = [x for x in st if x["stage"] == "unparsed"]
check("a record that is not JSON kept as unparsed, the others read", len(un) == 1 and '"model":"llama_tiny"' in un[0].get("line", "")
      and "unparsed {" in table)
ac = one("kernels", "model", "gpt2_tiny_accum")
check("a summary cut short left out, C's -nan read as null, the record kept", ac.get("rc") == 1 and ac.get("summary") is None
      and ac.get("dgelu_worst", 0) is None and ac.get("nan_kernels") == 1 and "kcheck gpt2_tiny_accum on Stand-in" in ac.get("first_line", ""))
check("the checks after it skipped", all(one("kernels", "model", m).get("skipped") for m in ("mlp_rows", "llama_d128_bf16")))
e = one("e2e", "model", "gpt2_tiny")["result"] or {}
check("e2e agreement", e.get("ok") is True and e.get("steps") == 20 and e.get("max_rel") == 0 and e.get("graph_equals_eager") is True)
g = one("e2e", "model", "gpt2_tiny")
check("step-0 checkpoints equal, initialised on the device", g.get("init_same") is True and g.get("init_on_device") is True)
check("llama_tiny's checkpoints differ", one("e2e", "model", "llama_tiny").get("init_same") is False)
f = one("e2e", "model", "gpt2_tiny_fp16")["result"] or {}
check("fp16's 5% off fails", f.get("ok") is False and abs(f.get("max_rel", 0) - 0.05) < 1e-4)
b = one("bench", "impl", "trainc-gpt2_124m_bf16")["result"] or {}
flops = 6 * 123653376 * 16384 + 6 * 12 * 1024 * 768 * 16384
check("trainc bench: median of steps 3..14", b.get("steps") == 14 and b.get("step_ms") == 43.0)
check("trainc bench: tokens/s, MFU", abs(b.get("tokens_per_s", 0) - 16384 / 0.043) < 1e-6 and abs(b.get("mfu", 0) - flops / 0.043 / 989e12) < 1e-9)
check("trainc bench: device memory and first step", b.get("device_used_bytes") == 1234 * 2**20 and b.get("start_s") == 1.25
      and b.get("arena_bytes") == 1024 and b.get("device_before_bytes") == 1000 * 2**20)
check("trainc bench: a run to judge by", b.get("complete") is True and b.get("losses_finite") is True and b.get("loss_fell") is True
      and b.get("first_loss") == 5.49 and b.get("last_loss") == 5.36)
check("trainc bench: the start's phases and the first step's time", (b.get("start_phases") or {}).get("cuda_gemm") == 0.15
      and len(b.get("start_phases") or {}) == 8 and b.get("first_step_ms") == 41.0)
c = one("bench", "impl", "pytorch-compile")["result"] or {}
check("torch.compile result", c.get("step_ms") == 50.0 and c.get("device_used_bytes") == 1234 * 2**20 and c.get("peak_mem_bytes") == 1073741824
      and c.get("device_before_bytes") == 1000 * 2**20 and c.get("device_samples", 0) >= 5)
order = [x.get("impl") for x in st if x["stage"] == "bench"]
check("bench order", order == ["trainc-gpt2_124m_bf16", "pytorch-compile", "pytorch-compile-v50304", "pytorch-eager", "trainc-gpt2_124m_fp32"])
check("torch rows' MFU from tokens/s with trainc's FLOP count", abs(c.get("mfu", 0) - 327680 * flops / 16384 / 989e12) < 1e-9 and c.get("mfu_script") == 0.3)
check("eager's NaN loss written as null", (one("bench", "impl", "pytorch-eager")["result"] or {}).get("last_loss", 0) is None)
check("torch.compile padded by hand", (one("bench", "impl", "pytorch-compile-v50304")["result"] or {}).get("step_ms") == 48.0)
p = one("profile", "model", "gpt2_124m_bf16")["result"] or {}
ops = {o["op"]: o for o in p.get("by_op", [])}
check("profile: micro-batch kernels only, summed per call", p.get("kernels") == 3 and abs(p.get("step_ms_sum", 0) - 4.0) < 1e-9)
check("profile: per op", abs(ops.get("gemm", {}).get("ms", 0) - 2.0) < 1e-9 and ops.get("attention", {}).get("kernels") == 2
      and abs(ops["gemm"].get("tflops", 0) - 1500.0) < 1e-6)
check("profile: attention's TFLOP/s and GB/s", abs(ops.get("attention", {}).get("tflops", 0) - 600.0) < 1e-6
      and abs(ops["attention"].get("gbps", 0) - 2000.0) < 1e-6 and "600 TFLOP/s  2000 GB/s" in table)
# the roofline's bound per call: attention max(6e11 / 989e12, 3e9 / 4.8e12)
# + max(6e11 / 989e12, 1e9 / 4.8e12) s, the products 3e12 / 989e12 s
ab = 1e3 * (3e9 / 4.8e12 + 6e11 / 989e12)
check("profile: the roofline's bound per op and for the micro-batch", abs(ops.get("attention", {}).get("bound_ms", 0) - ab) < 1e-9
      and abs(p.get("bound_ms", 0) - ab - 3e15 / 989e12) < 1e-9 and f"bound {ab:.3f} ms ({100 * ab / 2:.0f}%)" in table)
# and at the stand-in's measured ceilings, 800 TFLOP/s and 4.0 TB/s
ce = one("ceilings", "name", "device").get("result") or {}
am = 1e3 * (3e9 / 4e12 + 6e11 / 800e12)
check("ceilings recorded, the bound at them", ce.get("bf16_tflops") == 800.0 and p.get("ceilings") == {"tflops": 800.0, "tb_per_s": 4.0, "layer_products_tflops": 600.0,
                                                                       "attention_fwd_tflops": 400.0, "attention_bwd_tflops": 300.0}
      and "(75%); PyTorch's SDPA 400 TFLOP/s" in table and "its causal attention 400 forward, 300 backward" in table
      and "(188%); PyTorch on a layer's products 600 TFLOP/s" in table
      and abs(ops.get("attention", {}).get("bound_measured_ms", 0) - am) < 1e-9 and abs(p.get("bound_measured_ms", 0) - am - 3e15 / 800e12) < 1e-9
      and f"measured {am:.3f} ms ({100 * am / 2:.0f}%)" in table and "a 8192^3 bf16 product 800 TFLOP/s" in table and "GPT-2 small's 12 products of a layer 600 TFLOP/s" in table)
v = one("profile", "model", "gpt2_1l_bf16_rows1")
check("profile: the one-row-tile build's attention a layer beside the default's", v.get("rc") == 0
      and "profile  gpt2_1l_bf16_rows1 (--tc-attention-rows=1, rc 0): attention 1.500 ms a layer (the default's 1.000 ms: 1.50x); attention_grad - (the default's -)" in table)
gl = res.get("goal", {})
check("goal: ratios of this run, against the faster torch.compile row", gl.get("reference") == "pytorch-compile-v50304"
      and abs(gl.get("speedup_vs_compile", 0) - (16384 / 0.043) / 341333) < 1e-9 and gl.get("device_memory_vs_compile") == 1.0
      and gl.get("met") == {"speedup_vs_compile": False, "device_memory_vs_compile": True, "mfu": False, "start_s": True}
      and gl.get("invalid") is None and gl.get("build_stale_files") == 1)
check("the environment first in the table, the stale build under the goal", table.startswith("env      Stand-in H200")
      and "(1 source files differ from this tree)" in table.splitlines()[0] and "goal     (measured on a build of other sources: 1 files differ" in table
      and "INVALID" not in table)
for line in ("against pytorch-compile-v50304: 1.12x torch.compile's tokens/s (>= 1.3: no)", "first step at 1.25 s (<= 2 s: yes)", "start: device 0.90 s, cuda_driver 0.50 s, cuda_module 0.20 s, cuda_arena 0.05 s, cuda_gemm 0.15 s, init 0.25 s, load 0.00 s, data 0.05 s; the first step 0.04 s", "skipped: out of time", "why: timed out", "e2e      gpt2_tiny_fp16  FAIL", "step 43.0 ms  381023 tok/s"):
    check(f"table has {line!r}", line in table)
if bad:
    print("selftest: FAILED:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"selftest: {len(st)} records, all as expected")
EOF
grep -q "WARNING: build-gpu was built from other sources (1 files differ)" "$w/run.log" || { echo "selftest: FAILED: no warning of the stale build-gpu"; exit 1; }
grep -q "^unpacked $w/build-gpu.tar.gz" "$w/run.log" || { echo "selftest: FAILED: build-gpu/ not unpacked from its pack"; exit 1; }

# a second call that reruns one stage: only its records, and the time the
# others would have kept is not kept
# (there an H100 SXM, whose bandwidth the bounds take, and torch's eager
# row failing: why is its exception, not the hint printed after it)
rm "$w/bin/nvidia-smi" && sed 's/Stand-in H200/Stand-in H100 80GB HBM3/' "$w/stub" > "$w/bin/nvidia-smi" && chmod +x "$w/bin/nvidia-smi"
PATH=$w/bin:$PATH OUT=$w/out2 TRAINC_GPU_BUILD=$w/build-gpu TRAINC_GPU_PACK=/nonexistent TRAINC_GPU_TORCH=$w/bin/torch_bench TRAINC_GPU_CEILINGS=$w/bin/ceilings TRAINC_GPU_BUDGET=60 \
    TRAINC_GPU_STAGES=bench STANDIN_TORCH_FAIL=eager STANDIN_TORCH_RC124=compile STANDIN_TRAINC_FAIL=1 TRAINC_CUBLASLT=/nonexistent bash "$root/tests/gpu/run.sh" > "$w/run2.log" 2>&1 || { cat "$w/run2.log"; echo "run.sh (bench only) failed"; exit 1; }
rm "$w/bin/nvidia-smi" && ln -s "$w/stub" "$w/bin/nvidia-smi"
python3 - "$w/out2/results.json" "$w/out2/table.txt" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
st = res["stages"]
table = open(sys.argv[2]).read()
got = [(x["stage"], x.get("impl"), bool(x.get("skipped"))) for x in st]
want = [("env", None, False)] + [("bench", i, i == "pytorch-compile-v50304") for i in ("trainc-gpt2_124m_bf16", "pytorch-compile", "pytorch-compile-v50304", "pytorch-eager", "trainc-gpt2_124m_fp32")]
if got != want:
    print(f"selftest: FAILED: TRAINC_GPU_STAGES=bench gave {got}")
    sys.exit(1)
why = "RuntimeError: the stand-in failed"
e = [x for x in st if x.get("impl") == "pytorch-eager"][0]
if st[0].get("peak_tb_per_s") != 3.35 or e.get("rc") != 1 or e.get("why") != why or f"why: {why}" not in table:
    print(f"selftest: FAILED: TRAINC_GPU_STAGES=bench on an H100: env {st[0]}, eager {e}")
    sys.exit(1)
# trainc's run failed after 4 NaN steps: figures, but the Goal invalid,
# nothing met; torch.compile timed out: no reference, its padded row not run
g = res["goal"]
inv = g.get("invalid") or ""
if (g.get("met") != {"speedup_vs_compile": None, "device_memory_vs_compile": None, "mfu": None, "start_s": None} or g.get("reference") is not None
        or "status 1" not in inv or "ran 4 of 14 steps" not in inv or "a loss not finite" not in inv or "an MFU of" not in inv
        or f"goal     INVALID, nothing above is met: {inv}" not in table or "(>= 1.3: yes)" in table
        or "pytorch-compile-v50304 skipped: not run: the torch.compile row above timed out" not in table):
    print(f"selftest: FAILED: a failed trainc run and a timed-out torch.compile: goal {g}")
    sys.exit(1)
print("selftest: TRAINC_GPU_STAGES=bench ran the benchmark alone (an H100's 3.35 TB/s; the failed row's exception under it;"
      " a failed trainc run gives an invalid Goal; a timed-out torch.compile, no padded row)")
EOF

# a third: the profile alone, where the ceilings' copy rate comes out NaN
# (every other figure as it should be): not measured, said why, the
# profile's bounds at the datasheet's peaks only
cat > "$w/bin/ceilings_none" <<'EOF'
#!/bin/bash
echo '{"gpu": "Stand-in H200", "torch": "0.0-stand-in", "copy_tb_per_s": NaN, "matmul_n": 8192, "bf16_tflops": 800.0, "layer_products_tflops": 600.0, "attention_fwd_tflops": 400.0, "attention_bwd_tflops": 300.0, "matmul_finite": true}'
EOF
chmod +x "$w/bin/ceilings_none"
PATH=$w/bin:$PATH OUT=$w/out3 TRAINC_GPU_BUILD=$w/build-gpu TRAINC_GPU_PACK=/nonexistent TRAINC_GPU_TORCH=$w/bin/torch_bench TRAINC_GPU_CEILINGS=$w/bin/ceilings_none TRAINC_GPU_BUDGET=60 \
    TRAINC_GPU_STAGES=profile TRAINC_CUBLASLT=/nonexistent bash "$root/tests/gpu/run.sh" > "$w/run3.log" 2>&1 || { cat "$w/run3.log"; echo "run.sh (profile only) failed"; exit 1; }
python3 - "$w/out3/results.json" "$w/out3/table.txt" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1]))["stages"]
table = open(sys.argv[2]).read()
c = [x for x in st if x["stage"] == "ceilings"]
p = [x for x in st if x["stage"] == "profile"]
bad = []
if [x["stage"] for x in st] != ["env", "ceilings", "profile", "profile"]: bad.append(f"records {[x['stage'] for x in st]}")
if not c or c[0].get("result") is not None or "copy_tb_per_s: NaN" not in c[0].get("why", ""): bad.append(f"ceilings record {c}")
r = (p[0].get("result") or {}) if p else {}
if r.get("ceilings") is not None or r.get("bound_measured_ms") is not None or not r.get("bound_ms"): bad.append(f"profile without ceilings {r}")
if "ceilings not measured (rc 0)" not in table or "copy_tb_per_s: NaN" not in table or "at the measured" in table: bad.append("table")
if bad:
    print("selftest: FAILED: TRAINC_GPU_STAGES=profile, the ceilings' copy rate NaN:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("selftest: TRAINC_GPU_STAGES=profile, the ceilings' copy rate NaN: not measured, the bounds at the datasheet's peaks alone")
EOF

# a fourth: the benchmark alone, trainc's losses rising (status 0, every
# step run), its arena (2 GiB) and PyTorch's allocation (2 GiB) above what
# the samples saw (1234 MiB): the Goal invalid for that reason alone, no
# memory figure on either side
PATH=$w/bin:$PATH OUT=$w/out4 TRAINC_GPU_BUILD=$w/build-gpu TRAINC_GPU_PACK=/nonexistent TRAINC_GPU_TORCH=$w/bin/torch_bench TRAINC_GPU_CEILINGS=$w/bin/ceilings TRAINC_GPU_BUDGET=60 \
    TRAINC_GPU_STAGES=bench STANDIN_TRAINC_RISE=1 STANDIN_ARENA="2.00 GiB" STANDIN_TORCH_PEAK=2147483648 TRAINC_CUBLASLT=/nonexistent bash "$root/tests/gpu/run.sh" > "$w/run4.log" 2>&1 ||
    { cat "$w/run4.log"; echo "run.sh (bench, rising losses) failed"; exit 1; }
python3 - "$w/out4/results.json" "$w/out4/table.txt" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read()
b = {x["impl"]: x.get("result") or {} for x in res["stages"] if x["stage"] == "bench"}
t, c, g = b.get("trainc-gpt2_124m_bf16", {}), b.get("pytorch-compile", {}), res["goal"]
bad = []
if t.get("arena_bytes") != 2 * 2**30 or t.get("device_used_bytes") is not None or c.get("device_used_bytes") is not None: bad.append(f"memory: trainc {t}, torch {c}")
if g.get("invalid") != "the loss did not fall (5.51 -> 5.64)" or any(v is not None for v in g["met"].values()) or g.get("device_memory_vs_compile") is not None:
    bad.append(f"goal {g}")
if "goal     INVALID, nothing above is met: the loss did not fall (5.51 -> 5.64)" not in table: bad.append("table")
if bad:
    print("selftest: FAILED: rising losses, memory the samples did not see:\n  " + "\n  ".join(bad))
    sys.exit(1)
print("selftest: rising losses make the Goal invalid; memory the samples did not see gives no figure")
EOF
