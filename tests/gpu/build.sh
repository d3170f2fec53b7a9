#!/bin/bash
# tests/gpu/build.sh — run HERE (no GPU needed): builds into build-gpu/
# everything tests/gpu/run.sh runs on the device machine, with the cubin
# already embedded by NVRTC and libgomp carried beside the executables
# (rpath $ORIGIN/lib): the device machine has CUDA 13, gcc and PyTorch but no
# OpenBLAS, flex or bison.  Images are made for sm_90 only (the H200; the
# sm_80 cubin is CI's: tests/cuda.cmake).  The CPU side (the reference of
# every check) uses the C backend's plain GEMM loops (double accumulation)
# instead of OpenBLAS: a static OpenBLAS adds ~25 MB per executable.  Check:
# ldd build-gpu/*.  The folder travels packed, as
# build-gpu-pack/build-gpu.tar.gz (about 7.5 MB of its 33: the device tool
# carries at most 64 MiB with the working tree), and run.sh unpacks it.
#   bash tests/gpu/build.sh            (about 3 minutes on 2 cores, cold cache)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/build-gpu
cm=$root/build-gpu-cmake   # not carried: only build-gpu/ travels
rm -rf "$out"
mkdir -p "$out/lib" "$out/gen" "$out/data"
cd "$root"

# the compiler, the runtime and the test helpers
mkdir -p "$cm" && cmake -S . -B "$cm" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$cm/build.log"
cmake --build "$cm" -j2 --target trainc_rt cuda_emit trainc-tokenize >> "$cm/build.log"
emit=$cm/tests/cuda_emit
export TRAINC_RUNTIME_DIR=$root/runtime

cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 "$out/lib/"
CFLAGS="-std=c11 -O2 -fopenmp -fno-trapping-math -D_GNU_SOURCE -I$root/runtime"
LIBS="$cm/runtime/libtrainc_rt.a -lm -lpthread -ldl -Wl,-rpath,\$ORIGIN/lib -s"

# NAME MODEL SYMBOL [emit args...]: generated C (cuda target) + an executable + a kernel checker
# (NOCHECK=1: no checker; CHECKONLY=1: no executable, for models only the kernel check runs)
build() {
    local name=$1 model=$2 sym=$3
    shift 3
    echo "== $name"
    "$emit" "$root/examples/$model.model" "$out/gen/$name" lib --arch sm_90 "$@"
    printf '#include "trainc_rt.h"\nextern const TrnModel %s;\nint main(int argc, char **argv) { return trn_main(argc, argv, &%s, NULL); }\n' \
        "$sym" "$sym" > "$out/gen/${name}_main.c"
    cc $CFLAGS -c "$out/gen/$name.c" -o "$out/gen/$name.o"
    [ -n "${CHECKONLY:-}" ] || cc $CFLAGS "$out/gen/$name.o" "$out/gen/${name}_main.c" $LIBS -o "$out/$name"
    if [ -z "${NOCHECK:-}" ]; then
        cc $CFLAGS -DTRN_MODEL="$sym" "$out/gen/$name.o" "$root/tests/gpu/kcheck.c" $LIBS -o "$out/kcheck_$name"
    fi
}

