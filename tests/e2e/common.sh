# tests/e2e/common.sh — sourced by the end-to-end scripts after
# `trainc=$1 tokenize=$2 dir=$3 text=$4`: defines fail and root, makes the
# scratch folder dir (empty) and enters it, and makes text an absolute path.
# With no tiny Shakespeare beside the checkout, the text is the project's
# own documentation (README.md and docs/*.md).
fail() { echo "FAIL: $*"; exit 1; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir"
if [ -f "$text" ]; then
  text=$(cd "$(dirname "$text")" && pwd)/$(basename "$text")
else
  echo "no $text: training on the project's documentation instead"
  cat "$root/README.md" "$root"/docs/*.md > "$dir/docs.txt"
  text=$dir/docs.txt
fi
cd "$dir"
