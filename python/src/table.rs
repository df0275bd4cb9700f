//! `SynonymTable`: the crate's table (token id → sorted synonym ids, symmetric), built by the
//! crate's own builders: WordNet over a tokenizer's whole words (as `lexicon build`), a
//! `lexicon build` file, an embedding matrix (the self table's rules and guards,
//! `text::embedding_synonyms`), or explicit pairs.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::PyReadonlyArray2;
use pyo3::prelude::*;

use trueneg::text::WordPieceTokenizer;
use trueneg::text::default_corpus::default_wordnet_dir;
use trueneg::text::embedding_synonyms::{EmbeddingTable, wordnet_agreement};
use trueneg::text::synonym_table::{self, whole_words};

use crate::errors::{bad_argument, to_py};

#[pyclass(frozen, module = "trueneg._core")]
pub struct SynonymTable {
    pub(crate) inner: Arc<synonym_table::SynonymTable>,
}

/// `wordnet_dir`, or the default one (`TRUENEG_WORDNET`, then Debian's `wordnet-base`).
fn wordnet(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(default_wordnet_dir)
}

fn tokenizer(path: &std::path::Path) -> PyResult<WordPieceTokenizer> {
    WordPieceTokenizer::load(path).map_err(to_py)
}

fn wrap(t: synonym_table::SynonymTable) -> SynonymTable {
    SynonymTable { inner: Arc::new(t) }
}

#[pymethods]
impl SynonymTable {
    /// WordNet's synonyms over the whole-word tokens of the tokenizer at `tokenizer` (a
    /// `tokenizer.json` or a WordPiece `vocab.txt`).
    #[staticmethod]
    #[pyo3(signature = (tokenizer, wordnet_dir = None))]
    fn wordnet(tokenizer: PathBuf, wordnet_dir: Option<PathBuf>) -> PyResult<Self> {
        let tok = self::tokenizer(&tokenizer)?;
        let table = synonym_table::wordnet_table(&tok, &wordnet(wordnet_dir)).map_err(to_py)?;
        Ok(wrap(table))
    }

    /// A table `trueneg lexicon build` wrote (or a run's `lexicon.safetensors`).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(wrap(
            synonym_table::SynonymTable::load(&path).map_err(to_py)?,
        ))
    }

    /// A table over `vocab_size` ids from `(a, b)` pairs, each added both ways (pairs out of
    /// range or of one id are left out, as the crate's builders do).
    #[staticmethod]
    #[pyo3(signature = (vocab_size, pairs, source = "pairs".to_string()))]
    fn from_pairs(vocab_size: usize, pairs: Vec<(u32, u32)>, source: String) -> Self {
        wrap(synonym_table::SynonymTable::from_pairs(
            vocab_size,
            String::new(),
            source,
            pairs,
        ))
    }

    /// The mutual `k` nearest neighbours of an embedding matrix `[vocab, dim]` whose rows are
    /// the tokenizer's ids, at a centred cosine of at least `min_cosine` (None: any), over the
    /// tokenizer's content words: the self table's rules and guards.
    #[staticmethod]
    #[pyo3(signature = (matrix, tokenizer, k = 10, min_cosine = None, stop_words = Vec::new(),
        wordnet_dir = None, source = "embeddings:python".to_string()))]
    fn from_embeddings(
        matrix: PyReadonlyArray2<'_, f32>,
        tokenizer: PathBuf,
        k: usize,
        min_cosine: Option<f32>,
        stop_words: Vec<String>,
        wordnet_dir: Option<PathBuf>,
        source: String,
    ) -> PyResult<Self> {
        let (values, shape) = crate::arrays::matrix("matrix", &matrix)?;
        let tok = self::tokenizer(&tokenizer)?;
        let wordnet_dir = wordnet(wordnet_dir);
        let from = EmbeddingTable {
            tokenizer: &tok,
            k,
            min_cosine,
            stop_words: stop_words.iter().map(|w| w.trim().to_lowercase()).collect(),
            wordnet_dir: &wordnet_dir,
            source,
        };
        Ok(wrap(from.build(values, shape).map_err(to_py)?))
    }

    /// Token ids the table is made for.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// Where the synonyms came from (`wordnet:/usr/share/wordnet`, `embeddings:…`, …).
    #[getter]
    fn source(&self) -> String {
        self.inner.source.clone()
    }

    /// The fingerprint of the tokenizer the table was built for (empty for `from_pairs`).
    #[getter]
    fn fingerprint(&self) -> String {
        self.inner.fingerprint.clone()
    }

    /// The number of (id, synonym) entries, both directions counted.
    #[getter]
    fn entries(&self) -> usize {
        self.inner.entries()
    }

    /// The synonyms of token `id`, sorted.
    fn synonyms(&self, id: u32) -> PyResult<Vec<u32>> {
        if id as usize >= self.inner.vocab_size() {
            return Err(bad_argument(
                "id",
                format!(
                    "{id} is outside the table's {} ids",
                    self.inner.vocab_size()
                ),
            ));
        }
        Ok(self.inner.synonyms(id).to_vec())
    }

    /// Whether `a` and `b` are listed as synonyms.
    fn are_synonyms(&self, a: u32, b: u32) -> bool {
        self.inner.are_synonyms(a, b)
    }

    /// The share of the tokenizer's whole words with synonyms, and the mean list length.
    fn coverage(&self, tokenizer: PathBuf) -> PyResult<(usize, usize, f64)> {
        let tok = self::tokenizer(&tokenizer)?;
        let c = self.inner.coverage(whole_words(&tok).len());
        Ok((c.whole_words, c.with_synonyms, c.mean_list_length))
    }

    /// Precision and recall of the table's pairs against WordNet's table for the same
    /// tokenizer, on its content words (None where the set divided by is empty).
    #[pyo3(signature = (tokenizer, wordnet_dir = None))]
    fn wordnet_agreement(
        &self,
        tokenizer: PathBuf,
        wordnet_dir: Option<PathBuf>,
    ) -> PyResult<(Option<f64>, Option<f64>)> {
        let tok = self::tokenizer(&tokenizer)?;
        wordnet_agreement(&self.inner, &tok, &wordnet(wordnet_dir)).map_err(to_py)
    }

    /// Writes the table as `lexicon build` does (safetensors), readable by `trueneg pretrain`'s
    /// `objective.lexicon`.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        self.inner.save(&path).map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!(
            "SynonymTable(vocab_size={}, entries={}, source={:?})",
            self.inner.vocab_size(),
            self.inner.entries(),
            self.inner.source
        )
    }
}
