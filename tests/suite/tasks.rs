//! Metrics on known values and the GLUE / SQuAD readers on the real files.

use crate::common;
use common::data;

use std::collections::HashMap;

use trueneg::tasks::glue::{GlueTask, Label, read_glue};
use trueneg::tasks::metrics::*;
use trueneg::tasks::squad::{evaluate_squad, read_squad};

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-9, "{a} vs {b}");
}

#[test]
fn classification_metrics_on_known_values() {
    let gold = [1, 1, 1, 0, 0, 0, 1, 0];
    let pred = [1, 0, 1, 0, 1, 0, 1, 0];
    close(accuracy(&pred, &gold), 6.0 / 8.0);
    // tp 3, fp 1, fn 1, tn 3: F1 = 6/8, MCC = (9 - 1) / sqrt(4·4·4·4) = 0.5.
    close(f1_binary(&pred, &gold), 0.75);
    close(matthews(&pred, &gold), 0.5);
    close(matthews(&[1, 1, 1], &[1, 0, 1]), 0.0); // undefined → 0
    close(matthews(&[0, 1, 0, 1], &[1, 0, 1, 0]), -1.0);
}

#[test]
fn correlations_on_known_values_with_ties() {
    close(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 1.0);
    close(pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 4.0]), 0.8);
    assert_eq!(ranks(&[10.0, 20.0, 20.0, 5.0]), vec![2.0, 3.5, 3.5, 1.0]);
    // scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]) = 0.9486832980505138
    close(
        spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]),
        0.9486832980505138,
    );
    close(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), -1.0);
}

#[test]
fn squad_normalisation_em_and_f1() {
    assert_eq!(normalize_answer("The  Denver Broncos!"), "denver broncos");
    assert_eq!(normalize_answer("an apple, a pear"), "apple pear");
    // The script's \b: an article next to non-ASCII punctuation goes too; one inside a word,
    // or before a letter of any script, stays (outputs of the official normalize_answer).
    assert_eq!(normalize_answer("The’s «the» l’a"), "’s « » l’");
    assert_eq!(normalize_answer("theé athe the_x a-b"), "theé athe thex ab");
    assert_eq!(normalize_answer("the\u{00a0}end"), "end");
    close(exact_match("the Denver Broncos", "Denver Broncos."), 1.0);
    close(exact_match("Broncos", "Denver Broncos"), 0.0);
    // pred "denver broncos team" vs gold "denver broncos": p 2/3, r 1 → F1 0.8.
    close(token_f1("Denver Broncos team", "the Denver Broncos"), 0.8);
    // SQuAD v1.1's script: no common token gives F1 0, also when both sides normalise to
    // nothing ("the" is an article); EM still counts them equal.
    close(token_f1("", ""), 0.0);
    close(token_f1("the", "a"), 0.0);
    close(exact_match("the", "a"), 1.0);
    close(token_f1("a", "Carolina"), 0.0);
    let golds = vec![
        "Santa Clara, California".to_string(),
        "Levi's Stadium".to_string(),
    ];
    close(max_over_golds(exact_match, "Levi's Stadium", &golds), 1.0);
    close(max_over_golds(token_f1, "Santa Clara", &golds), 0.8);
}

