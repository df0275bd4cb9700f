//! The parameters a training step adds beside the network (its own heads, learned loss
//! weights), as one value the model carries, walks, copies and evaluates without knowing the
//! step that made it (`train::steps`).

use std::any::Any;

use super::params::ParamWalker;

pub trait StepHeads: std::fmt::Debug + Send + Sync + Any {
    /// Visits every parameter by its checkpoint name.
    fn walk(&mut self, w: &mut dyn ParamWalker);

    /// The same parameters without autodiff (no gradients kept, dropout off).
    fn valid(&self) -> Box<dyn StepHeads>;

    fn boxed_clone(&self) -> Box<dyn StepHeads>;

    /// The concrete heads, for the step that made them.
    fn as_any(&self) -> &dyn Any;
}

impl Clone for Box<dyn StepHeads> {
    fn clone(&self) -> Self {
        self.boxed_clone()
    }
}