# Every pass at its default for the cuda target: liger-fusion (add + norm,
# rope_qk, SwiGLU, linear + cross-entropy), pad-tiles (the vocabulary to a
# multiple of 64), mixed precision where the precision says.
fp32="--set precision=fp32"
bf16="--set precision=bf16"
tiny_gpt2="-D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4"
tiny_llama="-D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4"
build gpt2_tiny gpt2 trn_model_gpt2 $fp32 -D vocab=256 $tiny_gpt2
build llama_tiny llama trn_model_llama $fp32 -D vocab=256 $tiny_llama
# 2 micro-batches a step: the weight gradients' products summed into their
# accumulators (beta 1) with the bias-gradient epilogue writing the bias's
# (cuBLASLt does not document how the two go together)
CHECKONLY=1 build gpt2_tiny_accum gpt2 trn_model_gpt2 $fp32 -D vocab=256 $tiny_gpt2 --set grad_accum=2
CHECKONLY=1 build mlp mlp trn_model_mlp $fp32
# 8192 rows: column reductions split over row groups (partials, then their sum)
CHECKONLY=1 build mlp_rows mlp trn_model_mlp $fp32 -D batch=8192
# head dimensions 64 (GPT-2) and 128 (Llama, grouped-query): the fast attention paths
CHECKONLY=1 build gpt2_d64 gpt2 trn_model_gpt2 $fp32 -D vocab=512 -D layers=2 -D heads=4 -D dim=256 -D seq=128 -D batch=2
CHECKONLY=1 build llama_d128 llama trn_model_llama $fp32 -D vocab=512 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=512 -D ffn=1024 -D seq=128 -D batch=2
# bf16 (half attention, rope_qk and linear + cross-entropy); Llama's
# vocabulary 250 is padded to 256 (classes = 250: the masked columns)
build gpt2_tiny_bf16 gpt2 trn_model_gpt2 $bf16 -D vocab=256 $tiny_gpt2
# LoRA (rank 4 on c_attn and c_fc, the rest frozen): the adapters' thin products in cuBLASLt
NOCHECK=1 build gpt2_tiny_bf16_lora gpt2 trn_model_gpt2 $bf16 --set lora_rank=4 --set "lora_targets=*.c_attn.weight,*.c_fc.weight" -D vocab=256 $tiny_gpt2
build llama_tiny_bf16 llama trn_model_llama $bf16 -D vocab=250 $tiny_llama
# the same with gradient checkpointing: each block's clones in the backward
NOCHECK=1 build llama_tiny_bf16_ckpt llama trn_model_llama $bf16 --set checkpoint=blocks -D vocab=250 $tiny_llama
# bf16 at D = 64 (tensor-core attention, partial tiles at T = 80, GQA);
# and the same GPT-2 with --no-tc-attention (the CUDA-core kernels)
CHECKONLY=1 build gpt2_d64_bf16 gpt2 trn_model_gpt2 $bf16 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=80 -D batch=2
CHECKONLY=1 build gpt2_d64_bf16_notc gpt2 trn_model_gpt2 $bf16 -D vocab=512 -D layers=1 -D heads=4 -D dim=256 -D seq=80 -D batch=2 --no-tc-attention
# (Llama's with 2 micro-batches a step: products summed into another's
# result and into the accumulators by cuBLASLt with beta 1, the norms'
# weight gradients added to theirs)
CHECKONLY=1 build llama_d64_bf16 llama trn_model_llama $bf16 -D vocab=512 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=256 -D ffn=512 -D seq=80 -D batch=2 --set grad_accum=2
# bf16 at D = 128 (the tensor-core kernels' smaller tiles, three key tiles at T = 80)
CHECKONLY=1 build llama_d128_bf16 llama trn_model_llama $bf16 -D vocab=512 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=512 -D ffn=512 -D seq=80 -D batch=2
# fp16: dynamic loss scaling (loss_scale_update, the optimizers' skip)
build gpt2_tiny_fp16 gpt2 trn_model_gpt2 --set precision=fp16 -D vocab=256 $tiny_gpt2
# the benchmark: GPT-2 small (124M), B=16, T=1024, bf16 with every pass on
# (the vocabulary padded to 50304); and fp32 for comparison
NOCHECK=1 build gpt2_124m_bf16 gpt2 trn_model_gpt2 $bf16 -D batch=16
NOCHECK=1 build gpt2_124m_fp32 gpt2 trn_model_gpt2 $fp32 -D batch=16
# one layer of it with one tile of 16 query rows a warp in the tensor-core
# attention's forward and dq (the default: two), for the profile's
# comparison of the two forms
NOCHECK=1 build gpt2_1l_bf16_rows1 gpt2 trn_model_gpt2 $bf16 -D batch=16 -D layers=1 --tc-attention-rows 1

# data: tinyshakespeare as bytes (GPT-2's vocabulary covers them)
text=$root/../shared/data/tinyshakespeare.txt
[ -f "$text" ] || { cat "$root"/examples/*.model "$root"/docs/*.md > "$out/data/corpus.txt"; text=$out/data/corpus.txt; }
"$cm/tools/trainc-tokenize" "$text" "$out/data/ts"

rm -rf "$out/gen"
# what it was built from: the sources' checksums, which run.sh checks
# against the tree that travels with it (a build-gpu older than the tree is
# said in the results, not found out from odd numbers)
# (a tracked file deleted and not committed is left out: run.sh finds it
# missing there too, and sha256sum failing would lose the whole build)
git ls-files -- runtime codegen ir passes frontend tools examples tests/gpu CMakeLists.txt | sort |
    while read -r f; do if [ -f "$f" ]; then sha256sum "$f"; fi; done > "$out/sources.sha256"
git rev-parse HEAD > "$out/COMMIT" 2> /dev/null || true
git diff --quiet HEAD -- runtime codegen ir passes frontend tools examples tests/gpu CMakeLists.txt 2> /dev/null || echo "(with uncommitted changes)" >> "$out/COMMIT"
echo "== load-time dependencies"
for f in "$out"/gpt2_tiny "$out"/kcheck_gpt2_tiny; do
    ldd "$f" | sed 's/^/  /'
    if readelf -d "$f" | grep -E 'NEEDED.*(libcuda|cublas|openblas)'; then echo "unexpected dependency in $f"; exit 1; fi
done
# what travels: build-gpu/ packed (gzip takes it to about a fifth: the
# executables' runtime and cubin compress well), which run.sh unpacks into
# build-gpu/ there; the limit counts the bytes as they lie here
pack=$root/build-gpu-pack
rm -rf "$pack" && mkdir -p "$pack"
tar -C "$out" -czf "$pack/build-gpu.tar.gz" .
bytes=$(du -sb "$out" | cut -f1)
packed=$(du -sb "$pack" | cut -f1)
# what travels besides: the tracked files and the untracked ones git does not ignore
# (a tracked file deleted and not yet committed: stat's failure is not one)
tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2> /dev/null | awk '{s += $1} END {print s + 0}') || true
echo "build-gpu: $bytes bytes, packed $packed bytes; the working tree $tree bytes ($(( (packed + tree) / 1048576 )) MiB together; the device tool carries at most 64 MiB)"
[ $(( packed + tree )) -lt $(( 64 * 1048576 )) ] || { echo "build-gpu-pack and the working tree are over the carry limit"; exit 1; }
echo "build-gpu ready: carry build-gpu-pack and run tests/gpu/run.sh"
