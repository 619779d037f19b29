//! A simulated Kubernetes cluster for tests, benchmarks and the embedded default of the CLI.
