//! Training objectives, one small file each, formula in its doc comment.

pub mod mlm;
pub mod rtd;
pub mod soft_regularization;

pub use mlm::masked_cross_entropy;
pub use rtd::replaced_token_loss;
pub use soft_regularization::word_regularization;
