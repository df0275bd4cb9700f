//! Which implementation an operation takes on a device: our fused CPU kernels ([`fused`]),
//! single LibTorch calls ([`torch`]), or burn's composed operations (everywhere else, or
//! everywhere after [`set_composed`]).

use std::sync::atomic::{AtomicBool, Ordering};

use burn::prelude::*;
use burn::tensor::DType;

/// Set: the model composes burn's operations everywhere, as on a backend without kernels.
static COMPOSED: AtomicBool = AtomicBool::new(false);

/// Turns the fused kernels and the single LibTorch calls off (`true`) or on (`false`, the
/// default) for the whole process: the composed operations they are checked against, for
/// measuring what they bring (`bench --kernels composed`).
pub fn set_composed(composed: bool) {
    COMPOSED.store(composed, Ordering::Relaxed);
}

fn composed() -> bool {
    COMPOSED.load(Ordering::Relaxed)
}

/// Whether the fused kernels serve tensors of `dtype` on `device`: f32 on the `flex` backend.
pub fn fused(device: &Device, dtype: DType) -> bool {
    #[cfg(feature = "flex")]
    {
        dtype == DType::F32 && is_flex(device) && !composed()
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = (device, dtype);
        false
    }
}

/// Whether the operations with a LibTorch call (each module's `torch.rs`) run as single
/// LibTorch calls on `device` (any float dtype): the LibTorch backend's devices, in a
/// build with feature `tch`.
pub fn torch(device: &Device) -> bool {
    #[cfg(feature = "tch")]
    {
        is_libtorch(device) && !composed()
    }
    #[cfg(not(feature = "tch"))]
    {
        let _ = device;
        false
    }
}

/// Whether `device` is one of the `flex` backend's.
#[cfg(feature = "flex")]
fn is_flex(device: &Device) -> bool {
    matches!(
        device.clone().inner().as_dispatch(),
        burn::backend::DispatchDevice::Flex(_)
    )
}

/// Whether `device` is one of the LibTorch backend's.
#[cfg(feature = "tch")]
pub(super) fn is_libtorch(device: &Device) -> bool {
    matches!(
        device.clone().inner().as_dispatch(),
        burn::backend::DispatchDevice::LibTorch(_)
    )
}