#[test]
fn glue_readers_on_the_real_files() {
    let cases = [
        (GlueTask::named("cola"), "CoLA", 8551, 1043),
        (GlueTask::named("sst2"), "SST-2", 67349, 872),
        (GlueTask::named("mrpc"), "MRPC", 3668, 408),
        (GlueTask::named("stsb"), "STS-B", 5749, 1500),
        (GlueTask::named("rte"), "RTE", 2490, 277),
    ];
    for (task, dir, n_train, n_dev) in cases {
        let train = read_glue(task, &data(&format!("glue/{dir}/train.tsv"))).unwrap();
        let dev = read_glue(task, &data(&format!("glue/{dir}/dev.tsv"))).unwrap();
        assert_eq!((train.len(), dev.len()), (n_train, n_dev), "{dir}");
        assert!(
            dev.iter()
                .all(|e| e.label.is_some() && !e.text_a.is_empty()),
            "{dir}"
        );
        assert_eq!(
            dev[0].text_b.is_some(),
            task != GlueTask::named("cola") && task != GlueTask::named("sst2"),
            "{dir}"
        );
    }
    let mrpc = read_glue(GlueTask::named("mrpc"), &data("glue/MRPC/dev.tsv")).unwrap();
    assert_eq!(
        mrpc[0].label,
        Some(Label::Class(1)),
        "byte-order mark skipped, header read"
    );
    assert!(
        mrpc[0]
            .text_a
            .starts_with("He said the foodservice pie business")
    );
    let cola = read_glue(GlueTask::named("cola"), &data("glue/CoLA/dev.tsv")).unwrap();
    assert_eq!(
        cola[0].text_a,
        "The sailors rode the breeze clear of the rocks."
    );
    let stsb = read_glue(GlueTask::named("stsb"), &data("glue/STS-B/dev.tsv")).unwrap();
    assert_eq!(stsb[0].label, Some(Label::Score(5.0)));
    let rte = read_glue(GlueTask::named("rte"), &data("glue/RTE/dev.tsv")).unwrap();
    assert_eq!(rte[0].label, Some(Label::Class(1)), "not_entailment");
    let ones = cola
        .iter()
        .filter(|e| e.label == Some(Label::Class(1)))
        .count();
    // `cut -f2 dev.tsv | sort | uniq -c`: 719 ones, 324 zeros.
    assert_eq!(ones, 719, "CoLA dev has 719 acceptable sentences");
    assert_eq!(cola.len() - ones, 324);
}

#[test]
fn qqp_mnli_qnli_readers_on_files_in_glue_layout() {
    // ../shared/data has no QQP / MNLI / QNLI: rows written here in the column layout GLUE ships
    // (QQP's six columns, MNLI's parse columns and five dev annotator labels, QNLI's four).
    let dir = tempfile::tempdir().unwrap();
    let qqp = dir.path().join("qqp.tsv");
    std::fs::write(
        &qqp,
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n\
         201359\t303345\t303346\tWhy are African-Americans so beautiful?\tWhy are hispanics so beautiful?\t0\n\
         263843\t69383\t380476\tI want to pursue PhD in Computer Science?\tI handle social media?\t1\n",
    )
    .unwrap();
    let q = read_glue(GlueTask::named("qqp"), &qqp).unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(q[0].id, "201359");
    assert_eq!(
        q[0].text_b.as_deref(),
        Some("Why are hispanics so beautiful?")
    );
    assert_eq!(
        (q[0].label, q[1].label),
        (Some(Label::Class(0)), Some(Label::Class(1)))
    );

    let mnli = dir.path().join("dev_matched.tsv");
    std::fs::write(
        &mnli,
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n\
         0\t63735\t63735n\tslate\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tThe new rights are nice enough\tEveryone really likes the newest benefits \tneutral\tentailment\tneutral\tneutral\tneutral\tneutral\n\
         1\t91383\t91383c\tgovernment\t( x )\t( y )\t(ROOT x)\t(ROOT y)\tThis site includes a list.\tThe Government Executive articles are not on the site.\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\n",
    )
    .unwrap();
    let m = read_glue(GlueTask::named("mnli"), &mnli).unwrap();
    assert_eq!(m[0].text_a, "The new rights are nice enough");
    // Labels in GLUE's order: contradiction, entailment, neutral; the gold label, not label1.
    assert_eq!(
        (m[0].label, m[1].label),
        (Some(Label::Class(2)), Some(Label::Class(0)))
    );

    let qnli = dir.path().join("qnli.tsv");
    std::fs::write(
        &qnli,
        "index\tquestion\tsentence\tlabel\n\
         0\tWhat came into force after the new constitution was herald?\tAs of that day, the new constitution heralding the Second Republic came into force.\tentailment\n\
         1\tWhat is the first major city in the stream of the Rhine?\tThe most important tributaries in this area are the Ill below of Strasbourg.\tnot_entailment\n",
    )
    .unwrap();
    let n = read_glue(GlueTask::named("qnli"), &qnli).unwrap();
    assert_eq!(
        (n[0].label, n[1].label),
        (Some(Label::Class(0)), Some(Label::Class(1)))
    );
    assert!(n[1].text_b.as_deref().unwrap().ends_with("Strasbourg."));
    // A row with one column missing (3 fields in the 4-column layout) is an error naming
    // file:line, not an unlabeled row whose label became its text.
    let short = dir.path().join("short.tsv");
    std::fs::write(
        &short,
        "index\tquestion\tsentence\tlabel\n0\tQ?\tA.\tentailment\n1\tWhat is it?\tnot_entailment\n",
    )
    .unwrap();
    let e = read_glue(GlueTask::named("qnli"), &short)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("short.tsv:3") && e.contains("3 tab-separated columns") && e.contains("has 4"),
        "{e}"
    );
    let cola = dir.path().join("cola.tsv");
    std::fs::write(
        &cola,
        "gj04\t1\t\tOur friends won't buy this.\ngj04\t1\tNo star.\n",
    )
    .unwrap();
    let e = read_glue(GlueTask::named("cola"), &cola)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cola.tsv:2"), "{e}");
    assert_eq!(
        GlueTask::named("mnli").dev_files(dir.path()),
        vec![
            dir.path().join("dev_matched.tsv"),
            dir.path().join("dev_mismatched.tsv")
        ]
    );
}

