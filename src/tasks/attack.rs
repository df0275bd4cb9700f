//! Robustness attacks in the spirit of TextFlint's SwapSynWordNet and AddSentDiverse, built on
//! WordNet alone (no CoreNLP, no tagger). Our rules:
//!
//! **SwapSynWordNet** (GLUE texts, SQuAD contexts). A text is split into tokens: runs of
//! letters / digits (apostrophes inside) are words, every other non-space character is one
//! punctuation token. Candidates are alphabetic words that are not stop words, do not overlap a
//! protected span (a SQuAD gold answer) and have a single-word WordNet synonym of the same
//! part of speech. Without a tagger the part of speech is the word's dominant one in WordNet
//! (most synsets over its lemmas, see [`WordNet::dominant_pos`]); the synonym shares a synset
//! of that part of speech and is re-inflected like the word (`stayed` → `remained`).
//! max(1, min(10, ⌊0.1 · #tokens⌋)) candidates are drawn at random (all of them when there are
//! fewer), each replaced by a random synonym, keeping an initial capital or full upper case.
//! SQuAD answers keep their text; their `answer_start` moves with the edits before them.
//!
//! **AddSentDiverse** (SQuAD). A distractor sentence is made from the question: the leading
//! wh-word (and the auxiliary after it) goes, numbers become other numbers, capitalised words
//! after the first become other names, and each other content word with a WordNet antonym is
//! replaced by one (when nothing changed, the first content word is swapped for a name). A fake
//! answer of the gold answer's kind is put in front: a different number for a number, another
//! month for a date, another name for a capitalised answer, else a WordNet antonym of its last
//! word or a generic noun. The sentence, "<fake answer> <changed question>.", is inserted at a
//! random sentence boundary of the context that is not inside a gold answer; answers after it
//! move by its length.
//!
//! Every choice comes from a generator seeded with the seed and the example's position, so the
//! same seed gives the same output.

use std::path::Path;

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::glue::{GlueTask, has_header, text_columns};
use super::squad::SquadExample;
use crate::lexicon::wordnet::WordNet;
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttackKind {
    SwapSynWordnet,
    AddSentDiverse,
}

impl AttackKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "swap-syn-wordnet" => Some(Self::SwapSynWordnet),
            "add-sent-diverse" => Some(Self::AddSentDiverse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::SwapSynWordnet => "SwapSynWordNet",
            Self::AddSentDiverse => "AddSentDiverse",
        }
    }
}

const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "s",
    "t",
    "one",
    "may",
    "might",
    "must",
    "many",
    "much",
];

fn is_stop(w: &str) -> bool {
    STOP_WORDS.contains(&w.to_lowercase().as_str())
}

/// Byte ranges of the tokens of `text` and whether each is a word.
pub fn tokens(text: &str) -> Vec<(usize, usize, bool)> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = it.peek() {
                let inner_apostrophe = d == '\''
                    && text[j + 1..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphanumeric);
                if d.is_alphanumeric() || inner_apostrophe {
                    end = j + d.len_utf8();
                    it.next();
                } else {
                    break;
                }
            }
            out.push((i, end, true));
        } else {
            out.push((i, i + c.len_utf8(), false));
        }
    }
    out
}

/// The number of words SwapSynWordNet replaces in a text of `n_tokens` tokens.
pub fn swap_count(n_tokens: usize) -> usize {
    (n_tokens / 10).clamp(1, 10)
}

fn match_case(model: &str, w: &str) -> String {
    let upper = model.chars().count() > 1 && model.chars().all(|c| !c.is_lowercase());
    if upper {
        return w.to_uppercase();
    }
    if model.chars().next().is_some_and(char::is_uppercase) {
        let mut c = w.chars();
        return c
            .next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default();
    }
    w.to_string()
}

/// Replacements made in a text: (byte start, byte end, new text), sorted.
pub type Edits = Vec<(usize, usize, String)>;

fn apply(text: &str, edits: &Edits) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut at = 0;
    for (a, b, new) in edits {
        out.push_str(&text[at..*a]);
        out.push_str(new);
        at = *b;
    }
    out.push_str(&text[at..]);
    out
}

