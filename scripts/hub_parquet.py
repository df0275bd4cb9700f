#!/usr/bin/env python3
"""GLUE and SQuAD in the Hub's Parquet layout, written by the `datasets` library, for
tests/suite/hub_layout.rs.

Usage: python3 scripts/hub_parquet.py ../shared/data OUT

From the shared GLUE TSV files and the shared SQuAD dev half, writes what `load_dataset` users
have on disk (`Dataset.to_parquet`, the features of nyu-mll/glue and rajpurkar/squad):
  OUT/glue/rte/{train,validation}-00000-of-00001.parquet    sentence1, sentence2, label, idx
  OUT/glue/sst2/{train,validation}-00000-of-00001.parquet   sentence, label, idx
  OUT/glue/stsb/{train,validation}-00000-of-00001.parquet   sentence1, sentence2, label (float)
  OUT/glue/mnli/{train,validation_matched,validation_mismatched}-00000-of-00001.parquet
      a few pairs written here (the shared data has no MNLI), labels in the Hub's order
      (entailment, neutral, contradiction)
  OUT/squad/plain_text/{train,validation}-00000-of-00001.parquet
      the first 100 questions of dev-half-a.json, then the next 50
"""
import csv
import json
import pathlib
import sys

from datasets import ClassLabel, Dataset, Features, Sequence, Value

shared, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])


def tsv(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def write(rows, features, folder, split):
    folder.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows, features=features).to_parquet(
        str(folder / f"{split}-00000-of-00001.parquet")
    )


def pairs(names):
    return Features(
        {
            "sentence1": Value("string"),
            "sentence2": Value("string"),
            "label": names,
            "idx": Value("int32"),
        }
    )


rte_names = ["entailment", "not_entailment"]
for split, file in [("train", "train.tsv"), ("validation", "dev.tsv")]:
    rows = [
        {
            "sentence1": r["sentence1"],
            "sentence2": r["sentence2"],
            "label": rte_names.index(r["label"]),
            "idx": int(r["index"]),
        }
        for r in tsv(shared / "glue/RTE" / file)
    ]
    write(rows, pairs(ClassLabel(names=rte_names)), out / "glue/rte", split)

sst_features = Features(
    {
        "sentence": Value("string"),
        "label": ClassLabel(names=["negative", "positive"]),
        "idx": Value("int32"),
    }
)
for split, file in [("train", "train.tsv"), ("validation", "dev.tsv")]:
    rows = [
        {"sentence": r["sentence"], "label": int(r["label"]), "idx": i}
        for i, r in enumerate(tsv(shared / "glue/SST-2" / file))
    ]
    write(rows, sst_features, out / "glue/sst2", split)

for split, file in [("train", "train.tsv"), ("validation", "dev.tsv")]:
    rows = [
        {
            "sentence1": r["sentence1"],
            "sentence2": r["sentence2"],
            "label": float(r["score"]),
            "idx": int(r["index"]),
        }
        for r in tsv(shared / "glue/STS-B" / file)
    ]
    write(rows, pairs(Value("float32")), out / "glue/stsb", split)

mnli_names = ["entailment", "neutral", "contradiction"]
mnli_features = Features(
    {
        "premise": Value("string"),
        "hypothesis": Value("string"),
        "label": ClassLabel(names=mnli_names),
        "idx": Value("int32"),
    }
)
made_up = [
    ("A dog runs in the park.", "An animal is outside.", "entailment"),
    ("A dog runs in the park.", "The dog is asleep.", "contradiction"),
    ("A dog runs in the park.", "The dog is chasing a ball.", "neutral"),
    ("Two women sing on a stage.", "People are performing.", "entailment"),
    ("Two women sing on a stage.", "The stage is empty.", "contradiction"),
    ("Two women sing on a stage.", "The women are sisters.", "neutral"),
]
for split in ["train", "validation_matched", "validation_mismatched"]:
    rows = [
        {"premise": p, "hypothesis": h, "label": mnli_names.index(l), "idx": i}
        for i, (p, h, l) in enumerate(made_up)
    ]
    write(rows, mnli_features, out / "glue/mnli", split)

squad_features = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "context": Value("string"),
        "question": Value("string"),
        "answers": Sequence({"text": Value("string"), "answer_start": Value("int32")}),
    }
)
questions = []
for article in json.loads((shared / "squad-v1.1/dev-half-a.json").read_text())["data"]:
    for paragraph in article["paragraphs"]:
        for qa in paragraph["qas"]:
            questions.append(
                {
                    "id": qa["id"],
                    "title": article["title"],
                    "context": paragraph["context"],
                    "question": qa["question"],
                    "answers": {
                        "text": [a["text"] for a in qa["answers"]],
                        "answer_start": [a["answer_start"] for a in qa["answers"]],
                    },
                }
            )
write(questions[:100], squad_features, out / "squad/plain_text", "train")
write(questions[100:150], squad_features, out / "squad/plain_text", "validation")
print(f"wrote {out}")
