#!/bin/bash
# tests/cuda/cache.sh — the NVRTC images and their cache (docs/cuda.md):
#   - the generated C of a --target=cuda compile (the images embedded) is
#     the same compiled cold or from the cache, and from any working folder
#     (NVRTC's -lineinfo wrote the folder into every image);
#   - a cache entry that does not read back whole (truncated, garbage,
#     emptied) is compiled again, not embedded, and the entry repaired;
#   - --arch takes whole names (sm_90a is not sm_90) and at most 7: usage errors (status 2).
# usage: cache.sh TRAINC WORKDIR
set -u
trainc=$1 dir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir/a" "$dir/deeper/folder/b" && cd "$dir" || exit 1
export TRAINC_RUNTIME_DIR=$root/runtime TRAINC_CACHE_DIR=$dir/cache
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
model=$root/examples/mlp.model
gen() { (cd "$1" && "$trainc" compile "$model" --target=cuda --emit=c -o m 2> err.txt) || { cat "$1/err.txt"; echo "FAIL: compile in $1"; exit 1; }; }
report() { (cd a && "$trainc" compile "$model" --target=cuda --emit=cuda -o r > /dev/null 2>&1) && grep -o ', cached)' a/r.cuda-report.txt | wc -l; }

gen a
check "[ \$(ls cache | wc -l) -eq 3 ]" "three images cached (sm_80, sm_90, PTX)"
TRAINC_NO_CACHE=1 gen deeper/folder/b
check "cmp -s a/m.c deeper/folder/b/m.c" "cold, in another folder: the same C"
gen deeper/folder/b
check "cmp -s a/m.c deeper/folder/b/m.c" "from the cache, in another folder: the same C"
check "[ \$(report) -eq 3 ]" "the report says the three images came from the cache"

# break every entry a different way; each is compiled again and rewritten
set -- cache/*
truncate -s 1000 "$1"
echo 'this is not an image' > "$2"
: > "$3"
gen deeper/folder/b
check "cmp -s a/m.c deeper/folder/b/m.c" "broken entries compiled again: the same C"
check "! grep -q 'this is not an image' deeper/folder/b/m.c" "the garbage is not embedded"
check "[ \$(report) -eq 3 ]" "the entries were repaired"

# --arch: whole names only, at most 7
"$trainc" compile "$model" --target=cuda --arch=sm_90a --emit=c -o x 2> arch.txt
check "[ $? -eq 2 ] && grep -q \"'sm_90a' is not a GPU architecture\" arch.txt" "--arch=sm_90a is an error"
"$trainc" compile "$model" --target=cuda --arch=sm_60,sm_70,sm_75,sm_80,sm_86,sm_87,sm_89,sm_90 --emit=c -o x 2> arch8.txt
check "[ $? -eq 2 ] && grep -q 'more than 7 architectures' arch8.txt" "eight architectures are an error, not seven and one dropped"
exit $fail
