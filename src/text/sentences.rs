//! Sentence splitting: a paragraph into sentences, for packing segments A and B and for
//! sentence triples.

/// Splits a paragraph into sentences, so that packing can put whole sentences into segments A
/// and B even when the corpus has one paragraph per line. A sentence ends at `.`, `!` or `?`
/// (optionally followed by closing quotes or brackets) before white space and an upper-case
/// letter, digit or opening quote — except after a single letter (initials) or a common
/// abbreviation (Mr, Mrs, Ms, Dr, Prof, St, Jr, Sr, vs, etc, e.g, i.e, No, Vol, Fig).
pub fn split_sentences(paragraph: &str) -> Vec<&str> {
    const ABBREV: [&str; 15] = [
        "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no", "vol",
        "fig",
    ];
    let chars: Vec<(usize, char)> = paragraph.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if matches!(c, '.' | '!' | '?') {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j].1, '"' | '\'' | ')' | ']' | '”' | '’') {
                j += 1;
            }
            let end = chars.get(j).map_or(paragraph.len(), |&(p, _)| p);
            let spaced = j < chars.len() && chars[j].1.is_whitespace();
            let mut k = j;
            while k < chars.len() && chars[k].1.is_whitespace() {
                k += 1;
            }
            let next_ok = k < chars.len()
                && (chars[k].1.is_uppercase()
                    || chars[k].1.is_ascii_digit()
                    || matches!(chars[k].1, '"' | '“' | '\'' | '('));
            let word = paragraph[start..pos]
                .rsplit(char::is_whitespace)
                .next()
                .unwrap_or("");
            let abbrev = c == '.'
                && ((word.chars().count() == 1 && word.chars().all(char::is_alphabetic))
                    || ABBREV.contains(&word.to_lowercase().as_str()));
            if spaced && next_ok && !abbrev {
                let s = paragraph[start..end].trim();
                if !s.is_empty() {
                    out.push(s);
                }
                start = chars[k].0;
                i = k;
                continue;
            }
            let _ = pos;
        }
        i += 1;
    }
    let rest = paragraph[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}
