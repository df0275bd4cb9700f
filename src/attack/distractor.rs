//! AddSentDiverse's distractor sentences, built on WordNet alone (no parser, no tagger).
//!
//! A distractor is a declarative sentence made from the question.
//! The wh-phrase goes and a fake answer of the gold answer's kind takes its place: another
//! number for a number, another month for a date, another name for a capitalised answer, else
//! a WordNet antonym of its last word or a generic noun. The grammar has these cases (no
//! parser; parts of speech from WordNet):
//!
//! - subject questions: "Who founded the city?" → "Alvarez founded the city.";
//!   "Which river flows …" → "Kestrel is the river that flows …";
//! - forms of *be*: "What is the capital of France?" → "The capital of Kestrel is Alvarez.";
//!   "When was the city founded?" → "The city was founded in 1850.";
//! - *do* and modals, with the verb re-inflected: "When did the Normans conquer England?" →
//!   "The Normans conquered Kestrel in 1071.";
//! - "how many N": a number of N;
//! - a leading preposition ("In what year …") moves in front of the fake answer at the end;
//! - a wh-word inside the question takes the fake answer in place ("Plants lack what kind of
//!   cells?" → "Plants lack copper.");
//! - anything else: "`<remainder>` is `<fake answer>`."
//!
//! The meaning changes as well: every number becomes another number, and every run of
//! capitalised words becomes one other name (a possessive kept). When there is neither, one
//! adjective becomes its WordNet antonym ("greater" → "lesser"), or else a noun becomes another
//! noun. The sentence is inserted at a random sentence boundary of the context that is not
//! inside a gold answer, and answers after it move by its length. A transformed file keeps
//! every article and its title. `docs/attack-samples.md` shows 20 samples of each attack.

use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;

use super::phrases::*;
use super::*;
use crate::lexicon::wordnet::WordNet;

/// A sentence boundary (after ". ", "! ", "? ", or the text's start / end) not inside a span.
pub(super) fn insertion_point(ctx: &str, spans: &[(usize, usize)], rng: &mut ChaCha8Rng) -> usize {
    let mut points = vec![0, ctx.len()];
    for (i, _) in ctx.match_indices(['.', '!', '?']) {
        let rest = &ctx[i + 1..];
        if rest.starts_with(' ') && rest[1..].chars().next().is_some_and(char::is_uppercase) {
            points.push(i + 2);
        }
    }
    points.retain(|&p| !spans.iter().any(|&(a, b)| a < p && p < b));
    *points
        .choose(rng)
        .expect("the text's end is always a boundary")
}

const WH: &[&str] = &[
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
];
const AUX: &[&str] = &[
    "is", "are", "was", "were", "did", "does", "do", "has", "have", "had", "can", "could", "will",
    "would", "many", "much", "long", "far", "old",
];

const BE: &[&str] = &["is", "are", "was", "were"];
const DO: &[&str] = &["do", "does", "did"];
const MODAL: &[&str] = &[
    "can", "could", "will", "would", "shall", "should", "may", "might", "must", "has", "have",
    "had",
];
const PREPS: &[&str] = &[
    "in", "on", "at", "by", "from", "during", "for", "to", "after", "before", "since", "of",
    "with", "under", "into", "through",
];
const TIME_NOUNS: &[&str] = &[
    "year", "month", "day", "century", "decade", "date", "time", "period", "era", "season",
];

/// The past tense of a verb: WordNet's exception list (`went`, `stopped`, `built`), else the
/// regular rules.
fn past(verb: &str, wn: &WordNet) -> String {
    let mut forms: Vec<String> = wn
        .inflected_forms(verb, 1)
        .into_iter()
        .filter(|f| !f.ends_with("ing") && !f.ends_with('s'))
        .collect();
    forms.sort_by_key(|f| (!f.ends_with("ed"), f.ends_with('n'), !f.contains('a')));
    if let Some(f) = forms.into_iter().next() {
        return f;
    }
    if verb.ends_with('e') {
        format!("{verb}d")
    } else if let Some(stem) = verb.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'o', 'u'])
    {
        format!("{stem}ied")
    } else {
        format!("{verb}ed")
    }
}

