"""trueneg for PyTorch and transformers users: Hard Correction (HC) and Soft Regularization (SR),
the objectives of "Language Model Pre-Training on True Negatives" (Zhang et al., AAAI 2023),
computed by trueneg's Rust core.

- :class:`SynonymTable`: the synonym lookup table HC consults (WordNet over a tokenizer's
  words, a ``trueneg lexicon build`` file, an embedding matrix's mutual neighbours, or pairs).
- :func:`hard_correction`: the masked positions whose prediction is a synonym of the gold token
  (to drop from the masked-LM loss), with the counts the paper's Table 8 reports.
- :func:`soft_regularization`: ``1 - cos(e(pred), e(gold))`` over the masked positions,
  differentiable in torch.
- :func:`true_negatives_loss`: the masked-LM loss with HC, SR or both, from a model's logits.
- :mod:`trueneg.transformers`: the same as a ``Trainer`` subclass, with the statistics in
  Trainer's logs.

numpy arrays and torch tensors are taken and given back in kind (torch is optional); torch CPU
tensors reach the core without a copy, through DLPack. The data pipeline, pre-training runs and
fine-tuning recipes stay in the ``trueneg`` command (``trueneg --help``), which this package
installs too. See docs/python.md.
"""

from ._core import __version__
from .objectives import (
    Correction,
    hard_correction,
    soft_regularization,
    soft_regularization_from_logits,
    true_negatives_loss,
)
from .table import SynonymTable

__all__ = [
    "Correction",
    "SynonymTable",
    "__version__",
    "hard_correction",
    "soft_regularization",
    "soft_regularization_from_logits",
    "true_negatives_loss",
]
