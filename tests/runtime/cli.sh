#!/usr/bin/env bash
# tests/runtime/cli.sh — a training executable's command line, as a user
# sees it: flags, the progress line, sampling, errors and exit statuses.
#   cli.sh EXE SCRATCH      (EXE: rt_bigram, the bigram test model + trn_main)
. "$(dirname "$0")/check.sh"

"$exe" --write-test-tokens "$dir/train.bin" 20000 1 || exit 1
"$exe" --write-test-tokens "$dir/val.bin" 3000 2 || exit 1
"$exe" --write-test-tokens "$dir/small.bin" 64 3 || exit 1

# --help: every flag, exit 0
"$exe" --help > "$dir/help.txt"
check "--help exits 0" test $? -eq 0
for f in data val steps lr min-lr schedule warmup seed batches eval-every eval-steps save save-every resume init \
         metrics sample prompt temperature top-k device threads print-every report poison quiet help; do
  check "--help lists --$f" grep -q -- "--$f" "$dir/help.txt"
done

# progress when stderr is not a terminal: one plain line per step
"$exe" --data "$dir/train.bin" --steps 5 2> "$dir/progress.txt" < /dev/null
check "training exits 0" test $? -eq 0
n=$(grep -cE '^step +[0-9]+/5 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| [0-9]+ tok/s \| eta [0-9:]+$' "$dir/progress.txt")
check "one progress line per step (got $n)" test "$n" -eq 5
check "no carriage return when not a terminal" test "$(tr -cd '\r' < "$dir/progress.txt" | wc -c)" -eq 0
check "a summary line" grep -q '^trained to step 5 in ' "$dir/progress.txt"

# a warmup longer than the run: said once, with the rate it gets to
"$exe" --data "$dir/train.bin" --steps 5 --warmup 10 --lr 0.01 2> "$dir/warm.txt"
check "a warmup longer than the run trains" test $? -eq 0
check "a warmup longer than the run is said" grep -q 'warning: the warmup (10 steps) is longer than the run (5 steps): the learning rate climbs to 0.005, not --lr 0.01' "$dir/warm.txt"
"$exe" --data "$dir/train.bin" --steps 5 --warmup 5 2> "$dir/warm5.txt"
check "a warmup as long as the run is not" bash -c "! grep -q 'warning: the warmup' '$dir/warm5.txt'"

# --print-every 4 over 10 steps: steps 1, 4, 8 and the last
"$exe" --data "$dir/train.bin" --steps 10 --print-every 4 2> "$dir/every.txt"
check "--print-every exits 0" test $? -eq 0
n=$(grep -cE '^step ' "$dir/every.txt")
check "--print-every 4 (got $n lines)" test "$n" -eq 4

# on a terminal the line is redrawn in place
if script -qec "true" /dev/null > /dev/null 2>&1; then
  script -qec "'$exe' --data '$dir/train.bin' --steps 5" /dev/null > "$dir/tty.txt" 2>&1
  check "on a terminal: exit 0" test $? -eq 0
  check "redrawn with \\r on a terminal" test "$(tr -cd '\r' < "$dir/tty.txt" | wc -c)" -ge 1
fi

# validation: printed and logged
"$exe" --data "$dir/train.bin" --val "$dir/val.bin" --steps 6 --eval-every 3 --metrics "$dir/m.jsonl" 2> "$dir/val.txt"
check "validation run exits 0" test $? -eq 0
check "val loss printed" test "$(grep -cE '^step [36]/6 \| val loss [0-9.]+' "$dir/val.txt")" -eq 2
check "val loss logged" test "$(grep -c '"val_loss"' "$dir/m.jsonl")" -eq 2
check "metrics: one object per step" test "$(grep -cE '^\{"step":[0-9]+,"loss":[0-9.e+-]+,"lr":[0-9.e+-]+,"grad_norm":[0-9.e+-]+,"tokens_per_s":[0-9.]+,"ms":[0-9.]+(,"start_s":[0-9.]+,"start_phases":\{"device":[0-9.]+,"init":[0-9.]+,"load":[0-9.]+,"data":[0-9.]+\})?\}$' "$dir/m.jsonl")" -eq 6
check "metrics: start_s on the first step only" test "$(grep -n '"start_s"' "$dir/m.jsonl" | cut -d: -f1)" = 1
# the phases lie within start_s (each rounded to a millisecond)
check "metrics: start_phases within start_s" awk -F'[:,{}]' '/"start_s"/ { seen = 1
    for (i = 1; i < NF; i++) { if ($i == "\"start_s\"") st = $(i + 1); if ($i ~ /^"(device|init|load|data)"$/) sum += $(i + 1) } }
    END { exit !(seen && st >= 0 && sum <= st + 0.004) }' "$dir/m.jsonl"

