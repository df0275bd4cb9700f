#!/usr/bin/env python3
"""SQuAD answer-decoding fixture for tests/suite/squad_decoding.rs.

Usage: python3 scripts/squad_postprocess_golden.py ../shared/data/squad-v1.1/dev-half-a.json \
           tests/fixtures/squad
(needs `tokenizers`, `numpy` and `safetensors`; CI does not run it, the fixture is committed).

For the first QUESTIONS questions of a real dev file, with tests/fixtures/squad/tokenizer.json:
  1. windows as BERT's / ELECTRA's SQuAD code makes them (and trueneg's `make_features`): the
     question cut to MAX_QUERY tokens, `[CLS] question [SEP] window [SEP]`, context windows of
     at most MAX_LEN − |question| − 3 tokens whose starts are DOC_STRIDE tokens apart;
  2. each context token's max-context window, by BERT's rule (the window where
     min(tokens left, tokens right) + 0.01 · window length is largest, the first on ties);
  3. seeded random start / end logits per window position (float32);
  4. answers by the rules of transformers' `postprocess_qa_predictions` (examples/pytorch/
     question-answering/utils_qa.py), written out here: per window the N_BEST highest start
     and end logits over all its positions; a pair is kept when both tokens are context
     tokens, the start token's max-context window is this one, start ≤ end and the span is at
     most MAX_ANSWER tokens; its score is start + end logit; the best pair over all windows of
     a question gives the answer, cut from the context between the start token's first and the
     end token's last character (sub-word precision, as BERT's `get_final_text`); no pair:
     the empty answer.
  5. answers by ELECTRA's joint rules (google-research/electra `finetune/qa/qa_metrics.py` with
     `joint_prediction`), written out here, on a beam drawn per window from a second seeded
     generator: start logits over the window with every position but [CLS] and the context
     masked by −1000, their log-softmax's BEAM best (log-probability, index); for each of those
     starts, end logits masked the same way and their BEAM best. A pair (start i, end j) is kept
     when the start is not [CLS], both are context tokens, the start's max-context window is
     this one, start ≤ end and the span is at most MAX_ANSWER tokens; its score is the start's
     plus the end's log-probability; the best over all windows gives the answer (the first on
     ties), cut as in 4.
Written: decoding.json (options, per window: question index, ids, logits' offset) and
decoding.safetensors (`start`, `end`: every window's logits, concatenated; `joint.start_lp`,
`joint.start_index` [windows, BEAM], `joint.end_lp`, `joint.end_index` [windows, BEAM, BEAM]),
with the answers of 4 (`answers`) and of 5 (`joint_answers`).
"""
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer

QUESTIONS, MAX_LEN, DOC_STRIDE, MAX_QUERY, N_BEST, MAX_ANSWER = 60, 64, 24, 64, 20, 30
BEAM = 20

