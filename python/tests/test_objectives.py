"""The Python path equals trueneg's own step: the same positions dropped by Hard Correction and
the same losses, on transformers' golden tiny BERT."""

import numpy as np
import pytest
import torch

import trueneg
from trueneg import _core
from conftest import table_that_acts


def tensors(batch):
    return {k: torch.from_numpy(v) for k, v in batch.items()}


def masked(golden):
    labels = golden["batch"]["labels"].reshape(-1)
    index = np.flatnonzero(labels != -100)
    logits = golden["logits"].reshape(-1, golden["logits"].shape[-1])[index]
    return np.ascontiguousarray(logits), labels[index]


def test_the_golden_sr_loss_is_transformers_own(golden):
    from transformers import BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(golden["model_dir"]).eval()
    b = tensors(golden["batch"])
    labels = b.pop("labels")
    logits = model(**b).logits
    loss, stats = trueneg.true_negatives_loss(
        logits, labels, "sr", embeddings=model.get_input_embeddings().weight
    )
    assert abs(stats["mlm_loss"] - golden["mlm_loss"]) < 1e-5
    assert abs(stats["sr_loss"] - golden["reg_loss"]) < 1e-5
    assert abs(float(loss.detach()) - golden["loss"]) < 1e-5


def test_the_python_losses_equal_the_cores_on_the_same_logits(golden):
    table = table_that_acts(golden)
    logits = torch.from_numpy(golden["logits"])
    labels = torch.from_numpy(golden["batch"]["labels"])
    c = trueneg.hard_correction(logits, labels, table)
    assert c.counts["corrected"] == 3, c.counts
    assert c.counts["masked"] == int((labels != -100).sum())
    loss, _ = trueneg.true_negatives_loss(logits, labels, "hc", table)
    rows, gold = masked(golden)
    keep = (~c.dropped[labels != -100]).numpy().astype(np.float32)
    core = _core.masked_lm_loss(rows, gold, keep)
    assert abs(float(loss) - core) < 1e-6
    plain, _ = trueneg.true_negatives_loss(logits, labels, "baseline")
    assert abs(float(plain) - _core.masked_lm_loss(rows, gold)) < 1e-6
    assert float(loss) != pytest.approx(float(plain))


def test_soft_regularization_value_and_gradient_are_the_cosine_distance(golden):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(7, 16, generator=g, requires_grad=True)
    b = torch.randn(7, 16, generator=g, requires_grad=True)
    ours = trueneg.soft_regularization(a, b)
    ours.backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad, b.grad = None, None
    ref = (1 - torch.nn.functional.cosine_similarity(a, b, dim=1, eps=1e-8)).mean()
    ref.backward()
    assert abs(float(ours.detach()) - float(ref.detach())) < 1e-6
    assert torch.allclose(ga, a.grad, atol=1e-6) and torch.allclose(gb, b.grad, atol=1e-6)
    summed = trueneg.soft_regularization(a.detach().numpy(), b.detach().numpy(), "sum", 2)
    assert summed == pytest.approx(float(ref.detach()) * 7 / 2, abs=1e-5)


def test_bf16_tensors_under_autocast_take_the_same_rules(golden):
    table = table_that_acts(golden)
    logits = torch.from_numpy(golden["logits"])
    labels = torch.from_numpy(golden["batch"]["labels"])
    half = logits.to(torch.bfloat16)
    c = trueneg.hard_correction(half, labels, table)
    argmax = half.float().argmax(-1).where(labels != -100, -100)
    assert np.array_equal(c.predictions.numpy(), argmax.numpy())
    a = torch.randn(5, 8, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(5, 8, dtype=torch.bfloat16, requires_grad=True)
    sr = trueneg.soft_regularization(a, b)
    sr.backward()
    assert sr.dtype == torch.bfloat16 and a.grad.dtype == torch.bfloat16
    ref = (1 - torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=1)).mean()
    assert abs(float(sr.detach()) - float(ref.detach())) < 1e-2


def test_a_batch_without_masked_positions_has_no_soft_regularization_term():
    empty = torch.zeros(0, 4, requires_grad=True)
    sr = trueneg.soft_regularization(empty, torch.zeros(0, 4))
    sr.backward()
    assert float(sr.detach()) == 0.0 and empty.grad.shape == (0, 4)
    assert trueneg.soft_regularization(np.zeros((0, 4)), np.zeros((0, 4))) == 0.0


def test_hc_and_sr_equal_the_rust_step_on_the_golden_batch(golden):
    from transformers import BertForMaskedLM

    table = table_that_acts(golden)
    model = BertForMaskedLM.from_pretrained(golden["model_dir"]).eval()
    b = tensors(golden["batch"])
    labels = b.pop("labels")
    logits = model(**b).logits
    loss, stats = trueneg.true_negatives_loss(
        logits, labels, "hc+sr", table, model.get_input_embeddings().weight
    )
    rust = _core.bert_mlm_step(str(golden["model_dir"]), golden["batch"], table._core, 1.0)
    c = trueneg.hard_correction(logits, labels, table)
    assert np.array_equal(c.dropped.numpy(), rust["dropped"])
    assert np.array_equal(c.predictions.numpy(), rust["predictions"])
    assert stats["corrected"] == rust["counts"]["corrected"] == 3
    assert abs(stats["mlm_loss"] - rust["mlm_loss"]) < 1e-6
    assert abs(stats["sr_loss"] - rust["sr_loss"]) < 1e-6
    assert abs(float(loss.detach()) - rust["loss"]) < 1e-6


