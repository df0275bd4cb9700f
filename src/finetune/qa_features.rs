//! SQuAD's windows: each question with its context cut into the windows the model reads, as
//! the original BERT / ELECTRA SQuAD code cuts them. The question is cut to `max_query_len`
//! tokens; the context into windows of at most `max_seq_len − |question| − 3` tokens whose
//! starts are `doc_stride` tokens apart (the last window ends at the context's end);
//! `[CLS] question [SEP] window [SEP]`, segment ids 0 / 1. A training window that does not hold
//! the whole answer points at `[CLS]` (start = end = 0). Each context token knows whether this
//! is its max-context window (BERT's rule: of the windows holding it, the one where
//! min(tokens left, tokens right) + 0.01 · window length is largest).

use serde::{Deserialize, Serialize};

use crate::tasks::squad::SquadExample;
use crate::text::WordPieceTokenizer;
use crate::{Error, Result};

/// Feature and decoding settings (the BERT / ELECTRA defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QaOptions {
    pub max_seq_len: usize,
    pub doc_stride: usize,
    pub max_query_len: usize,
    pub n_best: usize,
    pub max_answer_len: usize,
    /// The joint head's beam: starts kept, and ends kept per start.
    #[serde(default = "default_beam")]
    pub beam: usize,
}

fn default_beam() -> usize {
    20
}

impl Default for QaOptions {
    fn default() -> Self {
        Self {
            max_seq_len: 384,
            doc_stride: 128,
            max_query_len: 64,
            n_best: 20,
            max_answer_len: 30,
            beam: default_beam(),
        }
    }
}

/// One window of one question.
#[derive(Clone, Debug, PartialEq)]
pub struct QaFeature {
    /// Index of the question in the example list.
    pub example: usize,
    pub ids: Vec<u32>,
    pub types: Vec<u32>,
    /// Byte range in the context of each context token; `None` for the question and specials.
    pub spans: Vec<Option<(usize, usize)>>,
    /// Per position: a context token whose max-context window this is.
    pub max_context: Vec<bool>,
    /// Training target (token positions); (0, 0) when the answer is not inside the window.
    pub start: usize,
    pub end: usize,
}

fn char_to_byte(s: &str, c: usize) -> usize {
    s.char_indices().nth(c).map(|(b, _)| b).unwrap_or(s.len())
}

/// Cuts every example into windows (see the module doc). The first gold answer is the
/// training target.
pub fn make_features(
    tok: &WordPieceTokenizer,
    examples: &[SquadExample],
    o: &QaOptions,
) -> Result<Vec<QaFeature>> {
    let mut out = Vec::new();
    for (ei, e) in examples.iter().enumerate() {
        let mut q = tok.encode(&e.question);
        q.truncate(o.max_query_len);
        let enc = tok
            .inner
            .encode(e.context.as_str(), false)
            .map_err(|err| Error::Input(format!("question {}: {err}", e.id)))?;
        let ctx_ids = enc.get_ids();
        let ctx_spans = enc.get_offsets();
        let room = o.max_seq_len.saturating_sub(q.len() + 3);
        if room == 0 {
            return Err(Error::Config(format!(
                "max_seq_len {} leaves no room for the context after a {}-token question",
                o.max_seq_len,
                q.len()
            )));
        }
        // The answer's token range in the whole context.
        let answer = e.answers.first().map(|(text, start)| {
            let a = char_to_byte(&e.context, *start);
            let b = a + text.len();
            let s = ctx_spans.iter().position(|&(_, end)| end > a);
            let t = ctx_spans.iter().rposition(|&(st, _)| st < b);
            (s, t)
        });
        let windows = windows(ctx_ids.len(), room, o.doc_stride);
        for (wi, &(w0, len)) in windows.iter().enumerate() {
            let s = tok.special;
            let mut ids = vec![s.cls];
            ids.extend(&q);
            ids.push(s.sep);
            let offset = ids.len();
            let mut types = vec![0; offset];
            let mut spans = vec![None; offset];
            let mut max_context = vec![false; offset];
            ids.extend(&ctx_ids[w0..w0 + len]);
            spans.extend(ctx_spans[w0..w0 + len].iter().map(|&p| Some(p)));
            max_context.extend((w0..w0 + len).map(|t| max_context_window(&windows, t) == wi));
            ids.push(s.sep);
            spans.push(None);
            max_context.push(false);
            types.resize(ids.len(), 1);
            let (start, end) = match answer {
                Some((Some(a), Some(b))) if a >= w0 && b < w0 + len && a <= b => {
                    (a - w0 + offset, b - w0 + offset)
                }
                _ => (0, 0),
            };
            out.push(QaFeature {
                example: ei,
                ids,
                types,
                spans,
                max_context,
                start,
                end,
            });
        }
    }
    Ok(out)
}

/// The context windows (first token, length) of a context of `n` tokens: at most `room`
/// tokens each, starts `stride` apart, the last ending at the context's end.
fn windows(n: usize, room: usize, stride: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut w0 = 0;
    loop {
        let len = room.min(n - w0);
        out.push((w0, len));
        if w0 + len >= n {
            return out;
        }
        w0 += len.min(stride);
    }
}

/// BERT's max-context window of context token `t`: of the windows holding it, the one where
/// min(tokens left of it, tokens right of it) + 0.01 · window length is largest (the first on
/// ties).
fn max_context_window(windows: &[(usize, usize)], t: usize) -> usize {
    let mut best: Option<(f64, usize)> = None;
    for (i, &(w0, len)) in windows.iter().enumerate() {
        if t < w0 || t >= w0 + len {
            continue;
        }
        let score = (t - w0).min(w0 + len - 1 - t) as f64 + 0.01 * len as f64;
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, i));
        }
    }
    best.map_or(usize::MAX, |(_, i)| i)
}
