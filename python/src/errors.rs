//! The crate's errors as Python exceptions, with the crate's one line as the message: a bad
//! input (a file, a field, a value) is a `ValueError`, a missing file `FileNotFoundError`, the
//! rest `RuntimeError`.

use pyo3::PyErr;
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};

pub fn to_py(e: trueneg::Error) -> PyErr {
    let line = e.to_string();
    match e {
        trueneg::Error::Missing(_) => PyFileNotFoundError::new_err(line),
        trueneg::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(line)
        }
        trueneg::Error::Input(_) | trueneg::Error::Config(_) | trueneg::Error::Checkpoint(_) => {
            PyValueError::new_err(line)
        }
        _ => PyRuntimeError::new_err(line),
    }
}

/// A `ValueError` naming the argument and what was expected.
pub fn bad_argument(name: &str, expected: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{name}: {expected}"))
}
