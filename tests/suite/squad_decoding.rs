//! SQuAD answers, against the references' decoding rules written out in
//! scripts/squad_postprocess_golden.py (tests/fixtures/squad, on the real dev file): the same
//! windows, and the same answer for every question, at sub-word precision, both from saved
//! start / end logits (transformers' `postprocess_qa_predictions` with BERT's max-context rule)
//! and from a saved beam (ELECTRA's joint decoding).

use std::collections::HashMap;
use std::path::PathBuf;

use trueneg::finetune::joint_span::WindowBeam;
use trueneg::finetune::qa_features::{QaFeature, QaOptions, make_features};
use trueneg::finetune::span_decode::{best_joint_span, best_span};
use trueneg::interop::tensors::TensorMap;
use trueneg::interop::tensors::read_safetensors;
use trueneg::tasks::squad::{SquadExample, read_squad};
use trueneg::text::WordPieceTokenizer;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/squad")
}

#[derive(serde::Deserialize)]
struct Fixture {
    options: Options,
    windows: Vec<Window>,
    answers: HashMap<String, String>,
    joint_answers: HashMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Options {
    questions: usize,
    max_seq_len: usize,
    doc_stride: usize,
    max_query_len: usize,
    n_best: usize,
    max_answer_len: usize,
    beam: usize,
}

#[derive(serde::Deserialize)]
struct Window {
    question: usize,
    ids: Vec<u32>,
    offset: usize,
}

/// The fixture, its saved tensors, the dev questions it covers and trueneg's windows of them
/// (checked to be the fixture's).
fn windows() -> (
    Fixture,
    TensorMap,
    Vec<SquadExample>,
    Vec<QaFeature>,
    QaOptions,
) {
    let fx: Fixture =
        serde_json::from_slice(&std::fs::read(fixtures().join("decoding.json")).unwrap()).unwrap();
    let saved = read_safetensors(&fixtures().join("decoding.safetensors")).unwrap();
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
        beam: fx.options.beam,
    };
    let features = make_features(&tok, &ex, &o).unwrap();
    assert_eq!(features.len(), fx.windows.len());
    for (f, w) in features.iter().zip(&fx.windows) {
        assert_eq!((f.example, &f.ids), (w.question, &w.ids));
    }
    // Several windows per question, so the max-context rule matters.
    assert!(features.len() > 4 * ex.len());
    (fx, saved, ex, features, o)
}

/// Each question's best window answer (the first on ties), as text; how many end inside a
/// word.
fn answers(
    ex: &[SquadExample],
    features: &[QaFeature],
    mut window: impl FnMut(usize, &QaFeature) -> Option<(f32, usize, usize)>,
) -> (Vec<String>, usize) {
    let mut best: Vec<Option<(f32, usize, usize)>> = vec![None; ex.len()];
    for (i, f) in features.iter().enumerate() {
        if let Some(c) = window(i, f)
            && best[f.example].is_none_or(|b| c.0 > b.0)
        {
            best[f.example] = Some(c);
        }
    }
    let mut partial_words = 0;
    let texts = ex
        .iter()
        .zip(&best)
        .map(|(e, b)| {
            // Answers that end inside a word ("199" of "1990s") are kept as they are.
            if let Some((_, _, z)) = b
                && e.context[*z..]
                    .chars()
                    .next()
                    .is_some_and(char::is_alphanumeric)
            {
                partial_words += 1;
            }
            trueneg::finetune::span::answer_text(e, b.map(|(_, a, z)| a..z))
        })
        .collect();
    (texts, partial_words)
}

#[test]
fn answers_equal_transformers_post_processing_on_saved_logits() {
    let (fx, saved, ex, features, o) = windows();
    let (start, end) = (&saved.tensors["start"].values, &saved.tensors["end"].values);
    let (texts, partial_words) = answers(&ex, &features, |i, f| {
        let w = &fx.windows[i];
        let r = w.offset..w.offset + f.ids.len();
        best_span(f, &start[r.clone()], &end[r], o.n_best, o.max_answer_len)
    });
    for (e, t) in ex.iter().zip(&texts) {
        assert_eq!(t, &fx.answers[&e.id], "question {}", e.id);
    }
    assert!(partial_words > 0, "the fixture holds sub-word answers");
}

#[test]
fn answers_equal_electras_joint_decoding_on_a_saved_beam() {
    let (fx, saved, ex, features, o) = windows();
    let t = |k: &str| &saved.tensors[&format!("joint.{k}")].values;
    let index = |k: &str| -> Vec<usize> { t(k).iter().map(|&v| v as usize).collect() };
    let (start_index, end_index) = (index("start_index"), index("end_index"));
    let k = o.beam;
    let (texts, _) = answers(&ex, &features, |i, f| {
        let beam = WindowBeam {
            k,
            start_lp: &t("start_lp")[i * k..(i + 1) * k],
            start_index: &start_index[i * k..(i + 1) * k],
            end_lp: &t("end_lp")[i * k * k..(i + 1) * k * k],
            end_index: &end_index[i * k * k..(i + 1) * k * k],
        };
        best_joint_span(f, beam, o.max_answer_len)
    });
    let mut differ_from_independent = 0;
    for (e, t) in ex.iter().zip(&texts) {
        assert_eq!(t, &fx.joint_answers[&e.id], "question {}", e.id);
        differ_from_independent += usize::from(t != &fx.answers[&e.id]);
    }
    // The two rules are told apart: not every question gets the same answer.
    assert!(differ_from_independent > 0);
    assert!(texts.iter().any(|t| !t.is_empty()));
}

#[test]
fn a_question_without_a_valid_span_answers_empty_as_electra_and_run_qa() {
    use trueneg::finetune::span::{NO_ANSWER, answer_text};
    let e = trueneg::tasks::squad::SquadExample {
        title: "t".into(),
        id: "q".into(),
        question: "Who?".into(),
        context: "Ada wrote it.".into(),
        answers: vec![("Ada".into(), 0)],
    };
    assert_eq!(answer_text(&e, Some(0..3)), "Ada");
    assert_eq!(answer_text(&e, None), "empty");
    assert_eq!(NO_ANSWER, "empty");
}
