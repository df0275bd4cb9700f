//! The `trueneg` command line: subcommands only, the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use trueneg::text::prepare::{PrepareOptions, prepare};
use trueneg::text::shards::ShardSet;
use trueneg::train::{PretrainConfig, RunOptions, pretrain};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc hands freed memory back to the OS after 10 ms. A training step frees and re-allocates
// the same large buffers (logits, activations, gradients) every few hundred milliseconds, so every
// step paid the kernel to fault in and zero those pages again (~70 000 page faults in a short
// bench run, about a tenth of the step). Keeping freed memory mapped (purge delay -1) removes
// that; `MIMALLOC_PURGE_DELAY` in the environment still wins.
unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}
/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the same in v2 and v3).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

fn keep_freed_memory_mapped() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: plain option setter of the linked mimalloc, valid at any time.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

#[derive(Parser)]
#[command(
    name = "trueneg",
    version,
    about = "Pre-train BERT / ELECTRA encoders on true negatives"
)]
struct Cli {
    /// Hide progress bars.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Tokenize and pack a corpus into memory-mapped shards.
    Prepare {
        /// Text files (.txt, one paragraph per line, blank line = document end), .jsonl with a
        /// `text` field, either gzipped, or directories of them.
        #[arg(long, required = true, num_args = 1..)]
        input: Vec<PathBuf>,
        /// tokenizer.json or vocab.txt.
        #[arg(long, conflicts_with = "train_vocab")]
        tokenizer: Option<PathBuf>,
        /// Train an uncased WordPiece vocabulary of this size on the corpus instead.
        #[arg(long)]
        train_vocab: Option<usize>,
        #[arg(long, default_value_t = 128)]
        max_seq_len: usize,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 65536)]
        examples_per_shard: usize,
    },
    /// Pre-train (or continue) a BERT or ELECTRA model.
    Pretrain {
        /// A preset (tiny, electra-small, electra-base, bert-base) or a TOML file.
        #[arg(long, required_unless_present = "resume")]
        config: Option<String>,
        /// Override a config value, e.g. --set train.steps=100 (repeatable).
        #[arg(long = "set")]
        set: Vec<String>,
        /// Run directory (default: runs/<config name>).
        #[arg(long, conflicts_with = "resume")]
        run: Option<PathBuf>,
        /// Continue the run in this directory from its last checkpoint.
        #[arg(long)]
        resume: Option<PathBuf>,
    },
    /// Export a run's checkpoint in transformers' layout (config.json + model.safetensors).
    Export {
        #[arg(long)]
        run: PathBuf,
        /// Checkpoint step (default: the latest).
        #[arg(long)]
        step: Option<u64>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Synonym lexicons for a tokenizer.
    Lexicon {
        #[command(subcommand)]
        command: LexiconCommand,
    },
    /// Correction statistics over a run's checkpoints (the paper's Table 8) and their plot.
    Stats {
        /// The run directory whose checkpoints are measured.
        #[arg(long)]
        checkpoints: PathBuf,
        /// Text corpus to mask and predict.
        #[arg(long)]
        corpus: PathBuf,
        /// Synonym table (default: the run's lexicon.safetensors, else WordNet).
        #[arg(long)]
        lexicon: Option<PathBuf>,
        #[arg(long, default_value_t = 50)]
        batches: usize,
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
    },
    /// Plot the loss curves of several runs side by side (PNG).
    Compare {
        #[arg(long, required = true, num_args = 1..)]
        runs: Vec<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        /// The metrics.jsonl field to plot.
        #[arg(long, default_value = "mlm_loss")]
        metric: String,
    },
    /// Fine-tune on a GLUE task and report dev scores over seeds.
    Finetune(FinetuneArgs),
    /// Write a transformed copy of a data set (robustness attack).
    Attack {
        /// swap-syn-wordnet (GLUE, SQuAD) or add-sent-diverse (SQuAD).
        #[arg(long)]
        kind: String,
        /// A GLUE task or squad.
        #[arg(long)]
        task: String,
        /// The task's folder, or one file.
        #[arg(long)]
        data: PathBuf,
        /// A new folder for the transformed files.
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// WordNet database folder (default: Debian's wordnet-base).
        #[arg(long)]
        wordnet: Option<PathBuf>,
    },
    /// Evaluate a fine-tuned model on a dev set; writes predictions in GLUE's submission format.
    Evaluate(EvaluateArgs),
    /// The CPU benchmark of DESIGN.md (BERT MLM + word-level SR step); prints ms_per_step=.
    Bench {
        #[arg(long, default_value_t = 20)]
        steps: usize,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// The loss: `sr` (the spec: MLM + word-level SR), `baseline` (MLM only), `hc`, `hc+sr`
        /// or `sr-sent` (Hard Correction uses a synthetic WordNet-sized table). A comma-separated
        /// list interleaves the objectives' steps and prints each one's ratio to the first.
        #[arg(long, default_value = "sr")]
        objective: String,
        /// cpu; cuda (feature `cuda`); libtorch or libtorch-cuda (feature `tch`).
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Encoder layers (the ELECTRA-Small-sized GPU variant: 12).
        #[arg(long, default_value_t = 4)]
        layers: usize,
        /// Sequences of 128 tokens per step (the ELECTRA-Small-sized GPU variant: 128).
        #[arg(long, default_value_t = 16)]
        batch: usize,
        /// f32, or bf16 mixed precision (torch_bench.py's `--amp bf16`).
        #[arg(long, default_value = "f32", value_parser = parse_precision)]
        precision: trueneg::model::Precision,
        /// AdamW implementation: auto (multi-tensor on GPUs), on, off.
        #[arg(long, default_value = "auto", value_parser = parse_multi_tensor)]
        multi_tensor: trueneg::train::optimizer::MultiTensor,
        /// Wait for the device after each phase (true phase times on GPUs).
        #[arg(long)]
        sync_phases: bool,
    },
}

