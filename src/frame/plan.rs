//! What a command declares before it runs: the paths it reads (each with the kind it takes),
//! the paths it writes (each with how it owns them), the memory it needs, and how it stops.
//! The frame ([`super::execute`]) does the rest.

use std::path::{Path, PathBuf};

use super::inputs::InputKind;

/// One path a command reads, as given by the user.
#[derive(Clone, Debug)]
pub struct Input {
    /// The flag or config key that gave it (`--model`, `data.shards`).
    pub flag: String,
    pub path: PathBuf,
    pub kind: InputKind,
}

/// How a command owns a path it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// A folder the command makes: new or empty, or one an earlier call of the same command
    /// made (which the command continues, or clears of its own files first).
    Folder,
    /// A folder the command continues (`pretrain --resume`): it must hold work of the same
    /// command (or, made before folders recorded their maker, of the input kind it was
    /// classified as).
    Continued,
    /// Files written into a folder that may hold other things (`evaluate --out`, `export
    /// --out`): the folder is locked while the command runs, and each file is replaced only
    /// when this command wrote it ([`crate::io::outputs::Outputs`]).
    FilesIn,
    /// Report files written beside a run's own files (`inspect`, `stats`): as
    /// [`FilesIn`](Self::FilesIn), under a lock of their own, so that a run in training keeps
    /// its folder's lock.
    ReportsIn,
    /// One file (`compare --out plot.png`, `lexicon build --out`): locked on its own, and
    /// replaced only when this command wrote it.
    File,
}

/// One path a command writes.
#[derive(Clone, Debug)]
pub struct Output {
    pub flag: String,
    pub path: PathBuf,
    pub kind: OutputKind,
}

/// What the command needs in memory, asked of [`crate::memory::check`] before it runs.
#[derive(Clone, Debug)]
pub struct Need {
    pub bytes: f64,
    /// What needs it, in words ("reading 3 batches of 32 × 128 tokens").
    pub what: String,
    /// What to change to need less.
    pub remedy: String,
}

/// How a command stops on Ctrl-C or SIGTERM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stops {
    /// At once: the frame prints one line, removes the command's locks and temporary files,
    /// and exits with 130. `then` says how to continue.
    AtOnce { then: String },
    /// At the command's next safe point (a finished step, a finished seed): the first signal
    /// asks, the command saves what continues the work and says how; a second stops at once.
    AtSafePoints { then: String },
}

/// A command's plan.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The subcommand as the user types it (`prepare`, `lexicon build`).
    pub command: String,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub memory: Vec<Need>,
    pub stops: Stops,
    /// `--force`: files in the way are replaced even when another command wrote them.
    pub force: bool,
}

impl Plan {
    /// A plan of `command` that reads and writes nothing yet, and stops at once with the
    /// advice to run it again.
    pub fn new(command: &str) -> Self {
        Self {
            command: command.into(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            memory: Vec::new(),
            stops: Stops::AtOnce {
                then: "nothing it was writing was kept; run the same command again".into(),
            },
            force: false,
        }
    }

    /// Reads `path`, given as `flag`, which must be of `kind`.
    pub fn input(mut self, flag: &str, path: &Path, kind: InputKind) -> Self {
        self.inputs.push(Input {
            flag: flag.into(),
            path: path.to_path_buf(),
            kind,
        });
        self
    }

    /// [`input`](Self::input) when the option was given.
    pub fn input_if(self, flag: &str, path: Option<&PathBuf>, kind: InputKind) -> Self {
        match path {
            Some(p) => self.input(flag, p, kind),
            None => self,
        }
    }

    /// Reads each of `inputs` (a config's paths, with their keys).
    pub fn inputs(mut self, inputs: Vec<Input>) -> Self {
        self.inputs.extend(inputs);
        self
    }

    /// Writes `path`, given as `flag`, owned as `kind` says.
    pub fn output(mut self, flag: &str, path: &Path, kind: OutputKind) -> Self {
        self.outputs.push(Output {
            flag: flag.into(),
            path: path.to_path_buf(),
            kind,
        });
        self
    }

    /// Needs `need` in memory.
    pub fn memory(mut self, need: Need) -> Self {
        self.memory.push(need);
        self
    }

    /// Stops at its safe points; `then` says how the work continues.
    pub fn stops_at_safe_points(mut self, then: &str) -> Self {
        self.stops = Stops::AtSafePoints { then: then.into() };
        self
    }

    /// Stops at once; `then` says how to continue.
    pub fn stops_at_once(mut self, then: &str) -> Self {
        self.stops = Stops::AtOnce { then: then.into() };
        self
    }

    /// `--force` as given.
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// The line printed when a signal stops the command.
    pub fn stop_line(&self) -> String {
        let then = match &self.stops {
            Stops::AtOnce { then } | Stops::AtSafePoints { then } => then,
        };
        format!("trueneg {}: stopped by a signal; {then}", self.command)
    }
}
