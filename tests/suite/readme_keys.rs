//! Every config key and value the README and docs/ show parses: the `--set key=value` of its commands,
//! the objective kinds of its table, the values listed for `hc_prediction` / `hc_discriminator`
//! and the CLINE keys' values of its table.

use crate::common;

use trueneg::train::config::PretrainConfig;

/// README.md and docs/*.md, one text.
fn readme() -> String {
    common::readme_and_docs()
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The backticked words of `s`, in order.
fn backticked(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// Parses `set` on `tiny`.
fn parses(set: &str) {
    parse_on("tiny", &[set.to_string()]);
}

/// Parses `sets` together on `preset`.
fn parse_on(preset: &str, sets: &[String]) {
    // Paths and devices are checked when a run starts, not when the config is read.
    if let Err(e) = PretrainConfig::load(preset, sets) {
        panic!(
            "README's `{}` does not parse on `{preset}`: {e}",
            sets.join(" ")
        );
    }
}

/// Every `--set` of the README and docs parses, with the others of its line, on the preset the
/// line's `--config` names (on `tiny` where the line names none).
#[test]
fn every_set_in_the_readme_parses() {
    let text = readme();
    let mut n = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let preset = words
            .windows(2)
            .find(|w| w[0] == "--config")
            .map(|w| w[1].trim_matches('`'))
            .filter(|p| trueneg::train::config::is_preset(p))
            .unwrap_or("tiny");
        let mut sets = Vec::new();
        for part in line.split("--set ").skip(1) {
            let arg = part.split_whitespace().next().unwrap_or("");
            let arg = arg.trim_matches(|c| c == '\'' || c == '`' || c == '\\');
            if arg.is_empty() || arg == "key=value" || arg.contains('…') {
                continue;
            }
            sets.push(arg.to_string());
        }
        if !sets.is_empty() {
            parse_on(preset, &sets);
            n += sets.len();
        }
    }
    assert!(n >= 8, "{n} --set examples");
}

#[test]
fn every_documented_objective_value_parses() {
    let text = readme();
    // The objective table: | `kind` | … |.
    let kinds: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| backticked(l).first().copied())
        .filter(|k| {
            ["baseline", "hc", "sr", "sr-sent", "hc+sr", "cline"].contains(k)
                || k.starts_with("hc")
                || k.starts_with("sr")
        })
        .collect();
    assert!(kinds.len() >= 6, "{kinds:?}");
    for k in kinds {
        parses(&format!("objective.kind={k}"));
    }
    // "Other keys: `hc_prediction` (`argmax`, …, or `sampled`: …), `hc_discriminator` (…)".
    let other = &text[text.find("Other keys:").expect("the Other keys paragraph")..];
    let other = &other[..other.find("\n\n").unwrap()];
    for key in [
        "hc_prediction",
        "hc_discriminator",
        "hc_source",
        "sr_sent_target",
        "sr_sent_encoder",
    ] {
        let at = other.find(&format!("`{key}` (")).expect(key) + key.len() + 4;
        let list = &other[at..at + other[at..].find(')').unwrap()];
        let values = backticked(list);
        assert!(values.len() >= 2, "{key}: {values:?}");
        for v in values {
            parses(&format!("objective.{key}={v}"));
        }
    }
    // The CLINE table: | `key` | `value`: … | `value`: … |.
    let mut n = 0;
    for line in text.lines().filter(|l| l.starts_with("| `cline_")) {
        let words = backticked(line);
        let key = words[0];
        for v in &words[1..] {
            if let Some((k, value)) = v.split_once(" = ") {
                parses(&format!("objective.{k}={value}"));
            } else {
                parses(&format!("objective.{key}={v}"));
            }
            n += 1;
        }
    }
    assert!(n >= 8, "{n} CLINE values");
}

#[test]
fn hc_prediction_takes_the_sample_spelling_too() {
    parses("objective.hc_prediction=sample");
    parses("objective.hc_prediction=sampled");
    assert!(PretrainConfig::load("tiny", &["objective.hc_prediction=samples".into()]).is_err());
}

#[test]
fn every_preset_loads_and_the_base_continuation_is_the_papers_setting() {
    use trueneg::train::config::PRESETS;
    for (name, _) in PRESETS {
        PretrainConfig::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // Zhang et al.'s Base setting: continue a released checkpoint for 200k steps, lr 5e-5,
    // batch 128 × 512.
    for name in ["electra-base-continue", "bert-base-continue"] {
        let c = PretrainConfig::load(name, &[]).unwrap();
        assert!(c.model.init_from.is_some(), "{name}");
        assert_eq!(
            (
                c.train.steps,
                c.optimizer.lr,
                c.data.batch_size,
                c.data.max_seq_len
            ),
            (200_000, 5e-5, 128, 512),
            "{name}"
        );
        assert!(
            !c.optimizer.bias_correction,
            "{name}: ELECTRA's / BERT's optimizer"
        );
    }
}
