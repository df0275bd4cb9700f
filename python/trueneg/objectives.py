"""Hard Correction and Soft Regularization on numpy arrays or torch tensors, each rule computed
by the Rust core (the functions trueneg's own pre-training step calls)."""

from dataclasses import dataclass

import numpy as np

from . import _core
from ._tensors import is_torch, like, to_numpy, torch

IGNORE_INDEX = -100

# The parts this package computes; the others stay in the `trueneg` command's pre-training.
PARTS = ("hc", "sr")
CLI_ONLY = ("sr-sent", "cline")
REDUCTIONS = ("mean", "sum")


@dataclass
class Correction:
    """What :func:`hard_correction` found. ``dropped`` and ``predictions`` have the labels' shape
    and kind (numpy or torch on the labels' device); ``predictions`` holds ``ignore_index``
    outside the masked positions. ``counts``: ``masked``, ``mismatched`` (predictions that differ
    from the gold token), ``corrected`` (those that are its synonyms: dropped), ``sequences`` and
    ``sequences_corrected`` (sequences with a dropped position)."""

    dropped: object
    predictions: object
    counts: dict

    def labels(self, labels, ignore_index=IGNORE_INDEX):
        """``labels`` with the dropped positions set to ``ignore_index``: the labels for a
        model's own masked-LM loss (transformers' ``labels=``) that leave them out."""
        if is_torch(labels):
            return labels.masked_fill(self.dropped, ignore_index)
        out = np.array(labels, copy=True)
        out[self.dropped] = ignore_index
        return out

    @property
    def corrected_ratio(self):
        """Corrected among mismatched predictions (the paper's Table 8, prediction level)."""
        return self.counts["corrected"] / max(self.counts["mismatched"], 1)


def _masked(labels, ignore_index):
    """The labels as int64 numpy, the flat indices of the masked positions, their sequences and
    the number of sequences (a 1-D ``labels`` is one sequence)."""
    lab = to_numpy(labels, np.int64)
    shaped = lab.reshape(1, -1) if lab.ndim == 1 else lab.reshape(-1, lab.shape[-1])
    flat = shaped.reshape(-1)
    index = np.flatnonzero(flat != ignore_index)
    rows = index // shaped.shape[1]
    return lab, flat, index, rows.astype(np.int64), shaped.shape[0]


def _predictions(logits_or_predictions, lab, index, rule, seed):
    """The prediction at each masked position: given ids, the argmax of the logits, or a draw
    from their softmax (``rule="sampled"``, the core's sampler seeded with ``seed``)."""
    x = logits_or_predictions
    dims = x.ndim
    if dims == lab.ndim:  # ids
        return to_numpy(x, np.int64).reshape(-1)[index]
    if dims != lab.ndim + 1:
        raise ValueError(
            f"logits_or_predictions: {dims} dimensions, expected the labels' {lab.ndim} (ids) "
            f"or {lab.ndim + 1} (logits)"
        )
    vocab = x.shape[-1]
    if is_torch(x):
        rows = x.detach().reshape(-1, vocab)[torch.as_tensor(index, device=x.device)]
        if rule == "argmax":
            return rows.argmax(-1).cpu().numpy().astype(np.int64)
        return _core.sample_rows(to_numpy(rows, np.float32), int(seed))
    rows = np.asarray(x).reshape(-1, vocab)[index]
    if rule == "argmax":
        return rows.argmax(-1).astype(np.int64)
    return _core.sample_rows(np.ascontiguousarray(rows, dtype=np.float32), int(seed))


def hard_correction(
    logits_or_predictions, labels, table, rule="argmax", seed=0, ignore_index=IGNORE_INDEX
):
    """Hard Correction: the masked positions (``labels != ignore_index``) whose prediction
    differs from the gold token and is one of its synonyms in ``table``; the paper drops them
    from the masked-LM loss.

    ``logits_or_predictions``: logits ``[..., vocab]`` (the prediction is their argmax, or with
    ``rule="sampled"`` a draw from their softmax seeded by ``seed``) or predicted ids of the
    labels' shape (an ELECTRA generator's samples). Returns a :class:`Correction`."""
    if rule not in ("argmax", "sampled"):
        raise ValueError(f'rule: {rule!r}, expected "argmax" or "sampled"')
    lab, flat, index, rows, batch = _masked(labels, ignore_index)
    pred = _predictions(logits_or_predictions, lab, index, rule, seed)
    gold = flat[index]
    weights, counts = _core.correction_weights(
        np.ascontiguousarray(pred, np.int64), gold, rows, batch, table._core
    )
    dropped = np.zeros(flat.shape, dtype=bool)
    dropped[index] = weights == 0.0
    predictions = np.full(flat.shape, ignore_index, dtype=np.int64)
    predictions[index] = pred
    return Correction(
        dropped=like(dropped.reshape(lab.shape), labels),
        predictions=like(predictions.reshape(lab.shape), labels),
        counts=counts,
    )


if torch is not None:

    class _CosineDistances(torch.autograd.Function):
        """``1 - cos`` of paired rows, value and gradient from the core."""

        @staticmethod
        def forward(ctx, pred, gold):
            d, gp, gg = _core.cosine_distances(
                to_numpy(pred, np.float32), to_numpy(gold, np.float32)
            )
            ctx.save_for_backward(like(gp, pred).to(pred.dtype), like(gg, gold).to(gold.dtype))
            return like(d, pred).to(pred.dtype)

        @staticmethod
        def backward(ctx, grad):
            gp, gg = ctx.saved_tensors
            g = grad.unsqueeze(-1)
            return g * gp, g * gg