# --sample N: N bytes of text, then a newline, on stdout
"$exe" --data "$dir/train.bin" --steps 20 --sample 100 --quiet > "$dir/sample.txt"
check "--sample exits 0" test $? -eq 0
check "--sample 100 prints 100 bytes and a newline" test "$(wc -c < "$dir/sample.txt")" -eq 101
"$exe" --data "$dir/train.bin" --steps 20 --sample 100 --quiet > "$dir/sample2.txt"
check "--sample is deterministic" cmp -s "$dir/sample.txt" "$dir/sample2.txt"
"$exe" --data "$dir/train.bin" --steps 300 --schedule constant --sample 200 --quiet > "$dir/sample4.txt"
check "trained 300 steps: exit 0" test $? -eq 0
check "--sample 200 prints 200 bytes and a newline" test "$(wc -c < "$dir/sample4.txt")" -eq 201
check "a trained bigram samples the text's alphabet" test "$(tr -d 'a-zA-Z ,.\n' < "$dir/sample4.txt" | wc -c)" -eq 0
"$exe" --steps 0 --sample 40 --quiet > "$dir/sample3.txt"
check "--sample without data: exit 0" test $? -eq 0
check "--sample without data" test "$(wc -c < "$dir/sample3.txt")" -eq 41

# --temperature 0 and --top-k 1: the most likely byte each time, the same
# text; --prompt: a bigram's next byte follows the prompt's last one
"$exe" --data "$dir/train.bin" --steps 300 --schedule constant --save "$dir/smp.st" --quiet
"$exe" --resume "$dir/smp.st" --sample 60 --quiet > "$dir/t1.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --temperature 0 --quiet > "$dir/t0.txt"
check "--temperature 0 exits 0" test $? -eq 0
"$exe" --resume "$dir/smp.st" --sample 60 --top-k 1 --quiet > "$dir/k1.txt"
check "--top-k 1 draws as --temperature 0 does" cmp -s "$dir/t0.txt" "$dir/k1.txt"
check "--temperature 0 is not --temperature 1" differ "$dir/t0.txt" "$dir/t1.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --temperature 1 --top-k 0 --quiet > "$dir/t1b.txt"
check "--temperature 1 --top-k 0 is the default" cmp -s "$dir/t1.txt" "$dir/t1b.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --top-k 3 --quiet > "$dir/k3.txt"
check "--top-k 3 is not --top-k 0" differ "$dir/k3.txt" "$dir/t1.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --prompt "Thy" --quiet > "$dir/p1.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --prompt "y" --quiet > "$dir/p2.txt"
"$exe" --resume "$dir/smp.st" --sample 60 --prompt "q" --quiet > "$dir/p3.txt"
check "--prompt: the bigram follows its last byte" cmp -s "$dir/p1.txt" "$dir/p2.txt"
check "--prompt: another last byte, another sample" differ "$dir/p1.txt" "$dir/p3.txt"
check "--prompt: the sample only is printed" test "$(wc -c < "$dir/p1.txt")" -eq 61
"$exe" --data "$dir/no-such.bin" --resume "$dir/smp.st" --sample 5 --prompt x > /dev/null 2> "$dir/pdata.txt"
check "--prompt: --data is not read" grep -qF "note: --data $dir/no-such.bin is not read: the run has no step to train (step 300 of 300) and --sample starts from --prompt" "$dir/pdata.txt"
"$exe" --resume "$dir/smp.st" --prompt x > /dev/null 2> "$dir/pns.txt"
check "--prompt without --sample: exit 1" test $? -eq 1
check "--prompt without --sample: message" grep -qF "error: --prompt needs --sample N (the tokens to generate)" "$dir/pns.txt"
"$exe" --resume "$dir/smp.st" --top-k 4 > /dev/null 2> "$dir/kns.txt"
check "--top-k without --sample: message" grep -qF "error: --top-k needs --sample N" "$dir/kns.txt"
"$exe" --resume "$dir/smp.st" --sample 3 --prompt= > /dev/null 2> "$dir/pe.txt"
check "--prompt empty: message" grep -qF "error: --prompt is empty" "$dir/pe.txt"

# --device=cuda without a CUDA module: a clear error, exit 1
"$exe" --device=cuda --steps 0 2> "$dir/cuda.txt"
check "--device=cuda exits 1" test $? -eq 1
check "--device=cuda says why" grep -q "device cuda: this executable was built without a CUDA module" "$dir/cuda.txt"
"$exe" --device=auto --data "$dir/train.bin" --steps 1 2> "$dir/auto.txt"
check "--device=auto exits 0" test $? -eq 0
check "--device=auto falls back to the CPU" grep -q "device cpu" "$dir/auto.txt"

