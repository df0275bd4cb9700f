//! The parameters a training step adds beside the network (its own heads, learned loss
//! weights), as one value the model carries, walks, copies and evaluates without knowing the
//! step that made it (`train::steps`).

use std::any::Any;

use burn::module::Module;

use super::params::ParamWalker;

/// A step's heads as the model holds them (implemented for every [`HeadsModule`]).
pub trait StepHeads: std::fmt::Debug + Send + Sync + Any {
    /// Visits every parameter by its checkpoint name.
    fn walk(&mut self, w: &mut dyn ParamWalker);

    /// The same parameters without autodiff (no gradients kept, dropout off).
    fn valid(&self) -> Box<dyn StepHeads>;

    fn boxed_clone(&self) -> Box<dyn StepHeads>;

    /// The concrete heads, for the step that made them.
    fn as_any(&self) -> &dyn Any;
}

/// What a step writes for its heads: a burn module that names its parameters.
pub trait HeadsModule: Module + Sync + 'static {
    /// Visits every parameter by its checkpoint name.
    fn walk_params(&mut self, w: &mut dyn ParamWalker);
}

impl<H: HeadsModule> StepHeads for H {
    fn walk(&mut self, w: &mut dyn ParamWalker) {
        self.walk_params(w);
    }

    fn valid(&self) -> Box<dyn StepHeads> {
        Box::new(Module::valid(self))
    }

    fn boxed_clone(&self) -> Box<dyn StepHeads> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Clone for Box<dyn StepHeads> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}
