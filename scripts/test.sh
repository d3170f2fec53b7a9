#!/usr/bin/env bash
# Installs what is missing, builds trainc and runs the whole test suite
# under CTest; then builds it again with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the tests that are not labelled slow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" build
(cd "$root/build" && ctest -j "$(nproc)" --output-on-failure)
"$root/scripts/build.sh" build-asan -DTRAINC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 ctest -j "$(nproc)" --output-on-failure -LE slow)
