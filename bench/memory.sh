#!/usr/bin/env bash
# bench/memory.sh — the memory plan of GPT-2 small (batch 16 x 1024) under
# each combination of passes, as the markdown rows of docs/passes.md's
# table: `trainc compile examples/gpt2.model -D batch=16 --report` per row
# (CPU target; the plan is known at compile time, nothing runs).  Each row
# takes a few seconds.
#
#   bench/memory.sh [TARGET]     (cpu, the default, or cuda)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:-cpu}
case $target in cpu | cuda) ;; *) echo "bench/memory.sh: TARGET is cpu or cuda, not '$target'" >&2; exit 2 ;; esac
trainc=${TRAINC_BIN:-$root/build/tools}/trainc
[ -x "$trainc" ] || "$root/scripts/build.sh" build >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=(
    "all off|--set fusion=0 --set pad_tiles=0"
    "liger-fusion alone|--set fusion=1 --set pad_tiles=0"
    "linear+CE only|--set fusion=64 --set pad_tiles=0"
    "mixed-precision alone|--set fusion=0 --set pad_tiles=0 --precision bf16"
    "mixed-precision alone, fp16|--set fusion=0 --set pad_tiles=0 --precision fp16"
    "pad-tiles alone|--set fusion=0 --pad-multiple=64"
    "all on|--precision bf16 --pad-multiple=64"
    "all on, fp16|--precision fp16 --pad-multiple=64"
    "all on, every position's logits when sampling|--precision bf16 --pad-multiple=64 --set sample_logits=all"
    "all off, gradient checkpointing|--set fusion=0 --set pad_tiles=0 --set checkpoint=blocks"
    "all on, gradient checkpointing|--precision bf16 --pad-multiple=64 --set checkpoint=blocks"
    "all on, checkpointing within 6 GB|--precision bf16 --pad-multiple=64 --set checkpoint=budget --set memory_budget=6GB"
)
fmt() { echo "$1" | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta'; }
echo "| passes | settings | parameters | gradients | optimizer states | activations saved | temporaries | eval or sampling beyond the step | arena total |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for r in "${rows[@]}"; do
    name=${r%%|*}
    # shellcheck disable=SC2086
    "$trainc" compile "$root/examples/gpt2.model" -D batch=16 --target="$target" ${r#*|} --report \
        > "$work/rep" 2>/dev/null
    col() { awk -v k="$1" 'index($0, k) == 3 {print $(NF - 2)}' "$work/rep"; }
    tot=$(col "total (arena)")
    gib=$(awk -v b="$tot" 'BEGIN {printf "%.2f", b / 1073741824}')
    echo "| $name | \`${r#*|}\` | $(fmt "$(col parameters)") | $(fmt "$(col gradients)") |" \
         "$(fmt "$(col "optimizer states")") | $(fmt "$(col "activations saved")") |" \
         "$(fmt "$(col "temporaries (at peak)")") | $(fmt "$(col "eval or sampling")") |" \
         "**$(fmt "$tot")** ($gib GiB) |"
    grep "each schedule" "$work/rep" | sed 's/^/<!-- /; s/$/ -->/' >&2
done
