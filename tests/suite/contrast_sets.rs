//! Contrast-set readers on the shared data (and on rows written in the NLI layout), and the
//! consistency metric on hand-computed cases.

use crate::common;
use common::data;

use trueneg::tasks::contrast::*;

fn ex(label: &str) -> Example {
    Example {
        text_a: label.to_string(),
        text_b: None,
        label: label.to_string(),
        source: String::new(),
    }
}

#[test]
fn consistency_counts_groups_that_are_right_throughout() {
    // Three groups; the model predicts "a" everywhere.
    let groups = vec![
        Group {
            original: ex("a"),
            perturbed: vec![ex("a"), ex("a")],
        }, // all right
        Group {
            original: ex("a"),
            perturbed: vec![ex("b")],
        }, // original right, perturbation wrong
        Group {
            original: ex("b"),
            perturbed: vec![ex("a")],
        }, // original wrong
    ];
    let c = consistency(&groups, |_| "a".to_string());
    assert!((c.ori - 200.0 / 3.0).abs() < 1e-9, "{c:?}");
    assert!((c.rev - 75.0).abs() < 1e-9, "{c:?}");
    assert!((c.con - 100.0 / 3.0).abs() < 1e-9, "{c:?}");
    assert_eq!((c.groups, c.perturbed), (3, 4));
    let md = consistency_table(&[("tiny".into(), "IMDb".into(), c)]);
    assert!(
        md.contains("| tiny | IMDb | 66.7 | 75.0 | 33.3 | 3 |"),
        "{md}"
    );
}

#[test]
fn counterfactual_sentiment_pairs_by_batch_id() {
    let g = read_cad_sentiment(&data(
        "counterfactual/sentiment/combined/paired/dev_paired.tsv",
    ))
    .unwrap();
    assert_eq!(g.len(), 245);
    let orig = std::fs::read_to_string(data("counterfactual/sentiment/orig/dev.tsv")).unwrap();
    for x in &g {
        assert_eq!(x.perturbed.len(), 1);
        assert_ne!(
            x.original.label, x.perturbed[0].label,
            "revisions flip the label"
        );
    }
    // The originals are the rows of orig/dev.tsv.
    let first = g[0].original.text_a.chars().take(60).collect::<String>();
    assert!(orig.contains(&first), "{first}");
}

#[test]
fn allenai_contrast_sets_read_as_published() {
    let dir = data("contrast-sets/IMDb/data");
    let dev = read_imdb_contrast(&dir, "dev").unwrap();
    let test = read_imdb_contrast(&dir, "test").unwrap();
    assert_eq!((dev.len(), test.len()), (100, 488));
    assert!(dev.iter().all(|g| g.original.label != g.perturbed[0].label));
    // Quote-aware: a text that starts with a quote keeps its inner quotes and tabs-free body.
    assert!(dev.iter().any(|g| g.original.text_a.contains("<br />")));

    let boolq = read_boolq_contrast(&data("contrast-sets/BoolQ/boolq_perturbed.json")).unwrap();
    assert_eq!(
        boolq.len(),
        68,
        "the template item and items without perturbations dropped"
    );
    assert_eq!(boolq.iter().map(|g| g.perturbed.len()).sum::<usize>(), 335);
    assert!(
        boolq
            .iter()
            .flat_map(|g| std::iter::once(&g.original).chain(&g.perturbed))
            .all(|e| (e.label == "TRUE" || e.label == "FALSE") && e.text_b.is_some())
    );

    let p = read_perspectrum_contrast(&data(
        "contrast-sets/perspectrum/perspectrum_contrast_sets.csv",
    ))
    .unwrap();
    assert_eq!(p.len(), 217, "rows with an unk stance dropped");
    assert!(
        p.iter()
            .flat_map(|g| std::iter::once(&g.original).chain(&g.perturbed))
            .all(|e| e.label == "pos" || e.label == "neg"),
    );
}

