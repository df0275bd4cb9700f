"""Hard Correction and Soft Regularization in transformers' ``Trainer``.

:class:`TrueNegativesTrainer` is a ``Trainer`` whose loss is :func:`trueneg.true_negatives_loss`
of the model's masked-LM logits (``BertForMaskedLM``, ``ElectraForMaskedLM`` as a generator, any
``*ForMaskedLM``), with HC's counts summed over each logging window and written through
Trainer's own ``log`` (so to TensorBoard, W&B, the console …) beside the loss:
``hc_mismatched``, ``hc_corrected``, ``hc_corrected_ratio`` (corrected among mismatched
predictions, the paper's Table 8 at the prediction level) and ``hc_sequences_corrected_ratio``
(at the iteration level), and the window's mean ``mlm_loss`` and ``sr_loss``.

:func:`loss_function` gives the same loss as a ``compute_loss_func`` for a plain ``Trainer``
(without the logged statistics).
"""

from transformers import Trainer

from .objectives import IGNORE_INDEX, parse_objective, true_negatives_loss


def _input_embeddings(model):
    return model.get_input_embeddings().weight


def loss_function(table=None, objective="hc", sr_weight=1.0, sr_reduction="mean", model=None):
    """A ``compute_loss_func(outputs, labels, num_items_in_batch)`` for ``Trainer``; SR needs
    the ``model`` (its input embeddings).

    Trainer takes such a loss as already scaled for gradient accumulation, so under it the
    micro-batch's loss is weighted by its share of the accumulated masked positions
    (``num_items_in_batch``): the accumulated step then averages over all of them, as one large
    batch would (up to HC's normaliser, the kept positions of each micro-batch)."""
    parse_objective(objective)

    def compute(outputs, labels, num_items_in_batch=None):
        embeddings = _input_embeddings(model) if model is not None else None
        loss, _ = true_negatives_loss(
            outputs.logits, labels, objective, table, embeddings, sr_weight, sr_reduction
        )
        if num_items_in_batch is not None:
            here = (labels != IGNORE_INDEX).sum()
            loss = loss * here / num_items_in_batch
        return loss

    return compute


class TrueNegativesTrainer(Trainer):
    """``Trainer`` with the true-negatives masked-LM loss. ``objective``: ``"hc"``, ``"sr"``,
    ``"hc+sr"`` or ``"baseline"``; ``table``: HC's :class:`trueneg.SynonymTable`;
    ``hc_rule``: ``"argmax"`` (the paper) or ``"sampled"`` (a draw from the softmax, seeded by
    the step)."""

    def __init__(
        self,
        *args,
        table=None,
        objective="hc",
        sr_weight=1.0,
        sr_reduction="mean",
        hc_rule="argmax",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        parse_objective(objective)
        # The loss is each micro-batch's mean (as trueneg's step computes it), not normalised by
        # `num_items_in_batch`: Trainer divides it by the accumulation steps itself.
        self.model_accepts_loss_kwargs = False
        self.loss_is_scaled_for_ga = False
        self.true_negatives = dict(
            table=table,
            objective=objective,
            sr_weight=sr_weight,
            sr_reduction=sr_reduction,
            hc_rule=hc_rule,
        )
        self._window = {}
        self._window_steps = 0

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        o = self.true_negatives
        loss, stats = true_negatives_loss(
            outputs.logits,
            labels,
            objective=o["objective"],
            table=o["table"],
            embeddings=_input_embeddings(model),
            sr_weight=o["sr_weight"],
            sr_reduction=o["sr_reduction"],
            hc_rule=o["hc_rule"],
            seed=self.state.global_step,
            ignore_index=IGNORE_INDEX,
        )
        if model.training:
            for k, v in stats.items():
                self._window[k] = self._window.get(k, 0) + v
            self._window_steps += 1
        return (loss, outputs) if return_outputs else loss

    def window_statistics(self):
        """The statistics of the steps since the last log, as ``log`` adds them."""
        w, steps = self._window, max(self._window_steps, 1)
        out = {}
        for k in ("mlm_loss", "sr_loss"):
            if k in w:
                out[k] = w[k] / steps
        if "mismatched" in w:
            out["hc_mismatched"] = w["mismatched"]
            out["hc_corrected"] = w["corrected"]
            out["hc_corrected_ratio"] = w["corrected"] / max(w["mismatched"], 1)
            out["hc_sequences_corrected_ratio"] = w["sequences_corrected"] / max(
                w["sequences"], 1
            )
        return out

    def log(self, logs, *args, **kwargs):
        if "loss" in logs and self._window_steps:
            logs = {**logs, **self.window_statistics()}
            self._window, self._window_steps = {}, 0
        return super().log(logs, *args, **kwargs)