/// The third person singular present of a verb.
fn third_person(verb: &str) -> String {
    match verb {
        "have" => "has".into(),
        "be" => "is".into(),
        _ if verb.ends_with(['s', 'x', 'z', 'o'])
            || verb.ends_with("ch")
            || verb.ends_with("sh") =>
        {
            format!("{verb}es")
        }
        _ => match verb.strip_suffix('y') {
            Some(stem) if !stem.ends_with(['a', 'e', 'o', 'u']) => format!("{stem}ies"),
            _ => format!("{verb}s"),
        },
    }
}

/// Whether WordNet lists `w` (lower case) as a verb lemma.
fn is_verb(w: &str, wn: &WordNet) -> bool {
    // Any lemma: "stretches" reaches "stretch" through the noun rule first.
    wn.lemmas(w).iter().any(|(l, _, _)| wn.pos_counts(l)[1] > 0)
}

/// Whether `w` looks like a past participle ("founded", "born", "built").
fn is_participle(w: &str, wn: &WordNet) -> bool {
    let w = w.to_lowercase();
    (w.ends_with("ed") || w.ends_with("en") || w.ends_with('t') || w.ends_with('n'))
        && wn
            .lemmas(&w)
            .iter()
            .any(|(l, _, p)| *p == Some(1) && *l != w)
}

/// Whether a word can follow an auxiliary when the wh-phrase is the subject ("What was used
/// …", "Which country is not …", "What techniques can be used …").
fn starts_predicate(w: &str, wn: &WordNet) -> bool {
    let l = w.to_lowercase();
    matches!(
        l.as_str(),
        "not" | "be" | "been" | "being" | "also" | "often" | "still"
    ) || l.ends_with("ly")
        || is_participle(&l, wn)
}

/// Whether `w` (lower case) is an auxiliary: a form of *be*, *do*, a modal or *have*.
fn is_aux(w: &str) -> bool {
    [BE, DO, MODAL].iter().any(|l| l.contains(&w))
}

/// The end of a wh-phrase's noun phrase ("what general theory" | "was …"): the first auxiliary
/// within four words, if any.
fn phrase_end(lw: &[String], q: &[Piece], from: usize) -> Option<usize> {
    (from..(from + 5).min(lw.len()))
        .take_while(|&j| q[j].1)
        .find(|&j| is_aux(&lw[j]))
        .filter(|&j| j > from)
}