# --report: the memory plan and its total
"$exe" --report > "$dir/report.txt"
check "--report exits 0" test $? -eq 0
check "--report lines" grep -qE '^  params +[0-9]+ bytes' "$dir/report.txt"
check "--report total" grep -qE '^  total +[0-9]+ bytes' "$dir/report.txt"
# what stdout cannot take (a full disk) is an error
if [ -w /dev/full ]; then
  "$exe" --report > /dev/full 2> "$dir/full.txt"
  check "--report to a full disk: exit 1" test $? -eq 1
  check "--report to a full disk: message" grep -q "error: cannot write to stdout" "$dir/full.txt"
fi

# errors: a message and exit status 1
"$exe" --data "$dir/small.bin" --steps 1 2> "$dir/err1.txt"
check "too few tokens: exit 1" test $? -eq 1
check "too few tokens: message" grep -q "small.bin holds 64 tokens; a micro-batch of B=4 rows of T=16 tokens needs at least B\*T+1 = 65" "$dir/err1.txt"
"$exe" --data "$dir/nonexistent.bin" --steps 1 2> "$dir/err2.txt"
check "missing file: exit 1" test $? -eq 1
check "missing file: message" grep -q "nonexistent.bin" "$dir/err2.txt"
"$exe" --bogus 2> "$dir/err3.txt"
check "unknown flag: exit 1" test $? -eq 1
check "unknown flag: message" grep -q "unknown flag '--bogus'" "$dir/err3.txt"
"$exe" --data "$dir/train.bin" --steps 1 --batches shuffled 2> "$dir/err4.txt"
check "bad --batches: exit 1" test $? -eq 1
"$exe" --data "$dir/train.bin" --steps 1 --save "$dir/no/such/dir/x.st" 2> "$dir/err5.txt"
check "unwritable --save: exit 1" test $? -eq 1
check "unwritable --save: message" grep -q "cannot write into folder $dir/no/such/dir: No such file or directory" "$dir/err5.txt"
check "unwritable --save: before training" test "$(grep -c '^step' "$dir/err5.txt")" -eq 0

# outputs that cannot be written are found before the first step, not when
# the run ends (the whole run was lost): a folder, an empty path, a folder
# part that is a file
mkdir -p "$dir/afolder"
touch "$dir/afile"
out_error() {   # out_error NAME MESSAGE FLAGS...: exit 1, MESSAGE, no step taken
  local name=$1 msg=$2
  shift 2
  "$exe" --data "$dir/train.bin" --steps 2 "$@" 2> "$dir/out.txt"
  check "$name: exit 1" test $? -eq 1
  check "$name: message" grep -qF -- "$msg" "$dir/out.txt"
  check "$name: before training" test "$(grep -c '^step' "$dir/out.txt")" -eq 0
}
out_error "--save a folder" "error: --save $dir/afolder: $dir/afolder is a folder" --save "$dir/afolder"
out_error "--save ''" "error: --save: the path is empty" --save ""
out_error "--save in a file" "error: --save $dir/afile/x.st: cannot write into folder $dir/afile: Not a directory" --save "$dir/afile/x.st"
out_error "--metrics a folder" "error: --metrics $dir/afolder: $dir/afolder is a folder" --metrics "$dir/afolder"
out_error "--metrics ''" "error: --metrics: the path is empty" --metrics ""
out_error "--metrics in a missing folder" "error: --metrics $dir/no/m.jsonl: cannot write into folder $dir/no: No such file or directory" \
  --metrics "$dir/no/m.jsonl"

# an output naming an input is refused before anything is written: the
# metrics would truncate it, a checkpoint replace it
"$exe" --data "$dir/train.bin" --steps 2 --save "$dir/ck2.st" --quiet
check "a checkpoint to resume: exit 0" test $? -eq 0
cp "$dir/train.bin" "$dir/train.orig"
cp "$dir/val.bin" "$dir/val.orig"
cp "$dir/ck2.st" "$dir/ck2.orig"
out_error "--metrics the --data file" "error: --metrics $dir/train.bin is the --data file $dir/train.bin" --metrics "$dir/train.bin"
out_error "--metrics the --val file" "error: --metrics $dir/val.bin is the --val file $dir/val.bin" --val "$dir/val.bin" --metrics "$dir/val.bin"
out_error "--metrics the --resume file" "error: --metrics $dir/ck2.st is the --resume file $dir/ck2.st" --steps 4 \
  --resume "$dir/ck2.st" --metrics "$dir/ck2.st"
out_error "--metrics the --init file" "error: --metrics $dir/ck2.st is the --init file $dir/ck2.st" --init "$dir/ck2.st" \
  --metrics "$dir/ck2.st"
