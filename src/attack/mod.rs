//! Robustness attacks in the spirit of TextFlint's SwapSynWordNet and AddSentDiverse, built on
//! WordNet alone (no CoreNLP, no tagger). Our rules:
//!
//! **SwapSynWordNet** (GLUE texts, SQuAD contexts). A text is split into tokens: runs of
//! letters / digits (apostrophes inside) are words, every other non-space character is one
//! punctuation token. Candidates are alphabetic words that are not stop words, do not overlap a
//! protected span (a SQuAD gold answer) and have a single-word WordNet synonym of the same
//! part of speech. Names and numbers are never candidates: capitalised words inside a
//! sentence, sentence-initial ones that WordNet knows only as names or that start a run of
//! capitalised words ("United States"), all-capitals words, number words ("eight"). Without a
//! tagger the part of speech is the word's dominant one in WordNet (most synsets over its
//! lemmas, see [`WordNet::dominant_pos`]); the synonym shares a common-word synset of that part
//! of speech (not a name's: "California" → "CA") and is re-inflected like the word (`stayed` →
//! `remained`).
//! max(1, min(10, ⌊0.1 · #tokens⌋)) candidates are drawn at random (all of them when there are
//! fewer), each replaced by a random synonym, keeping an initial capital or full upper case.
//! SQuAD answers keep their text; their `answer_start` moves with the edits before them.
//!
//! **AddSentDiverse** (SQuAD): a distractor sentence made from the question is inserted into
//! the context; its grammar is in [`distractor`](mod@distractor).
//!
//! Every choice comes from a generator seeded with the seed and the example's position, so the
//! same seed gives the same output.

pub mod distractor;
pub mod files;
pub mod phrases;

pub use distractor::distractor;
use distractor::insertion_point;
pub use phrases::fake_answer;

use std::path::Path;

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;

use crate::lexicon::wordnet::WordNet;
pub use crate::lexicon::words::tokens;
use crate::lexicon::words::{apply_edits, capitalised, is_name_or_number, is_stop, match_case};
use crate::tasks::glue::{GlueTask, has_header, text_columns};
use crate::tasks::squad::SquadExample;
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

/// The number of words SwapSynWordNet replaces in a text of `n_tokens` tokens.
pub fn swap_count(n_tokens: usize) -> usize {
    (n_tokens / 10).clamp(1, 10)
}

/// Replacements made in a text: (byte start, byte end, new text), sorted.
pub type Edits = Vec<(usize, usize, String)>;

fn apply(text: &str, edits: &Edits) -> String {
    apply_edits(text, edits.iter().map(|(a, b, new)| (*a, *b, new.as_str())))
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
        .enumerate()
        .filter(|&(i, &(a, b, word))| {
            word && !protected.iter().any(|&(p, q)| a < q && p < b)
                && text[a..b].chars().all(char::is_alphabetic)
                && text[a..b].chars().count() > 2
                && !is_stop(&text[a..b])
                && !is_name_or_number(text, &toks, i, wn)
        })
        .filter_map(|(_, &(a, b, _))| {
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

/// Writes SQuAD examples in the official JSON layout: one article per run of examples with
/// the same title (in order, titles kept), one paragraph per run of questions over the same
/// context.
pub fn write_squad(path: &Path, examples: &[SquadExample]) -> Result<()> {
    let mut articles: Vec<serde_json::Value> = Vec::new();
    let mut start = 0;
    for i in 1..=examples.len() {
        if i < examples.len() && examples[i].title == examples[start].title {
            continue;
        }
        let article = &examples[start..i];
        let paras: Vec<serde_json::Value> = paragraphs(article)
            .into_iter()
            .map(|r| {
                let qas: Vec<serde_json::Value> = article[r.clone()]
                    .iter()
                    .map(|e| {
                        serde_json::json!({
                            "id": e.id,
                            "question": e.question,
                            "answers": e.answers.iter().map(|(t, s)| serde_json::json!({"text": t, "answer_start": s})).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                serde_json::json!({"context": article[r.start].context, "qas": qas})
            })
            .collect();
        articles.push(serde_json::json!({"title": examples[start].title, "paragraphs": paras}));
        start = i;
    }
    let doc = serde_json::json!({"version": "1.1", "data": articles});
    crate::io::write_atomic(path, doc.to_string().as_bytes())
}

/// SwapSynWordNet on a GLUE file: text columns transformed, every other byte of the file kept
/// (header, other columns, byte-order mark). Returns the transformed file's text.
pub fn attack_glue_file(task: GlueTask, path: &Path, wn: &WordNet, seed: u64) -> Result<String> {
    if !task.is_glue() {
        return Err(crate::Error::Config(format!(
            "{}: attacks apply to GLUE and SQuAD (contrast sets are evaluated with evaluate --contrast)",
            task.dir_name()
        )));
    }
    // Validates the file first, so that malformed rows are reported with their line.
    crate::tasks::glue::read_glue(task, path)?;
    let bytes = crate::io::read::read(path, crate::io::limit::DATA)?;
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
