//! A stand-in for a Spark image's entrypoint: a POSIX shell script that acts as the driver or an
//! executor, printing log lines in Spark's format, so that Spark jobs run end to end on the
//! simulated cluster.
//!
//! As `driver` (the args Spark gives the driver: `driver --properties-file … --class <class>
//! <resource> <application args…>`) it logs the application's start, then ends as its
//! application args ask: `exit=N` exits with code N (with an exception on the log), `sleep=S`
//! runs S seconds first, `until=FILE` waits for FILE to exist first, `take=FILE` waits for it
//! and removes it (so that each attempt of a restarted application waits for its own); SparkPi
//! prints its result. Any other application argument (SparkPi's partition count) is left alone, so
//! `examples/spark-pi-*.yaml` succeed unchanged. As `executor` it logs its start and then
//! runs until it is stopped.

use crate::config::{CrdBundle, SimConfig};

/// The image repository the demo entrypoint is registered for by [`with_spark_operators`].
pub const SPARK_IMAGE: &str = "apache/spark";

/// The script (run as `sh -c SCRIPT spark <args…>`).
pub const SPARK_DEMO_SCRIPT: &str = r#"
log() { echo "$(date -u '+%y/%m/%d %H:%M:%S') $*"; }
role="${1:-}"
[ $# -gt 0 ] && shift
case "$role" in
  executor)
    log "INFO CoarseGrainedExecutorBackend: Started daemon with process name: $$@${HOSTNAME:-localhost}"
    log "INFO Executor: Starting executor ID ${SPARK_EXECUTOR_ID:-1} on host ${HOSTNAME:-localhost}"
    exec sleep 2147483647
    ;;
  driver) ;;
  *)
    echo "spark: unknown role '$role': expected driver or executor" >&2
    exit 64
    ;;
esac
class=""
while [ $# -gt 0 ]; do
  case "$1" in
    --class) class="${2:-}"; shift; [ $# -gt 0 ] && shift ;;
    --properties-file) shift; [ $# -gt 0 ] && shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
resource="${1:-}"
[ $# -gt 0 ] && shift
code=0
pause=0
until_file=""
take_file=""
for arg in "$@"; do
  case "$arg" in
    exit=*) code="${arg#exit=}" ;;
    sleep=*) pause="${arg#sleep=}" ;;
    until=*) until_file="${arg#until=}" ;;
    take=*) take_file="${arg#take=}" ;;
  esac
done
name="${class##*.}"
[ -n "$name" ] || name="${resource##*/}"
log "INFO SparkContext: Running Spark application $name"
log "INFO SparkContext: Submitted application: $name"
log "INFO SparkContext: Added JAR $resource"
log "INFO ExecutorPodsAllocator: Going to request executors from Kubernetes"
if [ -n "$until_file" ]; then
  while [ ! -e "$until_file" ]; do sleep 0.02; done
fi
if [ -n "$take_file" ]; then
  while ! rm "$take_file" 2>/dev/null; do sleep 0.02; done
fi
if [ "$pause" != 0 ]; then sleep "$pause"; fi
if [ "$code" = 0 ]; then
  log "INFO DAGScheduler: Job 0 finished: reduce at $name, took 0.4 s"
  case "$class" in *SparkPi) echo "Pi is roughly 3.1415926535" ;; esac
  log "INFO SparkContext: Successfully stopped SparkContext"
else
  log "ERROR SparkContext: Error running $name"
  echo "Exception in thread \"main\" java.lang.IllegalStateException: $name was asked to exit with code $code"
fi
exit "$code"
"#;

/// The entrypoint that runs [`SPARK_DEMO_SCRIPT`], for `SimConfig::image_entrypoints`.
pub fn demo_entrypoint() -> Vec<String> {
    ["sh", "-c", SPARK_DEMO_SCRIPT, "spark"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// `config` with both Spark operators installed and the demo entrypoint registered for the
/// `apache/spark` image (unless one is registered already).
pub fn with_spark_operators(mut config: SimConfig) -> SimConfig {
    for bundle in [CrdBundle::SparkApache, CrdBundle::SparkKubeflow] {
        if !config.crd_bundles.contains(&bundle) {
            config.crd_bundles.push(bundle);
        }
    }
    with_demo_entrypoint(config)
}

/// `config` with the demo entrypoint registered for the `apache/spark` image when a Spark
/// operator is installed and no entrypoint is registered for that image.
pub fn with_demo_entrypoint(mut config: SimConfig) -> SimConfig {
    let spark = config
        .crd_bundles
        .iter()
        .any(|b| matches!(b, CrdBundle::SparkApache | CrdBundle::SparkKubeflow));
    if spark {
        config
            .image_entrypoints
            .entry(SPARK_IMAGE.to_string())
            .or_insert_with(demo_entrypoint);
    }
    config
}