/// A value of one of the library's lowercase-named enums (`f32`, `hc+sr`, `auto`, …), parsed
/// by its serde name.
fn from_name<T: serde::de::DeserializeOwned>(s: &str, expected: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.trim().to_string()))
        .map_err(|_| format!("{s}: expected {expected}"))
}

fn parse_multi_tensor(s: &str) -> Result<trueneg::train::optimizer::MultiTensor, String> {
    from_name(s, "auto, on or off")
}

fn parse_precision(s: &str) -> Result<trueneg::model::Precision, String> {
    from_name(s, "f32 or bf16")
}

#[derive(Subcommand)]
enum LexiconCommand {
    /// Build a synonym table (token id → synonym token ids) for a tokenizer.
    Build {
        /// tokenizer.json or vocab.txt.
        #[arg(long)]
        tokenizer: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// WordNet database folder (default /usr/share/wordnet).
        #[arg(long)]
        wordnet: Option<PathBuf>,
        /// Use top-k neighbours from word vectors (word2vec text/binary or GloVe) instead.
        #[arg(long, conflicts_with_all = ["wordnet", "checkpoint"])]
        embeddings: Option<PathBuf>,
        /// Use top-k neighbours in a checkpoint's own token embeddings (a model.safetensors).
        #[arg(long, conflicts_with = "wordnet")]
        checkpoint: Option<PathBuf>,
        #[arg(long, default_value_t = 10)]
        top_k: usize,
    },
}

