#!/bin/bash
# tests/gpu/build.sh — run HERE (no GPU needed): builds into build-gpu/
# everything tests/gpu/run.sh runs on the device machine, with the cubin
# already embedded by NVRTC and libgomp carried beside the executables
# (rpath $ORIGIN/lib): the device machine has CUDA 13, gcc and PyTorch but no
# OpenBLAS, flex or bison.  The CPU side (the reference of every check) uses
# the C backend's plain GEMM loops (double accumulation) instead of
# OpenBLAS: a static OpenBLAS adds ~25 MB per executable, and the carried
# folder must stay under 64 MiB.  Check: ldd build-gpu/*.
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
CFLAGS="-std=c11 -O2 -fopenmp -D_GNU_SOURCE -I$root/runtime"
LIBS="$cm/runtime/libtrainc_rt.a -lm -lpthread -ldl -Wl,-rpath,\$ORIGIN/lib -s"

# NAME MODEL SYMBOL [emit args...]: generated C (cuda target) + an executable + a kernel checker
build() {
    local name=$1 model=$2 sym=$3
    shift 3
    echo "== $name"
    "$emit" "$root/examples/$model.model" "$out/gen/$name" lib "$@"
    printf '#include "trainc_rt.h"\nextern const TrnModel %s;\nint main(int argc, char **argv) { return trn_main(argc, argv, &%s, NULL); }\n' \
        "$sym" "$sym" > "$out/gen/${name}_main.c"
    cc $CFLAGS -c "$out/gen/$name.c" -o "$out/gen/$name.o"
    cc $CFLAGS "$out/gen/$name.o" "$out/gen/${name}_main.c" $LIBS -o "$out/$name"
    if [ -z "${NOCHECK:-}" ]; then
        cc $CFLAGS -DTRN_MODEL="$sym" "$out/gen/$name.o" "$root/tests/gpu/kcheck.c" $LIBS -o "$out/kcheck_$name"
    fi
}

fp32="--set precision=fp32"
build gpt2_tiny gpt2 trn_model_gpt2 $fp32 -D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4
build llama_tiny llama trn_model_llama $fp32 -D vocab=256 -D layers=2 -D heads=4 -D kv_heads=2 -D dim=64 -D ffn=128 -D seq=64 -D batch=4
build mlp mlp trn_model_mlp $fp32
# head dimensions 64 (GPT-2) and 128 (Llama, grouped-query): the fast attention paths
build gpt2_d64 gpt2 trn_model_gpt2 $fp32 -D vocab=512 -D layers=2 -D heads=4 -D dim=256 -D seq=128 -D batch=2
build llama_d128 llama trn_model_llama $fp32 -D vocab=512 -D layers=1 -D heads=4 -D kv_heads=2 -D dim=512 -D ffn=1024 -D seq=128 -D batch=2
# the benchmark: GPT-2 small (124M), B=16, T=1024; TF32 products (no bf16 until the mixed-precision pass)
NOCHECK=1 build gpt2_124m gpt2 trn_model_gpt2 --set precision=tf32 -D batch=16
NOCHECK=1 build gpt2_124m_fp32 gpt2 trn_model_gpt2 --set precision=fp32 -D batch=16

# data: tinyshakespeare as bytes (GPT-2's vocabulary covers them)
text=$root/../shared/data/tinyshakespeare.txt
[ -f "$text" ] || { cat "$root"/examples/*.model "$root"/docs/*.md > "$out/data/corpus.txt"; text=$out/data/corpus.txt; }
"$cm/tools/trainc-tokenize" "$text" "$out/data/ts"

rm -rf "$out/gen"
echo "== load-time dependencies"
for f in "$out"/gpt2_tiny "$out"/kcheck_gpt2_tiny; do
    ldd "$f" | sed 's/^/  /'
    if readelf -d "$f" | grep -E 'NEEDED.*(libcuda|cublas|openblas)'; then echo "unexpected dependency in $f"; exit 1; fi
done
du -sh "$out"
echo "build-gpu ready: carry build-gpu and run tests/gpu/run.sh"
