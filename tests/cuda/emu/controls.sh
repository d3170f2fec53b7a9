#!/bin/bash
# tests/cuda/emu/controls.sh — the positive controls of the CUDA
# emulation's checks: kernels with one race each (controls.cu), each
# reported by the check meant for it and passing with that check off, and
# their correct forms passing with every check on:
#   controls.sh WORKDIR TSAN
# TSAN=1: ThreadSanitizer's rows too (where g++ links -fsanitize=thread).
# The checks: the two orders (off: TRAINC_EMU_ONE_ORDER=1), shared memory
# filled with 0xFF before each block (off: TRAINC_EMU_NO_FILL=1), and
# ThreadSanitizer (EMU_TSAN=1 in run.sh); and, always on, the alignment of
# 16-byte vector accesses (a kernel with a misaligned one) and full-warp
# collectives with every lane there (a shuffle after half the lanes
# returned).  Exits 1 when a row does not come out as it says.
set -u
dir=$1 tsan=$2
here=$(cd "$(dirname "$0")" && pwd)
cxx=${CXX:-g++}
mkdir -p "$dir" && cd "$dir" || exit 2
rt=$(cd "$here/../../../runtime" && pwd)
awk -f "$here/dispatch.awk" "$here/controls.cu" > controls.emu.h || exit 1
$cxx -std=c++17 -O1 -w -I"$here" -I"$rt" -I. -DEMU_DISPATCH='"controls.emu.h"' "$here/controls.cpp" -o controls -ldl ||
    { echo "FAIL: g++ on controls.cpp"; exit 1; }
if [ "$tsan" = 1 ]; then
    $cxx -std=c++17 -O1 -w -fsanitize=thread -g -I"$here" -I"$rt" -I. -DEMU_DISPATCH='"controls.emu.h"' "$here/controls.cpp" -o controls-tsan -ldl ||
        { echo "FAIL: g++ -fsanitize=thread on controls.cpp"; exit 1; }
fi

bad=0
# row PROGRAM ENV KERNEL RC PATTERN: PROGRAM KERNEL with ENV exits RC and
# prints a line that matches PATTERN
row() {
    local prog=$1 env=$2 kernel=$3 rc=$4 pat=$5 out got
    out=$(env $env TSAN_OPTIONS="halt_on_error=1 exitcode=66" ./$prog "$kernel" 2>&1)
    got=$?
    if [ "$got" = "$rc" ] && grep -qE -- "$pat" <<< "$out"; then
        echo "ok   $prog $env $kernel: $(grep -m1 -E -- "$pat" <<< "$out")"
    else
        echo "FAIL $prog $env $kernel: exit $got (want $rc and a line matching '$pat'):"
        sed 's/^/    /' <<< "$out" | head -30
        bad=1
    fi
}
orders="its blocks, warps and lanes in reverse order give another result"
all="TRAINC_EMU_NO_FILL=0"
# the correct forms, every check on
for k in ctl_scale ctl_table ctl_sum ctl_warp; do row controls "$all" $k 0 ": ok$"; done
# a block reading an element another block writes: the two orders
row controls TRAINC_EMU_ONE_ORDER=1 ctl_next_block 0 ": ok$"
row controls "$all" ctl_next_block 1 "$orders"
# shared memory a block never wrote: the fill
# (not the two orders without it: the second order's blocks find the
# table the first order's block 0 left)
row controls TRAINC_EMU_NO_FILL=1 ctl_table_once 0 ": ok$"
row controls "$all" ctl_table_once 1 "FAIL: float [0-9]+ of the memory is -?nan"
# a misaligned 16-byte vector access: the alignment check
row controls "$all" ctl_vec 0 ": ok$"
row controls "$all" ctl_vec_misaligned 2 "16-byte vector access at .* not 16-byte aligned"
# lanes returning before a full-warp shuffle: the collectives' check
row controls "$all" ctl_shfl 0 ": ok$"
row controls "$all" ctl_shfl_exited 2 "full-warp collective .* with lane 16 of its warp returned before it"
# a barrier left out: ThreadSanitizer
row controls "TRAINC_EMU_ONE_ORDER=1 TRAINC_EMU_NO_FILL=1" ctl_sum_nobarrier 0 ": ok$"
row controls "$all" ctl_sum_nobarrier 1 "$orders"
# (the same between the lanes of a warp, with no __syncwarp)
row controls TRAINC_EMU_ONE_ORDER=1 ctl_warp_nosync 1 "FAIL: float [0-9]+ of the memory is -?nan"
row controls "$all" ctl_warp_nosync 1 "$orders"
if [ "$tsan" = 1 ]; then
    for k in ctl_scale ctl_table ctl_sum ctl_warp; do row controls-tsan TRAINC_EMU_ONE_ORDER=1 $k 0 ": ok$"; done
    row controls-tsan "TRAINC_EMU_ONE_ORDER=1 TRAINC_EMU_NO_FILL=1" ctl_sum_nobarrier 66 "WARNING: ThreadSanitizer: data race"
    row controls-tsan "TRAINC_EMU_ONE_ORDER=1 TRAINC_EMU_NO_FILL=1" ctl_warp_nosync 66 "WARNING: ThreadSanitizer: data race"
fi
[ $bad = 0 ] && echo "every check reports the races it is meant to find" || echo "FAIL: a check does not report its race"
exit $bad