/// The distractor sentence for a question: a declarative sentence built from it, with a fake
/// answer of the gold answer's kind where the wh-phrase was and a changed entity, number or
/// antonym (see the module doc). "When did the Normans conquer England?" → "The Normans
/// conquered Kestrel in 1071."
pub fn distractor(question: &str, answer: &str, wn: &WordNet, rng: &mut ChaCha8Rng) -> String {
    let (q, lw) = question_pieces(question);
    let at = |i: usize| lw.get(i).map(String::as_str).unwrap_or("");
    let fake = fake_answer(answer, wn, rng);
    let Some(k) = wh_position(&q, &lw) else {
        return fallback(q, &fake, wn, rng);
    };
    let wh = lw[k].clone();
    let initial_prep = k == 1 && PREPS.contains(&at(0));
    if k > 0 && !initial_prep {
        return wh_inside(&q, &lw, k, answer, &fake, wn, rng);
    }
    let prep = initial_prep.then(|| lw[0].clone());
    let mut i = k + 1;
    let mut noun: Option<String> = None;
    let mut how_many = false;
    if wh == "how" && matches!(at(i), "many" | "much") {
        how_many = true;
        i += 1;
        if q.get(i).is_some_and(|p| p.1) && !is_aux(at(i)) {
            noun = Some(q[i].0.clone());
            i += 1;
        }
    } else if matches!(wh.as_str(), "what" | "which" | "whose")
        && let Some(e) = phrase_end(&lw, &q, i)
    {
        noun = Some(join(&q[i..e]));
        i = e;
    } else if wh == "how" && !is_aux(at(i)) {
        // "How long / far / old …": a measure this grammar does not turn around.
        return fallback(q, &fake, wn, rng);
    }
    let fake = if how_many {
        count_answer(fake, noun.as_deref(), rng)
    } else {
        fake
    };
    let time = noun
        .as_deref()
        .is_some_and(|n| TIME_NOUNS.contains(&n.to_lowercase().as_str()));
    // Where the fake answer goes when it is neither the subject nor the object.
    let adjunct = |default: &str| -> Vec<Piece> {
        let p = match (&prep, wh.as_str()) {
            (Some(p), _) => p.as_str(),
            _ if time => "in",
            (None, w) => adjunct_preposition(w).unwrap_or(default),
        };
        words(&format!("{p} {fake}"))
    };
    let aux = at(i).to_string();
    let has_aux = is_aux(&aux);
    let mut rest: Vec<Piece> = q[(i + usize::from(has_aux)).min(q.len())..].to_vec();
    let verb_at = main_verb(&rest, &aux, wn);
    change_around(&mut rest, verb_at, wn, rng);
    let object_like = (prep.is_none()
        && !time
        && matches!(wh.as_str(), "what" | "which" | "who" | "whom" | "whose"))
        || how_many;
    let subject = !has_aux || rest.first().is_some_and(|p| starts_predicate(&p.0, wn));
    let mut out: Vec<Piece> = Vec::new();
    if subject && object_like {
        subject_sentence(
            &mut out,
            rest,
            &fake,
            has_aux.then_some(aux.as_str()),
            &wh,
            wn,
        );
    } else if BE.contains(&aux.as_str()) {
        out = be_sentence(
            rest,
            &aux,
            wn,
            &|participle| match (participle, object_like) {
                (true, _) => adjunct(if wh == "who" { "by" } else { "as" }),
                (false, true) => words(&fake),
                (false, false) => adjunct(""),
            },
        );
    } else if has_aux {
        let Some(j) = verb_at else {
            return fallback(q, &fake, wn, rng);
        };
        let object = rest.split_off(j + 1);
        let verb = rest.pop().expect("the verb").0.to_lowercase();
        out.extend(rest);
        out.extend(verb_with_aux(&verb, &aux, wn));
        // "What did Tesla invent?" → "Tesla invented Alvarez."
        let (first, then) = if object_like {
            (words(&fake), object)
        } else {
            (object, adjunct(""))
        };
        out.extend(first.into_iter().chain(then));
    } else {
        // No auxiliary and not the subject ("When Tesla left?"): the fake answer at the end.
        out.extend(rest);
        out.extend(adjunct(""));
    }
    sentence(&out)
}

/// The question's pieces without its final punctuation, and their lower case.
fn question_pieces(question: &str) -> (Vec<Piece>, Vec<String>) {
    let mut q: Vec<Piece> = tokens(question)
        .into_iter()
        .map(|(a, b, w)| (question[a..b].to_string(), w))
        .collect();
    while q.last().is_some_and(|p| !p.1) {
        q.pop();
    }
    let lw = q.iter().map(|p| p.0.to_lowercase()).collect();
    (q, lw)
}

/// Where the question's wh-word is: one after a comma wins over a leading subordinate clause
/// ("When forces are …, what law gives symmetry?").
fn wh_position(q: &[Piece], lw: &[String]) -> Option<usize> {
    let after_comma = (1..lw.len()).find(|&j| q[j - 1].0 == "," && WH.contains(&lw[j].as_str()));
    after_comma.or_else(|| lw.iter().position(|w| WH.contains(&w.as_str())))
}

/// A question with a form of "be" as a statement: "When was the city founded?" → "The city was
/// founded in 1850." (`answer(true)`: the words after the participle), "What is the capital of
/// France?" → "The capital of Kestrel is Alvarez." (`answer(false)`).
fn be_sentence(
    mut rest: Vec<Piece>,
    aux: &str,
    wn: &WordNet,
    answer: &dyn Fn(bool) -> Vec<Piece>,
) -> Vec<Piece> {
    let participle = rest.last().is_some_and(|p| is_participle(&p.0, wn)) && rest.len() > 1;
    let part = participle.then(|| rest.pop().expect("non-empty"));
    rest.push((aux.to_string(), true));
    rest.extend(part);
    rest.extend(answer(participle));
    rest
}

/// "How many X": the fake answer as a number (the fake itself when it is one) and the noun.
fn count_answer(fake: String, noun: Option<&str>, rng: &mut ChaCha8Rng) -> String {
    let n = if fake.chars().all(|c| c.is_ascii_digit()) {
        fake
    } else {
        other_number("", rng)
    };
    format!("{n} {}", noun.unwrap_or_default())
        .trim()
        .to_string()
}

