//! Evaluation metrics: accuracy, binary F1, Matthews correlation (CoLA), Pearson and Spearman
//! (STS-B; ties get their average rank), and SQuAD v1.1's exact match and F1 with the official
//! answer normalisation.

use std::collections::HashMap;

pub fn accuracy(pred: &[usize], gold: &[usize]) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    pred.iter().zip(gold).filter(|(p, g)| p == g).count() as f64 / gold.len() as f64
}

/// F1 of the positive class (label 1).
pub fn f1_binary(pred: &[usize], gold: &[usize]) -> f64 {
    let tp = pred
        .iter()
        .zip(gold)
        .filter(|&(&p, &g)| p == 1 && g == 1)
        .count() as f64;
    let fp = pred
        .iter()
        .zip(gold)
        .filter(|&(&p, &g)| p == 1 && g != 1)
        .count() as f64;
    let fn_ = pred
        .iter()
        .zip(gold)
        .filter(|&(&p, &g)| p != 1 && g == 1)
        .count() as f64;
    if tp == 0.0 {
        return 0.0;
    }
    2.0 * tp / (2.0 * tp + fp + fn_)
}

/// Matthews correlation coefficient of binary predictions; 0 when undefined.
pub fn matthews(pred: &[usize], gold: &[usize]) -> f64 {
    let (mut tp, mut tn, mut fp, mut fn_) = (0.0, 0.0, 0.0, 0.0);
    for (&p, &g) in pred.iter().zip(gold) {
        match (p == 1, g == 1) {
            (true, true) => tp += 1.0,
            (false, false) => tn += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fn_ += 1.0,
        }
    }
    let d: f64 = (tp + fp) * (tp + fn_) * (tn + fp) * (tn + fn_);
    if d == 0.0 {
        0.0
    } else {
        (tp * tn - fp * fn_) / d.sqrt()
    }
}

pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    if sxx == 0.0 || syy == 0.0 {
        0.0
    } else {
        sxy / (sxx * syy).sqrt()
    }
}

/// 1-based ranks, ties sharing their average rank.
pub fn ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation: Pearson of the (tie-averaged) ranks.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

/// SQuAD's normalisation, in the official script's order: lower case, ASCII punctuation
/// removed (Python's `string.punctuation`), articles removed where the script's regex
/// `\b(a|an|the)\b` finds them (also next to a character that is neither a letter, a digit nor
/// `_`, such as non-ASCII punctuation: "the’s", "«the»"), white space collapsed.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    remove_articles(&no_punct)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A character of a word for the `\b` of Python's `re` on text: a letter, a digit or `_`.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `re.sub(r'\b(a|an|the)\b', ' ', text)`: every article standing between word boundaries
/// becomes a space.
fn remove_articles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev_word = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let article = (!prev_word)
            .then(|| {
                ["a", "an", "the"].into_iter().find(|a| {
                    rest.strip_prefix(a)
                        .is_some_and(|after| !after.chars().next().is_some_and(is_word_char))
                })
            })
            .flatten();
        if let Some(a) = article {
            out.push(' ');
            rest = &rest[a.len()..];
            prev_word = false;
            continue;
        }
        out.push(c);
        prev_word = is_word_char(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

pub fn exact_match(pred: &str, gold: &str) -> f64 {
    f64::from(u8::from(normalize_answer(pred) == normalize_answer(gold)))
}

/// Token-level F1 between normalised answers (bag of tokens); 0 when they share no token,
/// both empty included (SQuAD v1.1's official script).
pub fn token_f1(pred: &str, gold: &str) -> f64 {
    let p = normalize_answer(pred);
    let g = normalize_answer(gold);
    let pt: Vec<&str> = p.split_whitespace().collect();
    let gt: Vec<&str> = g.split_whitespace().collect();
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for t in &gt {
        *counts.entry(t).or_default() += 1;
    }
    let mut same = 0;
    for t in &pt {
        if let Some(c) = counts.get_mut(t)
            && *c > 0
        {
            *c -= 1;
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / pt.len() as f64;
    let recall = same as f64 / gt.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The best score of `pred` over all gold answers.
pub fn max_over_golds(f: fn(&str, &str) -> f64, pred: &str, golds: &[String]) -> f64 {
    golds.iter().map(|g| f(pred, g)).fold(0.0, f64::max)
}
