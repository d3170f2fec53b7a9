#!/usr/bin/env bash
# Indices a graph computes, outside their range (docs/interpreter.md,
# Runtime errors): tests/codegen/computed_target.model's targets - 100.
# The interpreter stops with an error at the cross_entropy; the compiled
# step is not checked, and its fused and unfused schedules (the gradient
# written over the logits, or a separate backward kernel) train alike,
# bit for bit: the backward kernel once gave such a row the whole softmax
# as its gradient where the forward and the fused kernel give it none.
# Usage: computed_index.sh TRAINC TOKENIZE SCRATCH
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"

"$tokenize" "$root/README.md" tk > /dev/null   # bytes: most below 100 + 256, many below 100
model=$root/tests/codegen/computed_target.model
if "$trainc" run "$model" --data tk_train.bin --steps 1 --quiet 2> interp.txt; then fail "the interpreter took a target outside [0, 256)"; fi
grep -q "computed_target.model:10:.*target -[0-9]* .*outside \[0, 256)" interp.txt || { cat interp.txt; fail "the interpreter's error"; }
"$trainc" compile "$model" -o fused 2> /dev/null || fail "compile (fused)"
"$trainc" compile "$model" --no-fuse -o unfused 2> /dev/null || fail "compile (--no-fuse)"
"$trainc" compile "$model" --no-fuse --emit=c -o unfused_src 2> /dev/null || fail "compile --emit=c"
grep -q "tk_cross_entropy_bwd_f32" unfused_src.c || fail "the --no-fuse step has no separate cross-entropy backward kernel"
for f in fused unfused; do
  ./$f --data tk_train.bin --steps 6 --batches sequential --lr 0.05 --warmup 0 --threads 1 --quiet --metrics $f.jsonl || fail "run ($f)"
done
losses() { grep -o '"loss":[^,}]*' "$1"; }
[ "$(losses fused.jsonl | wc -l)" -eq 6 ] || fail "6 losses"
diff <(losses fused.jsonl) <(losses unfused.jsonl) || fail "the fused and unfused steps train differently"
echo "ok: the interpreter stops; fused and unfused compiled steps agree over 6 steps"
