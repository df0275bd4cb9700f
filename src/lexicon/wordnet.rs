//! WordNet 3.0 in the standard database format (Debian's `wordnet-base`, /usr/share/wordnet):
//! synsets from `data.{noun,verb,adj,adv}`, inflection exceptions from `{pos}.exc`, and
//! morphy-style lemmatisation (exceptions first, then the detachment rules).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

pub const POS: [&str; 4] = ["noun", "verb", "adj", "adv"];

/// Morphy's detachment rules per part of speech: (suffix to strip, ending to add).
const RULES: [(usize, &[(&str, &str)]); 3] = [
    (
        0,
        &[
            ("s", ""),
            ("ses", "s"),
            ("xes", "x"),
            ("zes", "z"),
            ("ches", "ch"),
            ("shes", "sh"),
            ("men", "man"),
            ("ies", "y"),
        ],
    ),
    (
        1,
        &[
            ("s", ""),
            ("ies", "y"),
            ("es", "e"),
            ("es", ""),
            ("ed", "e"),
            ("ed", ""),
            ("ing", "e"),
            ("ing", ""),
        ],
    ),
    (2, &[("er", ""), ("est", ""), ("er", "e"), ("est", "e")]),
];

/// How an inflected word was reduced to a lemma: `word = lemma − add + strip`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inflection {
    pub strip: String,
    pub add: String,
}

pub struct WordNet {
    /// Single-word lemmas (lower case) → ids of their synsets (index into `synsets`).
    lemma_synsets: HashMap<String, Vec<u32>>,
    /// Per synset: part of speech index and its single-word lemmas.
    synsets: Vec<(u8, Vec<String>)>,
    /// Inflected form → base forms, per part of speech.
    exceptions: [HashMap<String, Vec<String>>; 4],
    pub dir: PathBuf,
}

fn missing(path: &Path) -> Error {
    Error::Input(format!(
        "{}: WordNet file not found; install Debian's `wordnet-base` (apt-get install -y wordnet-base) or pass the folder holding data.noun etc.",
        path.display()
    ))
}

impl WordNet {
    pub fn open(dir: &Path) -> Result<Self> {
        let mut lemma_synsets: HashMap<String, Vec<u32>> = HashMap::new();
        let mut synsets = Vec::new();
        let mut exceptions: [HashMap<String, Vec<String>>; 4] = Default::default();
        for (p, pos) in POS.iter().enumerate() {
            let path = dir.join(format!("data.{pos}"));
            if !path.exists() {
                return Err(missing(&path));
            }
            let text = String::from_utf8_lossy(&crate::error::read(&path)?).into_owned();
            for (n, line) in text.lines().enumerate() {
                if line.starts_with("  ") || line.is_empty() {
                    continue;
                }
                let f: Vec<&str> = line.split(' ').collect();
                let bad = || {
                    Error::Input(format!(
                        "{}:{}: malformed synset line",
                        path.display(),
                        n + 1
                    ))
                };
                let count =
                    usize::from_str_radix(f.get(3).ok_or_else(bad)?, 16).map_err(|_| bad())?;
                let mut words = Vec::new();
                for i in 0..count {
                    let w = f.get(4 + 2 * i).ok_or_else(bad)?;
                    // Adjective markers like "(a)", "(p)", "(ip)" are not part of the lemma.
                    let w = w.split('(').next().unwrap_or(w).to_lowercase();
                    if !w.contains('_') && !w.is_empty() && !words.contains(&w) {
                        words.push(w);
                    }
                }
                let id = synsets.len() as u32;
                for w in &words {
                    lemma_synsets.entry(w.clone()).or_default().push(id);
                }
                synsets.push((p as u8, words));
            }
            let exc = dir.join(format!("{pos}.exc"));
            if exc.exists() {
                let text = String::from_utf8_lossy(&crate::error::read(&exc)?).into_owned();
                for line in text.lines() {
                    let mut it = line.split_whitespace();
                    if let Some(inflected) = it.next() {
                        exceptions[p].insert(
                            inflected.to_lowercase(),
                            it.map(str::to_lowercase).collect(),
                        );
                    }
                }
            }
        }
        Ok(Self {
            lemma_synsets,
            synsets,
            exceptions,
            dir: dir.to_path_buf(),
        })
    }

    fn has_pos(&self, lemma: &str, pos: usize) -> bool {
        self.lemma_synsets.get(lemma).is_some_and(|ids| {
            ids.iter()
                .any(|&i| self.synsets[i as usize].0 as usize == pos)
        })
    }

    /// Lemmas of `word` (lower case) with how they were reached; the word itself first when it
    /// is a WordNet lemma (inflection empty).
    pub fn lemmas(&self, word: &str) -> Vec<(String, Inflection, Option<usize>)> {
        let w = word.to_lowercase();
        let mut out = Vec::new();
        let none = Inflection {
            strip: String::new(),
            add: String::new(),
        };
        if self.lemma_synsets.contains_key(&w) {
            out.push((w.clone(), none.clone(), None));
        }
        for p in 0..4 {
            if let Some(bases) = self.exceptions[p].get(&w) {
                for b in bases {
                    if self.has_pos(b, p) && !out.iter().any(|(l, _, _)| l == b) {
                        out.push((b.clone(), none.clone(), Some(p)));
                    }
                }
            }
        }
        for (p, rules) in RULES {
            for (strip, add) in rules {
                if let Some(stem) = w.strip_suffix(strip)
                    && !stem.is_empty()
                {
                    let lemma = format!("{stem}{add}");
                    if self.has_pos(&lemma, p) && !out.iter().any(|(l, _, _)| *l == lemma) {
                        out.push((
                            lemma,
                            Inflection {
                                strip: strip.to_string(),
                                add: add.to_string(),
                            },
                            Some(p),
                        ));
                    }
                }
            }
        }
        out
    }

    /// Synonyms of a lemma: the other single-word lemmas of its synsets, restricted to one part
    /// of speech when given.
    pub fn synonyms_of_lemma(&self, lemma: &str, pos: Option<usize>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for &id in self
            .lemma_synsets
            .get(lemma)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let (p, words) = &self.synsets[id as usize];
            if pos.is_some_and(|q| q != *p as usize) {
                continue;
            }
            out.extend(words.iter().filter(|w| *w != lemma).cloned());
        }
        out
    }

    /// Synonyms of any word form: its own synsets (all parts of speech), plus those of its
    /// lemmas, re-inflected the same way (`stayed` → `remained`) and also as bare lemmas.
    pub fn synonyms(&self, word: &str) -> BTreeSet<String> {
        let w = word.to_lowercase();
        let mut out = BTreeSet::new();
        for (lemma, infl, pos) in self.lemmas(&w) {
            for s in self.synonyms_of_lemma(&lemma, pos) {
                if !infl.strip.is_empty()
                    && let Some(stem) = s.strip_suffix(infl.add.as_str())
                {
                    out.insert(format!("{stem}{}", infl.strip));
                }
                out.insert(s);
            }
        }
        out.remove(&w);
        out
    }

    /// Number of single-word lemmas.
    pub fn lemma_count(&self) -> usize {
        self.lemma_synsets.len()
    }

    /// All single-word lemmas of a part of speech (for attacks and tests).
    pub fn is_lemma(&self, word: &str) -> bool {
        self.lemma_synsets.contains_key(word)
    }
}
