//! Which objective a run trains with (`objective.kind`): the masked-LM step with a set of the
//! registry's parts, or a step of its own.
//!
//! A kind's name is its parts' names joined by `+` in the registry's order (`hc`, `sr`,
//! `hc+sr`), `baseline` for the masked-LM step alone, or an own step's name (`cline`). Any set
//! of parts is a kind, so a new part is trainable, alone and with the others, from its registry
//! line.

use crate::text::shards::DataKind;

use super::PARTS;
use super::part_registry::PartRow;

/// The steps a kind trains with: the masked-LM step first (named `baseline` without parts),
/// then the steps of their own, each with the data it reads.
const STEPS: [(&str, DataKind); 2] = [("baseline", DataKind::Packed), ("cline", DataKind::Triples)];

/// An objective: its step (an index into the steps above) and, for the masked-LM step, its
/// parts (bit `i`: the registry's `i`-th part).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ObjectiveKind {
    step: usize,
    parts: u32,
}

impl ObjectiveKind {
    /// The masked-LM step without parts: BERT's MLM, ELECTRA's generator and discriminator.
    pub const BASELINE: Self = Self { step: 0, parts: 0 };

    /// The kind named `name` (`baseline`, `hc`, `sr+hc`, `cline`); parts may be given in any
    /// order, each once.
    pub fn parse(name: &str) -> Option<Self> {
        if let Some(step) = STEPS.iter().position(|(n, _)| *n == name) {
            return Some(Self { step, parts: 0 });
        }
        let mut parts = 0u32;
        for part in name.split('+') {
            let i = PARTS.iter().position(|p| p.name == part.trim())?;
            if parts & (1 << i) != 0 {
                return None;
            }
            parts |= 1 << i;
        }
        Some(Self { step: 0, parts })
    }

    /// The config name (`objective.kind`): its parts' names joined by `+` in the registry's
    /// order, or its step's name.
    pub fn name(self) -> &'static str {
        if self.parts == 0 {
            return STEPS[self.step].0;
        }
        &joined_names()[self.parts as usize]
    }

    /// Every name a kind may take, for help texts and errors.
    pub fn names() -> String {
        let singles: Vec<&str> = STEPS[..1]
            .iter()
            .map(|(n, _)| *n)
            .chain(PARTS.iter().map(|p| p.name))
            .chain(STEPS[1..].iter().map(|(n, _)| *n))
            .collect();
        format!(
            "{}, or parts joined by `+` (`{}+{}`)",
            singles.join(", "),
            PARTS[0].name,
            PARTS[PARTS.len() - 1].name
        )
    }

    /// Its colour in every plot (an index into the plots' palette): the baseline first, then
    /// each part alone in the registry's order, the own steps, then the sets of several parts.
    pub fn colour(self) -> usize {
        let singles = PARTS.len();
        if self.step > 0 {
            return singles + self.step;
        }
        if self.parts == 0 {
            return 0;
        }
        if self.parts.count_ones() == 1 {
            return self.parts.trailing_zeros() as usize + 1;
        }
        let several_before = (0..self.parts).filter(|p| p.count_ones() > 1).count();
        singles + STEPS.len() + several_before
    }

    /// Whether the kind trains with the part named `part` (e.g. `hard_correction::NAME`).
    pub fn has(self, part: &str) -> bool {
        rows_of(self.parts).any(|p| p.name == part)
    }

    /// Whether the kind's runs count corrected false negatives (Hard Correction's: they get
    /// Table 8's statistics, `trueneg stats`).
    pub fn reports_corrections(self) -> bool {
        rows_of(self.parts).any(|p| (p.counts_corrections)())
    }

    /// The data the kind trains on: packed examples (the masked-LM step and its parts), or
    /// sentence triples (`prepare --triples`) with a step of their own (`train::steps`).
    pub fn data(self) -> DataKind {
        STEPS[self.step].1
    }
}

/// The registry's rows of the parts in `set` (bit `i`: the `i`-th row), in the registry's order.
fn rows_of(set: u32) -> impl Iterator<Item = &'static PartRow> {
    PARTS
        .iter()
        .enumerate()
        .filter(move |(i, _)| set & (1 << i) != 0)
        .map(|(_, row)| row)
}

/// The name of every set of parts, indexed by its bits (made once: the registry is small).
fn joined_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        (0..1u32 << PARTS.len())
            .map(|set| {
                let names: Vec<&str> = rows_of(set).map(|p| p.name).collect();
                names.join("+")
            })
            .collect()
    })
}

impl std::fmt::Debug for ObjectiveKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for ObjectiveKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<ObjectiveKind> for String {
    fn from(k: ObjectiveKind) -> String {
        k.name().to_string()
    }
}

impl TryFrom<String> for ObjectiveKind {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Self::parse(&s)
            .ok_or_else(|| format!("unknown objective `{s}`, expected one of {}", Self::names()))
    }
}