fn lexicon_build(
    tokenizer: PathBuf,
    out: PathBuf,
    wordnet: Option<PathBuf>,
    embeddings: Option<PathBuf>,
    checkpoint: Option<PathBuf>,
    top_k: usize,
) -> anyhow::Result<()> {
    use trueneg::lexicon::{embedding_table, embeddings::read_vectors, whole_words, wordnet_table};
    if out.exists() {
        anyhow::bail!(
            "{}: already exists; choose another --out (nothing was changed)",
            out.display()
        );
    }
    let tok = trueneg::text::WordPieceTokenizer::load(&tokenizer)?;
    let words = whole_words(&tok);
    let table = if let Some(e) = embeddings {
        let keep: std::collections::HashSet<String> =
            words.iter().map(|(w, _)| w.to_lowercase()).collect();
        let v = read_vectors(&e, &|w| keep.contains(w))?;
        embedding_table(&tok, &v, top_k, &format!("embeddings:{}", e.display()))
    } else if let Some(c) = checkpoint {
        let map = trueneg::interop::read_safetensors(&c)?;
        let m = map
            .tensors
            .iter()
            .find(|(k, _)| k.ends_with("embeddings.word_embeddings.weight"))
            .map(|(_, t)| t.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no `*.embeddings.word_embeddings.weight` tensor",
                    c.display()
                )
            })?;
        if m.shape[0] != tok.vocab_size() {
            anyhow::bail!(
                "{}: {} embedding rows, the tokenizer has {} tokens",
                c.display(),
                m.shape[0],
                tok.vocab_size()
            );
        }
        let dim = m.shape[1];
        let v = trueneg::lexicon::embeddings::WordVectors {
            words: words.iter().map(|(w, _)| w.to_lowercase()).collect(),
            dim,
            values: words
                .iter()
                .flat_map(|(_, id)| m.values[*id as usize * dim..(*id as usize + 1) * dim].to_vec())
                .collect(),
        };
        embedding_table(&tok, &v, top_k, &format!("checkpoint:{}", c.display()))
    } else {
        wordnet_table(
            &tok,
            &wordnet.unwrap_or_else(trueneg::text::default_corpus::default_wordnet_dir),
        )?
    };
    table.save(&out)?;
    let c = table.coverage(words.len());
    println!(
        "{} of {} whole-word tokens ({:.1} %) have synonyms, mean list length {:.2}; vocabulary {} -> {}",
        c.with_synonyms,
        c.whole_words,
        100.0 * c.with_synonyms as f64 / c.whole_words.max(1) as f64,
        c.mean_list_length,
        c.vocab_size,
        out.display()
    );
    Ok(())
}

#[derive(clap::Args)]
struct FinetuneArgs {
    /// cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte or squad.
    #[arg(long)]
    task: String,
    /// The task's folder (train.tsv, dev.tsv; MNLI: dev_matched.tsv, dev_mismatched.tsv).
    #[arg(long)]
    data: PathBuf,
    /// A trueneg run directory or a transformers directory.
    #[arg(long)]
    model: PathBuf,
    #[arg(long, value_delimiter = ',', default_value = "1")]
    seeds: Vec<u64>,
    /// Results, predictions and fine-tuned models go here (default: <model>/finetune/<task>).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long)]
    epochs: Option<usize>,
    #[arg(long)]
    batch_size: Option<usize>,
    #[arg(long)]
    max_seq_len: Option<usize>,
    #[arg(long)]
    layer_decay: Option<f64>,
    /// Train on at most this many examples (0 = all).
    #[arg(long, default_value_t = 0)]
    max_train_examples: usize,
    /// SQuAD: evaluate on at most this many questions (0 = all).
    #[arg(long, default_value_t = 0)]
    max_eval_examples: usize,
    /// SQuAD: tokens between the starts of two context windows.
    #[arg(long, default_value_t = 128)]
    doc_stride: usize,
    /// MRPC / QQP: also train on the swapped sentence order.
    #[arg(long)]
    both_orders: bool,
}

fn glue_task(name: &str) -> anyhow::Result<trueneg::tasks::glue::GlueTask> {
    trueneg::tasks::glue::GlueTask::parse(name).ok_or_else(|| {
        anyhow::anyhow!("--task {name}: expected cola, sst2, mrpc, stsb, qqp, mnli, qnli or rte")
    })
}

fn finetune_cmd(a: FinetuneArgs, progress: bool) -> anyhow::Result<()> {
    use trueneg::tasks::{finetune, qa, runner};
    let pre = finetune::load_pretrained(&a.model)?;
    let squad = a.task.eq_ignore_ascii_case("squad");
    let (mut opts, name) = if squad {
        (qa::squad_finetune_options(), "SQuAD")
    } else {
        let task = glue_task(&a.task)?;
        (finetune::FinetuneOptions::electra(task), task.dir_name())
    };
    opts.lr = a.lr.unwrap_or(opts.lr);
    opts.epochs = a.epochs.unwrap_or(opts.epochs);
    opts.batch_size = a.batch_size.unwrap_or(opts.batch_size);
    opts.max_seq_len = a.max_seq_len.unwrap_or(opts.max_seq_len);
    opts.layer_decay = a.layer_decay.unwrap_or(opts.layer_decay);
    opts.max_train_examples = a.max_train_examples;
    opts.both_orders = a.both_orders;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| runner::default_out(&a.model, name));
    let mut report = |line: String| println!("{line}");
    let result = if squad {
        let (train, dev) =
            runner::squad_splits(&a.data, a.max_train_examples, a.max_eval_examples)?;
        let qa_opts = qa::QaOptions {
            max_seq_len: opts.max_seq_len,
            doc_stride: a.doc_stride,
            ..qa::QaOptions::default()
        };
        runner::finetune_qa(
            &pre,
            &train,
            &dev,
            &opts,
            &qa_opts,
            &a.seeds,
            &out,
            progress,
            &mut report,
        )?
    } else {
        runner::finetune_glue(
            glue_task(&a.task)?,
            &pre,
            &a.data,
            &opts,
            &a.seeds,
            &out,
            progress,
            &mut report,
        )?
    };
    print!("{}", runner::write_results(&out, &result)?);
    println!(
        "train {:.1} examples/s, evaluate {:.1} examples/s -> {}",
        result.train_examples_per_s,
        result.eval_examples_per_s,
        out.display()
    );
    Ok(())
}