dev = json.loads(pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
tok = Tokenizer.from_file(str(out / "tokenizer.json"))
CLS, SEP = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")

examples = []
for article in dev["data"]:
    for par in article["paragraphs"]:
        for qa in par["qas"]:
            examples.append((qa["id"], qa["question"], par["context"]))
examples = examples[:QUESTIONS]

rng = np.random.default_rng(20261124)
joint_rng = np.random.default_rng(20261127)
windows, starts, ends, answers = [], [], [], {}
joint_answers = {}
joint = {"start_lp": [], "start_index": [], "end_lp": [], "end_index": []}


def log_softmax(x):
    x = x.astype(np.float64)
    z = x - x.max()
    return (z - np.log(np.exp(z).sum())).astype(np.float32)


def top(lp):
    """The BEAM highest (value, index), highest first (tf.nn.top_k)."""
    idx = np.argsort(-lp, kind="stable")[:BEAM]
    return lp[idx], idx
offset = 0
for qi, (qid, question, context) in enumerate(examples):
    q = tok.encode(question, add_special_tokens=False).ids[:MAX_QUERY]
    c = tok.encode(context, add_special_tokens=False)
    room = MAX_LEN - len(q) - 3
    spans = []  # (first context token, length)
    w0 = 0
    while True:
        length = min(room, len(c.ids) - w0)
        spans.append((w0, length))
        if w0 + length >= len(c.ids):
            break
        w0 += min(length, DOC_STRIDE)

    def max_context(si, pos):
        best, best_i = None, None
        for i, (s0, n) in enumerate(spans):
            if not s0 <= pos < s0 + n:
                continue
            score = min(pos - s0, s0 + n - 1 - pos) + 0.01 * n
            if best is None or score > best:
                best, best_i = score, i
        return best_i == si

    candidates = []
    joint_candidates = []
    for si, (s0, n) in enumerate(spans):
        ids = [CLS] + q + [SEP] + c.ids[s0 : s0 + n] + [SEP]
        first = len(q) + 2
        chars = [None] * len(ids)
        is_max = [False] * len(ids)
        for k in range(n):
            chars[first + k] = c.offsets[s0 + k]
            is_max[first + k] = max_context(si, s0 + k)
        sl = rng.standard_normal(len(ids)).astype(np.float32)
        el = rng.standard_normal(len(ids)).astype(np.float32)
        windows.append({"question": qi, "ids": ids, "offset": offset})
        starts.append(sl)
        ends.append(el)
        offset += len(ids)
        top_s = np.argsort(sl)[::-1][:N_BEST]
        top_e = np.argsort(el)[::-1][:N_BEST]
        for s in top_s:
            for e in top_e:
                if chars[s] is None or chars[e] is None or not is_max[s]:
                    continue
                if e < s or e - s + 1 > MAX_ANSWER:
                    continue
                candidates.append((float(sl[s]) + float(el[e]), chars[s][0], chars[e][1]))
        # ELECTRA's joint beam: padding to MAX_LEN, as a batch of windows holds it.
        allowed = np.zeros(MAX_LEN, np.float32)
        allowed[0] = 1
        allowed[first : first + n + 1] = 1  # the context and its [SEP] (segment 1)
        allowed[len(ids) :] = 0
        js = joint_rng.standard_normal(MAX_LEN).astype(np.float32) + 1000 * (allowed - 1)
        s_lp, s_idx = top(log_softmax(js))
        e_lp = np.zeros((BEAM, BEAM), np.float32)
        e_idx = np.zeros((BEAM, BEAM), np.int64)
        for i in range(BEAM):
            je = joint_rng.standard_normal(MAX_LEN).astype(np.float32) + 1000 * (allowed - 1)
            e_lp[i], e_idx[i] = top(log_softmax(je))
        joint["start_lp"].append(s_lp)
        joint["start_index"].append(s_idx)
        joint["end_lp"].append(e_lp)
        joint["end_index"].append(e_idx)
        for i, s in enumerate(s_idx):
            for j, e in enumerate(e_idx[i]):
                if s >= len(ids) or e >= len(ids) or s == 0:
                    continue
                if chars[s] is None or chars[e] is None or not is_max[s]:
                    continue
                if e < s or e - s + 1 > MAX_ANSWER:
                    continue
                score = float(s_lp[i]) + float(e_lp[i, j])
                joint_candidates.append((score, chars[s][0], chars[e][1]))
    if joint_candidates:
        best = sorted(joint_candidates, key=lambda x: x[0], reverse=True)[0]
        joint_answers[qid] = context[best[1] : best[2]]
    else:
        joint_answers[qid] = ""
    if candidates:
        # The first of the best (Python's sort is stable).
        best = sorted(candidates, key=lambda x: x[0], reverse=True)[0]
        answers[qid] = context[best[1] : best[2]]
    else:
        answers[qid] = ""

save_file(
    {
        "start": np.concatenate(starts),
        "end": np.concatenate(ends),
        **{f"joint.{k}": np.stack(v) for k, v in joint.items()},
    },
    str(out / "decoding.safetensors"),
)
(out / "decoding.json").write_text(
    json.dumps(
        {
            "options": {
                "questions": QUESTIONS,
                "max_seq_len": MAX_LEN,
                "doc_stride": DOC_STRIDE,
                "max_query_len": MAX_QUERY,
                "n_best": N_BEST,
                "max_answer_len": MAX_ANSWER,
                "beam": BEAM,
            },
            "windows": windows,
            "answers": answers,
            "joint_answers": joint_answers,
        },
        indent=1,
    )
    + "\n"
)
print(f"{len(examples)} questions, {len(windows)} windows")
