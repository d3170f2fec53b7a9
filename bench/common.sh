# bench/common.sh — sourced by the training benchmarks after they set
# $root: $bin (TRAINC_BIN, where trainc and trainc-tokenize are), $trainc
# (built when missing), a scratch folder $work removed on exit, and tiny
# Shakespeare (the README where it is absent) tokenized to $work/t_train.bin
# and $work/t_val.bin.
bin=${TRAINC_BIN:-$root/build/tools}
trainc=$bin/trainc
[ -x "$trainc" ] || "$root/scripts/build.sh" "$root/build" >/dev/null
# count NAME VALUE MIN: VALUE is a whole number >= MIN, else the usage error
count() {
    [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] || { echo "$(basename "$0"): $1 is a whole number >= $3, not '$2'" >&2; exit 2; }
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=$root/../shared/data/tinyshakespeare.txt
[ -f "$text" ] || text=$root/README.md
"$bin/trainc-tokenize" "$text" "$work/t" >/dev/null
