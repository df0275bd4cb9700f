//! Robustness attacks on the real SQuAD and GLUE files with the real WordNet: answer spans stay
//! at their stated offsets, the number of swapped words follows the rule, same seed → same
//! output.

use crate::common;
use common::data;

use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use trueneg::attack::*;
use trueneg::lexicon::wordnet::WordNet;
use trueneg::tasks::glue::{GlueTask, read_glue};
use trueneg::tasks::squad::read_squad;

fn wordnet() -> WordNet {
    WordNet::open(Path::new("/usr/share/wordnet")).unwrap()
}

fn squad_slice() -> Vec<trueneg::tasks::squad::SquadExample> {
    let mut ex = read_squad(&data("squad-v1.1/dev-half-a.json")).unwrap();
    ex.truncate(600);
    ex
}

fn check_answers(ex: &[trueneg::tasks::squad::SquadExample]) {
    for e in ex {
        for (text, start) in &e.answers {
            let at: String = e
                .context
                .chars()
                .skip(*start)
                .take(text.chars().count())
                .collect();
            assert_eq!(&at, text, "{}", e.id);
        }
    }
}

#[test]
fn wordnet_antonyms_and_parts_of_speech() {
    let wn = wordnet();
    assert!(wn.antonyms("early").contains("late"));
    assert!(wn.antonyms("good").contains("bad"));
    assert!(wn.antonyms("increased").contains("decreased"));
    assert!(wn.antonyms("xylophonist").is_empty());
    // "run": more verb than noun synsets.
    assert_eq!(wn.dominant_pos("run").unwrap().0, 1);
    let syn = wn.same_pos_synonyms("stayed");
    assert!(syn.contains(&"remained".to_string()), "{syn:?}");
    assert!(syn.iter().all(|s| s.chars().all(char::is_alphabetic)));
}

#[test]
fn swap_count_follows_the_rule() {
    assert_eq!(swap_count(3), 1);
    assert_eq!(swap_count(19), 1);
    assert_eq!(swap_count(20), 2);
    assert_eq!(swap_count(57), 5);
    assert_eq!(swap_count(500), 10);
    let wn = wordnet();
    let text = "The committee decided to increase the budget because the old building needed a large repair before winter.";
    let n_tokens = tokens(text).len();
    assert_eq!(n_tokens, 18);
    let edits = swap_synonyms(text, &wn, &mut ChaCha8Rng::seed_from_u64(3), &[]);
    assert_eq!(edits.len(), swap_count(n_tokens));
    for (a, b, new) in &edits {
        let old = &text[*a..*b];
        assert_ne!(old.to_lowercase(), new.to_lowercase());
        assert!(
            wn.synonyms(old).contains(&new.to_lowercase()),
            "{old} → {new}"
        );
    }
    // A protected span is never touched.
    let all = swap_synonyms(
        text,
        &wn,
        &mut ChaCha8Rng::seed_from_u64(3),
        &[(0, text.len())],
    );
    assert!(all.is_empty());
}

#[test]
fn swapped_squad_keeps_every_answer_at_its_offset() {
    let wn = wordnet();
    let ex = squad_slice();
    let a = attack_squad(AttackKind::SwapSynWordnet, &ex, &wn, 7);
    assert_eq!(a.len(), ex.len());
    check_answers(&a);
    let changed = a
        .iter()
        .zip(&ex)
        .filter(|(x, y)| x.context != y.context)
        .count();
    assert!(changed > ex.len() * 9 / 10, "{changed}");
    // Questions and answer texts are untouched; the number of swapped words follows the rule.
    for (x, y) in a.iter().zip(&ex) {
        assert_eq!(x.question, y.question);
        let texts = |e: &trueneg::tasks::squad::SquadExample| {
            e.answers.iter().map(|p| p.0.clone()).collect::<Vec<_>>()
        };
        assert_eq!(texts(x), texts(y));
        let old: Vec<&str> = y.context.split_whitespace().collect();
        let new: Vec<&str> = x.context.split_whitespace().collect();
        if old.len() == new.len() {
            let diff = old.iter().zip(&new).filter(|(p, q)| p != q).count();
            assert!(diff <= swap_count(tokens(&y.context).len()), "{diff}");
        }
    }
    assert_eq!(a, attack_squad(AttackKind::SwapSynWordnet, &ex, &wn, 7));
    assert_ne!(a, attack_squad(AttackKind::SwapSynWordnet, &ex, &wn, 8));
}

