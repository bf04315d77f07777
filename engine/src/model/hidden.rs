//! Hidden states after the output norm: what a forward pass returns and the logits are made
//! from. Host rows for our kernels, a device tensor for candle; callers outside the engine
//! never see which.

use candle_core::Tensor;

use crate::error::Result;

#[derive(Debug, Clone)]
pub struct Hidden {
    rows: usize,
    width: usize,
    repr: Repr,
}

#[derive(Debug, Clone)]
pub(crate) enum Repr {
    Host(Vec<f32>),
    Device(Tensor),
}

impl Hidden {
    pub(crate) fn host(data: Vec<f32>, width: usize) -> Self {
        Hidden {
            rows: data.len() / width.max(1),
            width,
            repr: Repr::Host(data),
        }
    }

    pub(crate) fn device(tensor: Tensor, rows: usize, width: usize) -> Self {
        Hidden {
            rows,
            width,
            repr: Repr::Device(tensor),
        }
    }

    pub(crate) fn repr(&self) -> &Repr {
        &self.repr
    }

    /// Positions held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Position `i` alone.
    pub fn row(&self, i: usize) -> Result<Hidden> {
        self.rows_from(i, 1)
    }

    /// Positions `start..start + count`.
    pub fn rows_from(&self, start: usize, count: usize) -> Result<Hidden> {
        if start + count > self.rows || count == 0 {
            return Err(crate::error::Error::InvalidArgument(format!(
                "hidden states {start}..{} of {}",
                start + count,
                self.rows
            )));
        }
        Ok(match &self.repr {
            Repr::Host(v) => Hidden::host(
                v[start * self.width..(start + count) * self.width].to_vec(),
                self.width,
            ),
            Repr::Device(t) => Hidden::device(t.narrow(0, start, count)?, count, self.width),
        })
    }

    /// The values as host rows `[rows × width]`.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        Ok(match &self.repr {
            Repr::Host(v) => v.clone(),
            Repr::Device(t) => t.flatten_all()?.to_vec1::<f32>()?,
        })
    }
}
