//! Word-level rules shared by the robustness attacks and the sentence triples' generation: a plain
//! tokenisation (words and punctuation with byte ranges), stop words, number words, and which
//! words are names or numbers (never replaced).

use super::wordnet::WordNet;

pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "s",
    "t",
    "one",
    "may",
    "might",
    "must",
    "many",
    "much",
];

pub fn is_stop(w: &str) -> bool {
    STOP_WORDS.contains(&w.to_lowercase().as_str())
}

/// Number words: WordNet gives them synonyms no reader expects ("eight" → "ogdoad").
pub const NUMBER_WORDS: &[&str] = &[
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "hundreds",
    "thousand",
    "thousands",
    "million",
    "millions",
    "billion",
    "billions",
    "trillion",
    "dozen",
    "dozens",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "twelfth",
    "twentieth",
    "hundredth",
    "thousandth",
    "half",
    "quarter",
    "twice",
    "thrice",
    "once",
    "single",
    "double",
    "triple",
    "pair",
    "couple",
];

pub fn is_number_word(w: &str) -> bool {
    NUMBER_WORDS.contains(&w.to_lowercase().as_str())
}

pub fn capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
}

/// Whether token `i` starts a sentence: the text's first token, or the first after `.`, `!`,
/// `?`, `:` (an opening quote or bracket in between allowed).
pub fn sentence_start(text: &str, toks: &[(usize, usize, bool)], i: usize) -> bool {
    let mut j = i;
    while j > 0 {
        j -= 1;
        let t = &text[toks[j].0..toks[j].1];
        match t {
            "\"" | "'" | "(" | "[" | "“" | "‘" => continue,
            "." | "!" | "?" | ":" => return true,
            _ => return false,
        }
    }
    true
}

/// Whether token `i` is (part of) a name or a number, which SwapSynWordNet leaves alone: a
/// capitalised word inside a sentence, a sentence-initial one that WordNet knows only as a name
/// or that a capitalised word follows ("United States"), an all-capitals word, a number word.
pub fn is_name_or_number(
    text: &str,
    toks: &[(usize, usize, bool)],
    i: usize,
    wn: &WordNet,
) -> bool {
    let w = &text[toks[i].0..toks[i].1];
    if is_number_word(w) {
        return true;
    }
    if !capitalised(w) {
        return false;
    }
    if w.chars().count() > 1 && w.chars().all(|c| !c.is_lowercase()) {
        return true;
    }
    if !sentence_start(text, toks, i) {
        return true;
    }
    let next_is_name = toks
        .get(i + 1)
        .is_some_and(|&(a, b, word)| word && capitalised(&text[a..b]));
    let lower = w.to_lowercase();
    next_is_name
        || wn
            .lemmas(&lower)
            .first()
            .is_none_or(|(lemma, _, _)| wn.is_proper(lemma))
}

/// Byte ranges of the tokens of `text` and whether each is a word.
pub fn tokens(text: &str) -> Vec<(usize, usize, bool)> {
    let mut out = Vec::new();
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = it.peek() {
                let inner_apostrophe = d == '\''
                    && text[j + 1..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphanumeric);
                if d.is_alphanumeric() || inner_apostrophe {
                    end = j + d.len_utf8();
                    it.next();
                } else {
                    break;
                }
            }
            out.push((i, end, true));
        } else {
            out.push((i, i + c.len_utf8(), false));
        }
    }
    out
}

/// `w` written with the case of `model`: all capitals, an initial capital, or as it is.
pub fn match_case(model: &str, w: &str) -> String {
    let upper = model.chars().count() > 1 && model.chars().all(|c| !c.is_lowercase());
    if upper {
        return w.to_uppercase();
    }
    if model.chars().next().is_some_and(char::is_uppercase) {
        let mut c = w.chars();
        return c
            .next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default();
    }
    w.to_string()
}

/// Whether the word at bytes `a..b` is part of a hyphenated compound ("high-spirited").
pub fn in_compound(text: &str, a: usize, b: usize) -> bool {
    text[..a].ends_with('-') || text[b..].starts_with('-')
}

/// `text` with the byte ranges of `edits` (sorted, not overlapping) replaced by their new text.
pub fn apply_edits<'s>(
    text: &str,
    edits: impl IntoIterator<Item = (usize, usize, &'s str)>,
) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut at = 0;
    for (a, b, new) in edits {
        out.push_str(&text[at..a]);
        out.push_str(new);
        at = b;
    }
    out.push_str(&text[at..]);
    out
}
