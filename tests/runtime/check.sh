# tests/runtime/check.sh — sourced by cli.sh and disk.sh: the arguments
# (EXE: rt_bigram, the bigram test model + trn_main; SCRATCH: a folder made
# empty), `check NAME COMMAND...` counting what passes and what fails, and
# `differ A B` (the files differ), `checks_done`, the summary and the exit status.
set -u
exe=$1 dir=$2
rm -rf "$dir"
mkdir -p "$dir"
pass=0 fail=0
check() {   # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then pass=$((pass + 1)); else echo "FAILED: $name"; fail=$((fail + 1)); fi
}
differ() { ! cmp -s "$1" "$2"; }   # differ FILE1 FILE2
checks_done() {
  echo "$pass passed, $fail failed"
  test "$fail" -eq 0
}
