#!/usr/bin/env bash
# tests/e2e/interrupt.sh TRAINC TOKENIZE SCRATCH — a signal that ends the
# driver or the tokenizer leaves no half-written file (CTest:
# e2e_interrupt).
#   trainc compile: SIGTERM while the C compiler runs (a stand-in, --cc,
#     that writes part of its -o file and waits) ends the compiler first,
#     then removes its NAME.PID.tmp and the NAME.c it would have removed;
#     status 143, as the signal gives.
#   trainc-tokenize: SIGTERM while the token files are written (their
#     temporary file seen) waits for them: both files whole, no temporary
#     file, status 143.
set -u
trainc=$1 tokenize=$2 dir=$3
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
# wait_for GLOB: up to 20 s for a file matching it
wait_for() { for _ in $(seq 2000); do compgen -G "$1" > /dev/null && return 0; sleep 0.01; done; return 1; }

# -- trainc compile
cat > fakecc.sh <<'CC'
#!/usr/bin/env bash
# writes part of its -o file, says so, and waits to be stopped
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf 'part of a program' > "$out"
touch "$(dirname "$out")/cc.started"
exec sleep 60
CC
chmod +x fakecc.sh
mkdir out
"$trainc" compile "$root/examples/mlp.model" --no-blas --cc "$dir/fakecc.sh" -o out/mlp 2> compile.log &
pid=$!
wait_for out/cc.started || { kill $pid; fail "the stand-in compiler did not start: $(cat compile.log)"; }
compgen -G 'out/mlp.*.tmp' > /dev/null && [ -f out/mlp.c ] || fail "no NAME.PID.tmp and NAME.c while the compiler runs: $(ls out)"
kill -TERM $pid
wait $pid
st=$?
[ $st -eq 143 ] || fail "trainc compile stopped by SIGTERM: status $st, not 143"
rm -f out/cc.started
[ -z "$(ls out)" ] || fail "trainc compile stopped by SIGTERM left: $(ls out)"
pgrep -f "$dir/fakecc.sh" > /dev/null && fail "the compiler outlived trainc"
echo "trainc compile: SIGTERM during the link left nothing (status 143)"

# -- trainc-tokenize
yes 'to be, or not to be' | head -c 150000000 > big.txt
"$tokenize" big.txt big > tok.log 2>&1 &
pid=$!
wait_for 'big_*.tmp' || { kill $pid; fail "no temporary token file seen: $(cat tok.log)"; }
kill -TERM $pid
wait $pid
st=$?
[ $st -eq 143 ] || fail "trainc-tokenize stopped by SIGTERM: status $st, not 143"
compgen -G 'big_*.tmp' > /dev/null && fail "trainc-tokenize stopped by SIGTERM left $(ls big_*.tmp)"
[ "$(stat -c %s big_train.bin)" -eq $((1024 + 2 * 135000000)) ] && [ "$(stat -c %s big_val.bin)" -eq $((1024 + 2 * 15000000)) ] ||
  fail "the token files are not whole: $(ls -l big_*)"
rm -f big.txt big_train.bin big_val.bin
echo "trainc-tokenize: SIGTERM during the write waited for both files (status 143)"
echo ok
