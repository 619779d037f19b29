//! Job spec files: the container job format in YAML or JSON, its validation, and its hash.

pub mod quantity;

pub use quantity::{Quantity, QuantityError, QuantityFormat};
