//! `trueneg._core`: the Rust crate's rules for Python (the `trueneg` package in `python/trueneg`
//! wraps them with numpy and torch tensors). Every rule is the crate's own function; this
//! module only converts arrays and errors.

use pyo3::prelude::*;

mod arrays;
mod errors;
mod objectives;
mod reference_step;
mod table;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<table::SynonymTable>()?;
    m.add_function(wrap_pyfunction!(objectives::correction_weights, m)?)?;
    m.add_function(wrap_pyfunction!(objectives::cosine_distances, m)?)?;
    m.add_function(wrap_pyfunction!(objectives::masked_lm_loss, m)?)?;
    m.add_function(wrap_pyfunction!(objectives::sample_rows, m)?)?;
    m.add_function(wrap_pyfunction!(reference_step::bert_mlm_step, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
