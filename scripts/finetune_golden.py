#!/usr/bin/env python3
"""Fine-tuning fixtures for tests/suite/finetune_golden.rs, computed with transformers and PyTorch.

Usage: python3 scripts/finetune_golden.py ../shared/golden tests/fixtures/finetune
(needs torch, transformers and safetensors; CI does not run it, the fixtures are committed).

The encoders are the shared golden models (../shared/golden/electra_discriminator and
bert_tiny, read again by the test); the batch is its `inputs.*` (B=3, L=20, padded). Every
model runs in eval mode (no dropout) with eager attention, in float32 on the CPU. The heads
are drawn here (weights N(0, 0.1), biases N(0, 0.05)) and stored in the fixture.

Models and what is stored for each (`<name>.*` in finetune_golden.safetensors):
  electra_cls   ElectraForSequenceClassification, 3 labels (transformers' head)
  electra_reg   ElectraForSequenceClassification, 1 label, regression (MSE)
  electra_qa    ElectraForQuestionAnswering (start/end CE averaged, every position)
  bert_cls      BertForSequenceClassification, 2 labels (with BERT's pooler)
  electra_lin   ELECTRA's own fine-tuning head: dropout + one dense layer on [CLS]
                (google-research/electra `classification_tasks.py`), written out here
  -> <name>.head.<param>   the head's initial weights
     <name>.logits, <name>.loss, <name>.grad.<param> (every parameter, transformers names)
     <name>.labels (and electra_qa.start_positions / end_positions)

Three optimizer steps on the same batch (`<name>.after.<param>`: every parameter after them):
  steps_electra  electra_lin under ELECTRA's update rule written out below, on the batch's
                 summed loss (run_finetuning.py sums the per-example losses): Adam without bias
                 correction, decoupled weight decay lr·wd·p (not on biases / LayerNorm),
                 TF's clip_by_global_norm(1.0), lr·min(1, t/W)·(1 − t/T), layer-wise decay
                 as google-research/electra's `_get_layer_lrs` (top layer 0.8², embeddings
                 0.8^(L+2)).
  steps_hf       electra_cls under torch.optim.AdamW (bias correction) with
                 get_linear_schedule_with_warmup, clip_grad_norm_(1.0), and layer-wise decay
                 as param groups with the shifted rule (top layer 0.8, embeddings 0.8^(L+1)).
  Both: peak lr 1e-3, weight decay 0.01, T = 10 updates, warmup fraction 0.2 (ELECTRA: W = 2.0;
  transformers: ceil(0.2·10) = 2), β = (0.9, 0.999); ε 1e-6 (ELECTRA) / 1e-8 (torch).
"""
import json
import math
import pathlib
import re
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import (
    BertForSequenceClassification,
    ElectraForQuestionAnswering,
    ElectraForSequenceClassification,
    ElectraModel,
    get_linear_schedule_with_warmup,
)

shared = pathlib.Path(sys.argv[1])
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(20261124)

batch = load_file(str(shared / "electra_golden.safetensors"))
ids = batch["inputs.input_ids"]
mask = batch["inputs.attention_mask"]
types = batch["inputs.token_type_ids"]
LAYERS = 2
fixture = {}


def redraw(module):
    """Head weights N(0, 0.1), biases N(0, 0.05): far from zero, so the checks are sensitive."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * (0.05 if name.endswith("bias") else 0.1))


def load(cls, folder, **kw):
    m = cls.from_pretrained(str(shared / folder), attn_implementation="eager", **kw)
    return m.eval()


def record(name, model, head, out_logits, loss, extra):
    for k, v in head.items():
        fixture[f"{name}.head.{k}"] = v.detach().clone()
    fixture[f"{name}.logits"] = out_logits.detach().clone()
    fixture[f"{name}.loss"] = loss.detach().reshape(1).clone()
    for k, v in extra.items():
        fixture[f"{name}.{k}"] = v
    model.zero_grad()
    loss.backward()
    for k, p in model.named_parameters():
        if p.grad is not None:
            fixture[f"{name}.grad.{k}"] = p.grad.detach().clone()


class ElectraLinear(torch.nn.Module):
    """ELECTRA's fine-tuning head on the discriminator's encoder: dense on [CLS]."""

    def __init__(self, labels):
        super().__init__()
        self.electra = ElectraModel.from_pretrained(
            str(shared / "electra_discriminator"), attn_implementation="eager"
        )
        self.classifier = torch.nn.Linear(self.electra.config.hidden_size, labels)

    def forward(self):
        h = self.electra(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        return self.classifier(h[:, 0])


def head_params(model, prefixes):
    return {k: v for k, v in model.state_dict().items() if k.startswith(prefixes)}


# --- Outputs, losses and gradients.
labels3 = torch.tensor([0, 2, 1])
m = load(ElectraForSequenceClassification, "electra_discriminator", num_labels=3)
redraw(m.classifier)
o = m(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels3)
record("electra_cls", m, head_params(m, ("classifier.",)), o.logits, o.loss, {"labels": labels3})

scores = torch.tensor([0.4, 3.1, 1.7])
m = load(ElectraForSequenceClassification, "electra_discriminator", num_labels=1)
assert m.config.problem_type in (None, "regression")
redraw(m.classifier)
o = m(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=scores)
assert m.config.problem_type == "regression"
record("electra_reg", m, head_params(m, ("classifier.",)), o.logits, o.loss, {"labels": scores})

starts, ends = torch.tensor([3, 5, 0]), torch.tensor([6, 5, 2])
m = load(ElectraForQuestionAnswering, "electra_discriminator")
redraw(m.qa_outputs)
o = m(
    input_ids=ids,
    attention_mask=mask,
    token_type_ids=types,
    start_positions=starts,
    end_positions=ends,
)
logits = torch.stack([o.start_logits, o.end_logits], dim=-1)
record(
    "electra_qa",
    m,
    head_params(m, ("qa_outputs.",)),
    logits,
    o.loss,
    {"start_positions": starts, "end_positions": ends},
)

labels2 = torch.tensor([1, 0, 1])
m = load(BertForSequenceClassification, "bert_tiny", num_labels=2)
redraw(m.bert.pooler)
redraw(m.classifier)
o = m(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels2)
record(
    "bert_cls",
    m,
    head_params(m, ("bert.pooler.", "classifier.")),
    o.logits,
    o.loss,
    {"labels": labels2},
)

m = ElectraLinear(3).eval()
redraw(m.classifier)
logits = m()
loss = F.cross_entropy(logits, labels3)
record("electra_lin", m, head_params(m, ("classifier.",)), logits, loss, {"labels": labels3})

# --- Three optimizer steps.
LR, WD, TOTAL, WARMUP_FRACTION, DECAY = 1e-3, 0.01, 10, 0.2, 0.8


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm" in name


def depth(name, prefix):
    """ELECTRA's depths: embeddings 0, encoder layer i: i + 1, anything else: the head."""
    if name.startswith(f"{prefix}.embeddings"):
        return 0
    g = re.match(rf"{prefix}\.encoder\.layer\.(\d+)\.", name)
    return int(g.group(1)) + 1 if g else None


