"""tests/gpu/ceilings.py — the two ceilings of this GPU, measured (run.sh's
profile stage, before it times trainc's kernels): the bandwidth of a
device-to-device copy (bytes read plus bytes written over its time) and
the rate of a large bf16 matrix product through PyTorch (cuBLAS), each the
median of timed repeats with CUDA events after warm-up, on random data.
The roofline's bound at these is what the device allows in practice; at
the datasheet's peaks (989 TFLOP/s, 4.8 TB/s) it is what no program
reaches.  Prints one JSON line: {"copy_tb_per_s", "bf16_tflops", ...},
or {"error": ...} where PyTorch or the GPU is missing.

    python3 tests/gpu/ceilings.py [--copy-gib 2] [--n 8192] [--reps 20] [--device cuda]
"""
import argparse
import json
import sys
import time


def timed(fn, reps, torch, dev):
    """median, least and most milliseconds of fn over reps after 3 warm-ups,
    each between two CUDA events (on the CPU, the host's clock: the
    tests' smoke run)"""
    for _ in range(3):
        fn()
    ms = []
    for _ in range(reps):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t) * 1e3)
    ms.sort()
    return ms[len(ms) // 2], ms[0], ms[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copy-gib", type=float, default=2.0)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--device", default="cuda", help="cuda; cpu only for the tests' smoke run, at small sizes")
    a = ap.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001 (any import failure is a result)
        print(json.dumps({"error": f"no PyTorch: {e}"}))
        return
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device", "torch": torch.__version__}))
        return
    torch.manual_seed(0)
    nbytes = int(a.copy_gib * 2**30) // 16 * 16
    src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    cmed, cmin, cmax = timed(lambda: dst.copy_(src), a.reps, torch, dev)
    del src, dst
    n = a.n
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    y = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    mmed, mmin, mmax = timed(lambda: torch.matmul(x, w, out=y), a.reps, torch, dev)
    ok = bool(torch.isfinite(y).all())
    flops = 2.0 * n * n * n
    print(json.dumps({
        "gpu": torch.cuda.get_device_name() if dev == "cuda" else dev,
        "torch": torch.__version__,
        "copy_bytes": 2 * nbytes,
        "copy_ms": cmed, "copy_ms_range": [cmin, cmax],
        "copy_tb_per_s": 2 * nbytes / (cmed / 1e3) / 1e12,
        "matmul_n": n,
        "matmul_ms": mmed, "matmul_ms_range": [mmin, mmax],
        "bf16_tflops": flops / (mmed / 1e3) / 1e12,
        "matmul_finite": ok,
        "reps": a.reps,
    }))


if __name__ == "__main__":
    sys.exit(main())
