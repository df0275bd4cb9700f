//! A masked position shown in its sentence: the word around a WordPiece and the row's text
//! with the piece marked (⟦…⟧), cut to a few words either side for a table.

use super::WordPieceTokenizer;

/// The word around piece `at` of `ids` (its `##` pieces joined) and the row's text with the
/// piece marked.
pub fn word_and_context(tok: &WordPieceTokenizer, ids: &[u32], at: usize) -> (String, String) {
    let piece = |i: usize| tok.inner.id_to_token(ids[i]).unwrap_or_default();
    let continues = |i: usize| piece(i).starts_with("##");
    let mut first = at;
    while first > 0 && continues(first) {
        first -= 1;
    }
    let mut last = at;
    while last + 1 < ids.len() && continues(last + 1) {
        last += 1;
    }
    let word: String = (first..=last)
        .map(|i| piece(i).trim_start_matches("##").to_string())
        .collect();
    let mut text = String::new();
    for i in 0..ids.len() {
        let p = piece(i);
        let shown = if i == at {
            format!("⟦{}⟧", p.trim_start_matches("##"))
        } else {
            p.trim_start_matches("##").to_string()
        };
        if !text.is_empty() && !p.starts_with("##") {
            text.push(' ');
        }
        text.push_str(&shown);
    }
    (word, text)
}

/// A Markdown table cell: pipes escaped.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `words` words either side of the marked piece.
pub fn around_mark(context: &str, words: usize) -> String {
    let w: Vec<&str> = context.split(' ').collect();
    let at = w.iter().position(|x| x.contains('⟦')).unwrap_or(0);
    let (a, z) = (at.saturating_sub(words), (at + words + 1).min(w.len()));
    let mut s = w[a..z].join(" ");
    if a > 0 {
        s = format!("… {s}");
    }
    if z < w.len() {
        s += " …";
    }
    s
}
