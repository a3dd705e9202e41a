//! gslb: a multi-cloud GSLB health controller.
#![doc = "\n## Layout\n"]
pub mod clock;
pub mod model;
pub mod policy;
