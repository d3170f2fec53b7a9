#!/usr/bin/env bash
# bench/lce_chunk.sh — linear + cross-entropy's chunk: Liger's rows per chunk
# (64 here, forced through train.memory_budget) against the compiler's
# default (2048: the f32 dw is over 16 MiB), for a GPT-2 whose step is
# mostly the head (1 layer, 768 wide, the full 50257 vocabulary, 4 x 1024
# tokens), fp32 on the CPU, both executables built by the same compiler and
# run alternately in the same run.  Prints the median step times and their
# ratio; writes bench/results/lce_chunk.json.
#
#   bench/lce_chunk.sh [THREADS] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
steps=${2:-4}
. "$root/bench/common.sh"   # $bin, $trainc, $work, $work/t_train.bin
count THREADS "$threads" 0
count STEPS "$steps" 2   # the first step of each run is a warm-up
defs=(-D layers=1 -D seq=1024 -D batch=4)
# budget / 16 / (4 V) = 64 rows
"$trainc" compile "$root/examples/gpt2.model" "${defs[@]}" --set memory_budget=205852672 -o "$work/liger" >/dev/null
"$trainc" compile "$root/examples/gpt2.model" "${defs[@]}" -o "$work/default" >/dev/null
chunk() { "$trainc" ir --train "$root/examples/gpt2.model" "${defs[@]}" "$@" 2>/dev/null | sed -n 's/.*linear_cross_entropy.*chunk=\([0-9]*\).*/\1/p' | head -1; }
c_liger=$(chunk --set memory_budget=205852672)
c_default=$(chunk)
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
: > "$work/liger.ms"
: > "$work/default.ms"
for i in 1 2; do   # alternately, so that both see the same machine
    for v in liger default; do
        "$work/$v" --data "$work/t_train.bin" --steps "$steps" --warmup 0 --lr 6e-4 --schedule constant \
            --threads "$threads" --quiet --metrics "$work/$v.jsonl"
        # the first step of each run is a warm-up
        sed -n 's/.*"step": *\([0-9]*\).*"ms": *\([0-9.eE+-]*\).*/\1 \2/p' "$work/$v.jsonl" | awk '$1 > 1 {print $2}' >> "$work/$v.ms"
    done
done
a=$(median < "$work/liger.ms")
b=$(median < "$work/default.ms")
ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
printf 'GPT-2 head (1 layer, vocab 50257, 4 x 1024 tokens), fp32, %s threads, median of %s steps each:\n' "$threads" "$(wc -l < "$work/default.ms")"
printf '  chunk %5s rows   %10.1f ms/step\n  chunk %5s rows   %10.1f ms/step\n  speed-up           %10sx\n' "$c_liger" "$a" "$c_default" "$b" "$ratio"
mkdir -p "$root/bench/results"
cat > "$root/bench/results/lce_chunk.json" <<JSON
{"model": "gpt2 layers=1 seq=1024 batch=4 (vocab 50257, dim 768)", "dtype": "f32", "threads": $threads,
 "liger_chunk": $c_liger, "default_chunk": $c_default, "liger_ms_per_step": $a, "default_ms_per_step": $b, "speedup": $ratio,
 "cpu": "$cpu", "date": "$(date -u +%Y-%m-%d)"}
JSON
