# tests/torch/common.sh — sourced by the tests that run PyTorch
# (tests/torch/*.sh, tests/gpu/torch_smoke.sh), with root set to the
# repository's root.
#   torch_python MODULE...  sets py to a python3 that imports the modules
#                           (PATH's, else Debian's /usr/bin/python3), or
#                           exits 77, the tests' skip (scripts/setup.sh
#                           installs python3-torch when it can)
#   torch_setup OUT TOKENIZE  torch_python torch numpy, then OUT made
#                           afresh and entered, with tok_train.bin (and
#                           tok_val.bin) in it: the first 200 KB of tiny
#                           Shakespeare, or of the README where ../shared
#                           is not there
torch_python() {
    local p mods
    mods=$(IFS=,; echo "$*")
    py=
    for p in python3 /usr/bin/python3; do
        command -v "$p" > /dev/null && "$p" -c "import $mods" 2> /dev/null && { py=$p; return 0; }
    done
    echo "skip: no python3 here imports $*"
    exit 77
}
torch_setup() {
    torch_python torch numpy
    rm -rf "$1" && mkdir -p "$1" && cd "$1" || exit 2
    head -c 200000 "$root/../shared/data/tinyshakespeare.txt" > text.txt 2> /dev/null || head -c 200000 "$root/README.md" > text.txt
    "$2" text.txt tok > /dev/null || { echo "FAIL: trainc-tokenize"; exit 1; }
}
