//! `docs/adding-a-task.md` followed once: a toy sentence task written as one type (what would
//! be its own file in `src/tasks/sentence/`) — its own file format, labels, metric and file
//! names — registered (as a library user registers one of their own) and fine-tuned through
//! the library's one pipeline (reader, head, loss, metric, baselines, the fine-tuned folder)
//! with no other code naming it; and the registry's rule, checked on `src/`: a task in the
//! registry is its file and one line.

use crate::common;
use common::{code, mentions};

use std::path::Path;

use trueneg::Result;
use trueneg::finetune::pretrained::load_pretrained;
use trueneg::finetune::recipe::{FinetuneOptions, Recipe};
use trueneg::finetune::seeds::{SeedPlan, finetune_glue};
use trueneg::tasks::glue::{GlueExample, GlueTask, Label};
use trueneg::tasks::sentence::{Columns, SentenceTask, TaskMetric, named};

/// The toy: is a line of text a question? One JSON object a line, `{"text", "kind"}`, kind
/// `statement` or `question`; scored by accuracy with F1 beside it.
struct IsQuestion;

impl SentenceTask for IsQuestion {
    fn name(&self) -> &'static str {
        "is-question"
    }
    fn dir_name(&self) -> &'static str {
        "IsQuestion"
    }
    fn columns(&self) -> Columns {
        named("text", None, "kind")
    }
    fn labels(&self) -> &'static [&'static str] {
        &["statement", "question"]
    }
    fn metric(&self) -> TaskMetric {
        TaskMetric::AccuracyAndF1
    }
    fn train_file_name(&self) -> &'static str {
        "train.jsonl"
    }
    fn dev_file_names(&self) -> &'static [&'static str] {
        &["dev.jsonl"]
    }
    fn read_own_format(&self, path: &Path) -> Option<Result<Vec<GlueExample>>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| trueneg::Error::Input(format!("{}: {e}", path.display())));
        Some(text.map(|text| {
            text.lines()
                .enumerate()
                .map(|(i, l)| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    let kind = v["kind"].as_str().unwrap();
                    GlueExample {
                        id: i.to_string(),
                        text_a: v["text"].as_str().unwrap().to_string(),
                        text_b: None,
                        label: self
                            .labels()
                            .iter()
                            .position(|l| *l == kind)
                            .map(Label::Class),
                    }
                })
                .collect()
        }))
    }
}

static TOY: IsQuestion = IsQuestion;

/// `n` lines of the toy's format: questions and statements about the same words.
fn write_toy_file(path: &Path, n: usize, offset: usize) {
    let words = [
        "river", "city", "music", "winter", "garden", "history", "station",
    ];
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let w = words[(i + offset) % words.len()];
            let (text, kind) = if i % 2 == 0 {
                (format!("where is the {w} ?"), "question")
            } else {
                (format!("the {w} is near the old road ."), "statement")
            };
            serde_json::json!({ "text": text, "kind": kind }).to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n")).unwrap();
}

#[test]
fn a_new_task_is_one_type_and_fine_tunes_through_the_one_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("is-question");
    std::fs::create_dir_all(&data).unwrap();
    write_toy_file(&data.join("train.jsonl"), 64, 0);
    write_toy_file(&data.join("dev.jsonl"), 24, 3);
    let task = GlueTask::register(&TOY).unwrap();
    // Registered, it is a task like the registry's: by name, in files, and once only.
    assert_eq!(GlueTask::parse("Is_Question"), Some(task));
    let e = GlueTask::register(&TOY).unwrap_err().to_string();
    assert!(e.contains("is-question") && e.contains("taken"), "{e}");
    assert_eq!(task.num_labels(), 2);
    assert!(!task.is_glue() && !task.is_regression());
    assert_eq!(task.dev_files(&data), [data.join("dev.jsonl")]);

    let pre = load_pretrained(common::pretrained_tiny_shared()).unwrap();
    let mut opts = FinetuneOptions::for_task(Recipe::Transformers, task);
    opts.epochs = 1;
    opts.max_seq_len = 16;
    let out = dir.path().join("ft");
    let mut said = Vec::new();
    let mut report = |s: String| said.push(s);
    let plan = SeedPlan {
        seeds: &[1],
        out: &out,
        progress: false,
        report: &mut report,
    };
    let r = finetune_glue(task, &pre, &data, &opts, plan).unwrap();
    // Its metric: accuracy with F1 beside it, each within [0, 100], and its baselines on its
    // own dev labels (half questions: the majority class scores 50 % accuracy).
    let scores = &r.per_seed[0];
    for m in ["accuracy", "f1"] {
        let v = scores.metrics[m];
        assert!((0.0..=100.0).contains(&v), "{m} {v}");
    }
    let baselines = r.baselines.as_ref().expect("the dev set's baselines");
    assert!((baselines.majority - 50.0).abs() < 1e-9, "{baselines:?}");
    assert_eq!(r.task, "IsQuestion");
    assert!(said.iter().any(|l| l.contains("accuracy")), "{said:?}");
    let record = std::fs::read_to_string(out.join("seed-1/finetuned.json")).unwrap();
    assert!(record.contains("\"is-question\""), "{record}");
}

/// The registry's lines (`module::Type,`) inside `tasks! { … }`, as (line, module, type).
fn registry_lines(registry: &str) -> Vec<(String, String, String)> {
    let block = registry
        .rsplit("tasks! {")
        .next()
        .and_then(|b| b.split('}').next())
        .expect("tasks/sentence/mod.rs holds the registry `tasks! { … }`");
    block
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("::"))
        .map(|l| {
            let (module, ty) = l.trim_end_matches(',').split_once("::").unwrap();
            (l.to_string(), module.to_string(), ty.to_string())
        })
        .collect()
}

/// A registered task is its file plus one line: every file of `tasks/sentence/` is in the
/// registry, which names it on that line only, and its module is private to the registry's
/// folder (code outside asks the task, never which task it is).
#[test]
fn a_task_is_its_file_and_one_registry_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folder = src.join("tasks/sentence");
    let registry = std::fs::read_to_string(folder.join("mod.rs")).unwrap();
    let lines = registry_lines(&registry);
    assert!(lines.len() >= 12, "{lines:?}");
    // The macro declares each task's module private to the registry's folder: no other file
    // can name a task's type (the compiler refuses it), so code outside asks the task.
    let registry_macro = std::fs::read_to_string(folder.join("registry.rs")).unwrap();
    assert!(
        registry_macro.contains("$(mod $module;)+") && !registry_macro.contains("pub mod $module"),
        "{registry_macro}"
    );
    for entry in std::fs::read_dir(&folder).unwrap() {
        let stem = entry
            .unwrap()
            .path()
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .to_string();
        if stem != "mod" && stem != "registry" {
            assert!(
                lines.iter().any(|(_, m, _)| *m == stem),
                "{stem}.rs is not registered"
            );
        }
    }
    for (line, module, ty) in &lines {
        let on: Vec<&str> = registry
            .lines()
            .filter(|l| mentions(&code(l), module) || mentions(&code(l), ty))
            .map(str::trim)
            .collect();
        assert_eq!(
            on,
            [line.as_str()],
            "the registry names {module} off its line"
        );
    }
}