#[test]
fn add_sent_diverse_inserts_one_distractor_outside_the_answers() {
    let wn = wordnet();
    let ex = squad_slice();
    let a = attack_squad(AttackKind::AddSentDiverse, &ex, &wn, 1);
    check_answers(&a);
    for (x, y) in a.iter().zip(&ex) {
        assert!(x.context.len() > y.context.len());
        // Removing the inserted sentence gives the original back: exactly one insertion.
        let k = x
            .context
            .bytes()
            .zip(y.context.bytes())
            .take_while(|(p, q)| p == q)
            .count();
        let extra = x.context.len() - y.context.len();
        let mut back = x.context.clone();
        back.replace_range(k..k + extra, "");
        // The common prefix may end inside the insertion; compare from the end too.
        assert!(
            back == y.context || x.context.ends_with(&y.context[k..]),
            "{}",
            x.id
        );
    }
    assert_eq!(a, attack_squad(AttackKind::AddSentDiverse, &ex, &wn, 1));
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let d = distractor(
        "Who was the NFL Commissioner in early 2012?",
        "Roger Goodell",
        &wn,
        &mut rng,
    );
    assert!(
        d.ends_with('.') && !d.contains("2012") && !d.contains("NFL"),
        "{d}"
    );
    assert!(!d.contains("Roger") && !d.contains("Goodell"), "{d}");
    let n = fake_answer("1995", &wn, &mut rng);
    assert!(n.parse::<u32>().is_ok() && n != "1995", "{n}");
}

#[test]
fn swapped_glue_file_keeps_its_layout() {
    let wn = wordnet();
    for (task, folder) in [
        (GlueTask::named("mrpc"), "MRPC"),
        (GlueTask::named("cola"), "CoLA"),
    ] {
        let path = data(&format!("glue/{folder}/dev.tsv"));
        let text = attack_glue_file(task, &path, &wn, 1).unwrap();
        let orig = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), orig.lines().count());
        assert_eq!(text.starts_with('\u{feff}'), orig.starts_with('\u{feff}'));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("dev.tsv");
        std::fs::write(&f, &text).unwrap();
        let a = read_glue(task, &f).unwrap();
        let o = read_glue(task, &path).unwrap();
        assert_eq!(a.len(), o.len());
        let changed = a
            .iter()
            .zip(&o)
            .filter(|(x, y)| x.text_a != y.text_a)
            .count();
        assert!(changed > o.len() / 2, "{folder}: {changed}");
        for (x, y) in a.iter().zip(&o) {
            assert_eq!((x.label, &x.id), (y.label, &y.id));
        }
    }
}

/// Names, numbers and answers are never swapped; synonyms are inflected like the word.
#[test]
fn swap_leaves_names_numbers_and_answers_and_inflects_synonyms() {
    let wn = wordnet();
    let text = "California joined the United States when eight settlers stayed in the valley. \
                People in California sold the largest farms; Paris grew quickly.";
    let answer = text.find("largest").unwrap();
    let protected = [(answer, answer + "largest farms".len())];
    for seed in 0..40 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let edits = swap_synonyms(text, &wn, &mut rng, &protected);
        for (a, b, new) in &edits {
            let old = &text[*a..*b];
            for kept in [
                "California",
                "United",
                "States",
                "eight",
                "Paris",
                "largest",
                "farms",
            ] {
                assert_ne!(old, kept, "seed {seed}: {old} → {new}");
            }
            assert!(new.chars().count() > 2, "{old} → {new}");
        }
    }
    assert!(wn.is_proper("california") && !wn.is_proper("state"));
    assert!(!wn.same_pos_synonyms("California").iter().any(|s| s == "ca"));
    use trueneg::lexicon::wordnet::Form;
    assert_eq!(wn.inflect("associate", Form::Gerund, 1), "associating");
    assert_eq!(wn.inflect("apply", Form::Past, 1), "applied");
    assert_eq!(wn.inflect("keep", Form::Past, 1), "kept");
    assert_eq!(wn.inflect("alumnus", Form::S, 0), "alumni");
    assert_eq!(wn.inflect("big", Form::Comparative, 2), "bigger");
    let sold = wn.same_pos_synonyms("sold");
    assert!(
        sold.iter()
            .all(|s| s.ends_with("ed") || wn.inflected_forms(&wn.lemmas(s)[0].0, 1).contains(s)),
        "{sold:?}"
    );
}

