//! What the registry knows of a part of the masked-LM step, and the macro that makes the
//! registry from one line per part (`objective/mod.rs`).
//!
//! A part's file declares `NAME`, its keys of the `[objective]` section as a struct that
//! implements [`PartConfig`], and `build`. Its registry line, `module::ConfigType => field,`,
//! declares the module, adds the keys to the section as a flattened field of
//! [`PartsConfig`](super::PartsConfig), and adds the part's row to `PARTS`: its name in
//! `objective.kind` (alone or joined by `+`), its constructor, and its keys' check. Nothing
//! else names a part to train with it.

use std::path::PathBuf;

use crate::error::SectionPart;
use crate::frame::FileKind;

use super::Build;

/// A bad config value: `(field, value, rule)`, e.g. `("objective.sr_weight", "-1", "must be >= 0")`.
pub type BadValue = (String, String, String);

/// A part's keys of the `[objective]` section, and what the registry reads of the part through
/// their type (all defaults: a part declares only what it has).
pub trait PartConfig {
    /// The first bad value, its field named as `objective.<key>` (a value outside its range,
    /// or values that contradict each other).
    fn validate(&self) -> std::result::Result<(), BadValue> {
        Ok(())
    }

    /// The files its values name, each with its key (`objective.lexicon`) and kind: the command
    /// checks them before it starts, and they are made absolute with the config's other paths.
    fn files_mut(&mut self) -> Vec<(&'static str, &mut Option<PathBuf>, FileKind)> {
        Vec::new()
    }

    /// Whether runs that train with the part count corrected false negatives (Table 8's
    /// statistics: `trueneg stats`, the ablation's correction tables).
    fn counts_corrections() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// How a reader calls each loss term the part logs (`sr_loss` → "Soft Regularization
    /// term"), for plots' axes; a term without a label is shown by its name.
    fn term_labels() -> &'static [(&'static str, &'static str)]
    where
        Self: Sized,
    {
        &[]
    }
}

/// One part's row in the registry.
pub struct PartRow {
    /// Its name in `objective.kind` (`hc`; `hc+sr` trains with two parts).
    pub name: &'static str,
    /// Its constructor: `None` when the run's config does not train with it.
    pub build: Build,
    /// Reads the `[objective]` table as the part's keys, so that a bad value names its key.
    pub check: SectionPart,
    /// See [`PartConfig::counts_corrections`].
    pub counts_corrections: fn() -> bool,
    /// See [`PartConfig::term_labels`].
    pub term_labels: fn() -> &'static [(&'static str, &'static str)],
}

/// The check of a flattened section's keys as `T` (see [`PartRow::check`]).
pub fn check_as<T: serde::de::DeserializeOwned>(
    table: toml::Value,
) -> std::result::Result<(), serde_path_to_error::Error<toml::de::Error>> {
    crate::error::flat_part::<T>(table)
}

/// The registry of the masked-LM step's parts: `module::ConfigType => field,` per part, in the
/// order their terms join the loss. Makes `pub mod module;` for each, the section's
/// [`PartsConfig`](super::PartsConfig) with each part's keys flattened under `field`, and
/// `PARTS`.
macro_rules! parts {
    ($($module:ident :: $config:ident => $field:ident,)+) => {
        $(pub mod $module;)+

        /// Every part's keys of the `[objective]` section, each part's flattened under its
        /// registry field (`cfg.objective.parts.hc.lexicon`).
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct PartsConfig {
            $(
                #[serde(flatten)]
                pub $field: $module::$config,
            )+
        }

        impl PartsConfig {
            /// Each part's keys, in the registry's order.
            pub fn each(&self) -> Vec<&dyn part_registry::PartConfig> {
                vec![$(&self.$field),+]
            }

            /// Each part's keys, to change.
            pub fn each_mut(&mut self) -> Vec<&mut dyn part_registry::PartConfig> {
                vec![$(&mut self.$field),+]
            }
        }

        /// The parts, in the order their terms join the loss (after `L_mlm`, before `λ·L_D`).
        pub const PARTS: &[part_registry::PartRow] = &[$(
            part_registry::PartRow {
                name: $module::NAME,
                build: $module::build,
                check: part_registry::check_as::<$module::$config>,
                counts_corrections:
                    <$module::$config as part_registry::PartConfig>::counts_corrections,
                term_labels: <$module::$config as part_registry::PartConfig>::term_labels,
            },
        )+];
    };
}
