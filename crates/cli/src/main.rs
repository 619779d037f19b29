//! The `kubeferry` command line.

fn main() {}