/// AddSentDiverse writes declarative sentences: no wh-word left in front, a full stop, the
/// question's entity or number changed, a fake answer of the gold answer's kind.
#[test]
fn distractors_are_declarative_sentences() {
    let wn = wordnet();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let cases = [
        ("When did the Normans conquer England?", "1066"),
        ("Who founded the city of Rome?", "Romulus"),
        ("What is the capital of France?", "Paris"),
        ("When was the Eiffel Tower built?", "1889"),
        ("How many people live in Warsaw?", "1.7 million"),
        ("In what year did the war end?", "1918"),
        ("Plants lack what kind of immune cells?", "phagocytic cells"),
    ];
    let mut out = Vec::new();
    for (q, a) in cases {
        let d = distractor(q, a, &wn, &mut rng);
        let first = d.split_whitespace().next().unwrap().to_lowercase();
        assert!(
            d.ends_with('.')
                && !d.contains('?')
                && !["what", "when", "who", "how", "in"].contains(&first.as_str()),
            "{q} → {d}"
        );
        let c = d.chars().next().unwrap();
        assert!(c.is_uppercase() || c.is_ascii_digit(), "{d}");
        out.push(d);
    }
    assert!(
        out[0].starts_with("The ")
            && out[0].contains(" conquered ")
            && !out[0].contains("England")
            && !out[0].contains("1066"),
        "{}",
        out[0]
    );
    assert!(out[0].contains(" in "), "{}", out[0]);
    assert!(
        out[1].ends_with("founded the city of Rome.") || !out[1].contains("Rome"),
        "{}",
        out[1]
    );
    assert!(!out[1].starts_with("Romulus"), "{}", out[1]);
    assert!(
        out[2].starts_with("The capital of ")
            && !out[2].contains("France")
            && out[2].contains(" is "),
        "{}",
        out[2]
    );
    assert!(
        out[3].contains(" was built in ") && !out[3].contains("1889"),
        "{}",
        out[3]
    );
    assert!(
        out[4].contains(" people live in ") && !out[4].contains("Warsaw"),
        "{}",
        out[4]
    );
    assert!(
        out[5].contains(" ended in ") && !out[5].contains("1918"),
        "{}",
        out[5]
    );
    assert!(out[6].starts_with("Plants lack "), "{}", out[6]);
}

/// A transformed SQuAD file keeps every article and its title.
#[test]
fn attacked_squad_keeps_articles_and_titles() {
    let wn = wordnet();
    let path = data("squad-v1.1/dev-half-a.json");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("add");
    trueneg::attack::files::write_attacked(
        AttackKind::AddSentDiverse,
        trueneg::tasks::task::Task::Squad,
        &path,
        &out,
        &wn,
        1,
    )
    .unwrap();
    let titles = |p: &Path| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["title"].as_str().unwrap().to_string())
            .collect()
    };
    let before = titles(&path);
    assert!(before.len() > 1);
    assert_eq!(titles(&out.join("dev-half-a.json")), before);
    assert_eq!(
        read_squad(&out.join("dev-half-a.json")).unwrap().len(),
        read_squad(&path).unwrap().len()
    );
}

/// `attack --task squad` on a folder reads its SQuAD files (the standard names, else every
/// `.json`: the shared data's `dev-half-a.json`); a folder without any is an error that writes
/// nothing.
#[test]
fn a_squad_folder_is_attacked_file_by_file_and_an_empty_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = |data: &Path, out: &str| {
        common::bin()
            .args([
                "attack",
                "--kind",
                "swap-syn-wordnet",
                "--task",
                "squad",
                "--data",
            ])
            .arg(data)
            .arg("--out")
            .arg(dir.path().join(out))
            .output()
            .unwrap()
    };
    let squad = data("squad-v1.1");
    let out = common::ok(run(&squad, "swapped"));
    assert!(out.contains("dev-half-a.json"), "{out}");
    let original = read_squad(&squad.join("dev-half-a.json")).unwrap();
    let swapped = read_squad(&dir.path().join("swapped/dev-half-a.json")).unwrap();
    assert_eq!(original.len(), swapped.len());
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = common::fails(run(&empty, "none"));
    assert!(e.contains("no SQuAD file"), "{e}");
    assert!(!dir.path().join("none").exists());
}
