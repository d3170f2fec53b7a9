#!/usr/bin/env bash
# tests/runtime/disk.sh — a training executable's files when writing them
# fails: a full disk or file-size limit during the run loses no more than
# it must, every checkpoint path is checked before the first step, the
# temporary file of a save never clobbers another file, the resume notes.
#   disk.sh EXE SCRATCH      (EXE: rt_bigram, the bigram test model + trn_main)
# The full-tmpfs checks need root and mount(8); without them they are
# skipped, with a message, and the rest runs (/dev/full and ulimit -f).
. "$(dirname "$0")/check.sh"
steps_of() { grep -c '^step ' "$1"; }   # progress and save lines in a stderr file

"$exe" --write-test-tokens "$dir/train.bin" 20000 1 || exit 1
T="--data $dir/train.bin"

# tmpfs folders of a given size, unmounted at the end
mounts=()
cleanup() { for m in "${mounts[@]}"; do umount "$m" 2> /dev/null; done; }
trap cleanup EXIT
tmpfs() {   # tmpfs DIR SIZE: 0 when mounted
  mkdir -p "$1"
  [ "$(id -u)" = 0 ] && mount -t tmpfs -o "size=$2" tmpfs "$1" 2> /dev/null && mounts+=("$1")
}

# 1. a failure during training (here the metrics: /dev/full fails at the
# first flush) is reported, then the state of the last completed step is
# saved to --save's path for it, and the run exits 1; resumed from it, the
# run ends where an uninterrupted one does, byte for byte
"$exe" $T --steps 6 --save "$dir/u.st" --quiet
"$exe" $T --steps 6 --save "$dir/f_{step}.st" --metrics /dev/full 2> "$dir/full.txt"
check "metrics fail: exit 1" test $? -eq 1
check "metrics fail: the error" grep -q "error: fprintf/fflush to /dev/full failed at runtime/main.c:[0-9]*: No space left on device" "$dir/full.txt"
check "metrics fail: saved, and says where" grep -qF "stopped at step 1 of 6: saved $dir/f_1.st (--resume $dir/f_1.st continues the run)" "$dir/full.txt"
"$exe" $T --resume "$dir/f_1.st" --save "$dir/r.st" --quiet
check "metrics fail: the checkpoint resumes" test $? -eq 0
check "metrics fail: resumed, the uninterrupted run's checkpoint" cmp -s "$dir/u.st" "$dir/r.st"
"$exe" $T --steps 1 --save "$dir/last.st" --metrics /dev/full 2> "$dir/full1.txt"
check "metrics fail at the last step: saved, no resume offered" grep -qF "the last step, 1, is done: saved $dir/last.st" "$dir/full1.txt"
check "metrics fail at the last step: no --resume" test "$(grep -c -- '--resume' "$dir/full1.txt")" -eq 0
# the current step's path between two --save-every steps, never checked:
# its failure says which checkpoint was saved last
mkdir -p "$dir/ev_2" "$dir/ev_4" "$dir/ev_6"
"$exe" $T --steps 6 --save-every 2 --save "$dir/ev_{step}/ck.st" --metrics /dev/full 2> "$dir/ev.txt"
check "an unchecked path: exit 1" test $? -eq 1
check "an unchecked path: its error" grep -q "ev_1/ck.st.*No such file or directory" "$dir/ev.txt"
check "an unchecked path: nothing claimed saved" test "$(grep -c 'stopped at step' "$dir/ev.txt")" -eq 0
"$exe" $T --steps 6 --metrics /dev/full 2> "$dir/full2.txt"
check "metrics fail without --save: exit 1" test $? -eq 1
check "metrics fail without --save: nothing said of saving" test "$(grep -c 'saved' "$dir/full2.txt")" -eq 0

