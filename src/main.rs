//! The `trueneg` command line: subcommands only, the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use trueneg::text::prepare::{PrepareOptions, prepare};
use trueneg::text::shards::ShardSet;
use trueneg::train::{PretrainConfig, RunOptions, pretrain};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// The CPU benchmark of DESIGN.md (BERT MLM + word-level SR step); prints ms_per_step=.
    Bench {
        #[arg(long, default_value_t = 20)]
        steps: usize,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// Leave out the Soft Regularization term (plain MLM).
        #[arg(long)]
        no_sr: bool,
    },
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
        Command::Bench {
            steps,
            warmup,
            no_sr,
        } => {
            let device = burn::prelude::Device::flex().autodiff();
            println!(
                "# trueneg bench: backend=flex threads={} batch=16x128 masked=304 sr={}",
                rayon::current_num_threads(),
                !no_sr
            );
            let r = trueneg::bench::run_bench(&device, warmup, steps, !no_sr, |step, loss, ms| {
                let tag = if step < warmup { "warmup" } else { "step" };
                println!("{tag} {step:4} loss={loss:.6} ms={ms:.1}");
            });
            println!("ms_per_step={:.3}", r.median_ms);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
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