out_error "--save the --data file" "error: --save $dir/train.bin is the --data file $dir/train.bin" --save "$dir/train.bin"
out_error "--save the --val file" "error: --save $dir/val.bin is the --val file $dir/val.bin" --val "$dir/val.bin" --save "$dir/val.bin"
out_error "--save the --metrics file" "error: --save $dir/mm.jsonl and --metrics $dir/mm.jsonl are the same file" --save "$dir/mm.jsonl" \
  --metrics "$dir/mm.jsonl"
check "the --data file is intact" cmp -s "$dir/train.bin" "$dir/train.orig"
check "the --val file is intact" cmp -s "$dir/val.bin" "$dir/val.orig"
check "the --resume file is intact" cmp -s "$dir/ck2.st" "$dir/ck2.orig"
# --save over the checkpoint the run resumes from: read first, replaced whole
"$exe" --data "$dir/train.bin" --steps 4 --resume "$dir/ck2.st" --save "$dir/ck2.st" --quiet
check "--save over the --resume file: exit 0" test $? -eq 0
check "--save over the --resume file: saved" test -s "$dir/ck2.st"

# every {step} of --save is the step
"$exe" --data "$dir/train.bin" --steps 4 --save "$dir/d{step}_{step}.st" --save-every 2 --quiet
check "two {step}: exit 0" test $? -eq 0
check "two {step}: both replaced" test -s "$dir/d2_2.st" -a -s "$dir/d4_4.st"

# the program itself is an input too: a copy of it saving over itself
cp "$exe" "$dir/prog"
"$dir/prog" --data "$dir/train.bin" --steps 2 --save "$dir/prog" 2> "$dir/self.txt"
check "--save the program: exit 1" test $? -eq 1
check "--save the program: message" grep -qF "error: --save $dir/prog is this program prog: the checkpoint would replace it" "$dir/self.txt"
"$dir/prog" --data "$dir/train.bin" --steps 2 --metrics "$dir/prog" 2> "$dir/self.txt"
check "--metrics the program: exit 1" test $? -eq 1
check "the program is intact" cmp -s "$exe" "$dir/prog"

# a value that is a flag: the value forgotten, not a file named --quiet
out_error "--save --quiet" "error: --save needs a value (FILE), not the flag --quiet (write --save=--quiet for a file of that name)" \
  --save --quiet
check "no file named --quiet" test ! -e ./--quiet -a ! -e "$dir/--quiet"
out_error "--prompt --quiet" "error: --prompt needs a value (TEXT), not the flag --quiet (write --prompt=--quiet for that value)" \
  --sample 3 --prompt --quiet
# numbers past their range say so; --steps stops at 2^53
out_error "--steps past 64 bits" "error: --steps: '99999999999999999999' is too large for a 64-bit integer" --steps 99999999999999999999
out_error "--lr past a double" "error: --lr: '1e400' is out of range for a double" --lr 1e400
out_error "--steps past 2^53" "error: --steps: 9223372036854775807 steps is more than 2^53" --steps 9223372036854775807

# a checkpoint holding NaNs loads as it is, with a warning naming the tensor
"$exe" --data "$dir/train.bin" --steps 2 --save "$dir/nan.st" --quiet
python3 - "$dir/nan.st" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    b = json.loads(f.read(n))["b"]["data_offsets"][0]
    for i in (0, 5):
        f.seek(8 + n + b + 4 * i)
        f.write(struct.pack("<I", 0x7fc00000))
PY
"$exe" --data "$dir/train.bin" --steps 1 --init "$dir/nan.st" 2> "$dir/nan.txt"
check "--init with NaNs: exit 0" test $? -eq 0
check "--init with NaNs: a warning" grep -qF "warning: --init $dir/nan.st: 'b' holds 2 NaNs or infinities of 256 values" "$dir/nan.txt"
"$exe" --data "$dir/train.bin" --steps 3 --resume "$dir/nan.st" 2> "$dir/nan.txt"
check "--resume with NaNs: a warning" grep -qF "warning: --resume $dir/nan.st: 'b' holds 2 NaNs or infinities of 256 values" "$dir/nan.txt"
# sampling from them: an error, not a sample of token 0
"$exe" --data "$dir/train.bin" --resume "$dir/nan.st" --sample 5 > "$dir/nan.out" 2> "$dir/nan.txt"
check "--sample with NaN logits: exit 1" test $? -eq 1
check "--sample with NaN logits: message" grep -qF "error: --sample: the logits of token 1 of the sample hold NaNs or infinities (so do the parameters?): nothing to draw from" "$dir/nan.txt"
check "--sample with NaN logits: no token drawn" test "$(od -An -c "$dir/nan.out" | tr -d ' ')" = '\n'
"$exe" --data "$dir/train.bin" --steps 3 --resume "$dir/ck2.orig" 2> "$dir/nan.txt"
check "--resume, all finite: no warning" bash -c "! grep -q 'NaN' '$dir/nan.txt'"