fn open_wordnet(path: &Option<PathBuf>) -> anyhow::Result<trueneg::lexicon::wordnet::WordNet> {
    let dir = path
        .clone()
        .unwrap_or_else(trueneg::text::default_corpus::default_wordnet_dir);
    Ok(trueneg::lexicon::wordnet::WordNet::open(&dir)?)
}

fn attack_kind(kind: &str) -> anyhow::Result<trueneg::tasks::attack::AttackKind> {
    trueneg::tasks::attack::AttackKind::parse(kind).ok_or_else(|| {
        anyhow::anyhow!("--kind {kind}: expected swap-syn-wordnet or add-sent-diverse")
    })
}

#[derive(clap::Args)]
struct EvaluateArgs {
    /// A folder written by `finetune` (…/seed-N).
    #[arg(long)]
    model: PathBuf,
    /// The task's folder or a .tsv file (SQuAD: the JSON file).
    #[arg(long)]
    data: PathBuf,
    #[arg(long)]
    out: PathBuf,
    /// Also evaluate under this attack (swap-syn-wordnet, add-sent-diverse) and report
    /// original → transformed scores and the drop.
    #[arg(long)]
    attack: Option<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// WordNet database folder (default: Debian's wordnet-base).
    #[arg(long)]
    wordnet: Option<PathBuf>,
    /// SQuAD: evaluate on at most this many questions (0 = all).
    #[arg(long, default_value_t = 0)]
    max_eval_examples: usize,
}

