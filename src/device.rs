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

/// A device's kind: which backend runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The default CPU backend (`flex`).
    Cpu,
    /// burn's CUDA backend (feature `cuda`).
    Cuda,
    /// LibTorch's CPU device (feature `tch`).
    LibTorch,
    /// LibTorch's CUDA devices (feature `tch`).
    LibTorchCuda,
}

impl DeviceKind {
    const ALL: [Self; 4] = [Self::Cpu, Self::Cuda, Self::LibTorch, Self::LibTorchCuda];

    /// Its name in configs and on the command line.
    pub fn name(self) -> &'static str {
        DEVICE_NAMES[self as usize]
    }

    /// A GPU: it takes an index.
    pub fn is_gpu(self) -> bool {
        matches!(self, Self::Cuda | Self::LibTorchCuda)
    }

    /// One of LibTorch's devices.
    pub fn is_libtorch(self) -> bool {
        matches!(self, Self::LibTorch | Self::LibTorchCuda)
    }
}

/// A device by name (see the module doc), parsed once where it is read: a config's
/// `train.device` / `train.devices` hold these, so a bad name is refused when the config loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DeviceName {
    pub kind: DeviceKind,
    /// A GPU's index as written (`None`: not written, device 0, or a job's `LOCAL_RANK`).
    pub index: Option<usize>,
}

impl DeviceName {
    pub const CPU: Self = Self {
        kind: DeviceKind::Cpu,
        index: None,
    };

    /// The index of the device it names (0 when none is written).
    pub fn ordinal(&self) -> usize {
        self.index.unwrap_or(0)
    }
}

impl std::str::FromStr for DeviceName {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
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
        let Some(kind) = DeviceKind::ALL.into_iter().find(|k| k.name() == kind) else {
            return Err(Error::Config(format!(
                "device {name:?}: unknown kind {kind:?}; use one of {} (GPUs with an index, e.g. cuda:1)",
                DEVICE_NAMES.join(", ")
            )));
        };
        if index.is_some() && !kind.is_gpu() {
            return Err(Error::Config(format!(
                "device {name:?}: only cuda and libtorch-cuda take an index"
            )));
        }
        Ok(Self { kind, index })
    }
}

impl TryFrom<String> for DeviceName {
    type Error = String;

    fn try_from(name: String) -> std::result::Result<Self, String> {
        name.parse().map_err(|e: Error| e.to_string())
    }
}

impl From<DeviceName> for String {
    fn from(d: DeviceName) -> String {
        d.to_string()
    }
}

impl std::fmt::Display for DeviceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}:{i}", self.kind.name()),
            None => f.write_str(self.kind.name()),
        }
    }
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
    open(&name.parse()?)
}

/// The device `name` names (see [`device_for`]).
pub fn open(name: &DeviceName) -> Result<Device> {
    let index = name.ordinal();
    match name.kind {
        DeviceKind::Cpu => Ok(host()),
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => {
            let n = cuda_count();
            if index >= n {
                return Err(Error::Config(format!(
                    "device \"{name}\" does not exist: this machine has {n} CUDA device{} (cuda:0 to cuda:{})",
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
        DeviceKind::LibTorch => Ok(Device::libtorch()),
        #[cfg(feature = "tch")]
        #[allow(deprecated)]
        DeviceKind::LibTorchCuda => Ok(Device::libtorch_cuda(index)),
        #[allow(unreachable_patterns)]
        _ => {
            let _ = index;
            Err(Error::Config(format!(
                "device \"{name}\" is not available in this build (cargo feature missing)"
            )))
        }
    }
}

/// The replicas of a data-parallel run, one device each, checked before any work starts:
/// every name known and built, one kind for all, no GPU named twice (`cpu` may repeat: replicas
/// on the host, which exist to test the data-parallel arithmetic), and more than one replica
/// only where burn has collectives for the kind (CUDA) or on the host.
pub fn devices_for(names: &[DeviceName]) -> Result<Vec<Device>> {
    let shown: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let Some(first) = names.first() else {
        return Err(Error::Config("no device named".into()));
    };
    if let Some(other) = names.iter().find(|n| n.kind != first.kind) {
        return Err(Error::Config(format!(
            "devices {shown:?}: one kind for all replicas ({} and {} mixed)",
            first.kind.name(),
            other.kind.name()
        )));
    }
    for (i, n) in names.iter().enumerate() {
        let same = |m: &DeviceName| m.ordinal() == n.ordinal();
        if n.kind.is_gpu() && names[..i].iter().any(same) {
            return Err(Error::Config(format!(
                "devices {shown:?}: {:?} is named twice (one replica per GPU)",
                shown[i]
            )));
        }
    }
    if names.len() > 1 && first.kind != DeviceKind::Cpu {
        return Err(Error::Config(format!(
            "devices {shown:?}: several {} devices train as one process each, launched by torchrun, srun or mpirun (docs/gpu.md); a list of devices in one process is for host replicas (cpu,cpu) only",
            first.kind.name()
        )));
    }
    names.iter().map(open).collect()
}
