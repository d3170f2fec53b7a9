#!/usr/bin/env bash
# Runs the RUN: lines of a FileCheck test file, the way LLVM's lit does.
#   run.sh FILE TRAINC FILECHECK SCRATCHDIR
# In a RUN line: %s is FILE, %S its folder, %trainc the driver, %t a scratch
# path unique to FILE; FileCheck is LLVM's FileCheck.  A RUN line ending in
# '\' continues on the next RUN line.  Every RUN line must succeed.
#
# `not CMD...` succeeds when CMD exits with a failure status (1..127), as
# LLVM's `not` does; a crash (a signal, or a sanitizer report, which is made
# to abort) fails the test either way.  `CMD 2>&1 | FileCheck ...; exits N`
# succeeds when CMD exited with status N and every later command of the
# pipeline (FileCheck) succeeded: a status to check beside the messages
# (`test ${PIPESTATUS[0]} -eq N` alone would let FileCheck fail unseen).
set -u
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}abort_on_error=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:abort_on_error=1:print_stacktrace=1"
prelude='not() { "$@"; local s=$?; [ $s -ne 0 ] && [ $s -lt 128 ]; }; set -o pipefail;
exits() { local s=("${PIPESTATUS[@]}") i; [ "${s[0]}" -eq "$1" ] || return 1; for ((i = 1; i < ${#s[@]}; i++)); do [ "${s[i]}" -eq 0 ] || return 1; done; };'
file=$1 trainc=$2 filecheck=$3 scratch=$4
mkdir -p "$scratch"
dir=$(cd "$(dirname "$file")" && pwd)
base=$(basename "$file")
t="$scratch/$base.tmp"
rm -rf "$t" "$t".* "$t"_* # what an earlier run left is not read as this one's
status=0
n=0
cmd=""
while IFS= read -r line; do
  case "$line" in
    *RUN:*) ;;
    *) continue ;;
  esac
  part=${line#*RUN:}
  case "$part" in
    *\\) cmd="$cmd${part%\\} "; continue ;;
  esac
  cmd="$cmd$part"
  n=$((n + 1))
  run=$(printf '%s' "$cmd" | sed -e "s|%trainc|$trainc|g" -e "s|%s|$file|g" -e "s|%S|$dir|g" -e "s|%t|$t|g" -e "s|FileCheck|$filecheck|g")
  cmd=""
  echo "RUN[$n]: $run"
  if ! bash -c "$prelude $run"; then
    echo "FAILED: RUN line $n of $file"
    status=1
  fi
done < "$file"
if [ "$n" -eq 0 ]; then
  echo "no RUN: lines in $file"
  exit 1
fi
exit $status
