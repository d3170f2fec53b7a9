#!/usr/bin/env bash
# Installs the Debian packages trainc needs that the machine lacks.
#   build: cmake, a C compiler, flex, bison
#   generated code: OpenBLAS, its OpenMP build (GEMMs), OpenMP (libgomp comes with gcc)
#   tests: LLVM's FileCheck (llvm-14-tools), clang and its libFuzzer runtime,
#          python3 (the GPU script's self-test, tests/gpu/selftest.sh);
#          python3-torch when it installs (the benchmark's PyTorch reference
#          run on the CPU, tests/gpu/torch_smoke.sh, which skips without
#          it; bench/cpu.sh), without its recommends
set -euo pipefail
pkgs=(cmake gcc make flex bison libopenblas-dev libopenblas-openmp-dev llvm-14-tools clang-14 libclang-rt-14-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# python3-torch: large (about 200 MB of packages) and only for one test and
# a benchmark; a failed install is said and does not stop the build
if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  echo "setup: installing python3-torch"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-torch >/dev/null; } ||
    echo "setup: python3-torch did not install: tests/gpu/torch_smoke.sh will skip"
fi