#[test]
fn malformed_glue_rows_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev.tsv");
    std::fs::write(
        &p,
        "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tmaybe\n",
    )
    .unwrap();
    let e = read_glue(GlueTask::named("rte"), &p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dev.tsv:3") && e.contains("maybe"), "{e}");
    std::fs::write(
        &p,
        "index\tsentence1\tsentence2\tlabel\n0\tonly one column\n",
    )
    .unwrap();
    let e = read_glue(GlueTask::named("rte"), &p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dev.tsv:2"), "{e}");
}

#[test]
fn squad_reader_and_evaluation_on_the_real_file() {
    let ex = read_squad(&data("squad-v1.1/dev-half-a.json")).unwrap();
    assert_eq!(ex.len(), 4961);
    assert!(ex.iter().all(|e| !e.answers.is_empty()));
    assert!(
        ex.iter().any(|e| e.answers.len() >= 3),
        "several gold answers per question"
    );
    assert_eq!(ex[0].answers[0].0, "Denver Broncos");
    // Perfect predictions score 100 / 100; none score 0.
    let perfect: HashMap<String, String> = ex
        .iter()
        .map(|e| (e.id.clone(), e.answers[0].0.clone()))
        .collect();
    let (em, f1) = evaluate_squad(&ex, &perfect);
    close(em, 100.0);
    close(f1, 100.0);
    assert_eq!(evaluate_squad(&ex, &HashMap::new()), (0.0, 0.0));
}

#[test]
fn layer_wise_decay_follows_electras_code_or_its_shifted_reading() {
    use trueneg::finetune::recipe::{LayerDecayRule, layer_decay_factor};
    // google-research/electra's `_get_layer_lrs` with 12 layers: the head 1, layer i
    // 0.8^(13 − i) (the top layer 0.8²), the embeddings 0.8^14.
    let f = |n: &str| layer_decay_factor(n, "electra", 12, 0.8, LayerDecayRule::Electra);
    close(f("classifier.weight"), 1.0);
    close(f("classifier.out_proj.bias"), 1.0);
    close(f("electra.encoder.layer.11.output.dense.weight"), 0.64);
    close(
        f("electra.encoder.layer.10.attention.self.query.weight"),
        0.8f64.powi(3),
    );
    close(
        f("electra.encoder.layer.0.output.dense.bias"),
        0.8f64.powi(13),
    );
    close(
        f("electra.embeddings.word_embeddings.weight"),
        0.8f64.powi(14),
    );
    close(f("electra.embeddings_project.weight"), 0.8f64.powi(14));
    // The shifted reading: the top layer 0.8, the embeddings 0.8^13.
    let g = |n: &str| layer_decay_factor(n, "bert", 12, 0.8, LayerDecayRule::Shifted);
    close(g("bert.encoder.layer.11.output.dense.weight"), 0.8);
    close(
        g("bert.encoder.layer.0.output.dense.weight"),
        0.8f64.powi(12),
    );
    close(g("bert.embeddings.LayerNorm.weight"), 0.8f64.powi(13));
    close(g("bert.pooler.dense.weight"), 1.0);
    close(g("classifier.weight"), 1.0);
}

#[test]
fn electras_schedule_is_the_product_of_warmup_and_decay() {
    use trueneg::finetune::recipe::product_lr;
    // T = 100, W = 10: t = 0 gives 0, t = 5 half the warmup times (1 − 5/100), after the
    // warmup only the decay.
    close(product_lr(1.0, 0, 10.0, 100), 0.0);
    close(product_lr(1.0, 5, 10.0, 100), 0.5 * 0.95);
    close(product_lr(1.0, 10, 10.0, 100), 0.9);
    close(product_lr(1.0, 60, 10.0, 100), 0.4);
    close(product_lr(1.0, 100, 10.0, 100), 0.0);
    // A fractional W (ELECTRA does not round it): W = 2.5.
    close(product_lr(2.0, 1, 2.5, 10), 2.0 * 0.4 * 0.9);
    // No warmup.
    close(product_lr(1.0, 0, 0.0, 10), 1.0);
}

#[test]
fn only_unordered_pairs_are_swapped() {
    use trueneg::finetune::recipe::{FinetuneOptions, Recipe};
    use trueneg::tasks::glue::GlueTask;
    // ELECTRA's recipe doubles MRPC and STS-B (its `double_unordered`), nothing else.
    for t in GlueTask::glue() {
        let o = FinetuneOptions::for_task(Recipe::Electra, t);
        assert_eq!(o.both_orders, ["mrpc", "stsb"].contains(&t.name()), "{t:?}");
        assert!(!FinetuneOptions::for_task(Recipe::Transformers, t).both_orders);
    }
    // Asked for on a directional task, it is an error naming the task.
    for t in [
        GlueTask::named("rte"),
        GlueTask::named("qnli"),
        GlueTask::named("mnli"),
        GlueTask::named("cad-nli"),
        GlueTask::named("boolq"),
        GlueTask::named("perspectrum"),
    ] {
        let mut o = FinetuneOptions::electra(t);
        o.both_orders = true;
        let e = o.validate_for(t).unwrap_err().to_string();
        assert!(
            e.contains("--both-orders") && e.contains(t.dir_name()),
            "{e}"
        );
    }
    let mut o = FinetuneOptions::electra(GlueTask::named("qqp"));
    o.both_orders = true;
    o.validate_for(GlueTask::named("qqp")).unwrap();
}

#[test]
fn sentence_pairs_are_encoded_and_truncated_longest_first() {
    use trueneg::text::WordPieceTokenizer;
    use trueneg::text::pairs::{Truncation, encode_pair};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("vocab.txt");
    std::fs::write(&p, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\n").unwrap();
    let t = WordPieceTokenizer::load(&p).unwrap();
    for rule in [Truncation::Greedy, Truncation::LongestFirst] {
        let (ids, types) = encode_pair(&t, "a a a a a a", Some("b c"), 8, rule);
        assert_eq!(ids, vec![2, 5, 5, 5, 3, 6, 7, 3]);
        assert_eq!(types, vec![0, 0, 0, 0, 0, 1, 1, 1]);
        let (ids, types) = encode_pair(&t, "a b", None, 8, rule);
        assert_eq!((ids, types), (vec![2, 5, 6, 3], vec![0; 4]));
    }
    // Both texts longer than half of an odd room: the rules part. Longest first as the
    // tokenizers library (0.23) cuts them, greedy as `_truncate_seq_pair` does.
    for ((na, nb), greedy, longest_first) in [
        ((20, 20), (15, 14), (14, 15)),
        ((21, 20), (15, 14), (15, 14)),
        ((20, 21), (15, 14), (14, 15)),
        ((30, 18), (15, 14), (15, 14)),
        ((18, 30), (15, 14), (14, 15)),
        ((16, 14), (15, 14), (15, 14)),
        ((14, 16), (14, 15), (14, 15)),
        ((10, 40), (10, 19), (10, 19)),
    ] {
        assert_eq!(Truncation::Greedy.lengths(na, nb, 29), greedy, "{na} {nb}");
        assert_eq!(
            Truncation::LongestFirst.lengths(na, nb, 29),
            longest_first,
            "{na} {nb}"
        );
    }
    let (ids, _) = encode_pair(&t, "a a a a", Some("b b b b"), 8, Truncation::Greedy);
    assert_eq!(ids, vec![2, 5, 5, 5, 3, 6, 6, 3]);
    let (ids, _) = encode_pair(&t, "a a a a", Some("b b b b"), 8, Truncation::LongestFirst);
    assert_eq!(ids, vec![2, 5, 5, 3, 6, 6, 6, 3]);
}

#[test]
fn squad_windows_hold_the_answer_tokens() {
    use trueneg::finetune::qa_features::{QaOptions, make_features};
    use trueneg::text::WordPieceTokenizer;
    let mut ex = read_squad(&data("squad-v1.1/dev-half-a.json")).unwrap();
    ex.truncate(300);
    let texts: Vec<String> = ex
        .iter()
        .flat_map(|e| [e.context.clone(), e.question.clone()])
        .collect();
    let tok = WordPieceTokenizer::train(&texts, 2000).unwrap();
    let o = QaOptions {
        max_seq_len: 96,
        doc_stride: 32,
        ..QaOptions::default()
    };
    let f = make_features(&tok, &ex, &o).unwrap();
    assert!(f.len() > ex.len(), "long contexts need several windows");
    let mut found = vec![false; ex.len()];
    for x in &f {
        assert!(x.ids.len() <= 96);
        assert_eq!(x.ids[0], tok.special.cls);
        assert_eq!(*x.ids.last().unwrap(), tok.special.sep);
        if x.start == 0 {
            assert_eq!(x.end, 0);
            continue;
        }
        let e = &ex[x.example];
        let (a, _) = x.spans[x.start].unwrap();
        let (_, z) = x.spans[x.end].unwrap();
        // The target tokens cover the answer, and little more ("gold" in "golden").
        let got = &e.context[a..z];
        assert!(
            got.contains(&e.answers[0].0) && got.len() <= e.answers[0].0.len() + 24,
            "{}: {got:?} vs {:?}",
            e.id,
            e.answers[0].0
        );
        found[x.example] = true;
    }
    // Every answer is inside some window (answers are shorter than a window).
    assert!(found.iter().filter(|&&b| b).count() >= ex.len() * 98 / 100);
    // Consecutive windows of one question overlap by window − stride tokens.
    let w: Vec<_> = f.iter().filter(|x| x.example == 0).collect();
    assert!(w.len() >= 2);
    assert_eq!(
        w[0].spans.iter().flatten().nth(32),
        w[1].spans.iter().flatten().next()
    );
}

#[test]
fn best_span_respects_order_and_length() {
    use trueneg::finetune::qa_features::QaFeature;
    use trueneg::finetune::span_decode::best_span;
    let f = QaFeature {
        example: 0,
        ids: vec![0; 6],
        types: vec![0; 6],
        spans: vec![
            None,
            Some((0, 3)),
            Some((4, 7)),
            Some((8, 11)),
            Some((12, 15)),
            None,
        ],
        max_context: vec![false, true, true, true, true, false],
        start: 0,
        end: 0,
    };
    // The best start (4) lies after the best end (1): the best valid pair is (2, 3) or (4, 4).
    let start = [9.0, -3.0, 2.0, 0.0, 3.0, 9.0];
    let end = [9.0, 5.0, 0.0, 2.5, 1.0, 9.0];
    assert_eq!(best_span(&f, &start, &end, 20, 30), Some((4.5, 4, 11)));
    assert_eq!(best_span(&f, &start, &end, 20, 1), Some((4.0, 12, 15)));
    // A start token whose max-context window is another one is no start here.
    let mut g = f.clone();
    g.max_context[2] = false;
    assert_eq!(best_span(&g, &start, &end, 20, 30), Some((4.0, 12, 15)));
    // The n_best candidates are taken over every position, specials included (transformers'
    // rule): with n_best 2 the starts are positions 0 and 5, neither a context token.
    assert_eq!(best_span(&f, &start, &end, 2, 30), None);
}

#[test]
fn rows_without_an_index_column_are_numbered_from_zero_as_glue_submissions_are() {
    use trueneg::tasks::glue::{GlueTask, read_glue};
    let ex = read_glue(GlueTask::named("sst2"), &common::data("glue/SST-2/dev.tsv")).unwrap();
    let ids: Vec<String> = ex.iter().map(|e| e.id.clone()).collect();
    let want: Vec<String> = (0..ex.len()).map(|i| i.to_string()).collect();
    assert_eq!(ids, want);
}