# a metrics file that fills its disk half way (8 KiB: some 60 steps)
if tmpfs "$dir/m8k" 8k; then
  "$exe" $T --steps 200 --save "$dir/t.st" --metrics "$dir/m8k/m.jsonl" --quiet 2> "$dir/m8k.txt"
  check "full tmpfs metrics: exit 1" test $? -eq 1
  check "full tmpfs metrics: the error" grep -q "error: fprintf/fflush to $dir/m8k/m.jsonl failed .*No space left on device" "$dir/m8k.txt"
  k=$(sed -n 's/.*stopped at step \([0-9]*\) of 200: saved .*/\1/p' "$dir/m8k.txt")
  check "full tmpfs metrics: saved mid-run (step '$k')" test -n "$k" -a "${k:-0}" -gt 10 -a "${k:-200}" -lt 200
  check "full tmpfs metrics: the checkpoint's step" grep -qa "\"step\":\"$k\"" "$dir/t.st"
  # a periodic save that fails: that path is not tried again; the message
  # names the last checkpoint saved.  One checkpoint fits in 1 MiB.
  if tmpfs "$dir/c1m" 1m; then
    "$exe" $T --steps 6 --save "$dir/c1m/p_{step}.st" --save-every 2 2> "$dir/c1m.txt"
    check "periodic save fails: exit 1" test $? -eq 1
    check "periodic save fails: the error" grep -q "error: cannot save $dir/c1m/p_4.st .*No space left on device" "$dir/c1m.txt"
    check "periodic save fails: where to resume" \
      grep -qF "the checkpoint of step 4 is not saved (above); the last checkpoint saved is $dir/c1m/p_2.st (step 2)" "$dir/c1m.txt"
    check "periodic save fails: no temporary file left" test -z "$(ls "$dir/c1m" | grep '\.tmp$')"
    # before training: a warning with the free space and what the run saves there
    check "free space: a warning before the first step" \
      grep -q "^rt_bigram: warning: --save: folder $dir/c1m has 1.00 MiB (1048576 bytes) free, less than the 3 checkpoints saved there take" \
      <(sed -n '1,/^step /p' "$dir/c1m.txt")
  fi
  if tmpfs "$dir/s64k" 64k; then
    "$exe" $T --steps 2 --save "$dir/s64k/x.st" 2> "$dir/s64k.txt"
    check "free space: the final save fails: exit 1" test $? -eq 1
    check "free space: the warning, before the first step" \
      grep -qE "^rt_bigram: warning: --save: folder $dir/s64k has 64.00 KiB \(65536 bytes\) free, less than the checkpoint's [0-9.]+ KiB \([0-9]+ bytes\)" \
      <(sed -n '1,/^step /p' "$dir/s64k.txt")
  fi
else
  echo "SKIPPED: the full-tmpfs checks (they need root and mount -t tmpfs)"
fi
"$exe" $T --steps 2 --save "$dir/ok.st" 2> "$dir/nowarn.txt"
check "free space: no warning where there is room" test "$(grep -c 'warning' "$dir/nowarn.txt")" -eq 0

# 2. every path the run saves to is checked before the first step: {step}
# in the folder, d_4 there, d_2 missing
mkdir -p "$dir/d_4"
"$exe" $T --steps 4 --save "$dir/d_{step}/x.st" --save-every 2 2> "$dir/d.txt"
check "{step} folder missing: exit 1" test $? -eq 1
check "{step} folder missing: the first bad one" \
  grep -qF "error: --save $dir/d_{step}/x.st: cannot write into folder $dir/d_2: No such file or directory (the checkpoint of step 2)" "$dir/d.txt"
check "{step} folder missing: before training" test "$(steps_of "$dir/d.txt")" -eq 0
mkdir -p "$dir/e_2"
"$exe" $T --steps 6 --save "$dir/e_{step}/x.st" --save-every 2 2> "$dir/e.txt"
check "{step} folder of the last step missing: exit 1" test $? -eq 1
check "{step} folder of step 4 missing" grep -qF "cannot write into folder $dir/e_4: No such file or directory (the checkpoint of step 4)" "$dir/e.txt"
mkdir -p "$dir/d_2"
"$exe" $T --steps 4 --save "$dir/d_{step}/x.st" --save-every 2 --quiet
check "{step} folders there: exit 0" test $? -eq 0 -a -s "$dir/d_2/x.st" -a -s "$dir/d_4/x.st"
mkdir -p "$dir/ck_4.st"
"$exe" $T --steps 6 --save "$dir/ck_{step}.st" --save-every 2 2> "$dir/f.txt"
check "a folder at a periodic path: exit 1" test $? -eq 1
check "a folder at a periodic path: named" grep -qF "$dir/ck_4.st is a folder (the checkpoint of step 4)" "$dir/f.txt"

