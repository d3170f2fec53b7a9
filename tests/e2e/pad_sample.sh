#!/usr/bin/env bash
# Padding and the sampling graph (codegen/compile.c, share_padding): a model
# that spells out log-softmax before its cross-entropy
# (tests/passes/primitive.model) samples from the log-probabilities, where
# pad-tiles cannot mask a padded head; the training graph pads the head
# (61 classes -> 64 in bf16).  The sampling graph reads the padded buffer
# through a slice.  Compiling it stopped with an internal error ("different
# types in two schedules"); now the padded executable trains to the same
# losses and samples the same tokens as the one compiled without pad-tiles.
# Usage: pad_sample.sh TRAINC TOKENIZE SCRATCH
set -euo pipefail
trainc=$1 tokenize=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"

seq 1 20000 | tr '\n' ' ' > digits.txt # bytes 32 and 48..57: below the model's 61 classes
"$tokenize" digits.txt digits --val-fraction 0.1 > /dev/null
model=$root/tests/passes/primitive.model
"$trainc" compile "$model" --precision=bf16 -o prim1 2> notes.txt || { cat notes.txt; fail "compile (padded)"; }
grep -q "pad-tiles: head.weight \[61,32\] -> \[64,32\]" notes.txt || { cat notes.txt; fail "the head was not padded"; }
"$trainc" compile "$model" --precision=bf16 --set pad_tiles=0 -o prim0 2> /dev/null || fail "compile (unpadded)"
for p in 1 0; do
  ./prim$p --data digits_train.bin --steps 20 --seed 3 --threads 1 --quiet --metrics m$p.jsonl --sample 40 > s$p.txt 2> e$p.txt ||
    { cat e$p.txt; fail "run (pad_tiles=$p)"; }
done
[ "$(wc -w < s1.txt)" -eq 40 ] || { cat s1.txt; fail "no sample of 40 tokens printed"; }
losses() { sed 's/.*"step": *\([0-9]*\).*"loss": *\([0-9.eE+-]*\).*/\1 \2/' "$1"; }
diff <(losses m1.jsonl) <(losses m0.jsonl) || fail "padded and unpadded losses differ"
cmp s1.txt s0.txt || fail "padded and unpadded samples differ"
# a prompt of token ids (the vocabulary is not bytes), top-k and a
# temperature: drawn from the 61 classes, never the padding
for p in 1 0; do
  ./prim$p --data digits_train.bin --steps 20 --seed 3 --threads 1 --quiet --save ck$p.st > /dev/null 2>&1 || fail "save (pad_tiles=$p)"
  ./prim$p --resume ck$p.st --quiet --sample 30 --prompt "49, 50 51" --top-k 5 --temperature 0.7 > k$p.txt 2> ek$p.txt ||
    { cat ek$p.txt; fail "--prompt --top-k (pad_tiles=$p)"; }
done
cmp k1.txt k0.txt || fail "padded and unpadded samples with --prompt --top-k differ"
[ "$(wc -w < k1.txt)" -eq 30 ] || { cat k1.txt; fail "--prompt: no sample of 30 tokens"; }
[ "$(tr ' ' '\n' < k1.txt | sort -un | tail -1)" -lt 61 ] || fail "a token past the vocabulary was drawn"
# a prompt longer than T (16): its last 16 tokens (not its first 16: that sample differs)
long="50 51 52 53 54 55 56 57 32 49 50 32 49 51 32 49 52 32 49 53"
./prim1 --resume ck1.st --quiet --sample 12 --temperature 0 --prompt "$long" > l20.txt || fail "a prompt of 20 tokens"
./prim1 --resume ck1.st --quiet --sample 12 --temperature 0 --prompt "$(echo $long | cut -d" " -f5-20)" > l16.txt || fail "its last 16 tokens"
./prim1 --resume ck1.st --quiet --sample 12 --temperature 0 --prompt "$(echo $long | cut -d' ' -f1-16)" > f16.txt || fail "its first 16 tokens"
cmp -s l20.txt l16.txt || fail "a prompt of 20 tokens is not its last 16: $(cat l20.txt) vs $(cat l16.txt)"
cmp -s l16.txt f16.txt && fail "the test cannot tell the last 16 tokens from the first 16 (the same sample)"
./prim1 --resume ck1.st --sample 3 --prompt "49 x" > /dev/null 2> bad.txt && fail "--prompt '49 x' was taken"
grep -qF "error: --prompt: 'x' is not a token id (the vocabulary of 61 tokens is not bytes: the prompt is token ids, separated by spaces or commas)" bad.txt ||
  { cat bad.txt; fail "--prompt '49 x': message"; }
./prim1 --resume ck1.st --sample 3 --prompt "49 61" > /dev/null 2> bad.txt && fail "--prompt '49 61' was taken"
grep -qF "error: --prompt: token 61 (the prompt's token 2) is not one the model reads (0 to 60)" bad.txt || { cat bad.txt; fail "--prompt '49 61': message"; }
echo "padded head: the same 20 losses, the same 40 sampled tokens and 30 with a prompt and top-k as unpadded"