#[test]
fn nli_revisions_pair_two_per_original_and_bad_files_name_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |folder: &str, rows: &[(&str, &str, &str)]| {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        let mut t = String::from("sentence1\tsentence2\tgold_label\n");
        for (a, b, l) in rows {
            t += &format!("{a}\t{b}\t{l}\n");
        }
        std::fs::write(root.join(folder).join("dev.tsv"), t).unwrap();
    };
    write(
        "original",
        &[("A man plays a guitar.", "A man makes music.", "entailment")],
    );
    write(
        "revised_premise",
        &[
            ("A man holds a guitar.", "A man makes music.", "neutral"),
            ("A man sleeps.", "A man makes music.", "contradiction"),
        ],
    );
    write(
        "revised_hypothesis",
        &[
            ("A man plays a guitar.", "A man is on stage.", "neutral"),
            ("A man plays a guitar.", "A man is silent.", "contradiction"),
        ],
    );
    let (g, notes) = read_cad_nli(root, "dev").unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].perturbed.len(), 4);
    assert_eq!(
        g[0].perturbed[3].text_b.as_deref(),
        Some("A man is silent.")
    );
    assert!(notes.is_empty());
    // Real files copy the unchanged sentence with another spacing now and then: a double
    // space or a trailing space is the same sentence.
    write(
        "revised_hypothesis",
        &[
            ("A man  plays a guitar.", "A man is on stage.", "neutral"),
            (
                "A man plays a guitar. ",
                "A man is silent.",
                "contradiction",
            ),
        ],
    );
    let (g, _) = read_cad_nli(root, "dev").unwrap();
    assert_eq!(g[0].perturbed[2].text_a, "A man  plays a guitar.");
    // A revision that changes nothing but the label is kept and reported, not refused.
    write(
        "revised_hypothesis",
        &[
            ("A man plays a guitar.", "A man makes  music.", "neutral"),
            ("A man plays a guitar.", "A man is silent.", "contradiction"),
        ],
    );
    let (g, notes) = read_cad_nli(root, "dev").unwrap();
    assert_eq!(g[0].perturbed.len(), 4);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("revised_hypothesis/dev.tsv:2") && notes[0].contains("neutral"),
        "{notes:?}"
    );
    // A revision whose unchanged sentence is not the original's: the pairing is wrong. Both
    // rows of each pair are checked (the second here).
    write(
        "revised_hypothesis",
        &[
            ("A man plays a guitar.", "A man is on stage.", "neutral"),
            (
                "A woman plays a guitar.",
                "A man is silent.",
                "contradiction",
            ),
        ],
    );
    let e = read_cad_nli(root, "dev").unwrap_err().to_string();
    assert!(
        e.contains("revised_hypothesis/dev.tsv:3") && e.contains("original/dev.tsv:2"),
        "{e}"
    );
    // An unknown label.
    write(
        "revised_hypothesis",
        &[
            ("A man plays a guitar.", "A man is on stage.", "maybe"),
            ("A man plays a guitar.", "A man is silent.", "contradiction"),
        ],
    );
    let e = read_cad_nli(root, "dev").unwrap_err().to_string();
    assert!(
        e.contains("revised_hypothesis/dev.tsv:2") && e.contains("\"maybe\""),
        "{e}"
    );
    // An IMDb contrast file whose rows do not pair with the originals.
    let imdb = root.join("imdb");
    std::fs::create_dir_all(&imdb).unwrap();
    std::fs::write(
        imdb.join("dev_original.tsv"),
        "Sentiment\tText\nPositive\tGood.\nNegative\tBad.\n",
    )
    .unwrap();
    std::fs::write(
        imdb.join("dev_contrast.tsv"),
        "Sentiment\tText\nNegative\tNot good.\n",
    )
    .unwrap();
    let e = read_imdb_contrast(&imdb, "dev").unwrap_err().to_string();
    assert!(
        e.contains("dev_contrast.tsv") && e.contains("pair by row"),
        "{e}"
    );
    std::fs::write(
        imdb.join("dev_contrast.tsv"),
        "Sentiment\tText\nNegative\tNot good.\nMeh\tOk.\n",
    )
    .unwrap();
    let e = read_imdb_contrast(&imdb, "dev").unwrap_err().to_string();
    assert!(e.contains("dev_contrast.tsv:3"), "{e}");
}

#[test]
fn counterfactual_fine_tuning_files_read_quoted_rows_and_name_bad_lines() {
    use trueneg::tasks::glue::{GlueTask, Label, read_glue};
    let train = read_glue(
        GlueTask::named("cad-sentiment"),
        &data("counterfactual/sentiment/orig/train.tsv"),
    )
    .unwrap();
    assert_eq!(train.len(), 1707);
    let pos = train
        .iter()
        .filter(|e| e.label == Some(Label::Class(1)))
        .count();
    assert!(pos > 700 && pos < 1000, "{pos} positive");
    // A quoted review keeps its inner quotes and line breaks markup.
    assert!(train.iter().any(|e| e.text_a.contains("<br />")));
    assert!(train.iter().all(|e| e.text_b.is_none()));

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("train.tsv");
    std::fs::write(
        &bad,
        "Sentiment\tText\nPositive\t\"Fine, \"\"really\"\".\"\nMixed\tHm.\n",
    )
    .unwrap();
    let e = read_glue(GlueTask::named("cad-sentiment"), &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("train.tsv:3") && e.contains("\"Mixed\""), "{e}");

    let nli = dir.path().join("nli.tsv");
    std::fs::write(
        &nli,
        "sentence1\tsentence2\tgold_label\nA dog runs.\tAn animal moves.\tentailment\n",
    )
    .unwrap();
    let ex = read_glue(GlueTask::named("cad-nli"), &nli).unwrap();
    assert_eq!(ex[0].text_b.as_deref(), Some("An animal moves."));
    assert_eq!(ex[0].label, Some(Label::Class(1)), "MNLI's label order");
}

