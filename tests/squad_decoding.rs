//! SQuAD answers from start / end logits, against transformers' `postprocess_qa_predictions`
//! rules with BERT's max-context rule (tests/fixtures/squad, written by
//! scripts/squad_postprocess_golden.py on the real dev file): the same windows, and on the same
//! saved logits the same answer for every question, at sub-word precision.

use std::collections::HashMap;
use std::path::PathBuf;

use trueneg::finetune::span::{QaOptions, best_span, make_features};
use trueneg::interop::tensors::read_safetensors;
use trueneg::tasks::squad::read_squad;
use trueneg::text::WordPieceTokenizer;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/squad")
}

#[derive(serde::Deserialize)]
struct Fixture {
    options: Options,
    windows: Vec<Window>,
    answers: HashMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Options {
    questions: usize,
    max_seq_len: usize,
    doc_stride: usize,
    max_query_len: usize,
    n_best: usize,
    max_answer_len: usize,
}

#[derive(serde::Deserialize)]
struct Window {
    question: usize,
    ids: Vec<u32>,
    offset: usize,
}

#[test]
fn answers_equal_transformers_post_processing_on_saved_logits() {
    let fx: Fixture =
        serde_json::from_slice(&std::fs::read(fixtures().join("decoding.json")).unwrap()).unwrap();
    let logits = read_safetensors(&fixtures().join("decoding.safetensors")).unwrap();
    let (start, end) = (
        &logits.tensors["start"].values,
        &logits.tensors["end"].values,
    );
    let tok = WordPieceTokenizer::load(&fixtures().join("tokenizer.json")).unwrap();
    let data =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/squad-v1.1/dev-half-a.json");
    let mut ex = read_squad(&data).unwrap();
    ex.truncate(fx.options.questions);
    let o = QaOptions {
        max_seq_len: fx.options.max_seq_len,
        doc_stride: fx.options.doc_stride,
        max_query_len: fx.options.max_query_len,
        n_best: fx.options.n_best,
        max_answer_len: fx.options.max_answer_len,
    };
    let features = make_features(&tok, &ex, &o).unwrap();
    // The same windows.
    assert_eq!(features.len(), fx.windows.len());
    for (f, w) in features.iter().zip(&fx.windows) {
        assert_eq!((f.example, &f.ids), (w.question, &w.ids));
    }
    // Several windows per question, so the max-context rule matters.
    assert!(features.len() > 4 * ex.len());
    let mut best: Vec<Option<(f32, usize, usize)>> = vec![None; ex.len()];
    for (f, w) in features.iter().zip(&fx.windows) {
        let r = w.offset..w.offset + f.ids.len();
        let cand = best_span(f, &start[r.clone()], &end[r], o.n_best, o.max_answer_len);
        if let Some(c) = cand
            && best[f.example].is_none_or(|b| c.0 > b.0)
        {
            best[f.example] = Some(c);
        }
    }
    let mut partial_words = 0;
    for (e, b) in ex.iter().zip(&best) {
        let ours = b.map_or("", |(_, a, z)| &e.context[a..z]);
        assert_eq!(ours, fx.answers[&e.id], "question {}", e.id);
        // Answers that end inside a word ("199" of "1990s") are kept as they are.
        if let Some((_, _, z)) = b
            && e.context[*z..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric)
        {
            partial_words += 1;
        }
    }
    assert!(partial_words > 0, "the fixture holds sub-word answers");
}