/// Where byte `pos` of the old text (not inside an edit) lands in the new one.
fn moved(pos: usize, edits: &Edits) -> usize {
    let mut p = pos as isize;
    for (a, b, new) in edits {
        if *b <= pos {
            p += new.len() as isize - (b - a) as isize;
        }
    }
    p as usize
}

/// SwapSynWordNet on one text; `protected` byte ranges are left alone.
pub fn swap_synonyms(
    text: &str,
    wn: &WordNet,
    rng: &mut ChaCha8Rng,
    protected: &[(usize, usize)],
) -> Edits {
    let toks = tokens(text);
    let mut cands: Vec<(usize, usize, Vec<String>)> = toks
        .iter()
        .filter(|&&(a, b, word)| {
            word && !protected.iter().any(|&(p, q)| a < q && p < b)
                && text[a..b].chars().all(char::is_alphabetic)
                && !is_stop(&text[a..b])
        })
        .filter_map(|&(a, b, _)| {
            let syn = wn.same_pos_synonyms(&text[a..b]);
            (!syn.is_empty()).then_some((a, b, syn))
        })
        .collect();
    cands.shuffle(rng);
    cands.truncate(swap_count(toks.len()));
    let mut edits: Edits = cands
        .into_iter()
        .map(|(a, b, syn)| {
            let s = syn.choose(rng).expect("non-empty");
            (a, b, match_case(&text[a..b], s))
        })
        .collect();
    edits.sort();
    edits
}

fn rng_for(seed: u64, index: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64)
}

fn char_to_byte(s: &str, c: usize) -> usize {
    s.char_indices().nth(c).map(|(b, _)| b).unwrap_or(s.len())
}

fn byte_to_char(s: &str, b: usize) -> usize {
    s[..b].chars().count()
}

/// Paragraphs of a SQuAD example list: runs of questions over the same context.
fn paragraphs(examples: &[SquadExample]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=examples.len() {
        if i == examples.len() || examples[i].context != examples[start].context {
            out.push(start..i);
            start = i;
        }
    }
    out
}

/// Applies `edits` to the paragraph's shared context and moves every answer.
fn edit_paragraph(group: &mut [SquadExample], edits: &Edits) {
    let old = group[0].context.clone();
    let new = apply(&old, edits);
    for e in group {
        for (_, start) in &mut e.answers {
            let b = moved(char_to_byte(&old, *start), edits);
            *start = byte_to_char(&new, b);
        }
        e.context = new.clone();
    }
}

fn answer_spans(group: &[SquadExample]) -> Vec<(usize, usize)> {
    group
        .iter()
        .flat_map(|e| {
            e.answers.iter().map(|(t, s)| {
                let a = char_to_byte(&e.context, *s);
                (a, a + t.len())
            })
        })
        .collect()
}

/// The attack on a SQuAD set, paragraph by paragraph (questions of one paragraph share its
/// transformed context). Returns the transformed copy.
pub fn attack_squad(
    kind: AttackKind,
    examples: &[SquadExample],
    wn: &WordNet,
    seed: u64,
) -> Vec<SquadExample> {
    let mut out = examples.to_vec();
    for (pi, range) in paragraphs(examples).into_iter().enumerate() {
        let group = &mut out[range];
        let mut rng = rng_for(seed, pi);
        let spans = answer_spans(group);
        let ctx = group[0].context.clone();
        let edits = match kind {
            AttackKind::SwapSynWordnet => swap_synonyms(&ctx, wn, &mut rng, &spans),
            AttackKind::AddSentDiverse => {
                let q = &group[0];
                let answer = q.answers.first().map(|a| a.0.as_str()).unwrap_or("");
                let sentence = distractor(&q.question, answer, wn, &mut rng);
                let at = insertion_point(&ctx, &spans, &mut rng);
                let text = if at == ctx.len() {
                    format!(" {sentence}")
                } else {
                    format!("{sentence} ")
                };
                vec![(at, at, text)]
            }
        };
        edit_paragraph(group, &edits);
    }
    out
}

