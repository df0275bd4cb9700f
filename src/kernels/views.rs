//! Strided matrix views over raw buffers: what the matrix products (`gemm`, `gemm_bf16`) read
//! and write.

use std::mem::MaybeUninit;

/// A read-only matrix view: element (i, j) is at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy)]
pub struct View {
    pub ptr: *const f32,
    pub rows: usize,
    pub cols: usize,
    pub rs: isize,
    pub cs: isize,
}

impl View {
    /// A row-major `rows × cols` block of `data` starting at `offset`, rows `stride` apart.
    pub fn rows(data: &[f32], offset: usize, rows: usize, cols: usize, stride: usize) -> Self {
        assert!(rows == 0 || offset + (rows - 1) * stride + cols <= data.len());
        Self {
            ptr: data[offset..].as_ptr(),
            rows,
            cols,
            rs: stride as isize,
            cs: 1,
        }
    }

    /// Columns `c0 .. c0 + cols` (inside the view), without moving anything.
    pub fn columns(self, c0: usize, cols: usize) -> Self {
        assert!(c0 + cols <= self.cols, "columns outside the view");
        Self {
            // In bounds: column c0 is inside the view.
            ptr: self.ptr.wrapping_offset(c0 as isize * self.cs),
            cols,
            ..self
        }
    }

    /// Rows `r0 .. r0 + rows` (inside the view), without moving anything.
    pub fn row_range(self, r0: usize, rows: usize) -> Self {
        let View { ptr, cols, .. } = self.t().columns(r0, rows);
        Self {
            ptr,
            rows: cols,
            ..self
        }
    }

    /// The transpose, without moving anything.
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// A writable matrix view, as [`View`].
#[derive(Clone, Copy)]
pub struct ViewMut {
    pub ptr: *mut f32,
    pub rows: usize,
    pub cols: usize,
    pub rs: isize,
    pub cs: isize,
}

// The views are raw pointers into buffers whose disjoint parts different threads write; the
// kernels guarantee the disjointness.
unsafe impl Send for View {}
unsafe impl Sync for View {}
unsafe impl Send for ViewMut {}
unsafe impl Sync for ViewMut {}

impl ViewMut {
    /// As [`View::rows`], over a buffer that outlives every use of the view.
    pub fn rows(data: &mut [f32], offset: usize, rows: usize, cols: usize, stride: usize) -> Self {
        assert!(rows == 0 || offset + (rows - 1) * stride + cols <= data.len());
        Self {
            ptr: data[offset..].as_mut_ptr(),
            rows,
            cols,
            rs: stride as isize,
            cs: 1,
        }
    }

    /// As [`ViewMut::rows`] over a whole contiguous `rows × cols` buffer that may be
    /// uninitialised: only for the destination of a product that does not accumulate (see
    /// [`product_new`](super::gemm::product_new)).
    pub fn uninit(data: &mut [MaybeUninit<f32>], rows: usize, cols: usize) -> Self {
        assert_eq!(data.len(), rows * cols, "output shape");
        Self {
            ptr: data.as_mut_ptr().cast(),
            rows,
            cols,
            rs: cols as isize,
            cs: 1,
        }
    }

    /// As [`View::columns`].
    pub fn columns(self, c0: usize, cols: usize) -> Self {
        let View { ptr, cols, .. } = self.read_only().columns(c0, cols);
        Self {
            ptr: ptr.cast_mut(),
            cols,
            ..self
        }
    }

    /// As [`View::row_range`].
    pub fn row_range(self, r0: usize, rows: usize) -> Self {
        let View { ptr, rows, .. } = self.read_only().row_range(r0, rows);
        Self {
            ptr: ptr.cast_mut(),
            rows,
            ..self
        }
    }

    /// The same extent as a [`View`].
    fn read_only(self) -> View {
        View {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }
}
