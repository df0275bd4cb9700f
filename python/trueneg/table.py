"""The synonym table Hard Correction consults, built by the Rust core's own builders."""

import contextlib
import os
import tempfile
import warnings

from . import _core
from ._tensors import to_numpy

# A table whose pairs are WordNet synonyms less than one time in ten is mostly related words that
# are not synonyms; the pre-training run's self table has the same gate (SELF_MIN_PRECISION).
MIN_PRECISION = 0.1


@contextlib.contextmanager
def tokenizer_file(tokenizer):
    """A path to ``tokenizer`` as the core reads it: a ``tokenizer.json`` or WordPiece
    ``vocab.txt`` path (or a folder holding one), a ``tokenizers.Tokenizer``, or a transformers
    tokenizer (fast: its ``tokenizer.json``; slow: its ``vocab.txt``)."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        if os.path.isdir(path):
            for name in ("tokenizer.json", "vocab.txt"):
                if os.path.isfile(os.path.join(path, name)):
                    path = os.path.join(path, name)
                    break
            else:
                raise FileNotFoundError(f"{path}: no tokenizer.json or vocab.txt in the folder")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="trueneg-tokenizer-") as tmp:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:  # a transformers fast tokenizer
            path = os.path.join(tmp, "tokenizer.json")
            backend.save(path)
        elif hasattr(tokenizer, "save_vocabulary"):  # a transformers slow (WordPiece) tokenizer
            path = tokenizer.save_vocabulary(tmp)[0]
        elif hasattr(tokenizer, "to_str"):  # a tokenizers.Tokenizer
            path = os.path.join(tmp, "tokenizer.json")
            tokenizer.save(path)
        else:
            raise TypeError(
                "tokenizer: expected a tokenizer.json / vocab.txt path, a tokenizers.Tokenizer "
                f"or a transformers tokenizer, not {type(tokenizer).__name__}"
            )
        yield path


class SynonymTable:
    """Token id -> sorted synonym ids, symmetric, over one tokenizer's vocabulary.

    Build one with :meth:`wordnet`, :meth:`from_lexicon`, :meth:`from_embeddings` or
    :meth:`from_pairs`. ``wordnet_agreement`` holds, for a table from embeddings, the precision
    and recall of its pairs against WordNet's (None where not measured)."""

    def __init__(self, core_table, wordnet_agreement=None):
        self._core = core_table
        self.wordnet_agreement = wordnet_agreement

    @classmethod
    def wordnet(cls, tokenizer, wordnet_dir=None):
        """WordNet's synonyms over the tokenizer's whole-word tokens, as ``trueneg lexicon
        build`` makes them (``wordnet_dir``: default ``$TRUENEG_WORDNET``, then Debian's
        ``wordnet-base`` at /usr/share/wordnet)."""
        with tokenizer_file(tokenizer) as path:
            return cls(_core.SynonymTable.wordnet(path, _path(wordnet_dir)))

    @classmethod
    def from_lexicon(cls, path):
        """A table ``trueneg lexicon build`` wrote (or a run's ``lexicon.safetensors``)."""
        return cls(_core.SynonymTable.load(os.fspath(path)))

    @classmethod
    def from_pairs(cls, vocab_size, pairs, source="pairs"):
        """A table over ``vocab_size`` ids from ``(a, b)`` id pairs, each added both ways."""
        pairs = [(int(a), int(b)) for a, b in pairs]
        return cls(_core.SynonymTable.from_pairs(int(vocab_size), pairs, source))

    @classmethod
    def from_embeddings(
        cls,
        matrix,
        vocab,
        k=10,
        min_cosine=None,
        stop_words=(),
        wordnet_dir=None,
        min_precision=MIN_PRECISION,
    ):
        """Mutual ``k`` nearest neighbours of an embedding matrix ``[vocab_size, dim]`` (numpy or
        torch; row i is token i of the tokenizer ``vocab``), by the cosine of the centred
        vectors, at least ``min_cosine`` (None: any), over the tokenizer's content words (not
        function words, not ``stop_words``, known to WordNet): the rules and guards of
        ``trueneg lexicon build --checkpoint`` and of a run's self table.

        The table's precision and recall against WordNet's are measured and kept in
        ``wordnet_agreement``; a precision under ``min_precision`` warns."""
        m = to_numpy(matrix, "float32")
        if m.ndim != 2:
            raise ValueError(f"matrix: {m.ndim} dimensions, expected [vocab_size, dim]")
        with tokenizer_file(vocab) as path:
            core = _core.SynonymTable.from_embeddings(
                m, path, int(k), min_cosine, [str(w) for w in stop_words], _path(wordnet_dir)
            )
            try:
                agreement = core.wordnet_agreement(path, _path(wordnet_dir))
            except (OSError, ValueError) as e:
                warnings.warn(f"the table's agreement with WordNet is not measured: {e}")
                agreement = None
        precision = agreement[0] if agreement else None
        if precision is not None and precision < min_precision:
            warnings.warn(
                f"only {100 * precision:.1f} % of this table's pairs are WordNet synonyms "
                f"(under {100 * min_precision:.0f} %): it holds mostly related words that are "
                "not synonyms, which Hard Correction would drop as synonyms"
            )
        return cls(core, agreement)

    @property
    def vocab_size(self):
        return self._core.vocab_size

    @property
    def source(self):
        return self._core.source

    @property
    def entries(self):
        """(id, synonym) entries, both directions counted."""
        return self._core.entries

    def synonyms(self, token_id):
        return self._core.synonyms(int(token_id))

    def are_synonyms(self, a, b):
        return self._core.are_synonyms(int(a), int(b))

    def coverage(self, tokenizer):
        """``(whole_words, with_synonyms, mean_list_length)`` over the tokenizer's whole words."""
        with tokenizer_file(tokenizer) as path:
            return self._core.coverage(path)

    def save(self, path):
        """Writes the table as ``trueneg lexicon build`` does (``objective.lexicon`` reads it)."""
        self._core.save(os.fspath(path))

    def __repr__(self):
        r = repr(self._core)
        if self.wordnet_agreement:
            p, rec = self.wordnet_agreement
            r += f" (WordNet agreement: precision {p}, recall {rec})"
        return r


def _path(p):
    return None if p is None else os.fspath(p)