# --print-every prints a resumed run's first step (3 here), then every 5th and the last
"$exe" --data "$dir/train.bin" --steps 2 --save "$dir/pe.st" --quiet
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/pe.st" --print-every 5 2> "$dir/pe.txt"
check "--print-every resumed: exit 0" test $? -eq 0
check "--print-every resumed: steps 3, 5 and 8" test "$(grep -oE '^step +[0-9]+' "$dir/pe.txt" | awk '{print $2}' | tr '\n' ' ')" = "3 5 8 "
# --steps on --resume: the steps done (1, 2: warm-up) had the same rates, no note
check "--steps on --resume within the warm-up: no note" bash -c "! grep -q 'changes the schedule' '$dir/pe.txt'"
# past the warm-up they did not: said (cosine, 4 steps, warm-up 2)
"$exe" --data "$dir/train.bin" --steps 4 --save "$dir/s4.st" --quiet
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/s4.st" 2> "$dir/s8.txt"
check "--steps on --resume: exit 0" test $? -eq 0
check "--steps on --resume: a note" grep -qF "note: --steps 8 changes the schedule's length from $dir/s4.st's 4 steps: its steps 1 to 4 ran at the 4-step schedule's rates (step 4: 0.0255, where 8 steps would give 0.04672), so the run differs from one run of 8 steps" "$dir/s8.txt"
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/s4.st" --quiet 2> "$dir/s8q.txt"
check "--steps on --resume, --quiet: no note" test ! -s "$dir/s8q.txt"
# the other schedule flags and --batches on --resume: said too, with the steps they do not reach
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/s4.st" --lr 0.01 --warmup 0 --schedule linear --batches sequential 2> "$dir/lr8.txt"
check "--lr on --resume: exit 0" test $? -eq 0
check "--lr on --resume: a note" grep -qF "note: the run replaces $dir/s4.st's schedule cosine with --schedule linear, lr 0.05 with --lr 0.01, warmup 2 with --warmup 0 from step 5 on: its steps 1 to 4 ran at the checkpoint's rates" "$dir/lr8.txt"
check "--steps on --resume with --lr: the length's note takes the checkpoint's rates" grep -qF "note: --steps 8 changes the schedule's length from $dir/s4.st's 4 steps: its steps 1 to 4 ran at the 4-step schedule's rates (step 4: 0.0255, where 8 steps would give 0.04672)" "$dir/lr8.txt"
check "--batches on --resume: a note" grep -qF "note: the run replaces $dir/s4.st's random batches with --batches sequential from micro-batch 5 on: its micro-batches 1 to 4 were random" "$dir/lr8.txt"
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/s4.st" --lr 0.05 --min-lr 0.001 --batches random 2> "$dir/lr8.txt"
check "the checkpoint's own values on --resume: no note" bash -c "! grep -q 'replaces' '$dir/lr8.txt'"
"$exe" --data "$dir/train.bin" --steps 8 --resume "$dir/s4.st" --min-lr 0.0001 --quiet 2> "$dir/lr8.txt"
check "--min-lr on --resume, --quiet: no note" test ! -s "$dir/lr8.txt"

# a --val shorter than an evaluation: said before training
"$exe" --data "$dir/train.bin" --val "$dir/small.bin" --steps 0 2> "$dir/short.txt"
check "short --val: exit 1 (64 tokens make no micro-batch)" test $? -eq 1
"$exe" --write-test-tokens "$dir/val65.bin" 65 4 || exit 1
"$exe" --data "$dir/train.bin" --val "$dir/val65.bin" --steps 1 --eval-steps 3 2> "$dir/short.txt"
check "short --val: exit 0" test $? -eq 0
check "short --val: a warning" grep -qF "warning: --val $dir/val65.bin has 4 rows of 16 tokens, and an evaluation reads 3 micro-batches of 4 rows" "$dir/short.txt"

# a token file that is not a regular file has no size to check
out_error "--data /dev/zero" "error: --data: /dev/zero: not a regular file" --data /dev/zero

# --data with nothing to train is not read: a note says so (a wrong path would go unseen)
"$exe" --data "$dir/no-such.bin" --steps 0 2> "$dir/unread.txt"
check "--data unread: exit 0" test $? -eq 0
check "--data unread: a note" grep -qF "note: --data $dir/no-such.bin is not read: the run has no step to train (step 0 of 0) and no --sample" "$dir/unread.txt"

