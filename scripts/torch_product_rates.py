"""GFLOP/s of torch.mm on the matrix products of the CPU bench step, in the same operand
layouts as `cargo run --release --example product_rates` (best of 8 calls on warm buffers),
in f32 or with bf16 operands (oneDNN's bf16 kernels, f32 accumulation, bf16 result).

    python scripts/torch_product_rates.py [threads] [f32|bf16]
"""
import sys
import time

import torch

SHAPES = [
    ("attention projection x·W", 2048, 256, 256, False, False),
    ("attention projection G·Wᵀ", 2048, 256, 256, False, True),
    ("attention projection xᵀ·G", 256, 2048, 256, True, False),
    ("FFN in x·W", 2048, 256, 1024, False, False),
    ("FFN in G·Wᵀ", 2048, 1024, 256, False, True),
    ("FFN in xᵀ·G", 256, 2048, 1024, True, False),
    ("FFN out x·W", 2048, 1024, 256, False, False),
    ("FFN out G·Wᵀ", 2048, 256, 1024, False, True),
    ("FFN out xᵀ·G", 1024, 2048, 256, True, False),
    ("MLM decoder x·Eᵀ", 304, 256, 30522, False, True),
    ("MLM decoder G·E", 304, 30522, 256, False, False),
    ("MLM decoder xᵀ·G", 256, 304, 30522, True, False),
]


DTYPE = torch.float32


def operand(rows, cols, transposed):
    x = torch.rand(cols, rows).t() if transposed else torch.rand(rows, cols)
    return x.to(DTYPE)


def main():
    global DTYPE
    if len(sys.argv) > 1:
        torch.set_num_threads(int(sys.argv[1]))
    if len(sys.argv) > 2:
        DTYPE = {"f32": torch.float32, "bf16": torch.bfloat16}[sys.argv[2]]
    print(f"threads={torch.get_num_threads()} dtype={DTYPE}")
    total_s = total_flop = 0.0
    for name, m, k, n, at, bt in SHAPES:
        a, b = operand(m, k, at), operand(k, n, bt)
        c = torch.empty(m, n, dtype=DTYPE)
        best = float("inf")
        for _ in range(8):
            start = time.perf_counter()
            torch.mm(a, b, out=c)
            best = min(best, time.perf_counter() - start)
        flop = 2.0 * m * k * n
        total_s += best
        total_flop += flop
        print(f"{name:28} {m:5}x{k:5}x{n:5}  {flop / best / 1e9:6.1f} GFLOP/s")
    print(f"all shapes once: {total_flop / total_s / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
