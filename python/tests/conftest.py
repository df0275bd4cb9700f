"""Shared fixtures: the golden tiny BERT (../shared/golden, written by transformers) and its
batch, and the `trueneg` command the wheel installed."""

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TRUENEG_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "golden"


@pytest.fixture(scope="session")
def golden():
    """The golden batch (int64 arrays) and transformers' logits on it."""
    from safetensors.numpy import load_file

    if not GOLDEN.is_dir():
        pytest.fail(f"{GOLDEN}: the shared golden fixtures are missing (set TRUENEG_SHARED)")
    t = load_file(str(GOLDEN / "bert_tiny_golden.safetensors"))
    batch = {
        "input_ids": t["inputs.masked_input_ids"].astype(np.int64),
        "attention_mask": t["inputs.attention_mask"].astype(np.int64),
        "token_type_ids": t["inputs.token_type_ids"].astype(np.int64),
        "labels": t["inputs.mlm_labels"].astype(np.int64),
    }
    return {
        "model_dir": GOLDEN / "bert_tiny",
        "batch": batch,
        "logits": t["bert.logits"],
        "loss": float(t["bert.loss"][0]),
        "mlm_loss": float(t["bert.mlm_loss"][0]),
        "reg_loss": float(t["bert.reg_loss"][0]),
    }


@pytest.fixture(scope="session")
def command():
    """The `trueneg` command installed beside this Python (the wheel's script)."""
    found = shutil.which("trueneg", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"no trueneg command in {Path(sys.executable).parent}: install the wheel")
    return found


def table_that_acts(golden):
    """A synonym table under which Hard Correction drops three of the golden batch's masked
    positions at the initial weights: each pairs a mismatched argmax with its gold token (plus
    unrelated pairs that never apply)."""
    import trueneg

    labels = golden["batch"]["labels"].reshape(-1)
    pred = golden["logits"].reshape(-1, golden["logits"].shape[-1]).argmax(-1)
    mismatched = [i for i in np.flatnonzero(labels != -100) if pred[i] != labels[i]]
    pairs = [(int(labels[i]), int(pred[i])) for i in mismatched[:3]]
    pairs += [(97, 98), (98, 99)]
    return trueneg.SynonymTable.from_pairs(100, pairs)