# a --metrics file the run made is removed when --save turns out to name it
# too: a refused run leaves nothing behind (an empty file was left)
out_error "--save the new --metrics file" "error: --save $dir/fresh_{step}.st and --metrics $dir/fresh_2.st are the same file" \
  --steps 4 --save "$dir/fresh_{step}.st" --save-every 2 --metrics "$dir/fresh_2.st"
check "the refused --metrics file is not left" test ! -e "$dir/fresh_2.st"
# what was there before the run stays: a dangling link is no file the run made
ln -s "$dir/linked.st" "$dir/metrics.link"
out_error "--save the --metrics link's target" "error: --save $dir/linked.st and --metrics $dir/metrics.link are the same file" \
  --save "$dir/linked.st" --metrics "$dir/metrics.link"
check "the --metrics link is kept" test -L "$dir/metrics.link"
check "the file the refused run made through the link is not left" test ! -e "$dir/linked.st"
out_error "--data ''" "error: --data: the path is empty" --data ""

# a checkpoint is read by its size: a FIFO is refused, not opened (the open
# blocked for ever waiting for a writer)
mkfifo "$dir/fifo.st"
timeout 60 "$exe" --data "$dir/train.bin" --steps 2 --resume "$dir/fifo.st" 2> "$dir/fifo.txt"
check "--resume a FIFO: exit 1" test $? -eq 1
check "--resume a FIFO: message" grep -qF "error: --resume: $dir/fifo.st: not a regular file: a checkpoint is read by its size" "$dir/fifo.txt"

# {step} checkpoints in one folder: the files the run would replace are read
# from the folder, not stat'ed step by step (2^53 steps with --save-every 1
# checked paths for ever before the first step); the earliest bad one is
# reported, and names that are no checkpoint of the run are left alone
mkdir -p "$dir/many" "$dir/many/c6.st" "$dir/many/c10.st" "$dir/many/c04.st" "$dir/many/c3.st" "$dir/many/c9007199254740993.st"
ln "$dir/train.bin" "$dir/many/c12.st"
timeout 60 "$exe" --data "$dir/train.bin" --steps 9007199254740992 --save "$dir/many/c{step}.st" --save-every 2 2> "$dir/many.txt"
check "a folder among {step} checkpoints: exit 1" test $? -eq 1
check "a folder among {step} checkpoints: the earliest" grep -qF "error: --save $dir/many/c{step}.st: $dir/many/c6.st is a folder (the checkpoint of step 6)" "$dir/many.txt"
rmdir "$dir/many/c6.st" "$dir/many/c10.st"
timeout 60 "$exe" --data "$dir/train.bin" --steps 9007199254740992 --save "$dir/many/c{step}.st" --save-every 2 2> "$dir/many.txt"
check "the --data file among {step} checkpoints: exit 1" test $? -eq 1
check "the --data file among {step} checkpoints: message" grep -qF "error: --save $dir/many/c{step}.st is the --data file $dir/train.bin" "$dir/many.txt"
rm "$dir/many/c12.st"
# the last of 2^53 checkpoints a folder: found at once (the sweep never got there)
rmdir "$dir/many/c3.st"
mkdir "$dir/many/c9007199254740992.st"
timeout 60 "$exe" --data "$dir/train.bin" --steps 9007199254740992 --save "$dir/many/c{step}.st" --save-every 1 2> "$dir/many.txt"
check "the last of 2^53 {step} checkpoints a folder: exit 1" test $? -eq 1
check "the last of 2^53 {step} checkpoints a folder: message" \
  grep -qF "error: --save $dir/many/c{step}.st: $dir/many/c9007199254740992.st is a folder (the checkpoint of step 9007199254740992)" "$dir/many.txt"
rmdir "$dir/many/c9007199254740992.st"
# a folder that cannot be listed (write and search permission only: root reads any)
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$dir/wx" && chmod 333 "$dir/wx"
  timeout 60 "$exe" --data "$dir/train.bin" --steps 9007199254740992 --save "$dir/wx/c{step}.st" --save-every 1 2> "$dir/wx.txt"
  check "an unlisted folder of 2^53 checkpoints: exit 1" test $? -eq 1
  check "an unlisted folder of 2^53 checkpoints: message" grep -qF "cannot list folder $dir/wx (Permission denied)" "$dir/wx.txt"
  "$exe" --data "$dir/train.bin" --steps 4 --save "$dir/wx/c{step}.st" --save-every 2 --quiet
  check "an unlisted folder of 2 checkpoints: saved" test $? -eq 0
  chmod 755 "$dir/wx"
fi
"$exe" --data "$dir/train.bin" --steps 4 --save "$dir/many/c{step}.st" --save-every 2 --quiet
check "{step} checkpoints beside other names: exit 0" test $? -eq 0
check "{step} checkpoints beside other names: saved" test -s "$dir/many/c2.st" -a -s "$dir/many/c4.st" -a -d "$dir/many/c04.st" -a -d "$dir/many/c9007199254740993.st"

