#!/usr/bin/env python3
"""Writes the text of the shared corpora, each once, as one corpus file for `prepare`'s
throughput (BENCHMARKS.md): WikiText-2 test and valid, SQuAD's contexts, the IMDb
counterfactual and contrast sets, GLUE's sentences (a TSV line's longest field).

Usage: shared_text.py OUT [--data ../shared/data]
"""
import argparse
import glob
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../shared/data"))
args = parser.parse_args()
d = args.data


def longest_fields(pattern):
    for path in sorted(glob.glob(os.path.join(d, pattern))):
        with open(path, encoding="utf-8", errors="replace") as f:
            next(f, None)
            for line in f:
                yield max(line.rstrip("\n").split("\t"), key=len)


with open(args.out, "w", encoding="utf-8") as out:
    for name in ["wikitext-2/wiki.test.raw", "wikitext-2/wiki.valid.tokens"]:
        with open(os.path.join(d, name), encoding="utf-8") as f:
            out.write(f.read() + "\n")
    with open(os.path.join(d, "squad-v1.1/dev-half-a.json"), encoding="utf-8") as f:
        for article in json.load(f)["data"]:
            for p in article["paragraphs"]:
                out.write(p["context"].replace("\n", " ") + "\n\n")
    for pattern in ["counterfactual/sentiment/combined/*.tsv", "contrast-sets/IMDb/data/*.tsv"]:
        for text in longest_fields(pattern):
            out.write(text + "\n\n")
    for text in longest_fields("glue/*/*.tsv"):
        out.write(text + "\n")
