//! NumPy arrays as the crate's functions take them: one reader of a float matrix for every
//! function of the module that takes one, so that each refuses the same bad shapes the same way.

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::bad_argument;

/// A row-major `[rows, cols]` matrix's values; `name` is the argument's name in the one line
/// a bad shape gets.
pub(crate) fn matrix(
    name: &str,
    m: &PyReadonlyArray2<'_, f32>,
) -> PyResult<(Vec<f32>, [usize; 2])> {
    let shape = m.shape();
    if shape[1] == 0 {
        return Err(bad_argument(name, "rows of width 0"));
    }
    Ok((m.as_array().iter().copied().collect(), [shape[0], shape[1]]))
}
