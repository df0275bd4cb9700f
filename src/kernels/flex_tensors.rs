//! The `flex` backend's tensors as the host kernels take them: f32 slices, strided matrix
//! views, indices; and the kernels' outputs back as tensors.

use std::borrow::Cow;

use burn::backend::flex::FlexTensor;
use burn::prelude::*;
use burn::tensor::{DType, Shape};

use super::gemm::View;

/// A 2-D f32 tensor as a (possibly strided) matrix view, valid while `t` lives.
pub(in crate::kernels) fn matrix(t: &FlexTensor) -> View {
    let layout = t.layout();
    let shape = layout.shape();
    let strides = layout.strides();
    assert!(
        shape.num_dims() == 2 && strides.iter().all(|&s| s >= 0),
        "fused kernels: a matrix operand is not 2-D with non-negative strides"
    );
    let data = t.storage::<f32>();
    let start = layout.start_offset();
    let (rows, cols) = (shape[0], shape[1]);
    if rows > 0 && cols > 0 {
        let last = start + (rows - 1) * strides[0] as usize + (cols - 1) * strides[1] as usize;
        assert!(
            last < data.len(),
            "fused kernels: a matrix view reaches outside its buffer"
        );
    }
    View {
        ptr: data[start..].as_ptr(),
        rows,
        cols,
        rs: strides[0],
        cs: strides[1],
    }
}

/// The elements of an integer tensor as indices (class labels, table rows).
pub(in crate::kernels) fn indices(t: &FlexTensor) -> Vec<usize> {
    let t = t.to_contiguous();
    match t.dtype() {
        DType::I64 => t.storage::<i64>().iter().map(|&i| i as usize).collect(),
        DType::I32 => t.storage::<i32>().iter().map(|&i| i as usize).collect(),
        other => panic!("fused kernels: indices of dtype {other:?}"),
    }
}

/// The elements of `t`, writable in place: copied first into a buffer of their own when `t`
/// shares its buffer (another tensor holds it, or `t` is a view of part of it) or is strided.
pub(in crate::kernels) fn host_mut(t: &mut FlexTensor) -> &mut [f32] {
    let whole = t
        .as_slice::<f32>()
        .is_some_and(|s| s.len() == t.storage::<f32>().len());
    if !whole || !t.is_unique() {
        *t = FlexTensor::from_data(t.to_contiguous().into_data());
    }
    t.try_storage_mut::<f32>()
        .expect("a contiguous tensor of one owner")
}

/// The f32 elements of `t` in row-major order (borrowed when already contiguous).
pub(in crate::kernels) fn host(t: &FlexTensor) -> Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(
            t.to_contiguous()
                .into_data()
                .try_into_vec::<f32>()
                .expect("fused kernels take f32 tensors"),
        ),
    }
}

pub(in crate::kernels) fn tensor(values: Vec<f32>, shape: Shape) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// Indices as an integer tensor of `dtype` (i64 or i32, as [`indices`] reads them): that of
/// the indices they go with, the device's integer dtype, which burn's `argmax` gives too.
pub(in crate::kernels) fn index_tensor(
    values: Vec<usize>,
    shape: Shape,
    dtype: DType,
) -> FlexTensor {
    let data = match dtype {
        DType::I64 => TensorData::new(values.into_iter().map(|i| i as i64).collect(), shape),
        DType::I32 => TensorData::new(values.into_iter().map(|i| i as i32).collect(), shape),
        other => panic!("fused kernels: indices of dtype {other:?}"),
    };
    FlexTensor::from_data(data)
}
