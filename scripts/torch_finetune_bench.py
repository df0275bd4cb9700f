#!/usr/bin/env python3
"""The fine-tuning step in PyTorch, for scripts/gpu/finetune.sh: transformers'
`ElectraForSequenceClassification` trained as the Trainer of run_glue trains it (the model's
own loss, `clip_grad_norm_(1.0)`, torch AdamW, linear schedule, `zero_grad(set_to_none)`),
on full-length rows of random token ids, so that every step does the same work as trueneg's on
the rows `make` writes.

Two commands:
  make SIZE OUT [--rows N]
                     writes a transformers folder for SIZE (small: hidden 256, embeddings 128,
                     12 layers, 4 heads, FFN 1024; base: 768, 12 layers, 12 heads, FFN 3072;
                     tiny: hidden 64, 2 layers, for a stand-in on the CPU) with random weights
                     (ElectraForPreTraining, as ELECTRA's discriminators ship), a vocab.txt of
                     the config's size whose words are "w<i>", and OUT/train.tsv + dev.tsv in
                     SST-2's layout (N training rows, default 4096) whose every sentence is
                     longer than 512 words;
  step SIZE          times the step: --batch, --len, --steps, --warmup, --device (cuda | cpu),
                     --mode eager | compile, --precision bf16 | f32 (bf16: torch.autocast, the
                     Trainer's --bf16); prints one line `torch <mode> <precision> <ms>/step
                     <examples>/s`.
"""
import argparse
import pathlib
import random
import time

import torch
from transformers import ElectraConfig, ElectraForPreTraining, ElectraForSequenceClassification

SIZES = {
    "tiny": dict(hidden_size=64, embedding_size=64, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=256),
    "small": dict(hidden_size=256, embedding_size=128, num_hidden_layers=12,
                  num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, embedding_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
}
VOCAB = 30522
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def config(size):
    return ElectraConfig(vocab_size=VOCAB, max_position_embeddings=512, **SIZES[size])


def make(size, out, rows):
    out = pathlib.Path(out)
    model = out / f"model-{size}"
    model.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1)
    ElectraForPreTraining(config(size)).save_pretrained(str(model))
    words = [f"w{i}" for i in range(len(SPECIALS), VOCAB)]
    (model / "vocab.txt").write_text("\n".join(SPECIALS + words) + "\n")
    rng = random.Random(1)
    data = out / "data"
    data.mkdir(exist_ok=True)
    for name, count in [("train.tsv", rows), ("dev.tsv", 64)]:
        lines = ["sentence\tlabel"]
        for i in range(count):
            lines.append(" ".join(rng.choice(words) for _ in range(520)) + f"\t{i % 2}")
        (data / name).write_text("\n".join(lines) + "\n")
    print(f"{model} {data}")


def step(a):
    device = torch.device(a.device)
    torch.manual_seed(1)
    model = ElectraForSequenceClassification(config(a.size)).to(device).train()
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-8, fused=fused)
    total = a.warmup + a.steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: max(0.0, 1 - t / total))
    ids = torch.randint(len(SPECIALS), VOCAB, (a.batch, a.len), device=device)
    ids[:, 0] = SPECIALS.index("[CLS]")
    ids[:, -1] = SPECIALS.index("[SEP]")
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    labels = torch.randint(0, 2, (a.batch,), device=device)
    forward = model
    if a.mode == "compile":
        forward = torch.compile(model)

    def one():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = forward(input_ids=ids, attention_mask=mask, token_type_ids=types,
                           labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        one()
    sync()
    start = time.perf_counter()
    for _ in range(a.steps):
        one()
    sync()
    ms = (time.perf_counter() - start) * 1000 / a.steps
    print(f"torch {a.mode} {a.precision} {ms:.2f} ms/step {a.batch * 1000 / ms:.1f} examples/s")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("size", choices=SIZES)
    m.add_argument("out")
    m.add_argument("--rows", type=int, default=4096)
    s = sub.add_parser("step")
    s.add_argument("size", choices=SIZES)
    s.add_argument("--batch", type=int, default=32)
    s.add_argument("--len", type=int, default=128)
    s.add_argument("--steps", type=int, default=50)
    s.add_argument("--warmup", type=int, default=10)
    s.add_argument("--device", default="cuda")
    s.add_argument("--mode", choices=["eager", "compile"], default="eager")
    s.add_argument("--precision", choices=["bf16", "f32"], default="bf16")
    a = p.parse_args()
    if a.cmd == "make":
        make(a.size, a.out, a.rows)
    else:
        step(a)


if __name__ == "__main__":
    main()
