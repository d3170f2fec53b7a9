#!/usr/bin/env bash
# Issue 3: a tiny GPT-2 trained with the reference interpreter (`trainc run`,
# no code generation) on tiny Shakespeare brings the loss from about
# ln(256) = 5.5 clearly down.  Also prints the training graph (`trainc ir
# --train`) and checks it has the optimizer's states.
# Usage: interp_gpt2.sh TRAINC TOKENIZE SCRATCH TEXT
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3 text=$4
. "$(dirname "$0")/common.sh"
"$tokenize" "$text" shakes >/dev/null
tiny=(-D vocab=256 -D layers=2 -D heads=4 -D dim=64 -D seq=64 -D batch=4)
"$trainc" ir --train "$root/examples/gpt2.model" "${tiny[@]}" --no-locs > train.ir
grep -q 'state {init="zeros", name="adamw.m.wte"}' train.ir || fail "no AdamW moment for wte in the training graph"
grep -q '= adamw ' train.ir || fail "no adamw update"
"$trainc" run "$root/examples/gpt2.model" "${tiny[@]}" --data shakes_train.bin --steps 150 --warmup 10 --lr 3e-3 \
    --min-lr 3e-4 --metrics m.jsonl --quiet
grep -q '"loss":null' m.jsonl && fail "a loss that is not finite (null in the metrics)"
first=$(head -1 m.jsonl | sed 's/.*"loss": *\([0-9.eE+-]*\).*/\1/')
# the mean of the last 10 steps (single steps are noisy)
last=$(tail -10 m.jsonl | sed 's/.*"loss": *\([0-9.eE+-]*\).*/\1/' | awk '{s += $1} END {printf "%.4f", s / NR}')
echo "interpreter: loss $first at step 1, $last averaged over steps 141-150"
# from ln(256) = 5.55 down by at least 1.8 nats (tiny Shakespeare: about 2.9)
[ "$(tail -10 m.jsonl | grep -c '"loss": *[0-9]')" -eq 10 ] && [ -n "$first" ] || fail "not 10 final losses and a first one in the metrics"
awk -v f="$first" -v l="$last" 'BEGIN {exit !(f > 5.0 && l < f - 1.8)}' || fail "the loss did not come down clearly ($first -> $last)"
# a micro-batch whose tokens do not fit in memory: said as such, before any step
out=$(ulimit -v 4000000; "$trainc" run "$root/examples/gpt2.model" -D vocab=256 -D layers=1 -D heads=1 -D dim=8 -D batch=65536 \
      -D seq=65536 --data shakes_train.bin --steps 1 --quiet 2>&1) && fail "a 2^32-token micro-batch trained"
grep -q "error: a micro-batch's tokens, B=65536 x T=65536: malloc([0-9]*) failed at runtime/main.c:[0-9]*: out of memory" <<<"$out" ||
  fail "a micro-batch too large for memory: $out"
echo "ok"
