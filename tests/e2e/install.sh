#!/usr/bin/env bash
# tests/e2e/install.sh CMAKE BUILD SCRATCH — `cmake --install BUILD
# --prefix P` (CTest: e2e_install): P/bin/trainc and trainc-tokenize, the
# runtime's headers and library, the examples, hf_to_trainc.py and the
# docs; moved elsewhere whole, the installed trainc builds generated code
# with the installed runtime (--version says which, --emit=lib copies it)
# and what it compiles trains.
set -u
cmake=$1 build=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
"$cmake" --install "$build" --prefix "$dir/prefix" > install.log 2>&1 || { cat install.log; fail "cmake --install"; }
for f in bin/trainc bin/trainc-tokenize lib/trainc/libtrainc_rt.a share/trainc/runtime/trainc_rt.h share/trainc/runtime/trainc_kernels.h \
         share/trainc/runtime/philox.h share/trainc/runtime/trainc_cuda.h share/trainc/runtime/trainc_cuda.cuh share/trainc/examples/gpt2.model \
         share/trainc/examples/embed/CMakeLists.txt share/trainc/tools/hf_to_trainc.py share/doc/trainc/README.md share/doc/trainc/runtime.md; do
  [ -f "prefix/$f" ] || fail "not installed: $f"
done
[ -x prefix/bin/trainc ] && [ -x prefix/share/trainc/tools/hf_to_trainc.py ] || fail "installed programs are not executable"
[ -z "$(find prefix/share/trainc/runtime -name '*.c')" ] || fail "the runtime's sources installed"

mv prefix moved
p=$dir/moved
"$p/bin/trainc" --version > version.txt || fail "--version"
grep -qx "runtime headers: $p/share/trainc/runtime" version.txt && grep -qx "runtime library: $p/lib/trainc/libtrainc_rt.a" version.txt ||
  { cat version.txt; fail "the moved trainc does not build with its installed runtime"; }
# marks in the installed header and library show in what --emit=lib copies
mkdir lib
echo '/* the installed copy */' >> "$p/share/trainc/runtime/trainc_rt.h"
echo 'int trainc_installed_copy;' > mark.c && cc -c mark.c -o installed_mark.o && ar q "$p/lib/trainc/libtrainc_rt.a" installed_mark.o ||
  fail "cannot mark the installed library"
"$p/bin/trainc" compile "$p/share/trainc/examples/mlp.model" --emit=lib -o lib/mlp 2> lib.log || { cat lib.log; fail "--emit=lib"; }
grep -q "the installed copy" lib/trainc_rt.h || fail "--emit=lib copied another trainc_rt.h"
ar t lib/libtrainc_rt.a | grep -qx installed_mark.o || fail "--emit=lib copied another libtrainc_rt.a"
# TRAINC_RUNTIME_DIR and TRAINC_RT_LIB still win
TRAINC_RUNTIME_DIR=/elsewhere "$p/bin/trainc" --version | grep -qx "runtime headers: /elsewhere" || fail "TRAINC_RUNTIME_DIR is not taken"
TRAINC_RT_LIB=/elsewhere.a "$p/bin/trainc" --version | grep -qx "runtime library: /elsewhere.a" || fail "TRAINC_RT_LIB is not taken"
# the headers and the library from one place: with the library gone, the build trees' both
mv "$p/lib/trainc/libtrainc_rt.a" lib.a
"$p/bin/trainc" --version | grep -q "runtime headers: $p" && fail "installed headers taken without the installed library"
mv lib.a "$p/lib/trainc/libtrainc_rt.a"

# a training executable, from the installed programs alone
for _ in $(seq 400); do echo 'to be, or not to be: that is the question.'; done > text.txt
"$p/bin/trainc-tokenize" text.txt text > tok.log 2>&1 || { cat tok.log; fail "trainc-tokenize"; }
"$p/bin/trainc" compile "$p/share/trainc/examples/gpt2.model" -D vocab=256 -D layers=1 -D heads=2 -D dim=32 -D seq=32 -D batch=4 -o gpt2 \
  2> compile.log || { cat compile.log; fail "trainc compile"; }
./gpt2 --data text_train.bin --steps 3 --threads 1 --quiet --metrics m.jsonl --sample 10 --prompt "to be" > sample.txt 2> run.log ||
  { cat run.log; fail "the executable did not train"; }
[ "$(wc -l < m.jsonl)" -eq 3 ] && [ "$(wc -c < sample.txt)" -eq 11 ] || fail "3 steps and a sample of 10 bytes: $(cat m.jsonl sample.txt)"
echo "installed, moved: trainc builds with its own runtime, and what it compiles trains"
