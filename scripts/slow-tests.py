#!/usr/bin/env python3
"""Passes `cargo test` output through and names every test that ran over a minute, with its time.

libtest itself prints "test NAME has been running for over 60 seconds" when a test passes a
minute; this filter takes that moment as the test's 60th second and, when the test's result
line ("test NAME ... ok") arrives, prints "slow test: NAME took N s". At the end it lists them
all again, slowest first. The exit status is 0; the pipeline's own (`set -o pipefail`) is
cargo's.

Usage: cargo test --release 2>&1 | scripts/slow-tests.py
"""

import re
import sys
import time

RUNNING = re.compile(r"^test (\S+) has been running for over (\d+) seconds")
RESULT = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)")


def main() -> None:
    started = {}
    slow = []
    for line in sys.stdin:
        sys.stdout.write(line)
        sys.stdout.flush()
        now = time.monotonic()
        m = RUNNING.match(line)
        if m:
            started[m.group(1)] = now - int(m.group(2))
            continue
        m = RESULT.match(line)
        if m and m.group(1) in started:
            took = now - started.pop(m.group(1))
            slow.append((took, m.group(1)))
            print(f"slow test: {m.group(1)} took {took:.0f} s", flush=True)
    if slow:
        print(f"{len(slow)} test(s) over 60 s:")
        for took, name in sorted(slow, reverse=True):
            print(f"  {took:6.0f} s  {name}")
    else:
        print("no test ran over 60 s")


if __name__ == "__main__":
    main()