# SIGINT stops the run between two steps and saves it: status 130, and the
# resumed run's next steps are the uninterrupted run's
timeout -s INT --preserve-status 2 "$exe" --data "$dir/train.bin" --steps 100000000 --schedule constant --save "$dir/int.st" 2> "$dir/int.txt"
check "SIGINT: exit 130" test $? -eq 130
n=$(sed -n 's/.*stopped by SIGINT at step \([0-9]*\) of 100000000: saved .*int.st (--resume .*int.st continues the run)$/\1/p' "$dir/int.txt")
check "SIGINT: said, with the step (got '$(tail -1 "$dir/int.txt")')" test -n "$n"
if [ -n "$n" ]; then
  "$exe" --data "$dir/train.bin" --steps 100000000 --resume "$dir/int.st" --quiet --metrics "$dir/int_r.jsonl" &
  pid=$!
  # (the resumed run is stopped too, once it has logged two steps)
  for _ in $(seq 200); do [ "$(wc -l < "$dir/int_r.jsonl" 2>/dev/null || echo 0)" -ge 2 ] && break; sleep 0.05; done
  kill -TERM $pid; wait $pid
  check "SIGTERM: exit 143" test $? -eq 143
  "$exe" --data "$dir/train.bin" --steps $((n + 2)) --schedule constant --quiet --metrics "$dir/int_u.jsonl"
  losses() { sed -n "s/^{\"step\":\($1\),\"loss\":\([^,]*\),.*/\1 \2/p" "$2"; }
  check "SIGINT, resumed: steps $((n + 1)) and $((n + 2)) the uninterrupted run's" \
    test "$(losses "$((n + 1))\|$((n + 2))" "$dir/int_r.jsonl")" = "$(losses "$((n + 1))\|$((n + 2))" "$dir/int_u.jsonl")" -a \
         "$(losses "$((n + 1))\|$((n + 2))" "$dir/int_r.jsonl" | wc -l)" -eq 2
