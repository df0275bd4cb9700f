//! Downstream data: the tasks (GLUE and the other sentence(-pair) tasks, SQuAD v1.1), their
//! readers, the contrast-set readers, and the official metrics.

pub mod contrast;
pub mod examples;
pub mod glue;
pub mod hub_layout;
pub mod hub_parquet;
pub mod metrics;
pub mod sentence;
pub mod squad;
pub mod task;
pub mod task_formats;

use std::path::Path;

/// Bytes of memory a task file read whole takes per byte of the file at its peak: its bytes,
/// then the parsed examples' strings and vectors beside them (a GLUE dev file of 114 MB held
/// 560 MB).
const HELD_PER_BYTE: f64 = 6.0;

/// The data file `path` (a task's train, dev or test file, a contrast set) read whole, after
/// the memory check: a file whose parsed rows cannot fit is refused in one line with the
/// figures, before it is read.
pub(crate) fn read_data_file(path: &Path) -> crate::Result<Vec<u8>> {
    check_held(path)?;
    crate::io::read::read(path, crate::io::limit::DATA)
}

/// The memory check of a data file about to be held whole, as parsed rows.
pub(crate) fn check_held(path: &Path) -> crate::Result<()> {
    let len = crate::io::read::bounded_len(path, crate::io::limit::DATA)?;
    crate::memory::check(
        len as f64 * HELD_PER_BYTE,
        &format!(
            "{}: its {} of rows read whole",
            path.display(),
            crate::memory::gib(len as f64)
        ),
        "give a smaller file (split it, or fewer rows)",
    )
}

/// [`read_data_file`] as UTF-8 text.
pub(crate) fn read_data_text(path: &Path) -> crate::Result<String> {
    String::from_utf8(read_data_file(path)?)
        .map_err(|e| crate::Error::Input(format!("{}: invalid UTF-8 ({e})", path.display())))
}
