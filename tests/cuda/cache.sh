#!/bin/bash
# tests/cuda/cache.sh — the NVRTC images and their cache (docs/cuda.md):
#   - the generated C of a --target=cuda compile (the images embedded) is
#     the same compiled cold or from the cache, and from any working folder
#     (NVRTC's -lineinfo wrote the folder into every image);
#   - a cache entry that does not read back whole (truncated, garbage,
#     emptied), names another key (an entry copied under another name), or
#     is not a regular file (a FIFO, which blocked the compile) is compiled
#     again, not embedded, and the entry repaired;
#   - what an interrupted write left (NAME.PID.tmp) is removed an hour on;
#   - a cache folder that cannot be used (a file) is said, with -v too,
#     and the compile goes on without it;
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

# an entry copied over another's name (the sm_80 cubin as the sm_90 one
# and as the PTX): each names its key, so the copies are misses
set -- $(ls cache/*.cubin) $(ls cache/*.ptx)
cp "$1" "$2"
cp "$1" "$3"
gen deeper/folder/b
check "cmp -s a/m.c deeper/folder/b/m.c" "entries copied under other names compiled again: the same C"
check "[ \$(report) -eq 3 ]" "and repaired"

# a FIFO where an entry was: a miss, not a compile that waits for a writer
rm -f "$2" && mkfifo "$2"
(cd deeper/folder/b && timeout 60 "$trainc" compile "$model" --target=cuda --emit=c -o m 2> err.txt)
check "[ $? -eq 0 ] && cmp -s a/m.c deeper/folder/b/m.c" "a FIFO entry is a miss (no hang), the same C"
rm -f "$2"

# what interrupted writes left: an hour old, removed; younger, kept (it
# may be another compile's, still writing)
echo partial > "$1.123.tmp" && touch -d '2 hours ago' "$1.123.tmp"
echo partial > "$1.456.tmp"
gen a
check "[ ! -e $1.123.tmp ] && [ -e $1.456.tmp ]" "an interrupted write's .tmp is removed an hour on, not before"
rm -f "$1.456.tmp"

# a cache folder that is a file: said once, and the compile goes on
: > notadir
(cd a && TRAINC_CACHE_DIR=$dir/notadir "$trainc" compile "$model" --target=cuda --emit=c -o nc -v > /dev/null 2> nc.txt)
check "[ $? -eq 0 ] && cmp -s a/m.c a/nc.c" "a cache folder that is a file: the same C"
check "grep -q 'note: the NVRTC cache is not used ($dir/notadir: not a folder)' a/nc.txt && grep -q '(no cache: $dir/notadir: not a folder)' a/nc.txt" \
    "and a note says so, and -v"
check "[ ! -s notadir ]" "the file is left as it was"

# --arch: whole names only, at most 7
"$trainc" compile "$model" --target=cuda --arch=sm_90a --emit=c -o x 2> arch.txt
check "[ $? -eq 2 ] && grep -q \"'sm_90a' is not a GPU architecture\" arch.txt" "--arch=sm_90a is an error"
"$trainc" compile "$model" --target=cuda --arch=sm_60,sm_70,sm_75,sm_80,sm_86,sm_87,sm_89,sm_90 --emit=c -o x 2> arch8.txt
check "[ $? -eq 2 ] && grep -q 'more than 7 architectures' arch8.txt" "eight architectures are an error, not seven and one dropped"
exit $fail
