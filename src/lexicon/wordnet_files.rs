//! Reading WordNet's database files: the synset lines of `data.{noun,verb,adj,adv}` (their
//! words and `@` hypernym / `!` antonym pointers) and the `*.exc` inflection exceptions.

use crate::io::PathQuery;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use crate::{Error, Result};

/// WordNet's parts of speech, in the order of its file names.
pub const POS: [&str; 4] = ["noun", "verb", "adj", "adv"];

/// What [`read`] finds in a WordNet folder (see [`super::wordnet::WordNet`]'s fields).
pub struct Database {
    pub lemma_synsets: HashMap<String, Vec<u32>>,
    pub synsets: Vec<(u8, Vec<String>)>,
    pub exceptions: [HashMap<String, Vec<String>>; 4],
    pub antonyms: HashMap<String, BTreeSet<String>>,
    pub capitalized: HashSet<(u32, String)>,
    pub hypernyms: HashMap<u32, Vec<u32>>,
}

pub fn missing(path: &Path) -> Error {
    Error::missing(
        path,
        "WordNet file not found; install Debian's `wordnet-base` (apt-get install -y wordnet-base) or pass the folder holding data.noun etc. (`--wordnet DIR`)",
    )
}

/// The part of speech index of a pointer's target (`n`, `v`, `a`/`s`, `r`).
fn target_pos(symbol: &str) -> usize {
    match symbol {
        "n" => 0,
        "v" => 1,
        "a" | "s" => 2,
        _ => 3,
    }
}

/// Reads the database files of `dir`; a missing `data.*` file is an error naming it.
pub fn read(dir: &Path) -> Result<Database> {
    let mut r = Reader::default();
    for (p, pos) in POS.iter().enumerate() {
        let path = dir.join(format!("data.{pos}"));
        if !path.is_present() {
            return Err(missing(&path));
        }
        let text = String::from_utf8_lossy(&crate::io::read::read(&path, crate::io::limit::DATA)?)
            .into_owned();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("  ") || line.is_empty() {
                continue;
            }
            r.synset(p, line).ok_or_else(|| {
                Error::Input(format!(
                    "{}:{}: malformed synset line",
                    path.display(),
                    n + 1
                ))
            })?;
        }
        let exc = dir.join(format!("{pos}.exc"));
        if exc.is_present() {
            let text =
                String::from_utf8_lossy(&crate::io::read::read(&exc, crate::io::limit::DATA)?)
                    .into_owned();
            for line in text.lines() {
                let mut it = line.split_whitespace();
                if let Some(inflected) = it.next() {
                    r.db.exceptions[p].insert(
                        inflected.to_lowercase(),
                        it.map(str::to_lowercase).collect(),
                    );
                }
            }
        }
    }
    Ok(r.finish())
}

/// The database being read, and the pointers to resolve once every synset is known.
struct Reader {
    db: Database,
    /// (part of speech, byte offset) → every word of the synset, for the antonym pointers.
    by_offset: HashMap<(usize, u64), Vec<String>>,
    id_by_offset: HashMap<(usize, u64), u32>,
    /// (source word, target part of speech, target offset, target word number).
    antonym_ptrs: Vec<(String, usize, u64, usize)>,
    /// (synset id, target part of speech, target offset) of every `@` pointer.
    hypernym_ptrs: Vec<(u32, usize, u64)>,
}

impl Default for Reader {
    fn default() -> Self {
        Self {
            db: Database {
                lemma_synsets: HashMap::new(),
                synsets: Vec::new(),
                exceptions: Default::default(),
                antonyms: HashMap::new(),
                capitalized: HashSet::new(),
                hypernyms: HashMap::new(),
            },
            by_offset: HashMap::new(),
            id_by_offset: HashMap::new(),
            antonym_ptrs: Vec::new(),
            hypernym_ptrs: Vec::new(),
        }
    }
}

impl Reader {
    /// One synset line of part of speech `p`; `None` when it is malformed.
    fn synset(&mut self, p: usize, line: &str) -> Option<()> {
        let f: Vec<&str> = line.split(' ').collect();
        let count = usize::from_str_radix(f.get(3)?, 16).ok()?;
        let mut words = Vec::new();
        let mut all_words = Vec::new();
        let id = self.db.synsets.len() as u32;
        for i in 0..count {
            let w = f.get(4 + 2 * i)?;
            // Adjective markers like "(a)", "(p)", "(ip)" are not part of the lemma.
            let original = w.split('(').next().unwrap_or(w);
            let w = original.to_lowercase();
            all_words.push(w.clone());
            if !w.contains('_') && !w.is_empty() && !words.contains(&w) {
                if original.chars().any(char::is_uppercase) {
                    self.db.capitalized.insert((id, w.clone()));
                }
                words.push(w);
            }
        }
        let offset: u64 = f[0].parse().ok()?;
        self.by_offset.insert((p, offset), all_words.clone());
        self.id_by_offset.insert((p, offset), id);
        self.pointers(id, &f, 4 + 2 * count, &all_words);
        for w in &words {
            self.db.lemma_synsets.entry(w.clone()).or_default().push(id);
        }
        self.db.synsets.push((p as u8, words));
        Some(())
    }

    /// The pointers of synset `id` from field `p_at` (their count): `symbol offset pos
    /// source/target` (source/target: two hex bytes, word numbers counted from 1; 0000 = the
    /// whole synset). `@` hypernyms and `!` antonyms are kept.
    fn pointers(&mut self, id: u32, f: &[&str], p_at: usize, all_words: &[String]) {
        let ptrs: usize = f.get(p_at).and_then(|v| v.parse().ok()).unwrap_or(0);
        for k in 0..ptrs {
            let q = &f[(p_at + 1 + 4 * k).min(f.len())..];
            if q.len() >= 4
                && q[0] == "@"
                && let Ok(target) = q[1].parse::<u64>()
            {
                self.hypernym_ptrs
                    .push((id, if q[2] == "v" { 1 } else { 0 }, target));
            }
            if q.len() < 4 || q[0] != "!" {
                continue;
            }
            let (Ok(target), Ok(st)) = (q[1].parse::<u64>(), u16::from_str_radix(q[3], 16)) else {
                continue;
            };
            let src = (st >> 8) as usize;
            if let Some(w) = src.checked_sub(1).and_then(|i| all_words.get(i)) {
                self.antonym_ptrs
                    .push((w.clone(), target_pos(q[2]), target, (st & 0xff) as usize));
            }
        }
    }

    /// Resolves the pointers now that every synset is known.
    fn finish(mut self) -> Database {
        for (src, tpos, target, tw) in std::mem::take(&mut self.antonym_ptrs) {
            let Some(t) = tw
                .checked_sub(1)
                .and_then(|i| self.by_offset.get(&(tpos, target))?.get(i))
            else {
                continue;
            };
            if !src.contains('_') && !t.contains('_') && *t != src {
                self.db.antonyms.entry(src).or_default().insert(t.clone());
            }
        }
        for (src, tpos, target) in std::mem::take(&mut self.hypernym_ptrs) {
            if let Some(&t) = self.id_by_offset.get(&(tpos, target)) {
                self.db.hypernyms.entry(src).or_default().push(t);
            }
        }
        self.db
    }
}
