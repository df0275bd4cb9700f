#!/usr/bin/env python3
"""Counts the kernel launches of one step of ../shared/bench/torch_electra_bench.py (the PyTorch
reference of `trueneg bench --model electra --count-ops`), by the same rule as trueneg's counter
(csrc/ops.cpp, whose list of calls that launch no kernel is read from that file): an ATen call
is one kernel unless it launches none itself (views, allocations, autograd's wrappers) or makes
kernel-launching calls inside it, which are counted instead; a dtype cast (aten::_to_copy)
counts once. The calls are seen by PyTorch's profiler instead of a RecordFunction callback of
our own. Prints launches_per_step= and casts_per_step=, and with --all every operation by name.

    python scripts/torch_count_ops.py --layers 12 --batch 2 --hc [--amp bf16] [--optim-impl fused]
"""
import argparse
import collections
import pathlib
import re
import sys

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CAST = "aten::_to_copy"


def no_kernel_names():
    """The names csrc/ops.cpp counts as launching no kernel."""
    text = (ROOT / "csrc" / "ops.cpp").read_text()
    block = re.search(r"names = \{(.*?)\};", text, re.S)
    if block is None:
        sys.exit("torch_count_ops: csrc/ops.cpp has no `names = {...}` list")
    return set(re.findall(r'"([^"]+)"', block.group(1)))


def launches(events, no_kernel):
    """By name, the events that launch a kernel under the rule above."""
    counts = collections.Counter()

    def visit(e, inside_cast):
        whole = e.name == CAST
        kernel_inside = False
        for c in e.cpu_children:
            kernel_inside |= visit(c, inside_cast or whole)
        quiet = e.name.startswith("autograd::") or not e.name.startswith("aten::") or e.name in no_kernel
        kernel = whole or (not kernel_inside and not quiet)
        if kernel and not inside_cast and (whole or not kernel_inside):
            counts[e.name] += 1
        return kernel or kernel_inside

    for e in events:
        if e.cpu_parent is None:
            visit(e, False)
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=str(ROOT.parent / "shared" / "bench" / "torch_electra_bench.py"))
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--hc", action="store_true")
    p.add_argument("--amp", choices=["none", "bf16"], default="none")
    p.add_argument("--optim-impl", choices=["default", "foreach", "fused"], default="default")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--all", action="store_true")
    args = p.parse_args()
    sys.path.insert(0, str(pathlib.Path(args.bench).parent))
    import torch_electra_bench as ref

    torch.set_num_threads(2)
    device = torch.device("cpu")
    spec = argparse.Namespace(layers=args.layers, batch=args.batch, gen_ratio=0.25, attn="sdpa", seed=0,
                              data_seed=1234)
    gen, disc = ref.build(spec, device)
    params = {id(q): q for q in list(gen.parameters()) + list(disc.parameters())}.values()
    kw = {"foreach": True} if args.optim_impl == "foreach" else {"fused": True} if args.optim_impl == "fused" else {}
    opt = torch.optim.AdamW(list(params), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-6, **kw)
    batch = ref.make_batch(spec, device)
    table = ref.synonym_table(device) if args.hc else None
    amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16")

    def one_step():
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = ref.step_loss(gen, disc, batch, table)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        one_step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        one_step()
    counts = launches(prof.events(), no_kernel_names())
    total = sum(counts.values())
    top = ", ".join(f"{n.removeprefix('aten::')} {c}" for n, c in counts.most_common(12))
    print(f"# torch eager ({args.amp}, {args.optim_impl} AdamW): {total} operations launch a kernel "
          f"({counts[CAST]} of them dtype casts); most frequent: {top}")
    if args.all:
        for n, c in counts.most_common():
            print(f"# op kernel {n} {c}")
    print(f"launches_per_step={total}")
    print(f"casts_per_step={counts[CAST]}")


if __name__ == "__main__":
    main()
