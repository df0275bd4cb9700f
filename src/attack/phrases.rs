//! The phrases AddSentDiverse's distractors are made of: fake answers of the gold answer's kind
//! (another number, month or name, a WordNet antonym, a generic noun), the change of meaning
//! around the wh-phrase (numbers, names, an adjective's antonym, another noun), and sentences
//! as word pieces.

use rand::Rng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::lexicon::wordnet::WordNet;

pub(super) const NAMES: &[&str] = &[
    "Alvarez",
    "Brightwater",
    "Castellan",
    "Dunmore",
    "Elsworth",
    "Fairholm",
    "Greystone",
    "Halloran",
    "Ingersoll",
    "Jarrow",
    "Kestrel",
    "Lindqvist",
    "Marlowe",
    "Northcott",
];
pub(super) const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
pub(super) const NOUNS: &[&str] = &[
    "pottery",
    "a lighthouse",
    "the harbour",
    "copper",
    "a festival",
    "the orchard",
];

pub(super) fn other_number(s: &str, rng: &mut ChaCha8Rng) -> String {
    match s.parse::<u64>() {
        Ok(n) if (1000..=2100).contains(&n) && s.len() == 4 => {
            let d = rng.random_range(1..=30);
            format!("{}", if rng.random_bool(0.5) { n + d } else { n - d })
        }
        Ok(n) => format!("{}", n + rng.random_range(1..=9)),
        Err(_) => format!("{}", rng.random_range(2..=99)),
    }
}

pub(super) fn other_name(not: &str, rng: &mut ChaCha8Rng) -> String {
    loop {
        let n = NAMES.choose(rng).expect("names");
        if *n != not {
            return n.to_string();
        }
    }
}

/// A fake answer of the same kind as `answer` (see the module doc).
pub fn fake_answer(answer: &str, wn: &WordNet, rng: &mut ChaCha8Rng) -> String {
    let words: Vec<&str> = tokens(answer)
        .into_iter()
        .filter(|t| t.2)
        .map(|(a, b, _)| &answer[a..b])
        .collect();
    if let Some(m) = words.iter().find(|w| MONTHS.contains(w)) {
        let other = MONTHS.iter().filter(|x| *x != m).collect::<Vec<_>>();
        return format!(
            "{} {}",
            other.choose(rng).expect("months"),
            rng.random_range(1..=28)
        );
    }
    if let Some(n) = words.iter().find(|w| w.chars().all(|c| c.is_ascii_digit())) {
        return other_number(n, rng);
    }
    if words
        .first()
        .is_some_and(|w| w.chars().next().is_some_and(char::is_uppercase))
    {
        return other_name(words[0], rng);
    }
    if let Some(last) = words.last()
        && let Some(a) = wn.antonyms(last).into_iter().next()
    {
        return a;
    }
    NOUNS.choose(rng).expect("nouns").to_string()
}

/// One token of a sentence being built: its text and whether it is a word (punctuation is
/// written without a space before it).
pub(super) type Piece = (String, bool);

/// Changes the meaning of part of a question: numbers become other numbers, each run of
/// capitalised words (with the dots of initials) one other name (a possessive `'s` kept). When
/// neither is there, one adjective with a WordNet antonym becomes that antonym ("greater" →
/// "lesser"; nouns and verbs are left alone: their antonyms read as nonsense, "passer" →
/// "failer"). A capitalised first word of the question counts as a name only when WordNet does
/// not know it as a common word. Returns whether anything changed.
pub(super) fn change_meaning(
    pieces: &mut [Piece],
    wn: &WordNet,
    rng: &mut ChaCha8Rng,
    initial: bool,
) -> bool {
    let mut changed = false;
    let mut entity = vec![false; pieces.len()];
    for i in 0..pieces.len() {
        let (w, is_word) = pieces[i].clone();
        if !is_word {
            if w == "." && i > 0 && entity[i - 1] {
                pieces[i].0.clear();
                entity[i] = true;
            }
            continue;
        }
        if is_stop(&w) {
            continue;
        }
        let lower = w.to_lowercase();
        let known_common = |l: &str| {
            wn.lemmas(l)
                .first()
                .is_some_and(|(m, _, _)| !wn.is_proper(m))
        };
        if w.chars().all(|c| c.is_ascii_digit()) {
            pieces[i].0 = other_number(&w, rng);
            changed = true;
        } else if capitalised(&w) && !(initial && i == 0 && known_common(&lower)) {
            let (name, possessive) = match w.strip_suffix("'s") {
                Some(n) => (n, "'s"),
                None => (w.as_str(), ""),
            };
            if i > 0 && entity[i - 1] {
                // "Peyton Manning's": the name's possessive moves to the one name written.
                pieces[i].0.clear();
                if let Some(j) = (0..i).rev().find(|&j| !pieces[j].0.is_empty()) {
                    pieces[j].0.push_str(possessive);
                }
            } else {
                pieces[i].0 = format!("{}{possessive}", other_name(name, rng));
            }
            entity[i] = true;
            changed = true;
        }
    }
    if changed {
        return true;
    }
    for piece in pieces.iter_mut().filter(|p| p.1 && !is_stop(&p.0)) {
        let lower = piece.0.to_lowercase();
        if wn.dominant_pos(&lower).is_some_and(|(p, _, _)| p == 2)
            && let Some(a) = wn.antonyms(&lower).into_iter().next()
        {
            piece.0 = match_case(&piece.0, &a);
            return true;
        }
    }
    false
}

/// Nouns a distractor's changed word can become when nothing else changed.
pub(super) const OTHER_NOUNS: &[&str] = &[
    "astronomy",
    "farming",
    "shipping",
    "music",
    "pottery",
    "weaving",
    "mining",
    "poetry",
];

/// When nothing in the question changed: its last content noun becomes another noun, so that
/// the distractor never answers the question.
pub(super) fn change_a_noun(pieces: &mut [Piece], wn: &WordNet, rng: &mut ChaCha8Rng) {
    if let Some(i) = (0..pieces.len()).rev().find(|&i| {
        pieces[i].1
            && !is_stop(&pieces[i].0)
            && !capitalised(&pieces[i].0)
            && wn
                .dominant_pos(&pieces[i].0.to_lowercase())
                .is_some_and(|(p, _, _)| p == 0)
    }) {
        pieces[i].0 = OTHER_NOUNS.choose(rng).expect("nouns").to_string();
    }
}

pub(super) fn join(pieces: &[Piece]) -> String {
    let mut out = String::new();
    let mut open_quote = false;
    for (w, is_word) in pieces.iter().filter(|p| !p.0.is_empty()) {
        let glued = out.is_empty()
            || out.ends_with(['(', '[', '-', '/'])
            || (open_quote && out.ends_with('"'));
        if *is_word {
            if !glued {
                out.push(' ');
            }
        } else if w == "\"" {
            open_quote = !open_quote;
            if open_quote && !out.is_empty() {
                out.push(' ');
            }
        } else if w == "(" && !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

pub(super) fn words(s: &str) -> Vec<Piece> {
    s.split_whitespace()
        .map(|w| (w.to_string(), true))
        .collect()
}
