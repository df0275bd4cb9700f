//! Values between host and device: the counted device→host reads, ids uploaded, and whether a
//! device's tensors live in host memory.

use std::sync::atomic::{AtomicU64, Ordering};

use burn::backend::DispatchDevice;
use burn::prelude::*;

/// Device→host reads made so far by this process (see [`host_reads`]).
static HOST_READS: AtomicU64 = AtomicU64::new(0);

/// How many times this process has read tensor values back to the host through trueneg's
/// read points: `host_ids`, `read_floats` and `interop::tensors::HostTensor::from_tensor`
/// (every read of the training loop goes through one of them). On a GPU each is a wait for
/// the device; a training step between its batch upload and its logging window makes none
/// (`tests/host_reads.rs`). The fused CPU kernels, which work on host memory in place, are
/// not reads.
pub fn host_reads() -> u64 {
    HOST_READS.load(Ordering::Relaxed)
}

/// Counts one device→host read (see [`host_reads`]).
pub(crate) fn count_read() {
    HOST_READS.fetch_add(1, Ordering::Relaxed);
}

/// The values of a float tensor on the host as f64, in row-major order: one counted read.
pub(crate) fn read_floats<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    count_read();
    t.into_data()
        .convert::<f64>()
        .try_into_vec::<f64>()
        .expect("float data")
}

/// The values of an integer tensor (token ids, argmax indices) on the host, in row-major order.
pub(crate) fn host_ids<const D: usize>(t: Tensor<D, Int>) -> Vec<u32> {
    count_read();
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .expect("ids")
        .into_iter()
        .map(|v| v as u32)
        .collect()
}

/// Token ids (or other small integers) `values` as an integer tensor of `shape` on `device`.
pub(crate) fn device_ids<const D: usize>(
    values: &[u32],
    shape: [usize; D],
    device: &Device,
) -> Tensor<D, Int> {
    let v: Vec<i64> = values.iter().map(|&x| x as i64).collect();
    Tensor::from_data(TensorData::new(v, shape), device)
}

/// Whether tensors on `device` live in host memory: the CPU fast paths (the host's random
/// draws, seeded per call) are taken there; other devices use burn's own kernels and draws.
#[allow(unreachable_patterns)]
pub(crate) fn on_host(device: &Device) -> bool {
    match device.clone().inner().as_dispatch() {
        #[cfg(feature = "flex")]
        DispatchDevice::Flex(_) => true,
        #[cfg(feature = "ndarray")]
        DispatchDevice::NdArray(_) => true,
        _ => false,
    }
}
