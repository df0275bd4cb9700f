//! Devices by name: `train.device`, `train.devices`, `--device`, `bench --device`.
//!
//! A name is a kind with an optional index: `cpu`, `cuda` (= `cuda:0`), `cuda:1`, `libtorch`,
//! `libtorch-cuda` (= `libtorch-cuda:0`), `libtorch-cuda:1`.

use burn::prelude::*;

use crate::{Error, Result};

/// Every device kind [`device_for`] knows (whether this build has its backend or not).
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

/// A device name split into its kind and index: `cuda:1` → (`cuda`, 1). The kind is checked
/// against [`DEVICE_NAMES`]; only the GPU kinds take an index.
pub fn parse_name(name: &str) -> Result<(&str, usize)> {
    let (kind, index) = match name.split_once(':') {
        Some((kind, index)) => {
            let i = index.parse::<usize>().map_err(|_| {
                Error::Config(format!(
                    "device {name:?}: the index after ':' must be a number (e.g. cuda:1)"
                ))
            })?;
            (kind, Some(i))
        }
        None => (name, None),
    };
    if !DEVICE_NAMES.contains(&kind) {
        return Err(Error::Config(format!(
            "device {name:?}: unknown kind {kind:?}; use one of {} (GPUs with an index, e.g. cuda:1)",
            DEVICE_NAMES.join(", ")
        )));
    }
    if index.is_some() && !is_gpu(kind) {
        return Err(Error::Config(format!(
            "device {name:?}: only cuda and libtorch-cuda take an index"
        )));
    }
    Ok((kind, index.unwrap_or(0)))
}

fn is_gpu(kind: &str) -> bool {
    kind == "cuda" || kind == "libtorch-cuda"
}

/// How many CUDA devices burn's CUDA backend sees on this machine.
#[cfg(feature = "cuda")]
fn cuda_count() -> usize {
    Device::enumerate(burn::tensor::DeviceType::Cuda)
        .into_vec()
        .len()
}

/// The device named by `train.device` / `--device` (see the module doc): `cpu` (burn's flex
/// backend), `cuda[:i]` (burn's CUDA backend, feature `cuda`), `libtorch` or
/// `libtorch-cuda[:i]` (burn's LibTorch backend over a PyTorch installation, feature `tch`).
/// A CUDA index the machine does not have is an error here, before any work starts.
pub fn device_for(name: &str) -> Result<Device> {
    let (kind, index) = parse_name(name)?;
    match kind {
        "cpu" => Ok(host()),
        #[cfg(feature = "cuda")]
        "cuda" => {
            let n = cuda_count();
            if index >= n {
                return Err(Error::Config(format!(
                    "device {name:?} does not exist: this machine has {n} CUDA device{} (cuda:0 to cuda:{})",
                    if n == 1 { "" } else { "s" },
                    n.saturating_sub(1)
                )));
            }
            Ok(Device::cuda(index))
        }
        // burn marks its LibTorch backend deprecated in favour of CubeCL's; it is the one GPU
        // path that builds offline (see docs/gpu.md, Cargo features).
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        "libtorch" => Ok(Device::libtorch()),
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        "libtorch-cuda" => Ok(Device::libtorch_cuda(index)),
        _ => {
            let _ = index;
            Err(Error::Config(format!(
                "device {name:?} is not available in this build (cargo feature missing)"
            )))
        }
    }
}

/// The replicas of a data-parallel run, one device each, checked before any work starts:
/// every name known and built, one kind for all, no GPU named twice (`cpu` may repeat: replicas
/// on the host, which exist to test the data-parallel arithmetic), and more than one replica
/// only where burn has collectives for the kind (CUDA) or on the host.
pub fn devices_for(names: &[String]) -> Result<Vec<Device>> {
    if names.is_empty() {
        return Err(Error::Config("no device named".into()));
    }
    let kinds: Vec<(&str, usize)> = names.iter().map(|n| parse_name(n)).collect::<Result<_>>()?;
    if let Some(other) = kinds.iter().find(|k| k.0 != kinds[0].0) {
        return Err(Error::Config(format!(
            "devices {names:?}: one kind for all replicas ({} and {} mixed)",
            kinds[0].0, other.0
        )));
    }
    for (i, k) in kinds.iter().enumerate() {
        if is_gpu(k.0) && kinds[..i].contains(k) {
            return Err(Error::Config(format!(
                "devices {names:?}: {:?} is named twice (one replica per GPU)",
                names[i]
            )));
        }
    }
    if names.len() > 1 && kinds[0].0 != "cpu" {
        return Err(Error::Config(format!(
            "devices {names:?}: several {} devices train as one process each, launched by torchrun, srun or mpirun (docs/gpu.md); a list of devices in one process is for host replicas (cpu,cpu) only",
            kinds[0].0
        )));
    }
    names.iter().map(|n| device_for(n)).collect()
}
