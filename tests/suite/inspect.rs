//! `trueneg inspect` on a tiny run over the shared WikiText-2 test split: the page, the TSV
//! and the JSON agree, counts add up by part of speech, the same seed gives the same page and
//! another seed another, and a table that lists a mismatched (gold, prediction) pair makes
//! Hard Correction drop exactly those positions.

use crate::common;
use common::{bin, data, fails, ok, pretrained_tiny};

use std::path::Path;

use serde_json::Value;

fn inspect(run: &Path, extra: &[&str]) -> String {
    ok(bin()
        .args(["inspect", "--run"])
        .arg(run)
        .arg("--corpus")
        .arg(data("wikitext-2/wiki.test.raw"))
        .args(["--batches", "4", "--batch-size", "8", "--sample", "30"])
        .args(extra)
        .output()
        .unwrap())
}

fn read(run: &Path, step: u64, ext: &str) -> String {
    std::fs::read_to_string(run.join(format!("inspect-step-{step}.{ext}"))).unwrap()
}

#[test]
fn inspect_writes_a_page_whose_counts_add_up_and_repeats_with_its_seed() {
    let dir = tempfile::tempdir().unwrap();
    let run = pretrained_tiny(dir.path());
    let said = inspect(&run, &[]);
    assert!(said.contains("step 20:"), "{said}");
    let j: Value = serde_json::from_str(&read(&run, 20, "json")).unwrap();
    let total = &j["total"];
    let masked = total["masked"].as_u64().unwrap();
    assert!(masked > 50, "{j}");
    for key in ["masked", "mismatched", "corrected"] {
        let sum: u64 = j["by_pos"]
            .as_object()
            .unwrap()
            .values()
            .map(|c| c[key].as_u64().unwrap())
            .sum();
        assert_eq!(sum, total[key].as_u64().unwrap(), "{key}");
    }
    assert!(total["corrected"].as_u64() <= total["mismatched"].as_u64());
    let tsv = read(&run, 20, "tsv");
    assert_eq!(tsv.lines().count(), 31, "{tsv}");
    assert!(
        tsv.lines()
            .skip(1)
            .all(|l| l.split('\t').count() == 8 && l.contains('⟦'))
    );
    let page = read(&run, 20, "md");
    assert!(
        page.contains("| all | ") && page.contains("## Sample"),
        "{page}"
    );

    // The same seed: the same page (the command replaces its own files); another: another.
    inspect(&run, &[]);
    assert_eq!(read(&run, 20, "md"), page);
    inspect(&run, &["--seed", "2"]);
    assert_ne!(read(&run, 20, "md"), page);

    // A table listing mismatched pairs of the sample: those positions are dropped.
    let sample = j["sample"].as_array().unwrap();
    let tok = trueneg::text::WordPieceTokenizer::load(&run.join("tokenizer.json")).unwrap();
    let id = |t: &Value| tok.inner.token_to_id(t.as_str().unwrap()).unwrap();
    let pairs: Vec<(u32, u32)> = sample
        .iter()
        .filter(|p| p["gold"] != p["predicted"])
        .map(|p| (id(&p["gold"]), id(&p["predicted"])))
        .collect();
    assert!(!pairs.is_empty());
    let table = trueneg::text::SynonymTable::from_pairs(
        tok.vocab_size(),
        tok.fingerprint(),
        "test pairs".into(),
        pairs.clone(),
    );
    let lexicon = dir.path().join("pairs.safetensors");
    table.save(&lexicon).unwrap();
    inspect(&run, &["--lexicon", lexicon.to_str().unwrap()]);
    let j: Value = serde_json::from_str(&read(&run, 20, "json")).unwrap();
    assert!(j["total"]["corrected"].as_u64().unwrap() >= pairs.len() as u64 / 2);
    for p in j["sample"].as_array().unwrap() {
        let listed =
            p["gold"] != p["predicted"] && table.are_synonyms(id(&p["gold"]), id(&p["predicted"]));
        assert_eq!(p["dropped"].as_bool().unwrap(), listed, "{p}");
        assert_eq!(p["synonym"].as_bool().unwrap(), listed, "{p}");
    }
    assert!(read(&run, 20, "md").contains("Lexicon: test pairs"));

    // A step the run lacks is named with the steps it has.
    let e = fails(
        bin()
            .args(["inspect", "--run"])
            .arg(&run)
            .arg("--corpus")
            .arg(data("wikitext-2/wiki.test.raw"))
            .args(["--step", "7"])
            .output()
            .unwrap(),
    );
    assert!(e.contains("step 7") && e.contains("20"), "{e}");
}
