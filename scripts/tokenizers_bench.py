#!/usr/bin/env python3
"""Tokenisation throughput of HF `tokenizers` (Python) on a text file, for comparison with
`trueneg prepare` on the same file and tokenizer (BENCHMARKS.md).

Usage: tokenizers_bench.py TOKENIZER_JSON TEXT_FILE [--threads N]

Reads the file's non-empty lines (one document per line, as `prepare` reads raw text), encodes
them with `Tokenizer.encode_batch` (Rust, parallel over RAYON_NUM_THREADS / TOKENIZERS threads)
and prints MB/s over the file's size, best of three runs.
"""
import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("tokenizer")
parser.add_argument("text")
parser.add_argument("--threads", type=int, default=os.cpu_count())
args = parser.parse_args()
os.environ["RAYON_NUM_THREADS"] = str(args.threads)

from tokenizers import Tokenizer  # noqa: E402  (after the thread count is set)

tok = Tokenizer.from_file(args.tokenizer)
size = os.path.getsize(args.text)
best = None
for _ in range(3):
    start = time.perf_counter()
    with open(args.text, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    encodings = tok.encode_batch(lines, add_special_tokens=False)
    tokens = sum(len(e.ids) for e in encodings)
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
print(f"bytes={size} lines={len(lines)} tokens={tokens} seconds={best:.3f} MB_per_s={size / best / 1e6:.2f}")
