//! The library's error type: every variant renders as one line naming the file, line or field.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed input data; the message names the file (and line / field where known).
    #[error("{0}")]
    Input(String),
    /// A file or folder the work needs is not there; the message names it and how to provide
    /// it ([`Error::missing`]).
    #[error("{0}")]
    Missing(String),
    /// A configuration value is missing, unknown or out of range.
    #[error("{0}")]
    Config(String),
    /// A checkpoint or weight file does not fit the model.
    #[error("{0}")]
    Checkpoint(String),
    /// Training hit a non-finite loss.
    #[error("{0}")]
    Diverged(String),
    /// Another process is writing to the same folder.
    #[error("{0}")]
    Busy(String),
    /// Stopped by a signal (Ctrl-C, SIGTERM) after saving what resumes the work.
    #[error("{0}")]
    Interrupted(String),
    /// A collective of a data-parallel job failed (a rank stopped or is unreachable).
    #[error("{0}")]
    Distributed(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// `path` is not there: "PATH: ADVICE", where `advice` says what the file is and how to
    /// provide it.
    pub fn missing(path: &std::path::Path, advice: &str) -> Self {
        Error::Missing(format!("{}: {advice}", path.display()))
    }
}

/// The longest error line printed; a longer one keeps its start and its end around "…".
pub const MAX_LINE: usize = 500;

/// `text` as one line of at most [`MAX_LINE`] characters: line breaks become "; " (a
/// library's message may span lines), and the middle of a longer text is cut.
pub fn one_line(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    shorten(&joined.join("; "), MAX_LINE)
}

/// `text` cut to at most `max` characters (`max` ≥ 4): its first three quarters and its last
/// quarter around "…", so that both a long value's start and its end stay readable.
pub fn shorten(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max * 3 / 4).collect();
    let tail: String = text.chars().skip(n - (max - max * 3 / 4) + 1).collect();
    format!("{head}…{tail}")
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// One part's check of a flattened config section (see [`check_flat_section`]).
pub type SectionPart =
    fn(toml::Value) -> std::result::Result<(), serde_path_to_error::Error<toml::de::Error>>;

/// A section check's failure: the field (`section.key`) and the message.
pub type FieldError = (String, String);

/// A config section read from several flattened parts (`#[serde(flatten)]` rules out
/// `deny_unknown_fields`): checks `table`, the TOML section `section`, as serde checks the
/// others. A key outside `known` is refused (`unknown field `x`, expected one of …`), then
/// each of `parts` deserialises the table so that a bad value is named by its key.
/// `Err((field, message))`, the field as `section.key`.
pub fn check_flat_section(
    section: &str,
    table: &toml::Table,
    known: &[String],
    parts: &[SectionPart],
) -> std::result::Result<(), FieldError> {
    if let Some(k) = table.keys().find(|k| !known.contains(k)) {
        let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        return Err((
            format!("{section}.{k}"),
            format!(
                "unknown field `{k}`, expected one of {}",
                expected.join(", ")
            ),
        ));
    }
    for part in parts {
        part(toml::Value::Table(table.clone())).map_err(|e| {
            let field = format!("{section}.{}", e.path());
            (field, e.into_inner().message().to_string())
        })?;
    }
    Ok(())
}

/// One part of [`check_flat_section`]: deserialises the section as `T`.
pub fn flat_part<T: serde::de::DeserializeOwned>(
    v: toml::Value,
) -> std::result::Result<(), serde_path_to_error::Error<toml::de::Error>> {
    serde_path_to_error::deserialize::<_, T>(v).map(drop)
}

/// The keys a section's default value serialises with.
pub fn section_keys<T: serde::Serialize + Default>() -> Vec<String> {
    match serde_json::to_value(T::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => unreachable!("a section serialises as a table"),
    }
}

/// A range rule of a config field: its key, its value, whether it holds, and the rule in words.
pub struct Rule {
    pub field: String,
    pub value: String,
    pub ok: bool,
    pub why: String,
}

impl Rule {
    /// The same rule with its key under `prefix` (`model.` for the `[model]` section).
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = format!("{prefix}{}", self.field);
        self
    }
}

/// The rule named `field`: `ok` tells whether `value` follows `why`.
pub fn rule(field: &str, value: impl std::fmt::Display, ok: bool, why: impl Into<String>) -> Rule {
    Rule {
        field: field.into(),
        value: value.to_string(),
        ok,
        why: why.into(),
    }
}

/// A count that must be > 0.
pub fn count(field: &str, n: usize) -> Rule {
    rule(field, n, n > 0, "must be > 0")
}

/// A finite real > 0.
pub fn positive(field: &str, x: f64) -> Rule {
    rule(field, x, x.is_finite() && x > 0.0, "must be > 0")
}

/// A finite real >= 0.
pub fn non_negative(field: &str, x: f64) -> Rule {
    rule(field, x, x.is_finite() && x >= 0.0, "must be >= 0")
}

/// A probability in [0, 1].
pub fn unit(field: &str, x: f64) -> Rule {
    rule(field, x, (0.0..=1.0).contains(&x), "must be in [0, 1]")
}

/// A rate in [0, 1) (dropout, Adam's betas).
pub fn below_one(field: &str, x: f64) -> Rule {
    rule(field, x, (0.0..1.0).contains(&x), "must be in [0, 1)")
}

/// Calls a function of the C++ bridges (`csrc/`): it returns 0, or non-zero after writing the
/// C++ exception's text into the buffer it is given. `Err` holds that text's first line
/// (LibTorch's messages go on with a stack trace), or `fallback` when it is empty.
#[cfg(feature = "tch")]
pub(crate) fn bridge_call(
    fallback: &str,
    f: impl FnOnce(*mut std::ffi::c_char, usize) -> std::ffi::c_int,
) -> std::result::Result<(), String> {
    let mut buf = vec![0u8; 1024];
    if f(buf.as_mut_ptr().cast(), buf.len()) == 0 {
        return Ok(());
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let text = String::from_utf8_lossy(&buf[..end]);
    Err(text.lines().next().unwrap_or(fallback).trim().to_string())
}

/// The name among `candidates` nearest to `name` by edit distance, within two edits, and not
/// `name` itself: the "did you mean" of an error line.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (strsim::levenshtein(c, name), c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_text_keeps_its_start_and_end_within_the_bound() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let s = super::shorten(&text, 120);
        assert_eq!(s.chars().count(), 120);
        assert!(s.starts_with(&text[..90]) && s.ends_with(&text[text.len() - 29..]));
        assert_eq!(super::shorten("short", 120), "short");
        let lines = super::one_line("first\n\n  second  \nthird");
        assert_eq!(lines, "first; second; third");
    }
}
