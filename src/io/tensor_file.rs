//! A safetensors file, checked before any tensor is read: its 8-byte header length and JSON
//! header are read alone (bounded), every tensor's byte range is checked against the file's real
//! length and against its dtype and shape, and only then is the file mapped. A file extended
//! with zeros, a device or a header that points past the end is refused without reading it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

fn bad(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::Checkpoint(format!(
        "{}: not a valid safetensors file ({why})",
        path.display()
    ))
}

/// Bytes per element of a safetensors dtype name; `None` for one trueneg does not know.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}

/// The header of `path`, read alone and bounded: its JSON object.
fn header(path: &Path) -> Result<(serde_json::Map<String, serde_json::Value>, u64, u64)> {
    let mut f = super::read::open(path)?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(|_| {
        bad(
            path,
            format!("{len} bytes, shorter than its 8-byte header length"),
        )
    })?;
    let header_len = u64::from_le_bytes(n);
    if header_len > super::limit::TENSOR_HEADER || header_len > len - 8 {
        return Err(bad(
            path,
            format!("a header of {header_len} bytes in a file of {len}"),
        ));
    }
    let mut header = vec![0u8; header_len as usize];
    f.read_exact(&mut header).map_err(|e| Error::io(path, e))?;
    let json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(path, format!("header: {e}")))?;
    Ok((json, len, header_len))
}

/// The string metadata (`__metadata__`) of the safetensors file `path`, from its header alone.
pub fn metadata(path: &Path) -> Result<BTreeMap<String, String>> {
    let (json, _, _) = header(path)?;
    match json.get("__metadata__") {
        None => Ok(BTreeMap::new()),
        Some(m) => {
            serde_json::from_value(m.clone()).map_err(|e| bad(path, format!("`__metadata__`: {e}")))
        }
    }
}

/// The metadata key of the content fingerprint (SHA-256) of a file's data section, its weights:
/// written with every safetensors file trueneg writes, checked whenever one is opened.
pub const WEIGHTS_KEY: &str = "trueneg_weights";

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `bytes`, a safetensors file as the `safetensors` crate serialises it, finished for writing:
/// its data section's fingerprint added to the metadata ([`WEIGHTS_KEY`]), and its header's
/// keys (the metadata's among them) in sorted order. The crate writes them in a hash map's
/// order, which differs from run to run, so the same tensors would give other bytes.
pub fn finish_for_writing(bytes: Vec<u8>) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + n]).expect("the crate's own header");
    let fingerprint = sha256_hex(&bytes[8 + n..]);
    let object = header.as_object_mut().expect("a header object");
    let meta = object
        .entry("__metadata__")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(WEIGHTS_KEY.into(), fingerprint.into());
    }
    // serde_json's map keeps its keys sorted.
    let mut text = serde_json::to_string(&header).expect("serialisable");
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut out = Vec::with_capacity(bytes.len());
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text.as_bytes());
    out.extend(&bytes[8 + n..]);
    out
}

/// Reads and checks the header of `path` (see the module's doc), then maps the file.
pub fn open(path: &Path) -> Result<memmap2::Mmap> {
    let (json, len, header_len) = header(path)?;
    let data_len = len - 8 - header_len;
    let mut covered = 0u64;
    for (name, v) in &json {
        if name == "__metadata__" {
            continue;
        }
        let entry: RawEntry = serde_json::from_value(v.clone())
            .map_err(|e| bad(path, format!("tensor `{}`: {e}", super::short(name))))?;
        let (start, end) = (entry.data_offsets[0], entry.data_offsets[1]);
        let elems = entry
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        let bytes = dtype_bytes(&entry.dtype)
            .zip(elems)
            .and_then(|(b, e)| b.checked_mul(e));
        if start > end || end > data_len || bytes.is_some_and(|b| b != end - start) {
            return Err(bad(
                path,
                format!(
                    "tensor `{}` claims bytes {start}..{end} for {} {:?}, the data holds {data_len}",
                    super::short(name),
                    entry.dtype,
                    entry.shape
                ),
            ));
        }
        covered = covered.max(end);
    }
    if covered != data_len {
        return Err(bad(
            path,
            format!("its tensors end at byte {covered} of a data section of {data_len} bytes"),
        ));
    }
    let map = super::read::map(path)?;
    if map.len() as u64 != len {
        return Err(bad(path, "the file changed while it was read"));
    }
    let recorded = json
        .get("__metadata__")
        .and_then(|m| m.get(WEIGHTS_KEY))
        .and_then(|f| f.as_str());
    if let Some(recorded) = recorded
        && sha256_hex(&map[(8 + header_len) as usize..]) != recorded
    {
        return Err(Error::Checkpoint(format!(
            "{}: its tensors are not the ones written (their content fingerprint differs from the `{WEIGHTS_KEY}` recorded): the file was changed or damaged",
            path.display()
        )));
    }
    Ok(map)
}

/// Refuses the safetensors file `path`, one trueneg wrote (a checkpoint, a fine-tuned model),
/// when it records no fingerprint of its tensors: the check is never skipped.
pub fn require_fingerprint(path: &Path) -> Result<()> {
    if metadata(path)?.contains_key(WEIGHTS_KEY) {
        return Ok(());
    }
    Err(Error::Checkpoint(format!(
        "{}: no `{WEIGHTS_KEY}` in its metadata, so its tensors cannot be checked (written by an older trueneg?); write it again with this one",
        path.display()
    )))
}

#[derive(serde::Deserialize)]
struct RawEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}
