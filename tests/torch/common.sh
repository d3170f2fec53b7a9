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
#                           Shakespeare, or where ../shared is not there
#                           the same amount of words drawn by a fixed
#                           generator (fallback_text): never a file of
#                           the project, whose edits would change the
#                           data and so the rounding the tests compare
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
# 200 KB of lines of words from a fixed list, the words drawn by the
# ZX81's LCG (exact in awk's doubles): the same text on every machine.
fallback_text() {
    awk 'BEGIN {
        n = split("the of and to in is it that was for on are with as his they be at one have this from or had by word " \
                  "but what some we can out other were all there when up use your how said an each she which do their time " \
                  "if will way about many then them write would like so these her long make thing see him two has look more " \
                  "day could go come did number sound no most people my over know water than call first who may down side", w, " ")
        x = 1; out = 0; k = 0
        while (out < 200000) {
            x = (75 * x + 74) % 65537
            s = w[1 + x % n]; k++
            s = s (k % 11 == 0 ? ".\n" : " ")
            printf "%s", s; out += length(s)
        }
    }'
}

torch_setup() {
    torch_python torch numpy
    rm -rf "$1" && mkdir -p "$1" && cd "$1" || exit 2
    head -c 200000 "$root/../shared/data/tinyshakespeare.txt" > text.txt 2> /dev/null || fallback_text > text.txt
    "$2" text.txt tok > /dev/null || { echo "FAIL: trainc-tokenize"; exit 1; }
}
