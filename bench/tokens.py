"""bench/tokens.py — token files in llm.c's .bin format (runtime/tokens.h:
int32[256] header, [0] magic 20240520, [1] version 1, [2] count; then
uint16 tokens, little-endian) for the benchmark's PyTorch scripts
(gpt2_torch.py, gpt2_cpu_torch.py)."""
import array
import sys


def read_tokens(path, limit=None):
    """The tokens of the file as an array of uint16, the first `limit` of
    them where given; exits with a message naming the file when it is not a
    token file, cannot be read (missing, a folder) or holds fewer tokens
    than its header says."""
    try:
        return _read(path, limit)
    except OSError as e:
        sys.exit(f"{path}: cannot read it: {e.strerror or e}")


def _read(path, limit):
    with open(path, "rb") as f:
        raw = f.read(1024)
        head = array.array("i")
        head.frombytes(raw[: len(raw) // 4 * 4])
        if sys.byteorder != "little":
            head.byteswap()
        if len(raw) < 1024 or head[0] != 20240520 or head[1] != 1 or head[2] < 1:
            sys.exit(f"{path} is not a token file (llm.c's .bin format)")
        want = head[2] if limit is None else min(head[2], limit)
        raw = f.read(2 * want)
    if len(raw) != 2 * want:
        sys.exit(f"{path} holds fewer tokens than its header's {head[2]}")
    tok = array.array("H")
    tok.frombytes(raw)
    if sys.byteorder != "little":
        tok.byteswap()
    return tok
