#!/usr/bin/env bash
# bench/checkpoint.sh — what gradient checkpointing costs and saves: the
# same tiny GPT-2 compiled with `checkpoint = none`, `checkpoint = blocks`
# and `checkpoint = budget` with memory_budget half way between their
# arenas (CPU, fp32), trained side by side in the same run (runs
# alternated, ROUNDS of each), median ms per step after the warm-up, and
# the arena and saved activations of each from --report.  Writes
# bench/results/checkpoint.json.
#
#   bench/checkpoint.sh [THREADS] [STEPS] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
steps=${2:-30}
rounds=${3:-2}
warm=3
. "$root/bench/common.sh"   # $bin, $trainc, $work, $work/t_train.bin
count THREADS "$threads" 0
count STEPS "$steps" 1
count ROUNDS "$rounds" 1
defs=(-D vocab=256 -D layers=4 -D heads=4 -D dim=128 -D seq=256 -D batch=8)
for ck in none blocks; do
    "$trainc" compile "$root/examples/gpt2.model" "${defs[@]}" --set checkpoint=$ck --report -o "$work/gpt2_$ck" > "$work/rep_$ck" 2>/dev/null
done
col() { awk -v k="$2" 'index($0, k) == 3 {print $(NF - 2)}' "$work/rep_$1"; }
mid=$(( ($(col none "total (arena)") + $(col blocks "total (arena)")) / 2 ))
"$trainc" compile "$root/examples/gpt2.model" "${defs[@]}" --set checkpoint=budget --set memory_budget=$mid --report \
    -o "$work/gpt2_budget" > "$work/rep_budget" 2> "$work/note_budget"
kept=$(sed -n 's/.*the last \([0-9]*\) of \([0-9]*\) blocks keep.*/\1 of \2/p' "$work/note_budget")
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for r in $(seq "$rounds"); do
    for ck in none budget blocks; do
        "$work/gpt2_$ck" --data "$work/t_train.bin" --steps $((warm + steps)) --warmup 0 --lr 6e-4 --schedule constant \
            --threads "$threads" --quiet --metrics "$work/m_${ck}_$r.jsonl"
        sed -n 's/.*"step": *\([0-9]*\).*"ms": *\([0-9.eE+-]*\).*/\1 \2/p' "$work/m_${ck}_$r.jsonl" |
            awk -v w="$warm" '$1 > w {print $2}' >> "$work/ms_$ck"
    done
done
a0=$(col none "activations saved") a1=$(col blocks "activations saved") a2=$(col budget "activations saved")
t0=$(col none "total (arena)") t1=$(col blocks "total (arena)") t2=$(col budget "total (arena)")
m0=$(median < "$work/ms_none") m1=$(median < "$work/ms_blocks") m2=$(median < "$work/ms_budget")
# the losses must agree: checkpointing changes no arithmetic
last() { grep -o '"loss": *[0-9.eE+-]*' "$work/m_$1_1.jsonl" | tail -1; }
l0=$(last none) l1=$(last blocks) l2=$(last budget)
[ "$l0" = "$l1" ] && [ "$l0" = "$l2" ] || { echo "checkpointing changed the loss: $l0 / $l1 / $l2" >&2; exit 1; }
[ -n "$kept" ] || { echo "checkpoint = budget chose no partial set of blocks: $(cat "$work/note_budget")" >&2; exit 1; }
printf 'tiny GPT-2 (vocab 256, 4 layers, 128 wide, T=256, B=8), fp32, %s threads, median of %s steps x %s rounds:\n' "$threads" "$steps" "$rounds"
printf '  checkpoint = none     %8.2f ms/step   arena %12s bytes, activations saved %12s\n' "$m0" "$t0" "$a0"
printf '  checkpoint = blocks   %8.2f ms/step   arena %12s bytes, activations saved %12s\n' "$m1" "$t1" "$a1"
printf '  checkpoint = budget   %8.2f ms/step   arena %12s bytes, activations saved %12s (memory_budget %s: %s blocks kept)\n' \
    "$m2" "$t2" "$a2" "$mid" "$kept"
r() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
printf '  blocks: time x%s, arena x%s, saved activations x%s\n' "$(r "$m1" "$m0")" "$(r "$t1" "$t0")" "$(r "$a1" "$a0")"
printf '  budget: time x%s, arena x%s, saved activations x%s; last loss %s in all three\n' "$(r "$m2" "$m0")" "$(r "$t2" "$t0")" \
    "$(r "$a2" "$a0")" "${l0##*:}"
cat > "$root/bench/results/checkpoint.json" <<JSON
{"model": "gpt2 vocab=256 layers=4 heads=4 dim=128 seq=256 batch=8", "dtype": "f32", "threads": $threads, "steps": $steps, "rounds": $rounds,
 "none": {"ms_per_step": $m0, "arena_bytes": $t0, "activations_bytes": $a0},
 "blocks": {"ms_per_step": $m1, "arena_bytes": $t1, "activations_bytes": $a1},
 "budget": {"memory_budget": $mid, "kept": "$kept", "ms_per_step": $m2, "arena_bytes": $t2, "activations_bytes": $a2},
 "cpu": "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')", "date": "$(date -u +%Y-%m-%d)"}
JSON