/// The preposition that puts the fake answer of a `wh` question as an adjunct, if the wh-word
/// implies one.
fn adjunct_preposition(wh: &str) -> Option<&'static str> {
    match wh {
        "when" | "where" => Some("in"),
        "why" => Some("because of"),
        "how" => Some("by"),
        _ => None,
    }
}

/// Changes the meaning of the words before and after the main verb (at `verb_at`), never the
/// verb itself; a noun when no word could be changed.
fn change_around(rest: &mut [Piece], verb_at: Option<usize>, wn: &WordNet, rng: &mut ChaCha8Rng) {
    let split = verb_at.unwrap_or(rest.len());
    let (subject_part, tail) = rest.split_at_mut(split);
    let object_part = if tail.is_empty() {
        tail
    } else {
        &mut tail[1..]
    };
    let c1 = change_meaning(subject_part, wn, rng, false);
    let c2 = change_meaning(object_part, wn, rng, false);
    if !(c1 || c2) {
        change_a_noun(object_part, wn, rng);
        change_a_noun(subject_part, wn, rng);
    }
}

/// The verb of a question with auxiliary `aux` in a statement: "did invent" → "invented",
/// "does run" → "runs", "can run" → "can run".
fn verb_with_aux(verb: &str, aux: &str, wn: &WordNet) -> Vec<Piece> {
    match aux {
        "did" => vec![(past(verb, wn), true)],
        "does" => vec![(third_person(verb), true)],
        "do" => vec![(verb.to_string(), true)],
        _ => vec![(aux.to_string(), true), (verb.to_string(), true)],
    }
}

/// Whether `w` is a determiner (a noun phrase goes on after it).
fn determiner(w: &str) -> bool {
    matches!(
        w.to_lowercase().as_str(),
        "the"
            | "a"
            | "an"
            | "its"
            | "his"
            | "her"
            | "their"
            | "this"
            | "that"
            | "these"
            | "those"
            | "our"
            | "my"
            | "your"
    )
}

/// The main verb of `rest` after do / a modal `aux`: a verb form after the subject; a word that
/// is more often a noun counts only before a function word or at the end ("… did the war end").
fn main_verb(rest: &[Piece], aux: &str, wn: &WordNet) -> Option<usize> {
    if !(DO.contains(&aux) || MODAL.contains(&aux)) {
        return None;
    }
    (1..rest.len()).find(|&j| {
        let l = rest[j].0.to_lowercase();
        rest[j].1
            && !capitalised(&rest[j].0)
            && !determiner(&rest[j - 1].0)
            && is_verb(&l, wn)
            && (wn.dominant_pos(&l).is_some_and(|d| d.0 == 1)
                || rest.get(j + 1).is_none_or(|n| !n.1 || is_stop(&n.0)))
    })
}

/// The wh-phrase is the subject: "Who founded the city?" → "Alvarez founded the city."; after
/// `aux` (a form of be / do / a modal) when the question has one.
fn subject_sentence(
    out: &mut Vec<Piece>,
    mut rest: Vec<Piece>,
    fake: &str,
    aux: Option<&str>,
    wh: &str,
    wn: &WordNet,
) {
    out.extend(words(fake));
    if let Some(aux) = aux {
        out.push((aux.to_string(), true));
    } else if matches!(wh, "what" | "which") {
        // "Which river flows through Paris?" → "Kestrel is the river that flows …": the
        // noun phrase runs up to the verb (a verb form in -s / -ed, or mostly a verb).
        let verb_form = |p: &Piece| {
            let l = p.0.to_lowercase();
            p.1 && !capitalised(&p.0)
                && is_verb(&l, wn)
                && (l.ends_with('s')
                    || l.ends_with("ed")
                    || wn.dominant_pos(&l).is_some_and(|d| d.0 == 1))
        };
        let starts_with_verb = rest.first().is_some_and(|p| {
            let l = p.0.to_lowercase();
            is_verb(&l, wn) && (l.ends_with('s') || l.ends_with("ed"))
        });
        if !starts_with_verb && let Some(v) = (1..rest.len().min(7)).find(|&v| verb_form(&rest[v]))
        {
            let tail = rest.split_off(v);
            out.extend(words("is the"));
            out.extend(rest);
            out.extend(words("that"));
            rest = tail;
        }
    }
    out.extend(rest);
}