def electra_factor(name, prefix):
    d = depth(name, prefix)
    head = LAYERS + 2
    return DECAY ** (head - (head if d is None else d))


def shifted_factor(name, prefix):
    d = depth(name, prefix)
    head = LAYERS + 1
    return DECAY ** (head - (head if d is None else d))


def electra_steps(model, loss_fn):
    """google-research/electra's AdamWeightDecayOptimizer + create_optimizer, on PyTorch."""
    params = dict(model.named_parameters())
    m = {k: torch.zeros_like(p) for k, p in params.items()}
    v = {k: torch.zeros_like(p) for k, p in params.items()}
    warmup = TOTAL * WARMUP_FRACTION
    for t in range(3):
        model.zero_grad()
        loss_fn().backward()
        grads = {k: p.grad.detach().clone() for k, p in params.items()}
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values())).float()
        clip = 1.0 / torch.maximum(norm, torch.tensor(1.0))  # tf.clip_by_global_norm
        lr = LR * (1 - t / TOTAL) * min(1.0, t / warmup)
        with torch.no_grad():
            for k, p in params.items():
                g = grads[k] * clip
                m[k] = 0.9 * m[k] + 0.1 * g
                v[k] = 0.999 * v[k] + 0.001 * g * g
                update = m[k] / (torch.sqrt(v[k]) + 1e-6)
                if not no_decay(k):
                    update = update + WD * p
                p -= lr * electra_factor(k, "electra") * update


def hf_steps(model, loss_fn):
    """transformers' Trainer pieces: torch AdamW, linear schedule, clip_grad_norm_."""
    groups = []
    for k, p in model.named_parameters():
        groups.append(
            {
                "params": [p],
                "lr": LR * shifted_factor(k, "electra"),
                "weight_decay": 0.0 if no_decay(k) else WD,
            }
        )
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    sched = get_linear_schedule_with_warmup(
        opt, math.ceil(TOTAL * WARMUP_FRACTION), TOTAL
    )
    for _ in range(3):
        opt.zero_grad()
        loss_fn().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()


m = ElectraLinear(3).eval()
with torch.no_grad():
    for k, p in m.classifier.named_parameters():
        p.copy_(fixture[f"electra_lin.head.classifier.{k}"])
electra_steps(m, lambda: F.cross_entropy(m(), labels3, reduction="sum"))
for k, p in m.named_parameters():
    fixture[f"steps_electra.after.{k}"] = p.detach().clone()

m = load(ElectraForSequenceClassification, "electra_discriminator", num_labels=3)
head = "electra_cls.head.classifier."
m.classifier.load_state_dict(
    {k.removeprefix(head): v for k, v in fixture.items() if k.startswith(head)}
)
hf_steps(
    m,
    lambda: m(
        input_ids=ids, attention_mask=mask, token_type_ids=types, labels=labels3
    ).loss,
)
for k, p in m.named_parameters():
    fixture[f"steps_hf.after.{k}"] = p.detach().clone()

fixture = {k: v.detach().clone().contiguous() for k, v in fixture.items()}
save_file(fixture, str(out / "finetune_golden.safetensors"))
info = {
    "torch": torch.__version__,
    "transformers": __import__("transformers").__version__,
    "losses": {
        n: float(fixture[f"{n}.loss"][0])
        for n in ["electra_cls", "electra_reg", "electra_qa", "bert_cls", "electra_lin"]
    },
}
(out / "finetune_golden.json").write_text(json.dumps(info, indent=2) + "\n")
print(json.dumps(info, indent=2))
