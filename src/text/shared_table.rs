//! The synonym table a run trains with, shared by the replicas of a step: the table itself, which
//! a refresh may replace between two steps, and its padded copy on each device the step runs on
//! (built at the first use on that device, dropped when the table is replaced).

use std::sync::{Arc, Mutex, RwLock};

use burn::prelude::*;

use super::SynonymTable;

/// See the module documentation.
pub struct SharedTable {
    table: RwLock<Arc<SynonymTable>>,
    on_device: Mutex<Vec<(Device, Tensor<2, Int>)>>,
}

impl SharedTable {
    pub fn new(table: SynonymTable) -> Self {
        Self {
            table: RwLock::new(Arc::new(table)),
            on_device: Mutex::new(Vec::new()),
        }
    }

    /// The table in use now.
    pub fn get(&self) -> Arc<SynonymTable> {
        self.table.read().expect("synonym table").clone()
    }

    /// Puts `table` in use; the device copies are made anew at their next use.
    pub fn replace(&self, table: SynonymTable) {
        *self.table.write().expect("synonym table") = Arc::new(table);
        self.on_device.lock().expect("table copies").clear();
    }

    /// The table on `device` as a [`padded_table`] of at least `rows` rows (built once per
    /// device and table).
    pub fn on_device(&self, rows: usize, device: &Device) -> Tensor<2, Int> {
        let mut cached = self.on_device.lock().expect("table copies");
        if let Some((_, t)) = cached.iter().find(|(d, _)| d == device) {
            return t.clone();
        }
        let table = self.get();
        let t = padded_table(&table, rows.max(table.vocab_size()), device);
        cached.push((device.clone(), t.clone()));
        t
    }
}

/// The synonym lists of `table` as a `[rows, K]` id matrix on `device` (K the longest list, at
/// least 1), each row padded with −1, which matches no token.
pub fn padded_table(table: &SynonymTable, rows: usize, device: &Device) -> Tensor<2, Int> {
    let k = (0..table.vocab_size())
        .map(|i| table.synonyms(i as u32).len())
        .max()
        .unwrap_or(0)
        .max(1);
    let mut ids = vec![-1i64; rows * k];
    for i in 0..table.vocab_size().min(rows) {
        for (j, &x) in table.synonyms(i as u32).iter().enumerate() {
            ids[i * k + j] = x as i64;
        }
    }
    Tensor::from_data(TensorData::new(ids, [rows, k]), device)
}