fi
timeout -s TERM --preserve-status 1 "$exe" --data "$dir/train.bin" --steps 100000000 2> "$dir/term.txt"
check "SIGTERM without --save: exit 143" test $? -eq 143
check "SIGTERM without --save: said" grep -qE "stopped by SIGTERM at step [0-9]+ of 100000000 \(nothing saved: no --save\)$" "$dir/term.txt"
# the same signal twice within a second (timeout(1) signals the program and
# its process group): the first, stopped and saved; a second signal a
# second or more after the first ends the program at once, in the middle
# of its step (--slow-steps: each step 400 ms, 6 s longer; the signals
# come after step 1, in step 2).  SIGTERM: a background job of this shell
# starts with SIGINT ignored
started() { for _ in $(seq 1200); do grep -q "^step " "$1" 2> /dev/null && return 0; sleep 0.05; done; return 1; }   # step 1 done
"$exe" --slow-steps 400 --data "$dir/train.bin" --steps 1000 --save "$dir/twice.st" 2> "$dir/twice.txt" &
pid=$!
started "$dir/twice.txt"
kill -TERM $pid; sleep 0.2; kill -TERM $pid; wait $pid
check "two SIGTERMs 0.2 s apart: exit 143" test $? -eq 143
check "two SIGTERMs 0.2 s apart: the run stopped and saved" grep -qE "stopped by SIGTERM at step [0-9]+ of 1000: saved .*twice.st" "$dir/twice.txt"
"$exe" --slow-steps 6000 --data "$dir/train.bin" --steps 1000 --save "$dir/kill.st" 2> "$dir/kill.txt" &
pid=$!
started "$dir/kill.txt"
kill -TERM $pid; sleep 1.5; kill -TERM $pid; wait $pid
check "a second SIGTERM 1.5 s later: exit 143" test $? -eq 143
check "a second SIGTERM 1.5 s later: ended in its step" test ! -e "$dir/kill.st" -a "$(grep -c stopped "$dir/kill.txt")" -eq 0
check "the first SIGTERM is said" grep -qxF "rt_bigram: SIGTERM: stopping after the step under way, then saving it (another signal, a second or more from now, ends the program at once)" "$dir/kill.txt"
# a signal before the run starts (--slow-start: each parameter's
# initialisation 2 s) stops it there, as said: nothing trained, nothing
# saved (the signal once the handler is in place: SigCgt's SIGTERM bit)
caught() { for _ in $(seq 400); do local m; m=$(sed -n 's/^SigCgt:\s*//p' "/proc/$1/status" 2> /dev/null)
           [ -n "$m" ] && (( (16#$m >> 14) & 1 )) && return 0; sleep 0.01; done; return 1; }
"$exe" --slow-start 2000 --data "$dir/train.bin" --steps 5 --save "$dir/early.st" 2> "$dir/early.txt" &
pid=$!
caught $pid; sleep 0.2
kill -TERM $pid; wait $pid
check "SIGTERM before the run starts: exit 143" test $? -eq 143
check "SIGTERM before the run starts: said" grep -qxF "rt_bigram: SIGTERM: stopping before the run starts (another signal, a second or more from now, ends the program at once)" "$dir/early.txt"
check "SIGTERM before the run starts: stopped there" \
  grep -qxF "rt_bigram: stopped by SIGTERM before the run started: nothing trained, nothing saved" "$dir/early.txt"
check "SIGTERM before the run starts: nothing saved" test ! -e "$dir/early.st"
check "SIGTERM before the run starts: no step" test "$(grep -c '^step' "$dir/early.txt")" -eq 0
# ... and in a step (--slow-steps), the step finishes and is saved, as said
"$exe" --slow-steps 2000 --data "$dir/train.bin" --steps 5 --save "$dir/in1.st" 2> "$dir/in1.txt" &
pid=$!
caught $pid; sleep 0.5
kill -TERM $pid; wait $pid
check "SIGTERM in step 1: stopped at step 1, saved" grep -qE "stopped by SIGTERM at step 1 of 5: saved .*in1.st" "$dir/in1.txt"
# a second signal while the checkpoint is written (--slow-saves: 3 s) ends
# the program once it is whole: no PATH.PID.tmp left
"$exe" --slow-saves 3000 --data "$dir/train.bin" --steps 100000000 --save "$dir/ws.st" 2> "$dir/ws.txt" &
pid=$!
started "$dir/ws.txt"
kill -TERM $pid
for _ in $(seq 400); do compgen -G "$dir/ws.st.*.tmp" > /dev/null && break; sleep 0.05; done
sleep 1.1; kill -TERM $pid; wait $pid
check "a second SIGTERM during the save: exit 143" test $? -eq 143
check "a second SIGTERM during the save: said" grep -qxF "rt_bigram: SIGTERM: ended at once, once $dir/ws.st was written whole" "$dir/ws.txt"
check "a second SIGTERM during the save: no temporary file" test -z "$(compgen -G "$dir/ws.st.*.tmp")"
"$exe" --resume "$dir/ws.st" --steps 0 --quiet > /dev/null 2>&1
check "a second SIGTERM during the save: the checkpoint loads" test $? -eq 0
# a long sample is cut short: said, its text ended by one newline
timeout -s INT --preserve-status 1 "$exe" --data "$dir/train.bin" --steps 2 --sample 100000000000 --quiet > "$dir/ssig.out" 2> "$dir/ssig.txt"
check "SIGINT during --sample: exit 130" test $? -eq 130
check "SIGINT during --sample: said" grep -qE "stopped by SIGINT after [0-9]+ tokens of the sample$" "$dir/ssig.txt"
check "SIGINT during --sample: the text ends with a newline" test "$(tail -c 1 "$dir/ssig.out" | od -An -c | tr -d ' ')" = '\n'
check "SIGINT during --sample, --quiet: the signal is not said" test "$(grep -c stopping "$dir/ssig.txt")" -eq 0
"$exe" --data "$dir/train.bin" --steps 2 --sample 100000000000 > /dev/null 2> "$dir/ssig2.txt" &
pid=$!
for _ in $(seq 1200); do grep -q "^sample (" "$dir/ssig2.txt" 2> /dev/null && break; sleep 0.05; done
kill -TERM $pid; wait $pid
check "SIGTERM during --sample: the signal is said" grep -qxF "rt_bigram: SIGTERM: stopping the sample (another signal, a second or more from now, ends the program at once)" "$dir/ssig2.txt"
# an ignored SIGINT (nohup) stays ignored: the run goes on
rm -f "$dir/ign.jsonl"
(trap '' INT
 "$exe" --data "$dir/train.bin" --steps 2000 --quiet --metrics "$dir/ign.jsonl" &
 pid=$!
 for _ in $(seq 200); do [ -s "$dir/ign.jsonl" ] && break; sleep 0.05; done
 kill -INT $pid
 wait $pid)
check "an ignored SIGINT stays ignored: the run ends by itself" test $? -eq 0 -a "$(wc -l < "$dir/ign.jsonl")" -eq 2000

# --quiet: nothing on stderr
"$exe" --data "$dir/train.bin" --steps 3 --quiet 2> "$dir/quiet.txt"
check "--quiet exits 0" test $? -eq 0
check "--quiet is quiet" test ! -s "$dir/quiet.txt"

checks_done
