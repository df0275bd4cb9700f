//! Devices by name: `train.device`, `bench --device`.

use burn::prelude::*;

use crate::{Error, Result};

/// Every name [`device_for`] knows (whether this build has its backend or not).
pub const DEVICE_NAMES: [&str; 4] = ["cpu", "cuda", "libtorch", "libtorch-cuda"];

/// The host CPU device: burn's flex backend (the default), else ndarray, else LibTorch's CPU.
pub fn host() -> Device {
    #[cfg(feature = "flex")]
    {
        Device::flex()
    }
    #[cfg(all(not(feature = "flex"), feature = "ndarray"))]
    {
        #[allow(deprecated)]
        Device::ndarray()
    }
    #[cfg(all(not(feature = "flex"), not(feature = "ndarray"), feature = "tch"))]
    {
        #[allow(deprecated)]
        Device::libtorch()
    }
    #[cfg(not(any(feature = "flex", feature = "ndarray", feature = "tch")))]
    compile_error!("trueneg needs a CPU backend: cargo feature flex, ndarray or tch")
}

/// The device named by `train.device` / `--device`: `cpu` (burn's flex backend), `cuda`
/// (burn's CUDA backend, feature `cuda`), `libtorch` or `libtorch-cuda` (burn's LibTorch backend
/// over a PyTorch installation, feature `tch`).
pub fn device_for(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(host()),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(Device::cuda(0)),
        // burn marks its LibTorch backend deprecated in favour of CubeCL's; it is the one GPU
        // path that builds offline (see README, Cargo features).
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        "libtorch" => Ok(Device::libtorch()),
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        "libtorch-cuda" => Ok(Device::libtorch_cuda(0)),
        other => Err(Error::Config(format!(
            "train.device = {other:?} is not available in this build (cargo feature missing)"
        ))),
    }
}