/// A sentence boundary (after ". ", "! ", "? ", or the text's start / end) not inside a span.
fn insertion_point(ctx: &str, spans: &[(usize, usize)], rng: &mut ChaCha8Rng) -> usize {
    let mut points = vec![0, ctx.len()];
    for (i, _) in ctx.match_indices(['.', '!', '?']) {
        let rest = &ctx[i + 1..];
        if rest.starts_with(' ') && rest[1..].chars().next().is_some_and(char::is_uppercase) {
            points.push(i + 2);
        }
    }
    points.retain(|&p| !spans.iter().any(|&(a, b)| a < p && p < b));
    *points
        .choose(rng)
        .expect("the text's end is always a boundary")
}

const NAMES: &[&str] = &[
    "Alvarez",
    "Brightwater",
    "Castellan",
    "Dunmore",
    "Elsworth",
    "Fairholm",
    "Greystone",
    "Halloran",
    "Ingersoll",
    "Jarrow",
    "Kestrel",
    "Lindqvist",
    "Marlowe",
    "Northcott",
];
const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const NOUNS: &[&str] = &[
    "pottery",
    "a lighthouse",
    "the harbour",
    "copper",
    "a festival",
    "the orchard",
];
const WH: &[&str] = &[
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
];
const AUX: &[&str] = &[
    "is", "are", "was", "were", "did", "does", "do", "has", "have", "had", "can", "could", "will",
    "would", "many", "much", "long", "far", "old",
];

fn other_number(s: &str, rng: &mut ChaCha8Rng) -> String {
    match s.parse::<u64>() {
        Ok(n) if (1000..=2100).contains(&n) && s.len() == 4 => {
            let d = rng.random_range(1..=30);
            format!("{}", if rng.random_bool(0.5) { n + d } else { n - d })
        }
        Ok(n) => format!("{}", n + rng.random_range(1..=9)),
        Err(_) => format!("{}", rng.random_range(2..=99)),
    }
}

fn other_name(not: &str, rng: &mut ChaCha8Rng) -> String {
    loop {
        let n = NAMES.choose(rng).expect("names");
        if *n != not {
            return n.to_string();
        }
    }
}

/// A fake answer of the same kind as `answer` (see the module doc).
pub fn fake_answer(answer: &str, wn: &WordNet, rng: &mut ChaCha8Rng) -> String {
    let words: Vec<&str> = tokens(answer)
        .into_iter()
        .filter(|t| t.2)
        .map(|(a, b, _)| &answer[a..b])
        .collect();
    if let Some(m) = words.iter().find(|w| MONTHS.contains(w)) {
        let other = MONTHS.iter().filter(|x| *x != m).collect::<Vec<_>>();
        return format!(
            "{} {}",
            other.choose(rng).expect("months"),
            rng.random_range(1..=28)
        );
    }
    if let Some(n) = words.iter().find(|w| w.chars().all(|c| c.is_ascii_digit())) {
        return other_number(n, rng);
    }
    if words
        .first()
        .is_some_and(|w| w.chars().next().is_some_and(char::is_uppercase))
    {
        return other_name(words[0], rng);
    }
    if let Some(last) = words.last()
        && let Some(a) = wn.antonyms(last).into_iter().next()
    {
        return a;
    }
    NOUNS.choose(rng).expect("nouns").to_string()
}