def _reduce(d, reduction, num_sequences):
    if d.shape[0] == 0:  # no masked position: no term (as trueneg's step, whose mean is 0 then)
        return d.sum()
    if reduction == "mean":
        return d.mean()
    if num_sequences is None:
        raise ValueError('num_sequences: needed with reduction="sum" (the batch\'s sequences)')
    return d.sum() / max(int(num_sequences), 1)


def soft_regularization(pred_embeddings, gold_embeddings, reduction="mean", num_sequences=None):
    """Word-level Soft Regularization: ``1 - cos(pred_k, gold_k)`` for each row pair of
    ``pred_embeddings`` and ``gold_embeddings`` ``[n, dim]`` (the embedding rows of the predicted
    and the gold token at each masked position), reduced as ``reduction`` says: ``"mean"`` over
    the positions, or ``"sum"`` per sequence averaged over ``num_sequences`` (the paper's Eq. 4).

    torch tensors give a torch scalar whose gradient flows into both (the core's derivative);
    numpy arrays give a float."""
    if reduction not in REDUCTIONS:
        raise ValueError(f'reduction: {reduction!r}, expected "mean" or "sum"')
    if is_torch(pred_embeddings):
        d = _CosineDistances.apply(pred_embeddings, gold_embeddings)
        return _reduce(d, reduction, num_sequences)
    d, _, _ = _core.cosine_distances(
        to_numpy(pred_embeddings, np.float32), to_numpy(gold_embeddings, np.float32)
    )
    return float(_reduce(d.astype(np.float64), reduction, num_sequences))


def _sequences(labels):
    """The sequences of a batch of labels (a 1-D ``labels`` is one)."""
    return labels.shape[0] if labels.dim() > 1 else 1


def soft_regularization_from_logits(
    logits, labels, embeddings, reduction="mean", ignore_index=IGNORE_INDEX
):
    """:func:`soft_regularization` from a masked-LM's ``logits`` ``[batch, len, vocab]``, its
    ``labels`` and its input embedding matrix ``[vocab, dim]`` (torch): the prediction is the
    argmax (no gradient through it); the gradient flows into both embedding rows."""
    mask = labels != ignore_index
    pred = logits.detach()[mask].argmax(-1)
    gold = labels[mask]
    return soft_regularization(embeddings[pred], embeddings[gold], reduction, _sequences(labels))


def parse_objective(objective):
    """The parts of ``objective``: ``"baseline"``, or ``"hc"``, ``"sr"`` joined by ``+``."""
    if objective == "baseline":
        return set()
    parts = set(objective.split("+"))
    unknown = sorted(parts - set(PARTS))
    if unknown:
        where = [p for p in unknown if p in CLI_ONLY]
        hint = f" ({', '.join(where)}: the `trueneg pretrain` command)" if where else ""
        raise ValueError(
            f"objective: {objective!r}, expected \"baseline\" or parts of {PARTS} joined by "
            f"'+'{hint}"
        )
    return parts


def true_negatives_loss(
    logits,
    labels,
    objective="hc",
    table=None,
    embeddings=None,
    sr_weight=1.0,
    sr_reduction="mean",
    hc_rule="argmax",
    seed=0,
    ignore_index=IGNORE_INDEX,
):
    """The masked-LM loss of a model's ``logits`` ``[batch, len, vocab]`` (torch) at ``labels``
    with the true-negatives objective ``objective`` (``"hc"``, ``"sr"``, ``"hc+sr"`` or
    ``"baseline"``), as trueneg's pre-training step computes it:

    - the cross-entropy at the masked positions, averaged over those HC keeps
      (``sum I_k nll_k / max(sum I_k, 1)``; ``table`` is HC's synonym table);
    - plus ``sr_weight`` times word-level SR over the input ``embeddings`` matrix.

    Returns ``(loss, stats)``: stats holds ``mlm_loss``, ``sr_loss`` and HC's counts."""
    parts = parse_objective(objective)
    if "hc" in parts and table is None:
        raise ValueError('table: objective "hc" needs a SynonymTable')
    if "sr" in parts and embeddings is None:
        raise ValueError('embeddings: objective "sr" needs the input embedding matrix')
    mask = labels != ignore_index
    gold = labels[mask]
    rows = logits[mask]
    # The argmax at the masked positions, once for HC (its default rule) and SR.
    argmax = rows.detach().argmax(-1)
    nll = torch.nn.functional.cross_entropy(
        rows.float(), gold, reduction="none", ignore_index=ignore_index
    )
    stats = {}
    if "hc" in parts:
        if hc_rule == "argmax":
            predicted = torch.full_like(labels, ignore_index)
            predicted[mask] = argmax
            c = hard_correction(predicted, labels, table, ignore_index=ignore_index)
        else:
            c = hard_correction(logits, labels, table, hc_rule, seed, ignore_index)
        keep = (~c.dropped[mask]).to(nll.dtype)
        mlm = (nll * keep).sum() / keep.sum().clamp_min(1.0)
        stats.update(c.counts)
    else:
        mlm = nll.mean()
    loss = mlm
    stats["mlm_loss"] = float(mlm.detach())
    if "sr" in parts:
        sr = soft_regularization(
            embeddings[argmax], embeddings[gold], sr_reduction, _sequences(labels)
        )
        loss = loss + sr_weight * sr
        stats["sr_loss"] = float(sr.detach())
    return loss, stats