#[test]
fn boolq_and_perspectrum_training_sets_read_in_their_official_formats() {
    use trueneg::tasks::glue::{GlueTask, Label, read_glue};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("train.jsonl"),
        concat!(
            r#"{"question": "is the sky blue", "title": "Sky", "answer": true, "passage": "The sky is blue."}"#,
            "\n",
            r#"{"question": "is grass red", "title": "Grass", "answer": false, "passage": "Grass is green."}"#,
            "\n"
        ),
    )
    .unwrap();
    let b = read_glue(
        GlueTask::named("boolq"),
        &GlueTask::named("boolq").train_file(d),
    )
    .unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].text_a.as_str(), b[0].label),
        ("is the sky blue", Some(Label::Class(1)))
    );
    assert_eq!(b[1].label, Some(Label::Class(0)), "FALSE is class 0");
    std::fs::write(d.join("dev.jsonl"), "{\"question\": 3}\n").unwrap();
    let e = read_glue(GlueTask::named("boolq"), &d.join("dev.jsonl"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("dev.jsonl:1"), "{e}");

    std::fs::write(
        d.join("perspectrum_with_answers_v1.0.json"),
        r#"[{"cId": 1, "text": "Mayors should be elected.", "source": "x", "perspectives": [
              {"pids": [10, 11], "stance_label_3": "support", "stance_label_5": "support", "voter_counts": [], "evidence": []},
              {"pids": [12], "stance_label_3": "undermine", "stance_label_5": "undermine", "voter_counts": [], "evidence": []},
              {"pids": [13], "stance_label_3": "not-a-perspective", "stance_label_5": "", "voter_counts": [], "evidence": []}]},
            {"cId": 2, "text": "Zoos are good.", "source": "x", "perspectives": [
              {"pids": [14], "stance_label_3": "support", "stance_label_5": "support", "voter_counts": [], "evidence": []}]}]"#,
    )
    .unwrap();
    std::fs::write(
        d.join("perspective_pool_v1.0.json"),
        r#"[{"pId": 10, "text": "Democracy.", "source": "x"}, {"pId": 11, "text": "Accountability.", "source": "x"},
            {"pId": 12, "text": "Cost.", "source": "x"}, {"pId": 13, "text": "Weather.", "source": "x"},
            {"pId": 14, "text": "Conservation.", "source": "x"}]"#,
    )
    .unwrap();
    std::fs::write(
        d.join("dataset_split_v1.0.json"),
        r#"{"1": "train", "2": "dev"}"#,
    )
    .unwrap();
    let p = read_glue(
        GlueTask::named("perspectrum"),
        &GlueTask::named("perspectrum").train_file(d),
    )
    .unwrap();
    let got: Vec<_> = p
        .iter()
        .map(|e| (e.text_b.clone().unwrap(), e.label))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Democracy.".to_string(), Some(Label::Class(1))),
            ("Accountability.".to_string(), Some(Label::Class(1))),
            ("Cost.".to_string(), Some(Label::Class(0))),
        ],
        "train claims only; not-a-perspective dropped"
    );
    let dev = read_glue(
        GlueTask::named("perspectrum"),
        &GlueTask::named("perspectrum").dev_files(d)[0],
    )
    .unwrap();
    assert_eq!(dev.len(), 1);
    assert_eq!(
        GlueTask::named("perspectrum").labels(),
        ["neg", "pos"],
        "the contrast set's names"
    );
    // A perspective id missing from the pool is named.
    std::fs::write(
        d.join("perspective_pool_v1.0.json"),
        r#"[{"pId": 10, "text": "Democracy.", "source": "x"}]"#,
    )
    .unwrap();
    let e = read_glue(
        GlueTask::named("perspectrum"),
        &GlueTask::named("perspectrum").train_file(d),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("perspective 11"), "{e}");
}

#[test]
fn the_fine_tuning_and_contrast_readers_unquote_fields_alike() {
    use trueneg::tasks::glue::{GlueTask, read_glue};
    // Kaushik et al.'s files are written with CSV quoting: a quoted field may hold a tab and
    // doubled quotes. Fine-tuning (`--task cad-nli`) and `evaluate --contrast` read it alike.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let premise = "\"He said \"\"no\"\",\tthen left.\"";
    for (folder, rows) in [
        ("original", 1),
        ("revised_premise", 2),
        ("revised_hypothesis", 2),
    ] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
        let mut t = String::from("sentence1\tsentence2\tgold_label\n");
        for k in 0..rows {
            let p = if folder == "revised_premise" {
                format!("He stayed {k}.")
            } else {
                premise.to_string()
            };
            let h = if folder == "revised_hypothesis" {
                format!("He is here {k}.")
            } else {
                "He left.".to_string()
            };
            t += &format!("{p}\t{h}\tentailment\n");
        }
        std::fs::write(root.join(folder).join("dev.tsv"), t).unwrap();
    }
    let finetune = read_glue(GlueTask::named("cad-nli"), &root.join("original/dev.tsv")).unwrap();
    let (groups, _) = read_cad_nli(root, "dev").unwrap();
    assert_eq!(finetune[0].text_a, "He said \"no\",\tthen left.");
    assert_eq!(groups[0].original.text_a, finetune[0].text_a);
    assert_eq!(groups[0].perturbed[2].text_a, finetune[0].text_a);
}