# 3. the temporary file of a save is a new file: PATH.tmp that is another
# file of the run (the metrics, the data) is neither truncated nor renamed
"$exe" $T --steps 4 --save "$dir/m_{step}.st" --save-every 2 --metrics "$dir/m_2.st.tmp" --quiet
check "--metrics PATH.tmp: exit 0" test $? -eq 0
check "--metrics PATH.tmp: the metrics intact" test "$(grep -c '"loss"' "$dir/m_2.st.tmp")" -eq 4
"$exe" $T --resume "$dir/m_2.st" --steps 4 --quiet
check "--metrics PATH.tmp: the checkpoint resumes" test $? -eq 0
cp "$dir/train.bin" "$dir/tr.bin.tmp"
"$exe" --data "$dir/tr.bin.tmp" --steps 2 --save "$dir/tr.bin" --quiet
check "--data PATH.tmp: exit 0" test $? -eq 0
check "--data PATH.tmp: the data file is still there" cmp -s "$dir/train.bin" "$dir/tr.bin.tmp"
# PATH.PID.tmp taken (by a folder, a file): the save takes another name
bash -c 'mkdir "$1.$$.tmp" && printf keep > "$1.$$.1.tmp" && exec "$2" --data "$3" --steps 2 --save "$1" --quiet' _ "$dir/pid.st" "$exe" "$dir/train.bin"
check "PATH.PID.tmp taken: saved after training" test $? -eq 0 -a -s "$dir/pid.st"
check "PATH.PID.tmp taken: the folder stays" test -d "$(ls -d "$dir"/pid.st.*.tmp | grep -v '\.1\.tmp$')"
check "PATH.PID.1.tmp taken: the file intact" test "$(cat "$dir"/pid.st.*.1.tmp)" = keep
# a name of 250 bytes (its PATH.PID.tmp past the 255 a name may have):
# saved through a short temporary name; one of 256 is an error before
# the first step
long=$(printf 'c%.0s' $(seq 250))
"$exe" $T --steps 2 --save "$dir/$long" --quiet
check "a 250-byte name: saved" test $? -eq 0 -a -s "$dir/$long"
check "a 250-byte name: no temporary left" test -z "$(ls -a "$dir" | grep '\.tmp$' | grep -v -e '^m_2' -e '^tr\.bin' -e '^pid\.st')"
"$exe" $T --steps 2 --save "$dir/${long}cccccc" 2> "$dir/long.txt"
check "a 256-byte name: exit 1" test $? -eq 1
check "a 256-byte name: the error" grep -q "error: --save .*: cannot write .*: File name too long" "$dir/long.txt"
check "a 256-byte name: before the first step" test "$(steps_of "$dir/long.txt")" -eq 0
# a symbolic link is written through (a dangling one too), the target's mode kept
mkdir -p "$dir/lk"
"$exe" $T --steps 1 --save "$dir/lk/target.st" --quiet
chmod 600 "$dir/lk/target.st"
"$exe" $T --steps 2 --save "$dir/lk/target.st" --quiet
check "--save over a file: its mode kept" test "$(stat -c %a "$dir/lk/target.st")" = 600
chmod 640 "$dir/lk/target.st"
ln -s target.st "$dir/lk/link.st"
"$exe" $T --steps 3 --save "$dir/lk/link.st" --quiet
"$exe" $T --steps 3 --save "$dir/lk/plain.st" --quiet
check "--save LINK: still a link" test -L "$dir/lk/link.st"
check "--save LINK: the target replaced" cmp -s "$dir/lk/target.st" "$dir/lk/plain.st"
check "--save LINK: the target's mode kept" test "$(stat -c %a "$dir/lk/target.st")" = 640
ln -s gone.st "$dir/lk/dangling.st"   # a dangling link: the file it names is made
"$exe" $T --steps 3 --save "$dir/lk/dangling.st" --quiet
check "--save DANGLING: still a link" test -L "$dir/lk/dangling.st"
check "--save DANGLING: the file it names made" cmp -s "$dir/lk/gone.st" "$dir/lk/plain.st"
mkdir -p "$dir/lk/sub" && ln -s sub/b.st "$dir/lk/a.st" && ln -s c.st "$dir/lk/sub/b.st"   # a chain of two, dangling
"$exe" $T --steps 3 --save "$dir/lk/a.st" --quiet
check "--save CHAIN: both links stay" test -L "$dir/lk/a.st" -a -L "$dir/lk/sub/b.st"
check "--save CHAIN: the last name made" cmp -s "$dir/lk/sub/c.st" "$dir/lk/plain.st"

# 4. a file-size limit: the save fails with an error naming the path
# (SIGXFSZ killed the process, status 153, and left PATH.tmp behind)
(ulimit -f 300 && exec "$exe" $T --steps 2 --save "$dir/big.st" --quiet 2> "$dir/big.txt")
check "ulimit -f: exit 1" test $? -eq 1
check "ulimit -f: the error names the path" grep -q "error: cannot save $dir/big.st .*: fwrite([0-9]* bytes) to $dir/big.st\.[0-9]*\.tmp failed .*File too large" "$dir/big.txt"
check "ulimit -f: nothing left behind" test -z "$(ls "$dir" | grep '^big\.st')"

# 5. a checkpoint at or past the run's steps trains nothing, and says so
"$exe" $T --steps 4 --save "$dir/c4.st" --quiet
"$exe" $T --resume "$dir/c4.st" --save "$dir/c4b.st" 2> "$dir/n1.txt"
check "resume at the end: exit 0" test $? -eq 0
check "resume at the end: a note" grep -qF "note: $dir/c4.st is at step 4, and the run has 4 steps (the checkpoint's lr.steps, the schedule's length): nothing to train; --steps N trains it on to step N" "$dir/n1.txt"
check "resume at the end: saved" test -s "$dir/c4b.st"
"$exe" $T --resume "$dir/c4.st" --steps 2 2> "$dir/n2.txt"
check "resume past --steps: exit 0" test $? -eq 0
check "resume past --steps: a note" grep -qF "note: $dir/c4.st is at step 4, and the run has 2 steps (--steps): nothing to train" "$dir/n2.txt"
"$exe" $T --resume "$dir/c4.st" --steps 6 2> "$dir/n3.txt"
check "resume with steps to go: no nothing-to-train note" test "$(grep -c 'nothing to train' "$dir/n3.txt")" -eq 0

checks_done
