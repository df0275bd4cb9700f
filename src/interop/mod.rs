//! transformers-compatible weights: `config.json` + `model.safetensors`, in and out.

pub mod hf_config;
pub mod hub;
pub mod hub_cache;
pub mod tensors;
pub mod weight_shapes;

pub use hf_config::{HfConfig, read_hf_config, write_hf_config};
pub use tensors::{Exporter, Loader, TensorMap, read_safetensors, write_safetensors};
