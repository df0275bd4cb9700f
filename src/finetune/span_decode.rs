//! A window's best answer, by the rule of the head that scored it.
//!
//! - [`best_span`], for independent start and end logits, follows transformers'
//!   `postprocess_qa_predictions`: the `n_best` highest start and end logits over the window's
//!   positions; a pair counts when both are context tokens, the start token is in its
//!   max-context window, start ≤ end and the span has at most `max_answer_len` tokens; its
//!   score is start + end logit.
//! - [`best_joint_span`], for ELECTRA's joint head, follows google-research/electra's
//!   `qa_metrics.py` with `joint_prediction`: the pairs of the beam (each start with its own
//!   best ends), the same filters (and never `[CLS]` as a start), scored by the start's plus the
//!   end's log-probability.
//!
//! Either gives (score, byte start, byte end) in the context; over a question's windows the
//! best score wins (the first on ties), cut between the start token's first and the end
//! token's last character.

use crate::finetune::joint_span::WindowBeam;
use crate::finetune::qa_features::QaFeature;

/// A candidate (start, end) of window `f`, if the rules allow it: its byte range.
fn allowed(f: &QaFeature, s: usize, e: usize, max_answer_len: usize) -> Option<(usize, usize)> {
    if !f.max_context.get(s).copied().unwrap_or(false) {
        return None;
    }
    let (Some(Some(a)), Some(Some(z))) = (f.spans.get(s), f.spans.get(e)) else {
        return None;
    };
    if e < s || e - s + 1 > max_answer_len {
        return None;
    }
    Some((a.0, z.1))
}

fn keep_best(best: &mut Option<(f32, usize, usize)>, score: f32, range: (usize, usize)) {
    if best.is_none_or(|b| score > b.0) {
        *best = Some((score, range.0, range.1));
    }
}

/// The best answer of one window from independent start and end logits.
pub fn best_span(
    f: &QaFeature,
    start: &[f32],
    end: &[f32],
    n_best: usize,
    max_answer_len: usize,
) -> Option<(f32, usize, usize)> {
    let top = |logits: &[f32]| {
        let mut idx: Vec<usize> = (0..f.ids.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        idx.truncate(n_best);
        idx
    };
    let mut best = None;
    for &s in &top(start) {
        for &e in &top(end) {
            if let Some(range) = allowed(f, s, e, max_answer_len) {
                keep_best(&mut best, start[s] + end[e], range);
            }
        }
    }
    best
}

/// The best answer of one window from ELECTRA's joint beam.
pub fn best_joint_span(
    f: &QaFeature,
    beam: WindowBeam,
    max_answer_len: usize,
) -> Option<(f32, usize, usize)> {
    let mut best = None;
    for (i, (&s, &s_lp)) in beam.start_index.iter().zip(beam.start_lp).enumerate() {
        if s == 0 {
            continue;
        }
        let ends = i * beam.k..(i + 1) * beam.k;
        for (&e, &e_lp) in beam.end_index[ends.clone()].iter().zip(&beam.end_lp[ends]) {
            if let Some(range) = allowed(f, s, e, max_answer_len) {
                keep_best(&mut best, s_lp + e_lp, range);
            }
        }
    }
    best
}