/// The distractor sentence for a question (see the module doc).
pub fn distractor(question: &str, answer: &str, wn: &WordNet, rng: &mut ChaCha8Rng) -> String {
    let toks: Vec<(usize, usize, bool)> = tokens(question)
        .into_iter()
        .filter(|t| !(t.0 + 1 == t.1 && &question[t.0..t.1] == "?"))
        .collect();
    let mut words: Vec<String> = toks
        .iter()
        .map(|&(a, b, _)| question[a..b].into())
        .collect();
    let is_word: Vec<bool> = toks.iter().map(|t| t.2).collect();
    let mut skip = 0;
    if words
        .first()
        .is_some_and(|w| WH.contains(&w.to_lowercase().as_str()))
    {
        skip = 1;
        while words
            .get(skip)
            .is_some_and(|w| AUX.contains(&w.to_lowercase().as_str()))
        {
            skip += 1;
        }
    }
    let mut changed = false;
    let mut first_content = None;
    let mut entity = vec![false; words.len()];
    for i in skip..words.len() {
        if !is_word[i] && words[i] == "." && i > 0 && entity[i - 1] {
            words[i].clear();
            entity[i] = true;
            continue;
        }
        if !is_word[i] || is_stop(&words[i]) {
            continue;
        }
        let w = words[i].clone();
        if w.chars().all(|c| c.is_ascii_digit()) {
            words[i] = other_number(&w, rng);
            changed = true;
        } else if i > 0 && w.chars().next().is_some_and(char::is_uppercase) {
            // A run of capitalised words (and the dots of initials, "U.S.") is one entity: it
            // becomes one other name.
            if i > skip && entity[i - 1] {
                words[i].clear();
            } else {
                words[i] = other_name(&w, rng);
            }
            entity[i] = true;
            changed = true;
        } else if let Some(a) = wn.antonyms(&w.to_lowercase()).into_iter().next() {
            words[i] = match_case(&w, &a);
            changed = true;
        } else if first_content.is_none() {
            first_content = Some(i);
        }
    }
    if !changed && let Some(i) = first_content {
        words[i] = other_name(&words[i], rng);
    }
    let mut body = String::new();
    for (i, w) in words.iter().enumerate().skip(skip) {
        if w.is_empty() {
            continue;
        }
        if i > skip && is_word[i] {
            body.push(' ');
        }
        body.push_str(w);
    }
    format!("{} {}.", fake_answer(answer, wn, rng), body.trim())
}

/// Writes SQuAD examples in the official JSON layout (one article; one paragraph per run of
/// questions over the same context).
pub fn write_squad(path: &Path, examples: &[SquadExample], title: &str) -> Result<()> {
    let paras: Vec<serde_json::Value> = paragraphs(examples)
        .into_iter()
        .map(|r| {
            let qas: Vec<serde_json::Value> = examples[r.clone()]
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "id": e.id,
                        "question": e.question,
                        "answers": e.answers.iter().map(|(t, s)| serde_json::json!({"text": t, "answer_start": s})).collect::<Vec<_>>(),
                    })
                })
                .collect();
            serde_json::json!({"context": examples[r.start].context, "qas": qas})
        })
        .collect();
    let doc =
        serde_json::json!({"version": "1.1", "data": [{"title": title, "paragraphs": paras}]});
    crate::error::write_atomic(path, doc.to_string().as_bytes())
}

/// SwapSynWordNet on a GLUE file: text columns transformed, every other byte of the file kept
/// (header, other columns, byte-order mark). Returns the transformed file's text.
pub fn attack_glue_file(task: GlueTask, path: &Path, wn: &WordNet, seed: u64) -> Result<String> {
    // Validates the file first, so that malformed rows are reported with their line.
    super::glue::read_glue(task, path)?;
    let bytes = crate::error::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(b) => ("\u{feff}", b),
        None => ("", text.as_ref()),
    };
    let mut lines = body.split('\n');
    let mut out = String::from(bom);
    let header = if has_header(task) {
        let h = lines.next().unwrap_or("");
        out.push_str(h);
        out.push('\n');
        Some(h.trim_end_matches('\r'))
    } else {
        None
    };
    let (ia, ib) = text_columns(task, header)
        .ok_or_else(|| Error::Input(format!("{}:1: missing text column", path.display())))?;
    let lines: Vec<&str> = lines.collect();
    for (n, line) in lines.iter().enumerate() {
        let mut rng = rng_for(seed, n);
        let mut f: Vec<String> = line.split('\t').map(str::to_string).collect();
        if !line.trim().is_empty() {
            for i in std::iter::once(ia).chain(ib) {
                if let Some(t) = f.get(i).cloned() {
                    f[i] = apply(&t, &swap_synonyms(&t, wn, &mut rng, &[]));
                }
            }
        }
        out.push_str(&f.join("\t"));
        if n + 1 < lines.len() {
            out.push('\n');
        }
    }
    Ok(out)
}