def test_twenty_steps_of_bert_with_hc_drop_what_the_rust_step_drops(golden, tmp_path):
    from transformers import BertForMaskedLM

    table = table_that_acts(golden)
    model = BertForMaskedLM.from_pretrained(golden["model_dir"]).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    b = tensors(golden["batch"])
    labels = b.pop("labels")
    dropped_steps, worst = 0, 0.0
    for step in range(20):
        logits = model(**b).logits
        loss, stats = trueneg.true_negatives_loss(logits, labels, "hc", table)
        folder = tmp_path / "now"
        model.save_pretrained(folder)
        rust = _core.bert_mlm_step(str(folder), golden["batch"], table._core)
        c = trueneg.hard_correction(logits, labels, table)
        assert np.array_equal(c.dropped.numpy(), rust["dropped"]), f"step {step}"
        assert stats["corrected"] == rust["counts"]["corrected"], f"step {step}"
        worst = max(worst, abs(float(loss.detach()) - rust["loss"]))
        dropped_steps += stats["corrected"] > 0
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert dropped_steps > 0, "Hard Correction never acted: the test would show nothing"
    print(f"largest loss difference from the Rust step over 20 steps: {worst:.3g}")
    assert worst < 1e-6, worst


def test_sampled_predictions_come_from_the_cores_seeded_sampler(golden):
    logits = golden["logits"]
    labels = golden["batch"]["labels"]
    table = table_that_acts(golden)
    a = trueneg.hard_correction(logits, labels, table, rule="sampled", seed=5)
    b = trueneg.hard_correction(logits, labels, table, rule="sampled", seed=5)
    assert np.array_equal(a.predictions, b.predictions)
    rows, _ = masked(golden)
    assert np.array_equal(a.predictions[labels != -100], _core.sample_rows(rows, 5))


def test_bad_arguments_are_one_clear_line(golden):
    table = table_that_acts(golden)
    labels = golden["batch"]["labels"]
    with pytest.raises(ValueError, match="logits_or_predictions: 4 dimensions"):
        trueneg.hard_correction(np.zeros((3, 20, 100, 1)), labels, table)
    with pytest.raises(ValueError, match='rule: .*expected "argmax" or "sampled"'):
        trueneg.hard_correction(golden["logits"], labels, table, rule="top")
    with pytest.raises(ValueError, match="cline: the `trueneg pretrain` command"):
        trueneg.true_negatives_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2).long(), "hc+cline")
    with pytest.raises(ValueError, match="table: objective \"hc\" needs a SynonymTable"):
        trueneg.true_negatives_loss(torch.zeros(1, 2, 3), torch.zeros(1, 2).long(), "hc")
    with pytest.raises(ValueError, match=r"gold_embeddings: shape \[2, 3\], expected"):
        trueneg.soft_regularization(np.ones((2, 4)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"batch\[\"labels\"\]: missing"):
        _core.bert_mlm_step(str(golden["model_dir"]), {"input_ids": labels})


def test_an_electra_generators_loss_takes_hard_correction(golden):
    """ELECTRA's generator (ElectraForMaskedLM): the baseline loss is transformers' own, and HC
    drops exactly the mismatched positions whose argmax the table pairs with the gold token."""
    from safetensors.numpy import load_file
    from transformers import ElectraForMaskedLM

    from conftest import GOLDEN

    g = load_file(str(GOLDEN / "electra_golden.safetensors"))
    model = ElectraForMaskedLM.from_pretrained(GOLDEN / "electra_generator").eval()
    labels = torch.from_numpy(g["inputs.mlm_labels"].astype(np.int64))
    logits = model(
        input_ids=torch.from_numpy(g["inputs.masked_input_ids"].astype(np.int64)),
        attention_mask=torch.from_numpy(g["inputs.attention_mask"].astype(np.int64)),
        token_type_ids=torch.from_numpy(g["inputs.token_type_ids"].astype(np.int64)),
    ).logits
    plain, _ = trueneg.true_negatives_loss(logits, labels, "baseline")
    assert abs(float(plain.detach()) - float(g["gen.loss"][0])) < 1e-5
    argmax = g["gen.argmax"].reshape(-1)
    flat = labels.numpy().reshape(-1)
    wrong = [i for i in np.flatnonzero(flat != -100) if argmax[i] != flat[i]]
    pairs = [(int(flat[i]), int(argmax[i])) for i in wrong[:2]]
    table = trueneg.SynonymTable.from_pairs(100, pairs)
    expected = np.zeros(flat.shape, dtype=bool)
    for i in np.flatnonzero(flat != -100):
        expected[i] = argmax[i] != flat[i] and table.are_synonyms(flat[i], argmax[i])
    c = trueneg.hard_correction(logits, labels, table)
    assert np.array_equal(c.dropped.numpy().reshape(-1), expected) and expected.sum() >= 2
    hc, stats = trueneg.true_negatives_loss(logits, labels, "hc", table)
    assert stats["corrected"] == expected.sum() and float(hc.detach()) != float(plain.detach())
