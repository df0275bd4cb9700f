"""Trainer with Hard Correction: the loss is true_negatives_loss, and HC's statistics reach
Trainer's logs."""

import torch
from torch.utils.data import Dataset

from conftest import table_that_acts


class Repeated(Dataset):
    """The golden batch's rows, repeated."""

    def __init__(self, batch, times):
        self.rows = [{k: torch.from_numpy(v[i]) for k, v in batch.items()}
                     for i in range(batch["input_ids"].shape[0])] * times

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def logged_windows(golden, tmp_path, **arguments):
    """The logs with HC's statistics of a short TrueNegativesTrainer run on the golden batch."""
    from transformers import BertForMaskedLM, TrainerCallback, TrainingArguments

    from trueneg.transformers import TrueNegativesTrainer

    seen = []

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs or {}))

    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=3, learning_rate=1e-3,
        report_to=[], use_cpu=True, save_strategy="no", seed=0, **arguments,
    )
    model = BertForMaskedLM.from_pretrained(golden["model_dir"])
    trainer = TrueNegativesTrainer(
        model=model, args=args, train_dataset=Repeated(golden["batch"], 4),
        table=table_that_acts(golden), objective="hc+sr", callbacks=[Keep()],
    )
    trainer.train()
    return [w for w in seen if "hc_corrected_ratio" in w]


def test_under_gradient_accumulation_the_logged_loss_is_the_micro_batches_mean(golden, tmp_path):
    windows = logged_windows(
        golden, tmp_path, max_steps=2, logging_steps=1, gradient_accumulation_steps=2
    )
    assert len(windows) == 2
    for w in windows:
        assert abs(w["loss"] - (w["mlm_loss"] + w["sr_loss"])) < 1e-3, w


def test_the_trainer_logs_hard_corrections_statistics(golden, tmp_path):
    from transformers import BertForMaskedLM, TrainerCallback, TrainingArguments

    from trueneg.transformers import TrueNegativesTrainer

    seen = []

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            seen.append(dict(logs or {}))

    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, logging_steps=2, per_device_train_batch_size=3,
        learning_rate=1e-3, report_to=[], use_cpu=True, save_strategy="no", seed=0,
    )
    model = BertForMaskedLM.from_pretrained(golden["model_dir"])
    trainer = TrueNegativesTrainer(
        model=model, args=args, train_dataset=Repeated(golden["batch"], 4),
        table=table_that_acts(golden), objective="hc+sr", callbacks=[Keep()],
    )
    trainer.train()
    windows = [w for w in seen if "hc_corrected_ratio" in w]
    assert len(windows) == 2, seen
    for w in windows:
        assert 0 <= w["hc_corrected"] <= w["hc_mismatched"]
        assert "mlm_loss" in w and "sr_loss" in w
    assert windows[0]["hc_corrected"] > 0


def test_the_loss_function_weights_a_micro_batch_by_its_share_of_the_masked_positions(golden):
    from types import SimpleNamespace

    from trueneg.transformers import loss_function

    import trueneg

    table = table_that_acts(golden)
    logits = torch.from_numpy(golden["logits"])
    labels = torch.from_numpy(golden["batch"]["labels"])
    alone, _ = trueneg.true_negatives_loss(logits, labels, "hc", table)
    compute = loss_function(table, "hc")
    outputs = SimpleNamespace(logits=logits)
    masked = int((labels != -100).sum())
    assert float(compute(outputs, labels)) == float(alone)
    half = compute(outputs, labels, torch.tensor(2 * masked))
    assert abs(float(half) - float(alone) / 2) < 1e-6
