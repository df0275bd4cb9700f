//! TensorBoard event files (`events.out.tfevents.*`): TFRecord-framed `Event` protobufs,
//! scalars as `simple_value`, text (the run's config) through the text plugin.
//!
//! A record is `len: u64 LE`, `masked_crc32c(len)`, `data`, `masked_crc32c(data)`, where
//! `masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8` (wrapping). The messages
//! below carry the field numbers of TensorFlow's `event.proto` / `summary.proto` /
//! `tensor.proto` for the fields written here.

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::{Error, Result};

#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    pub what: Option<What>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(message, optional, tag = "9")]
    pub metadata: Option<SummaryMetadata>,
    #[prost(oneof = "Value", tags = "2, 8")]
    pub value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(float, tag = "2")]
    Simple(f32),
    #[prost(message, tag = "8")]
    Tensor(TensorProto),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginData {
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    #[prost(bytes = "vec", tag = "2")]
    pub content: Vec<u8>,
}

/// A string tensor of rank 0 (`dtype` 7 = `DT_STRING`, no shape dimensions).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShape>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShape {}

const DT_STRING: i32 = 7;

/// TFRecord's checksum of `data`.
pub fn masked_crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

/// One TFRecord of `data`.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// The events in `bytes` (a whole event file); an error names the first bad record.
pub fn read_events(bytes: &[u8]) -> std::result::Result<Vec<Event>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let bad = |why: &str| format!("record at byte {at}: {why}");
        let head = bytes
            .get(at..at + 12)
            .ok_or_else(|| bad("truncated length"))?;
        let len = u64::from_le_bytes(head[..8].try_into().expect("8 bytes")) as usize;
        if masked_crc(&head[..8]).to_le_bytes() != head[8..12] {
            return Err(bad("length checksum"));
        }
        let data = bytes
            .get(at + 12..at + 12 + len)
            .ok_or_else(|| bad("truncated data"))?;
        let crc = bytes
            .get(at + 12 + len..at + 16 + len)
            .ok_or_else(|| bad("truncated checksum"))?;
        if masked_crc(data).to_le_bytes() != crc {
            return Err(bad("data checksum"));
        }
        out.push(Event::decode(data).map_err(|e| bad(&e.to_string()))?);
        at += 16 + len;
    }
    Ok(out)
}

/// An event file being written; every event is flushed as it is written, so TensorBoard sees
/// a run as it goes.
pub struct EventWriter {
    file: crate::io::File,
    path: PathBuf,
}

/// Whether `name` is an event file's name.
pub fn is_event_file(name: &str) -> bool {
    name.starts_with("events.out.tfevents.")
}

/// The event files of folder `dir`.
pub fn event_files(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(crate::io::read::names(dir)
        .into_iter()
        .filter(|n| is_event_file(n))
        .map(|n| dir.join(n))
        .collect())
}

impl EventWriter {
    /// A new event file in `dir` (TensorBoard reads every `events.out.tfevents.*` of a folder).
    pub fn create(dir: &Path) -> Result<Self> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let name = format!(
            "events.out.tfevents.{}.trueneg.{}",
            now.as_secs(),
            std::process::id()
        );
        let path = dir.join(name);
        let file = crate::io::write::create_new(&path)?;
        let mut w = Self { file, path };
        w.write(0, Some(What::FileVersion("brain.Event:2".into())))?;
        Ok(w)
    }

    fn write(&mut self, step: u64, what: Option<What>) -> Result<()> {
        let wall_time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let event = Event {
            wall_time,
            step: step as i64,
            what,
        };
        let bytes = record(&event.encode_to_vec());
        self.file
            .write_all(&bytes)
            .and_then(|()| self.file.flush())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Scalars `(tag, value)` at `step` (as f32, TensorBoard's scalar type).
    pub fn scalars(&mut self, step: u64, values: &[(String, f64)]) -> Result<()> {
        let value = values
            .iter()
            .map(|(tag, v)| SummaryValue {
                tag: tag.clone(),
                metadata: None,
                value: Some(Value::Simple(*v as f32)),
            })
            .collect();
        self.write(step, Some(What::Summary(Summary { value })))
    }

    /// A text (markdown) under `tag` at `step`, shown by TensorBoard's text plugin.
    pub fn text(&mut self, step: u64, tag: &str, text: &str) -> Result<()> {
        let value = SummaryValue {
            tag: tag.into(),
            metadata: Some(SummaryMetadata {
                plugin_data: Some(PluginData {
                    plugin_name: "text".into(),
                    content: Vec::new(),
                }),
            }),
            value: Some(Value::Tensor(TensorProto {
                dtype: DT_STRING,
                tensor_shape: Some(TensorShape {}),
                string_val: vec![text.as_bytes().to_vec()],
            })),
        };
        self.write(step, Some(What::Summary(Summary { value: vec![value] })))
    }
}
