//! `prepare` reads the `datasets` library's own files: Parquet and Arrow IPC (stream and file
//! format), one document per row of the `--text-field` column, into the same shards as the
//! same documents in `.jsonl`. Files written here by the Arrow crates and, where Python has
//! it, by pyarrow (what `datasets` writes with).

use crate::common;
use common::{bin, data, fails, ok, other_tokenizer};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// About 300 documents of WikiText-2 (its paragraphs, two per document; some empty).
fn documents() -> Vec<String> {
    let text = std::fs::read_to_string(data("wikitext-2/wiki.test.raw")).unwrap();
    let paragraphs: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(600)
        .collect();
    let mut docs: Vec<String> = paragraphs.chunks(2).map(|c| c.join("\n")).collect();
    docs.insert(7, String::new());
    docs
}

fn batch(docs: &[String]) -> RecordBatch {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..docs.len() as i64));
    let text: ArrayRef = Arc::new(StringArray::from_iter_values(docs));
    RecordBatch::try_from_iter([("id", ids), ("content", text)]).unwrap()
}

fn write_jsonl(path: &Path, docs: &[String]) {
    let lines: Vec<String> = docs
        .iter()
        .map(|d| serde_json::json!({"content": d}).to_string())
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn write_parquet(path: &Path, docs: &[String]) {
    let b = batch(docs);
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(100))
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        b.schema(),
        Some(props),
    )
    .unwrap();
    // Several record batches, as `datasets` writes them.
    for chunk in docs.chunks(128) {
        w.write(&batch(chunk)).unwrap();
    }
    w.close().unwrap();
}

fn write_arrow(path: &Path, docs: &[String], stream: bool) {
    let b = batch(docs);
    let f = std::fs::File::create(path).unwrap();
    if stream {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(f, &b.schema()).unwrap();
        for chunk in docs.chunks(100) {
            w.write(&batch(chunk)).unwrap();
        }
        w.finish().unwrap();
    } else {
        let mut w = arrow_ipc::writer::FileWriter::try_new(f, &b.schema()).unwrap();
        w.write(&b).unwrap();
        w.finish().unwrap();
    }
}

fn prepare(input: &Path, out: &Path) -> std::process::Output {
    prepare_field(input, "content", out)
}

/// `prepare` of `input` with the text in column `field`.
fn prepare_field(input: &Path, field: &str, out: &Path) -> std::process::Output {
    bin()
        .args(["prepare", "--input"])
        .arg(input)
        .arg("--tokenizer")
        .arg(other_tokenizer())
        .args(["--text-field", field, "--max-seq-len", "64", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

/// The shards' bytes and the manifest's counts of a `prepare` output.
fn shards(out: &Path) -> (Vec<u8>, serde_json::Value, serde_json::Value) {
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    (
        std::fs::read(out.join("shard-00000.bin")).unwrap(),
        m["examples"].clone(),
        m["tokens"].clone(),
    )
}

#[test]
fn parquet_and_arrow_files_prepare_like_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let docs = documents();
    let jsonl = dir.path().join("docs.jsonl");
    write_jsonl(&jsonl, &docs);
    ok(prepare(&jsonl, &dir.path().join("from-jsonl")));
    let want = shards(&dir.path().join("from-jsonl"));
    assert!(want.1.as_u64().unwrap() > 50, "{:?}", want.1);

    let mut inputs: Vec<(PathBuf, &str)> = Vec::new();
    let parquet = dir.path().join("train.parquet");
    write_parquet(&parquet, &docs);
    inputs.push((parquet, "parquet"));
    let stream = dir.path().join("data-00000-of-00001.arrow");
    write_arrow(&stream, &docs, true);
    inputs.push((stream, "arrow stream"));
    let file = dir.path().join("docs.feather");
    write_arrow(&file, &docs, false);
    inputs.push((file, "arrow file"));
    if let Some(py) = common::python_with("pyarrow") {
        // pyarrow's own writers: Parquet with its default (snappy) pages, an IPC stream.
        let script = "import sys, json, pyarrow as pa, pyarrow.parquet as pq\n\
docs = json.load(open(sys.argv[1]))\n\
t = pa.table({'id': list(range(len(docs))), 'content': docs})\n\
pq.write_table(t, sys.argv[2], row_group_size=64)\n\
with pa.ipc.new_stream(sys.argv[3], t.schema) as w:\n    w.write_table(t, max_chunksize=50)\n";
        let docs_json = dir.path().join("docs.json");
        std::fs::write(&docs_json, serde_json::to_vec(&docs).unwrap()).unwrap();
        let (pq, arrow) = (dir.path().join("py.parquet"), dir.path().join("py.arrow"));
        ok(std::process::Command::new(py)
            .args(["-c", script])
            .args([&docs_json, &pq, &arrow])
            .output()
            .unwrap());
        inputs.push((pq, "pyarrow parquet"));
        inputs.push((arrow, "pyarrow stream"));
    }
    for (i, (input, what)) in inputs.iter().enumerate() {
        let out = dir.path().join(format!("out-{i}"));
        ok(prepare(input, &out));
        assert!(
            shards(&out) == want,
            "{what}: other shards than the jsonl's"
        );
    }

    // A folder: its corpus files in name order, other files skipped with a note.
    let folder = dir.path().join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    write_parquet(&folder.join("a.parquet"), &docs[..150]);
    write_arrow(&folder.join("b.arrow"), &docs[150..], true);
    std::fs::write(folder.join("dataset_info.json"), "{}").unwrap();
    let out = prepare(&folder, &dir.path().join("from-folder"));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    ok(out);
    assert!(
        said.contains("skipped") && said.contains("dataset_info.json"),
        "{said}"
    );
    assert_eq!(shards(&dir.path().join("from-folder")), want);
}

#[test]
fn a_missing_or_non_text_column_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let parquet = dir.path().join("x.parquet");
    write_parquet(&parquet, &documents()[..20]);
    let e = fails(prepare_field(&parquet, "text", &dir.path().join("o1")));
    assert!(
        e.contains("x.parquet") && e.contains("no column `text`") && e.contains("id, content"),
        "{e}"
    );
    let e = fails(prepare_field(&parquet, "id", &dir.path().join("o2")));
    assert!(e.contains("column `id` holds Int64, not text"), "{e}");
    assert!(!dir.path().join("o2/manifest.json").exists());
}
