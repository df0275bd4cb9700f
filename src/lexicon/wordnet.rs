//! WordNet 3.0 in the standard database format (Debian's `wordnet-base`, /usr/share/wordnet):
//! synsets from `data.{noun,verb,adj,adv}`, inflection exceptions from `{pos}.exc`, and
//! morphy-style lemmatisation (exceptions first, then the detachment rules).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::Result;

pub use super::wordnet_files::POS;

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

/// The inflection of a word form relative to its lemma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Base,
    /// Noun plural or verb third person singular (`-s`).
    S,
    /// Past tense or past participle (`-ed`).
    Past,
    /// `-ing`.
    Gerund,
    Comparative,
    Superlative,
}

impl Form {
    /// The form of `word`, reduced to a lemma of part of speech `pos` through `infl` (a
    /// detachment rule) or, when `infl` is empty and the word differs from the lemma, through
    /// an exception list entry (classified by the word's ending).
    pub fn of(word: &str, lemma: &str, infl: &Inflection, pos: usize) -> Form {
        let w = word.to_lowercase();
        if w == lemma {
            return Form::Base;
        }
        let ending = if infl.strip.is_empty() {
            w.as_str()
        } else {
            infl.strip.as_str()
        };
        match pos {
            0 => Form::S,
            1 if ending.ends_with("ing") => Form::Gerund,
            1 if ending.ends_with('s') => Form::S,
            1 => Form::Past,
            2 | 3 if ending.ends_with("est") || ending.ends_with("st") => Form::Superlative,
            2 | 3 => Form::Comparative,
            _ => Form::Base,
        }
    }
}

/// Vowel groups of a word (a final silent `e` not counted): a rough syllable count.
fn syllables(w: &str) -> usize {
    let w = w.strip_suffix('e').unwrap_or(w);
    let mut n = 0;
    let mut prev = false;
    for c in w.chars() {
        let v = "aeiouy".contains(c);
        if v && !prev {
            n += 1;
        }
        prev = v;
    }
    n.max(1)
}

/// Verbs whose past tense is the lemma itself; WordNet's exception list leaves them out.
const SAME_PAST: [&str; 24] = [
    "beat",
    "bet",
    "bid",
    "broadcast",
    "burst",
    "cast",
    "cost",
    "cut",
    "forecast",
    "hit",
    "hurt",
    "let",
    "put",
    "quit",
    "read",
    "rid",
    "set",
    "shed",
    "shut",
    "slit",
    "split",
    "spread",
    "thrust",
    "upset",
];

/// A one-syllable word ending consonant–vowel–consonant doubles its last letter before
/// -ed / -ing / -er / -est ("stop" → "stopped", "big" → "bigger"; not "fix", "show", "stay").
fn doubled(w: &str) -> String {
    let c: Vec<char> = w.chars().collect();
    let vowel = |x: char| "aeiou".contains(x);
    let n = c.len();
    if n >= 3
        && syllables(w) == 1
        && !vowel(c[n - 1])
        && !"wxy".contains(c[n - 1])
        && vowel(c[n - 2])
        && !vowel(c[n - 3])
        && !(c[n - 3] == 'u' || (n >= 4 && c[n - 3] == 'q'))
    {
        format!("{w}{}", c[n - 1])
    } else {
        w.to_string()
    }
}

fn consonant_y(w: &str) -> Option<&str> {
    w.strip_suffix('y')
        .filter(|stem| !stem.is_empty() && !stem.ends_with(['a', 'e', 'i', 'o', 'u']))
}

pub struct WordNet {
    /// Single-word lemmas (lower case) → ids of their synsets (index into `synsets`).
    lemma_synsets: HashMap<String, Vec<u32>>,
    /// Per synset: part of speech index and its single-word lemmas.
    synsets: Vec<(u8, Vec<String>)>,
    /// Inflected form → base forms, per part of speech.
    exceptions: [HashMap<String, Vec<String>>; 4],
    /// Single-word lemma → its direct antonyms (WordNet's lexical `!` pointers).
    antonyms: HashMap<String, BTreeSet<String>>,
    /// (synset id, lemma) pairs written with a capital in the synset: a name ("California",
    /// "CA" in {California, Golden State, CA}), not a common word.
    capitalized: std::collections::HashSet<(u32, String)>,
    /// Synset id → its direct hypernyms (`@` pointers).
    hypernyms: HashMap<u32, Vec<u32>>,
    pub dir: PathBuf,
}