fn show_scores(s: &trueneg::tasks::finetune::Scores) -> String {
    s.metrics
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn evaluate_cmd(a: EvaluateArgs, progress: bool) -> anyhow::Result<()> {
    use trueneg::tasks::runner::{attack_table, evaluate_model};
    let original = evaluate_model(
        &a.model,
        &a.data,
        &a.out,
        None,
        a.max_eval_examples,
        progress,
    )?;
    for e in &original {
        if let Some(s) = &e.scores {
            println!(
                "{}: {} ({:.1} examples/s)",
                e.file.display(),
                show_scores(s),
                e.examples_per_s
            );
        }
        println!("wrote {}", e.written.display());
    }
    let Some(kind) = &a.attack else {
        return Ok(());
    };
    let kind = attack_kind(kind)?;
    let wn = open_wordnet(&a.wordnet)?;
    let attacked = evaluate_model(
        &a.model,
        &a.data,
        &a.out,
        Some((kind, &wn, a.seed)),
        a.max_eval_examples,
        progress,
    )?;
    let mut md = String::new();
    for (o, t) in original.iter().zip(&attacked) {
        if let (Some(os), Some(ts)) = (&o.scores, &t.scores) {
            md += &attack_table(kind.name(), os, ts);
        }
    }
    if md.is_empty() {
        anyhow::bail!(
            "{}: no gold labels to compare under attack",
            a.data.display()
        );
    }
    let path = a.out.join(format!("attack-{}.md", kind.name()));
    std::fs::write(&path, &md)?;
    print!("{md}");
    println!("wrote {}", path.display());
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let progress = !cli.quiet;
    match cli.command {
        Command::Prepare {
            input,
            tokenizer,
            train_vocab,
            max_seq_len,
            out,
            seed,
            examples_per_shard,
        } => {
            let r = prepare(&PrepareOptions {
                inputs: input,
                tokenizer,
                train_vocab,
                max_seq_len,
                out: out.clone(),
                seed,
                examples_per_shard,
                show_progress: progress,
            })?;
            let m = &r.manifest;
            println!(
                "prepared {} examples ({} tokens, {} single-segment) in {} shards, vocab {}, {:.1} MB/s -> {}",
                m.examples,
                m.tokens,
                m.single_segment_examples,
                m.shards.len(),
                m.vocab_size,
                r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
                out.display()
            );
        }
        Command::Pretrain {
            config,
            set,
            run,
            resume,
        } => {
            let (cfg, run_dir) = match (&resume, &config) {
                (Some(dir), _) => {
                    let cfg_path = dir.join("config.toml");
                    (
                        PretrainConfig::load(&cfg_path.to_string_lossy(), &set)?,
                        dir.clone(),
                    )
                }
                (None, Some(c)) => {
                    let name = std::path::Path::new(c)
                        .file_stem()
                        .map(|s| s.to_string_lossy().to_string())
                        .unwrap_or_else(|| c.clone());
                    (
                        PretrainConfig::load(c, &set)?,
                        run.unwrap_or_else(|| PathBuf::from("runs").join(name)),
                    )
                }
                (None, None) => unreachable!("clap requires --config or --resume"),
            };
            let shards_dir = match &cfg.data.shards {
                Some(d) => d.clone(),
                None => {
                    trueneg::train::default_data::ensure_default_shards(&run_dir, &cfg, progress)?
                }
            };
            let shards = ShardSet::open(&shards_dir)?;
            let s = pretrain(
                &cfg,
                &shards,
                &RunOptions {
                    run_dir: run_dir.clone(),
                    resume: resume.is_some(),
                    show_progress: progress,
                },
            )?;
            if let Some(m) = s.last {
                println!(
                    "pre-trained {} steps: loss {:.4} (mlm {:.4}{}) -> {}",
                    s.steps,
                    m.loss,
                    m.mlm_loss,
                    m.disc_loss
                        .map(|d| format!(", disc {d:.4}"))
                        .unwrap_or_default(),
                    run_dir.display()
                );
            }
        }
        Command::Export { run, step, out } => {
            for dir in trueneg::interop::export::export_run(&run, step, &out)? {
                println!("exported {}", dir.display());
            }
        }
        Command::Finetune(a) => finetune_cmd(a, progress)?,
        Command::Evaluate(a) => evaluate_cmd(a, progress)?,
        Command::Attack {
            kind,
            task,
            data,
            out,
            seed,
            wordnet,
        } => {
            let kind = attack_kind(&kind)?;
            let task = if task.eq_ignore_ascii_case("squad") {
                None
            } else {
                Some(glue_task(&task)?)
            };
            let wn = open_wordnet(&wordnet)?;
            for f in trueneg::tasks::runner::write_attacked(kind, task, &data, &out, &wn, seed)? {
                println!("wrote {}", f.display());
            }
        }
        Command::Lexicon {
            command:
                LexiconCommand::Build {
                    tokenizer,
                    out,
                    wordnet,
                    embeddings,
                    checkpoint,
                    top_k,
                },
        } => {
            lexicon_build(tokenizer, out, wordnet, embeddings, checkpoint, top_k)?;
        }
        Command::Stats {
            checkpoints,
            corpus,
            lexicon,
            batches,
            batch_size,
        } => {
            let tok = trueneg::text::WordPieceTokenizer::load(&checkpoints.join("tokenizer.json"))?;
            let table = match lexicon
                .or_else(|| Some(checkpoints.join("lexicon.safetensors")).filter(|p| p.exists()))
            {
                Some(p) => trueneg::lexicon::SynonymTable::load_for(&p, &tok.fingerprint())?,
                None => trueneg::lexicon::wordnet_table(
                    &tok,
                    &trueneg::text::default_corpus::default_wordnet_dir(),
                )?,
            };
            let stats = trueneg::train::stats::correction_stats(
                &checkpoints,
                &corpus,
                &table,
                batches,
                batch_size,
            )?;
            let md = trueneg::train::stats::stats_table(&stats);
            print!("{md}");
            let png = checkpoints.join("correction-stats.png");
            let series = vec![
                trueneg::plot::Series {
                    name: "prediction level (corrected / mismatched)".into(),
                    points: stats
                        .iter()
                        .map(|s| (s.step as f64, 100.0 * s.prediction_level))
                        .collect(),
                },
                trueneg::plot::Series {
                    name: "iteration level (sequences with a correction)".into(),
                    points: stats
                        .iter()
                        .map(|s| (s.step as f64, 100.0 * s.iteration_level))
                        .collect(),
                },
            ];
            trueneg::plot::line_plot(
                &png,
                "Hard Correction rates over training",
                "step",
                "%",
                &series,
            )?;
            let json = serde_json::to_string_pretty(&stats)?;
            std::fs::write(checkpoints.join("correction-stats.json"), json)?;
            std::fs::write(checkpoints.join("correction-stats.md"), md)?;
            println!("wrote {}", png.display());
        }
        Command::Compare { runs, out, metric } => {
            let mut series = Vec::new();
            for r in &runs {
                let path = r.join("metrics.jsonl");
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                let mut points = Vec::new();
                for (i, line) in text.lines().enumerate() {
                    let v: serde_json::Value = serde_json::from_str(line)
                        .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?;
                    if let (Some(s), Some(y)) = (v["step"].as_f64(), v[metric.as_str()].as_f64()) {
                        points.push((s, y));
                    }
                }
                if points.is_empty() {
                    anyhow::bail!("{}: no field `{metric}`", path.display());
                }
                series.push(trueneg::plot::Series {
                    name: r
                        .file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default(),
                    points,
                });
            }
            trueneg::plot::line_plot(&out, &format!("{metric} by run"), "step", &metric, &series)?;
            println!("wrote {}", out.display());
        }
        Command::Bench {
            steps,
            warmup,
            objective,
            device,
            layers,
            batch,
            precision,
            multi_tensor,
            sync_phases,
        } => {
            if layers == 0 || batch == 0 {
                anyhow::bail!("--layers and --batch must be > 0");
            }
            let spec = trueneg::bench::BenchSpec {
                layers,
                batch,
                precision,
                multi_tensor,
                sync_phases,
            };
            let kinds = objective
                .split(',')
                .map(|o| {
                    from_name::<trueneg::objective::ObjectiveKind>(
                        o,
                        "baseline, sr, hc, hc+sr or sr-sent",
                    )
                    .map_err(|e| anyhow::anyhow!("--objective {e}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let names: Vec<&str> = objective.split(',').map(str::trim).collect();
            let backend = device;
            let device = trueneg::train::pretrain::device_for(&backend)?.autodiff();
            println!(
                "# trueneg bench: device={backend} threads={} layers={layers} batch={batch}x{} masked={} precision={precision:?} objective={objective}",
                rayon::current_num_threads(),
                trueneg::bench::SEQ,
                batch * trueneg::bench::MASKED_PER_SEQ,
            );
            let reports = trueneg::bench::run_bench(
                &device,
                &spec,
                warmup,
                steps,
                &kinds,
                |j, step, loss, ms, [f, b, o]| {
                    let tag = if step < warmup { "warmup" } else { "step" };
                    println!(
                        "{tag} {step:4} {} loss={loss:.6} ms={ms:.1} (forward {f:.0}, backward {b:.0}, optimizer {o:.0})",
                        names[j]
                    );
                },
            );
            for (name, r) in names.iter().zip(&reports) {
                let [f, b, o] = r.phase_ms;
                println!(
                    "# {name}: mean ms forward+loss {f:.1}, backward {b:.1}, optimizer {o:.1}"
                );
            }
            if let Some(kb) = trueneg::bench::peak_rss_kb() {
                println!("# peak RSS {:.0} MiB", kb as f64 / 1024.0);
            }
            if reports.len() == 1 {
                println!("ms_per_step={:.3}", reports[0].median_ms);
            } else {
                for (name, r) in names.iter().zip(&reports) {
                    println!(
                        "ms_per_step[{name}]={:.3} ratio_to_{}={:.4} paired_ratio={:.4}",
                        r.median_ms,
                        names[0],
                        r.median_ms / reports[0].median_ms,
                        trueneg::bench::paired_ratio(r, &reports[0])
                    );
                }
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    keep_freed_memory_mapped();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