/// A wh-word inside the question ("Plants lack what kind of cells?", "…, who acts as the
/// coordinator?"), at `k`: the fake answer takes the wh-phrase's place. A wh-question after a
/// leading clause ("Besides Africa, where did Germany …") is turned around on its own.
fn wh_inside(
    q: &[Piece],
    lw: &[String],
    k: usize,
    answer: &str,
    fake: &str,
    wn: &WordNet,
    rng: &mut ChaCha8Rng,
) -> String {
    let at = |i: usize| lw.get(i).map(String::as_str).unwrap_or("");
    let wh = lw[k].as_str();
    let np_end = if matches!(wh, "what" | "which" | "whose") {
        phrase_end(lw, q, k + 1)
    } else {
        None
    };
    if is_aux(at(np_end.unwrap_or(k + 1))) && q[k - 1].0 == "," {
        let sub = join(&q[k..]) + "?";
        let d = distractor(&sub, answer, wn, rng);
        let mut before = q[..k].to_vec();
        change_meaning(&mut before, wn, rng, true);
        let mut c = d.chars();
        let first = c.next().unwrap_or(' ');
        let rest = if d.split_whitespace().next().is_some_and(is_stop) {
            format!("{}{}", first.to_lowercase(), c.as_str())
        } else {
            d.clone()
        };
        return format!("{} {rest}", join(&before));
    }
    let verb_after = (k + 2..(k + 6).min(q.len())).find(|&j| {
        let l = &lw[j];
        q[j].1 && is_verb(l, wn) && (l.ends_with('s') || l.ends_with("ed"))
    });
    let end = if matches!(wh, "what" | "which" | "whose") {
        np_end.or(verb_after).unwrap_or(
            if q.get(k + 1).is_some_and(|p| {
                is_verb(&p.0.to_lowercase(), wn)
                    && wn
                        .dominant_pos(&p.0.to_lowercase())
                        .is_some_and(|d| d.0 == 1)
            }) {
                k + 1
            } else {
                q.len()
            },
        )
    } else if wh == "how" && matches!(at(k + 1), "many" | "much") {
        (k + 3).min(q.len())
    } else {
        k + 1
    };
    let mut before = q[..k].to_vec();
    let mut after = q[end..].to_vec();
    let c1 = change_meaning(&mut before, wn, rng, true);
    let c2 = change_meaning(&mut after, wn, rng, false);
    if !(c1 || c2) {
        // Not the word before the wh-phrase: that is its verb or preposition.
        let n = before.len().saturating_sub(1);
        change_a_noun(&mut after, wn, rng);
        change_a_noun(&mut before[..n], wn, rng);
    }
    let mut out = before;
    out.extend(words(fake));
    out.extend(after);
    sentence(&out)
}

/// The pieces as a sentence: a capital first letter and a full stop.
fn sentence(pieces: &[Piece]) -> String {
    let body = join(pieces);
    let mut c = body.chars();
    let first: String = c
        .next()
        .map(|f| f.to_uppercase().collect())
        .unwrap_or_default();
    format!("{first}{}.", c.as_str().trim_end_matches([',', ';', ':']))
}

/// For questions the declarative grammar does not cover ("How long is the Nile?", questions
/// without a wh-word): "`<changed remainder>` is `<fake answer>`." ("The Kestrel is 6712.").
fn fallback(mut q: Vec<Piece>, fake: &str, wn: &WordNet, rng: &mut ChaCha8Rng) -> String {
    let skip = q
        .iter()
        .take_while(|p| {
            let l = p.0.to_lowercase();
            WH.contains(&l.as_str()) || AUX.contains(&l.as_str()) || PREPS.contains(&l.as_str())
        })
        .count();
    let mut rest = q.split_off(skip);
    if !change_meaning(&mut rest, wn, rng, skip == 0) {
        change_a_noun(&mut rest, wn, rng);
    }
    let mut out = rest;
    out.extend(words(&format!("is {fake}")));
    sentence(&out)
}
