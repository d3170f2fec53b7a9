#!/usr/bin/env bash
# Models that differential fuzzing found bugs with (tests/e2e/fuzz/*.model;
# each says what it found).  Each compiles for the CPU and the CUDA target
# in fp32 and bf16, with and without gradient accumulation and clipping,
# and its compiled executable trains 3 steps to the interpreter's losses
# (relative 1e-5, both in fp32; a NaN loss, null in the metrics, on both
# sides or neither).  tests/fuzz/models.py makes such models.
# Usage: fuzz.sh TRAINC TOKENIZE SCRATCH
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
cat "$root/README.md" "$root"/docs/*.md > text.txt
"$tokenize" text.txt tok > /dev/null
run="--data tok_train.bin --steps 3 --seed 7 --warmup 0 --schedule constant --quiet"
losses() { sed -n 's/.*"step": *\([0-9]*\).*"loss": *\([0-9.eE+-][0-9.eE+-]*\|null\).*/\1 \2/p' "$1"; } # null: NaN
for model in "$root"/tests/e2e/fuzz/*.model; do
  name=$(basename "$model" .model)
  for target in cpu cuda; do for p in fp32 bf16; do for o in "" "--set grad_accum=3 --set grad_clip=1"; do
    "$trainc" compile "$model" --emit=kernels --target=$target --precision=$p $o > kernels.txt 2> err.txt ||
      { cat err.txt; fail "$name: compile --emit=kernels --target=$target --precision=$p $o"; }
  done; done; done
  "$trainc" compile "$model" -o "$name" 2> err.txt || { cat err.txt; fail "$name: compile"; }
  ./"$name" $run --metrics "$name.c.jsonl" > /dev/null 2> err.txt || { cat err.txt; fail "$name: the executable"; }
  "$trainc" run "$model" $run --metrics "$name.i.jsonl" > /dev/null 2> err.txt || { cat err.txt; fail "$name: trainc run"; }
  paste <(losses "$name.c.jsonl") <(losses "$name.i.jsonl") > both.txt
  [ "$(wc -l < both.txt)" -eq 3 ] || { cat both.txt; fail "$name: not 3 losses each"; }
  awk '{ if ($2 == "null" || $4 == "null") { if ($2 != $4) { print "step " $1 ": compiled " $2 ", interpreter " $4; bad = 1 } next }
         d = $2 - $4; if (d < 0) d = -d; if (d > 1e-5 * ($4 < 0 ? -$4 : $4)) { print "step " $1 ": compiled " $2 ", interpreter " $4; bad = 1 } } END { exit bad }' both.txt ||
    fail "$name: the compiled losses are not the interpreter's"
  echo "$name: compiles for both targets; 3 steps, compiled = interpreter: $(awk '{ printf "%s ", $2 }' both.txt)"
done
