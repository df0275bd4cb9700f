#!/usr/bin/env python3
"""ELECTRA's joint SQuAD head, transcribed to PyTorch, for tests/suite/finetune_golden.rs.

Usage: python3 scripts/squad_head_golden.py ../shared/golden tests/fixtures/finetune
(needs torch, transformers and safetensors; CI does not run it, the fixture is committed).

The head is google-research/electra's `QATask.get_prediction_module` (finetune/qa/qa_tasks.py)
with the defaults of configure_finetuning.py (joint_prediction, answerable_classifier,
answerable_uses_start_logits, answerable_weight 0.5), written out here:
  answer mask  input_mask · segment_ids + one_hot(0): the context (segment 1) and [CLS]
  start        dense(hidden → 1) + 1000 · (mask − 1)
  end          training: the hidden state at the gold start beside every position's,
               concatenated [start, position], dense(2·hidden → 512) + GELU (erf),
               dense(512 → 1), + 1000 · (mask − 1);
               inference: the same for each of the BEAM best starts by log-softmax
  loss         per example (CE(start) + CE(end)) / 2 + 0.5 · BCE(answerable logit, is_impossible),
               the sum over the batch (run_finetuning.py sums the per-example losses)
  answerable   softmax(start) · hidden states, beside [CLS]'s, dense(2·hidden → 512) + GELU,
               dense(512 → 1)
The encoder is the shared golden discriminator (eval mode: no dropout) on the golden batch's
ids and mask, with segment ids written here so that every row has a context. The head is drawn
here (weights N(0, 0.1), biases N(0, 0.05)).

Stored in electra_squad.safetensors, each key under `electra_squad.` (`<param>`: the names
trueneg writes):
  head.<param>                    the head's weights
  token_type_ids, start_positions, end_positions, is_impossible
  start_logits, end_logits        [B, L], masked, under teacher forcing (training)
  answerable, loss                [B], [1]
  grad.<param>                    every parameter's gradient (encoder: transformers' names)
  beam.start_lp, beam.start_index          [B, BEAM]
  beam.end_lp, beam.end_index              [B, BEAM, BEAM]
"""
import json
import pathlib
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import ElectraModel

shared = pathlib.Path(sys.argv[1])
out = pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
torch.manual_seed(20261127)
BEAM, INNER, ANSWERABLE_WEIGHT = 8, 512, 0.5

batch = load_file(str(shared / "electra_golden.safetensors"))
ids = batch["inputs.input_ids"]
mask = batch["inputs.attention_mask"]
types = torch.zeros_like(ids)
types[0, 11:20] = 1
types[1, 6:13] = 1
types[2, 3:7] = 1
starts = torch.tensor([12, 8, 0])
ends = torch.tensor([15, 11, 0])
impossible = torch.tensor([0.0, 0.0, 1.0])


class JointHead(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qa_start = torch.nn.Linear(d, 1)
        self.qa_hidden = torch.nn.Linear(2 * d, INNER)
        self.qa_end = torch.nn.Linear(INNER, 1)
        self.qa_answerable_hidden = torch.nn.Linear(2 * d, INNER)
        self.qa_answerable = torch.nn.Linear(INNER, 1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.electra = ElectraModel.from_pretrained(
            str(shared / "electra_discriminator"), attn_implementation="eager"
        )
        self.head = JointHead(self.electra.config.hidden_size)

    def hidden(self):
        return self.electra(
            input_ids=ids, attention_mask=mask, token_type_ids=types
        ).last_hidden_state

    def end_logits(self, start_features, h, penalty):
        """start_features [..., L, D] beside h [..., L, D] → end logits [..., L]."""
        rep = torch.cat([start_features, h], -1)
        inner = F.gelu(self.head.qa_hidden(rep))
        return self.head.qa_end(inner).squeeze(-1) + penalty

    def train_outputs(self):
        h = self.hidden()
        b, length, d = h.shape
        answer = mask.float() * types.float() + F.one_hot(torch.tensor(0), length).float()
        penalty = 1000.0 * (answer - 1)
        start = self.head.qa_start(h).squeeze(-1) + penalty
        sf = h[torch.arange(b), starts]
        end = self.end_logits(sf[:, None].expand(b, length, d), h, penalty)
        ls = -F.log_softmax(start, -1)[torch.arange(b), starts]
        le = -F.log_softmax(end, -1)[torch.arange(b), ends]
        feat = (F.softmax(start, -1)[..., None] * h).sum(1)
        rep = torch.cat([h[:, 0], feat], -1)
        ans = self.head.qa_answerable(F.gelu(self.head.qa_answerable_hidden(rep))).squeeze(-1)
        bce = F.binary_cross_entropy_with_logits(ans, impossible, reduction="none")
        loss = ((ls + le) / 2 + ANSWERABLE_WEIGHT * bce).sum()
        return start, end, ans, loss, h, penalty

    def beam(self, start, h, penalty):
        b, length, d = h.shape
        s_lp, s_idx = torch.topk(F.log_softmax(start, -1), BEAM)
        sf = h[torch.arange(b)[:, None], s_idx]  # [B, BEAM, D]
        end = self.end_logits(
            sf[:, :, None].expand(b, BEAM, length, d),
            h[:, None].expand(b, BEAM, length, d),
            penalty[:, None],
        )
        e_lp, e_idx = torch.topk(F.log_softmax(end, -1), BEAM)
        return s_lp, s_idx, e_lp, e_idx


m = Model().eval()
with torch.no_grad():
    for name, p in m.head.named_parameters():
        p.copy_(torch.randn_like(p) * (0.05 if name.endswith("bias") else 0.1))
fixture = {f"head.{k}": v.detach().clone() for k, v in m.head.state_dict().items()}
start, end, ans, loss, h, penalty = m.train_outputs()
m.zero_grad()
loss.backward()
for k, p in m.named_parameters():
    if p.grad is not None:
        fixture[f"grad.{k.removeprefix('head.')}"] = p.grad.detach().clone()
with torch.no_grad():
    s_lp, s_idx, e_lp, e_idx = m.beam(start, h, penalty)
fixture.update(
    {
        "token_type_ids": types,
        "start_positions": starts,
        "end_positions": ends,
        "is_impossible": impossible,
        "start_logits": start.detach(),
        "end_logits": end.detach(),
        "answerable": ans.detach(),
        "loss": loss.detach().reshape(1),
        "beam.start_lp": s_lp,
        "beam.start_index": s_idx,
        "beam.end_lp": e_lp,
        "beam.end_index": e_idx,
    }
)
fixture = {f"electra_squad.{k}": v.detach().clone().contiguous() for k, v in fixture.items()}
save_file(fixture, str(out / "electra_squad.safetensors"))
info = {
    "torch": torch.__version__,
    "transformers": __import__("transformers").__version__,
    "beam": BEAM,
    "loss": float(loss.detach()),
}
(out / "electra_squad.json").write_text(json.dumps(info, indent=2) + "\n")
print(json.dumps(info, indent=2))
