"""transformers' outputs for an exported fine-tuned model (used by tests/suite/export_finetuned.rs).

Reads one JSON request on stdin and prints one JSON answer:

  {"model": DIR, "kind": "sequence", "pairs": [[a, b or null], ...], "max_len": N}
    -> {"ids": [[...], ...], "logits": [[...], ...], "labels": [...]}
       the exported tokenizer's ids (AutoTokenizer, truncated to N), the logits of
       AutoModelForSequenceClassification on them and the predicted labels' names.
  {"model": DIR, "kind": "qa", "ids": [[...]], "token_types": [[...]]}
    -> {"start": [[...]], "end": [[...]]}
       AutoModelForQuestionAnswering's logits on the given (unpadded) windows.

Models run in float32, eval mode, one example at a time (no padding).
"""

import json
import sys

import torch
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)


def sequence(req):
    tok = AutoTokenizer.from_pretrained(req["model"])
    model = AutoModelForSequenceClassification.from_pretrained(req["model"]).eval()
    ids, logits, labels = [], [], []
    for a, b in req["pairs"]:
        enc = tok(a, b, truncation=True, max_length=req["max_len"], return_tensors="pt")
        with torch.no_grad():
            out = model(**enc).logits[0]
        ids.append(enc["input_ids"][0].tolist())
        logits.append(out.tolist())
        labels.append(model.config.id2label[int(out.argmax())] if out.numel() > 1 else None)
    return {"ids": ids, "logits": logits, "labels": labels}


def qa(req):
    model = AutoModelForQuestionAnswering.from_pretrained(req["model"]).eval()
    start, end = [], []
    for ids, types in zip(req["ids"], req["token_types"]):
        with torch.no_grad():
            out = model(
                input_ids=torch.tensor([ids]),
                token_type_ids=torch.tensor([types]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            )
        start.append(out.start_logits[0].tolist())
        end.append(out.end_logits[0].tolist())
    return {"start": start, "end": end}


if __name__ == "__main__":
    request = json.load(sys.stdin)
    answer = sequence(request) if request["kind"] == "sequence" else qa(request)
    json.dump(answer, sys.stdout)