impl WordNet {
    pub fn open(dir: &Path) -> Result<Self> {
        let d = super::wordnet_files::read(dir)?;
        Ok(Self {
            hypernyms: d.hypernyms,
            lemma_synsets: d.lemma_synsets,
            synsets: d.synsets,
            exceptions: d.exceptions,
            antonyms: d.antonyms,
            capitalized: d.capitalized,
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
                    if self.has_pos(b, p) && !out.iter().any(|(l, _, q)| l == b && *q == Some(p)) {
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
                    if self.has_pos(&lemma, p)
                        && !out.iter().any(|(l, _, q)| *l == lemma && *q == Some(p))
                    {
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

    /// Direct antonyms of a word form (through its lemmas), re-inflected like [`Self::synonyms`].
    pub fn antonyms(&self, word: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (lemma, infl, _) in self.lemmas(word) {
            for a in self.antonyms.get(&lemma).into_iter().flatten() {
                match a.strip_suffix(infl.add.as_str()) {
                    Some(stem) if !infl.strip.is_empty() => {
                        out.insert(format!("{stem}{}", infl.strip))
                    }
                    _ => out.insert(a.clone()),
                };
            }
        }
        out
    }

    /// Number of synsets of a lemma per part of speech (noun, verb, adj, adv).
    pub fn pos_counts(&self, lemma: &str) -> [usize; 4] {
        let mut c = [0; 4];
        for &id in self
            .lemma_synsets
            .get(lemma)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            c[self.synsets[id as usize].0 as usize] += 1;
        }
        c
    }

    /// The part of speech a word form most likely has without a tagger: the one with the most
    /// synsets over its lemmas (ties: noun, verb, adjective, adverb), with that lemma and how
    /// it was inflected.
    pub fn dominant_pos(&self, word: &str) -> Option<(usize, String, Inflection)> {
        let mut best: Option<(usize, usize, String, Inflection)> = None;
        for (lemma, infl, pos) in self.lemmas(word) {
            let counts = self.pos_counts(&lemma);
            for (p, &n) in counts.iter().enumerate() {
                if pos.is_some_and(|q| q != p) || n == 0 {
                    continue;
                }
                if best.as_ref().is_none_or(|b| n > b.0) {
                    best = Some((n, p, lemma.clone(), infl.clone()));
                }
            }
        }
        best.map(|(_, p, l, i)| (p, l, i))
    }

    /// Whether WordNet writes this lemma only as a name (capitalised in every synset it is in:
    /// "california", "paris"); false for unknown words.
    pub fn is_proper(&self, lemma: &str) -> bool {
        let ids = self
            .lemma_synsets
            .get(lemma)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        !ids.is_empty()
            && ids
                .iter()
                .all(|&id| self.capitalized.contains(&(id, lemma.to_string())))
    }

    /// Single-word synonyms of a word form that share a synset of its dominant part of speech
    /// (see [`Self::dominant_pos`]), inflected as the word was. Only common-word senses count:
    /// synsets where the lemma is a name are skipped, and so are synonyms written as names
    /// ("CA" for "California", "Ca" for calcium).
    pub fn same_pos_synonyms(&self, word: &str) -> Vec<String> {
        let Some((pos, lemma, infl)) = self.dominant_pos(word) else {
            return Vec::new();
        };
        let w = word.to_lowercase();
        let mut common = BTreeSet::new();
        for id in self.common_senses(&lemma, pos) {
            common.extend(
                self.synsets[id as usize]
                    .1
                    .iter()
                    .filter(|s| **s != lemma && !self.capitalized.contains(&(id, (*s).clone())))
                    .cloned(),
            );
        }
        let form = Form::of(word, &lemma, &infl, pos);
        let mut out = BTreeSet::new();
        for s in common {
            // Comparatives and superlatives of multi-syllable adjectives take "more" / "most";
            // a synonym that cannot be inflected by a suffix is left out.
            if matches!(form, Form::Comparative | Form::Superlative)
                && (syllables(&s) > 1 || s.ends_with("er") || s.ends_with("est"))
                && self.inflected_forms(&s, pos).is_empty()
            {
                continue;
            }
            if s.chars().count() < 3 {
                continue;
            }
            let f = self.inflect(&s, form, pos);
            if f != w && f.chars().all(|c| c.is_alphabetic()) && f.chars().count() > 2 {
                out.insert(f);
            }
        }
        out.into_iter().collect()
    }

    /// The synsets of part of speech `pos` where `lemma` is a common word (not written as a
    /// name).
    fn common_senses<'s>(&'s self, lemma: &'s str, pos: usize) -> impl Iterator<Item = u32> + 's {
        self.lemma_synsets
            .get(lemma)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .copied()
            .filter(move |&id| {
                self.synsets[id as usize].0 as usize == pos
                    && !self.capitalized.contains(&(id, lemma.to_string()))
            })
    }

    /// Antonyms of a word form's lemma in its dominant part of speech, inflected like the word
    /// ("wildest" → "tamest"; "dynamics" is a noun, so not "undynamic"), sorted, without the word
    /// itself. `of_synonyms` adds the antonyms of the lemma's synonyms (as Wang et al. 2021's code
    /// does).
    pub fn same_pos_antonyms(&self, word: &str, of_synonyms: bool) -> Vec<String> {
        let Some((pos, lemma, infl)) = self.dominant_pos(word) else {
            return Vec::new();
        };
        let form = Form::of(word, &lemma, &infl, pos);
        let mut lemmas: Vec<String> = self.antonyms(&lemma).into_iter().collect();
        if of_synonyms {
            for s in self.synonyms_of_lemma(&lemma, Some(pos)) {
                lemmas.extend(self.antonyms(&s));
            }
        }
        let w = word.to_lowercase();
        let mut out: Vec<String> = lemmas
            .iter()
            .filter(|a| self.pos_counts(a)[pos] > 0)
            .map(|a| self.inflect(a, form, pos))
            .filter(|a| a.chars().all(char::is_alphabetic) && *a != w)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// `lemma` (of the same part of speech) inflected as `word` is ("played", "swim" →
    /// "swam"). Comparatives and superlatives of a multi-syllable adjective stay in the base
    /// form (no "more" / "most" is added). `lemma` itself when `word` is unknown.
    pub fn inflect_as(&self, word: &str, lemma: &str) -> String {
        let Some((pos, word_lemma, infl)) = self.dominant_pos(word) else {
            return lemma.to_string();
        };
        let form = Form::of(word, &word_lemma, &infl, pos);
        if matches!(form, Form::Comparative | Form::Superlative)
            && syllables(lemma) > 1
            && self.inflected_forms(lemma, pos).is_empty()
        {
            return lemma.to_string();
        }
        self.inflect(lemma, form, pos)
    }

    /// Single-word lemmas of the direct hypernyms of a word form's common-word senses in its
    /// dominant part of speech ("oak" → "tree"), inflected as the word was.
    pub fn hypernyms(&self, word: &str) -> Vec<String> {
        let Some((pos, lemma, infl)) = self.dominant_pos(word) else {
            return Vec::new();
        };
        let form = Form::of(word, &lemma, &infl, pos);
        let mut out = BTreeSet::new();
        for id in self.common_senses(&lemma, pos) {
            for &h in self.hypernyms.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
                for w in &self.synsets[h as usize].1 {
                    if !self.capitalized.contains(&(h, w.clone())) && w.chars().count() > 2 {
                        out.insert(self.inflect(w, form, pos));
                    }
                }
            }
        }
        out.into_iter().collect()
    }

    /// The other inflections of a word form's lemma in its dominant part of speech
    /// ("cities" → "city"; "ran" → "run", "running", "runs").
    pub fn other_inflections(&self, word: &str) -> Vec<String> {
        let Some((pos, lemma, infl)) = self.dominant_pos(word) else {
            return Vec::new();
        };
        let form = Form::of(word, &lemma, &infl, pos);
        let forms: &[Form] = match pos {
            0 => &[Form::Base, Form::S],
            1 => &[Form::Base, Form::S, Form::Past, Form::Gerund],
            _ => &[],
        };
        let w = word.to_lowercase();
        let mut out: Vec<String> = forms
            .iter()
            .filter(|f| **f != form)
            .map(|f| self.inflect(&lemma, *f, pos))
            .filter(|f| *f != w)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The inflected forms WordNet's exception list gives for a base form of a part of speech
    /// (`go` → `gone`, `went`; `stop` → `stopped`, `stopping`).
    pub fn inflected_forms(&self, base: &str, pos: usize) -> Vec<String> {
        let mut out: Vec<String> = self.exceptions[pos]
            .iter()
            .filter(|(_, bases)| bases.iter().any(|b| b == base))
            .map(|(form, _)| form.clone())
            .collect();
        out.sort();
        out
    }

    /// `lemma` (of part of speech `pos`) in `form`: WordNet's exception list where it has the
    /// form (`keep` → `kept`, `alumnus` → `alumni`, `stop` → `stopping`), else the regular
    /// spelling rules (`associate` → `associating`, `apply` → `applied`).
    pub fn inflect(&self, lemma: &str, form: Form, pos: usize) -> String {
        if form == Form::Base || pos > 3 {
            return lemma.to_string();
        }
        let mut forms = self.inflected_forms(lemma, pos);
        // Past tenses before participles in `-n` / `-ne` ("went" before "gone", "took" before
        // "taken").
        forms.sort_by_key(|f| f.ends_with('n') || f.ends_with("ne"));
        let irregular = forms.into_iter().find(|f| match form {
            Form::Gerund => f.ends_with("ing"),
            Form::S => pos == 0 || (f.ends_with('s') && !f.ends_with("ss")),
            Form::Past => !f.ends_with("ing") && (!f.ends_with('s') || f.ends_with("ss")),
            Form::Comparative => !f.ends_with("st"),
            Form::Superlative => f.ends_with("st"),
            Form::Base => false,
        });
        if let Some(f) = irregular {
            return f;
        }
        let l = lemma;
        match form {
            Form::S if l.ends_with('s') && !l.ends_with("ss") && pos == 0 => l.to_string(),
            Form::S if l.ends_with(['s', 'x', 'z']) || l.ends_with("ch") || l.ends_with("sh") => {
                format!("{l}es")
            }
            Form::S => match consonant_y(l) {
                Some(stem) => format!("{stem}ies"),
                None => format!("{l}s"),
            },
            Form::Past if SAME_PAST.contains(&l) => l.to_string(),
            Form::Past => match consonant_y(l) {
                Some(stem) => format!("{stem}ied"),
                None if l.ends_with('e') => format!("{l}d"),
                None => format!("{}ed", doubled(l)),
            },
            Form::Gerund => {
                if let Some(stem) = l.strip_suffix("ie") {
                    format!("{stem}ying")
                } else if l.ends_with('e') && !l.ends_with("ee") && l.len() > 2 {
                    format!("{}ing", &l[..l.len() - 1])
                } else {
                    format!("{}ing", doubled(l))
                }
            }
            Form::Comparative | Form::Superlative => {
                let suffix = if form == Form::Comparative {
                    "er"
                } else {
                    "est"
                };
                match consonant_y(l) {
                    Some(stem) => format!("{stem}i{suffix}"),
                    None if l.ends_with('e') => format!("{l}{}", &suffix[1..]),
                    None => format!("{}{suffix}", doubled(l)),
                }
            }
            Form::Base => l.to_string(),
        }
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
