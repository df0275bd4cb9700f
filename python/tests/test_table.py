"""Synonym tables from the Python side are the command's tables: WordNet over a transformers
tokenizer, a lexicon file, an embedding matrix (with the self table's guards)."""

import subprocess
import warnings

import numpy as np
import pytest
import torch

import trueneg

WORDS = """big large main primary chief principal happy glad car automobile auto quick fast
the of and run house home small little""".split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A transformers WordPiece tokenizer over a handful of English words."""
    from transformers import BertTokenizerFast

    folder = tmp_path_factory.mktemp("tok")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##s", "##ed"] + WORDS
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast.from_pretrained(folder)
    tok.save_pretrained(folder)
    return tok, folder


def ids(tok, *words):
    return [tok.convert_tokens_to_ids(w) for w in words]


def test_a_wordnet_table_from_a_transformers_tokenizer_is_the_commands(
    tokenizer, command, tmp_path
):
    tok, folder = tokenizer
    table = trueneg.SynonymTable.wordnet(tok)
    words = ids(tok, "big", "large", "main", "primary", "car", "house")
    big, large, main, primary, car, house = words
    assert table.vocab_size == len(tok)
    assert table.are_synonyms(big, large) and table.are_synonyms(main, primary)
    assert not table.are_synonyms(car, house)
    assert table.source.startswith("wordnet:")
    out = tmp_path / "lexicon.safetensors"
    subprocess.run(
        [command, "--quiet", "lexicon", "build", "--tokenizer", str(folder / "tokenizer.json"),
         "--out", str(out)],
        check=True,
    )
    theirs = trueneg.SynonymTable.from_lexicon(out)
    assert theirs.entries == table.entries > 0
    for i in range(len(tok)):
        assert table.synonyms(i) == theirs.synonyms(i), tok.convert_ids_to_tokens(i)
    whole, with_synonyms, _ = table.coverage(tok)
    assert whole == len(WORDS) and 0 < with_synonyms < whole


def test_a_saved_table_reads_back_whole(tokenizer, tmp_path):
    tok, folder = tokenizer
    table = trueneg.SynonymTable.wordnet(folder)
    table.save(tmp_path / "t.safetensors")
    back = trueneg.SynonymTable.from_lexicon(tmp_path / "t.safetensors")
    everyone = range(len(tok))
    assert [back.synonyms(i) for i in everyone] == [table.synonyms(i) for i in everyone]
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        trueneg.SynonymTable.from_lexicon(tmp_path / "missing.safetensors")


def test_a_missing_tokenizer_or_wordnet_folder_is_a_file_not_found_error(tokenizer, tmp_path):
    _, folder = tokenizer
    with pytest.raises(FileNotFoundError, match="nowhere.json: tokenizer file not found"):
        trueneg.SynonymTable.wordnet(tmp_path / "nowhere.json")
    with pytest.raises(FileNotFoundError, match="no-wordnet/.*WordNet file not found"):
        trueneg.SynonymTable.wordnet(folder, tmp_path / "no-wordnet")
    # A malformed file that is there stays a ValueError.
    (tmp_path / "vocab.txt").write_text("")
    with pytest.raises(ValueError):
        trueneg.SynonymTable.wordnet(tmp_path / "vocab.txt")


def embeddings_with_pairs(tok, pairs, dim=32, seed=0):
    """Random rows, except that each pair's two rows are nearly one vector."""
    g = np.random.default_rng(seed)
    m = g.standard_normal((len(tok), dim)).astype(np.float32)
    for a, b in pairs:
        ia, ib = ids(tok, a, b)
        m[ib] = m[ia] + 0.01 * g.standard_normal(dim).astype(np.float32)
    return m


def test_a_table_from_embeddings_keeps_mutual_neighbours_and_says_how_wordnet_agrees(tokenizer):
    tok, _ = tokenizer
    m = embeddings_with_pairs(tok, [("big", "large"), ("quick", "fast"), ("happy", "glad")])
    table = trueneg.SynonymTable.from_embeddings(torch.from_numpy(m), tok, k=1, min_cosine=0.9)
    big, large, quick, fast, the, of = ids(tok, "big", "large", "quick", "fast", "the", "of")
    assert table.are_synonyms(big, large) and table.are_synonyms(quick, fast)
    assert table.entries == 6
    precision, recall = table.wordnet_agreement
    assert precision == 1.0 and 0 < recall < 1
    # Function words are never given a synonym, however close their vectors.
    m2 = embeddings_with_pairs(tok, [("the", "of")])
    assert not trueneg.SynonymTable.from_embeddings(m2, tok, k=1, min_cosine=0.9).are_synonyms(
        the, of
    )


def test_a_table_of_unrelated_neighbours_warns(tokenizer):
    tok, _ = tokenizer
    m = embeddings_with_pairs(tok, [("car", "happy"), ("house", "quick")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = trueneg.SynonymTable.from_embeddings(m, tok, k=1, min_cosine=0.9)
    assert table.wordnet_agreement[0] == 0.0
    assert any("are WordNet synonyms" in str(w.message) for w in caught)


def test_a_table_from_embeddings_refuses_what_the_command_refuses(tokenizer):
    tok, _ = tokenizer
    with pytest.raises(ValueError, match="5 embedding rows, the tokenizer has"):
        trueneg.SynonymTable.from_embeddings(np.ones((5, 4), np.float32), tok)
    with pytest.raises(ValueError, match="k \\(neighbours per word\\) is 0"):
        trueneg.SynonymTable.from_embeddings(np.ones((len(tok), 4), np.float32), tok, k=0)
    with pytest.raises(ValueError, match="min_cosine 2 is outside"):
        trueneg.SynonymTable.from_embeddings(
            np.ones((len(tok), 4), np.float32), tok, min_cosine=2.0
        )
