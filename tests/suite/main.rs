//! trueneg's integration tests as one binary: a module per subject, sharing one build and one
//! set of fixtures (`common`: the prepared corpus, the tiny pre-trained run and a fine-tuned
//! model, each built once and cached under `target/`).
//!
//! Two subjects stay apart, each a binary of its own: `tests/libtorch.rs` (feature `tch` only)
//! and `tests/host_reads.rs` (it counts the process's reads from the device, which any other
//! test running beside it in the same process would add to).

#[path = "../common/mod.rs"]
mod common;

mod ablation;
mod adding_a_task;
mod adding_an_objective;
mod an_objective_is_one_file;
mod architecture;
mod attacks;
mod bad_input_and_faults;
mod bench;
mod bootstrap;
mod chunked_tokenizing;
mod cline_end_to_end;
mod cline_examples;
mod cline_losses;
mod columnar;
mod command_frame;
mod contrast_sets;
mod distributed;
mod export_finetuned;
mod fault_injection;
mod file_doors;
mod finetune;
mod finetune_golden;
mod first_contact;
mod fixed_step;
mod fixtures_shared;
mod fuzz_inputs;
mod gemm_bf16;
mod golden;
mod heldout;
mod hub_ids;
mod hub_layout;
mod input_consistency;
mod input_formats;
mod inspect;
mod kernel_dropout_add;
mod kernel_rows;
mod kernels;
mod kernels_by_operation;
mod lexicon;
mod memory_estimate;
mod objective_formulas;
mod objective_kinds;
mod objectives_end_to_end;
mod optimizer;
mod outputs_never_replace_foreign_files;
mod oversized_runs_and_clear_messages;
mod parallel;
mod phases;
mod plots;
mod precision;
mod pretrain;
mod readme_commands;
mod readme_keys;
mod seeded_draws;
mod self_synonyms;
mod self_synonyms_training;
mod squad_decoding;
mod tasks;
mod tensorboard;
mod text;
mod values_and_lifecycle;
