//! The two Spark operators kubeferry targets: their API groups, versions, and the names and
//! labels they give the driver pod.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::named::names;

/// The kind of every SparkApplication, of either operator.
pub const SPARK_APPLICATION_KIND: &str = crate::JobKind::SparkApp.object_kind();
/// The plural resource name of SparkApplications, of either operator.
pub const SPARK_APPLICATIONS: &str = "sparkapplications";
/// The label with a Spark pod's role (`driver` or `executor`); Spark sets it.
pub const SPARK_ROLE_LABEL: &str = "spark-role";
/// The value of [`SPARK_ROLE_LABEL`] on driver pods.
pub const DRIVER_ROLE: &str = "driver";
/// The value of [`SPARK_ROLE_LABEL`] on executor pods.
pub const EXECUTOR_ROLE: &str = "executor";
/// The name Spark gives the driver container, under both operators.
pub const DRIVER_CONTAINER: &str = "spark-kubernetes-driver";

/// Which Spark operator runs an application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SparkOperator {
    /// apache/spark-kubernetes-operator: `spark.apache.org/v1` SparkApplication.
    Apache,
    /// Kubeflow spark-operator: `sparkoperator.k8s.io/v1beta2` SparkApplication.
    Kubeflow,
}

names!(SparkOperator: Apache = "apache", Kubeflow = "kubeflow");

impl SparkOperator {
    /// Both operators, in the order they are documented.
    pub const ALL: [SparkOperator; 2] = [SparkOperator::Apache, SparkOperator::Kubeflow];

    /// The API group of its SparkApplication.
    pub fn group(self) -> &'static str {
        match self {
            SparkOperator::Apache => "spark.apache.org",
            SparkOperator::Kubeflow => "sparkoperator.k8s.io",
        }
    }

    /// The API version kubeferry creates SparkApplications in.
    pub fn version(self) -> &'static str {
        match self {
            SparkOperator::Apache => "v1",
            SparkOperator::Kubeflow => "v1beta2",
        }
    }

    /// `group/version`, the `apiVersion` of its SparkApplications.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group(), self.version())
    }

    /// The operator whose API group an `apiVersion` (`group/version`) names.
    pub fn of_api_version(api_version: &str) -> Option<Self> {
        let group = api_version.split_once('/').map(|(group, _)| group)?;
        SparkOperator::ALL
            .into_iter()
            .find(|op| op.group() == group)
    }

    /// The label the operator puts on the driver (and executor) pods, whose value is the
    /// SparkApplication's name.
    pub fn app_name_label(self) -> &'static str {
        match self {
            SparkOperator::Apache => "spark.operator/spark-app-name",
            SparkOperator::Kubeflow => "sparkoperator.k8s.io/app-name",
        }
    }

    /// The label selector of the driver pods of the SparkApplication `app`:
    /// `<app name label>=<app>,spark-role=driver`. Under the apache operator every attempt
    /// has its own driver pod; the status mapping picks the one of this application.
    pub fn driver_selector(self, app: &str) -> String {
        format!(
            "{}={app},{SPARK_ROLE_LABEL}={DRIVER_ROLE}",
            self.app_name_label()
        )
    }
}

impl fmt::Display for SparkOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SparkOperator {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SparkOperator::NAMES
            .iter()
            .find(|(name, _)| *name == s)
            .map(|(_, op)| *op)
            .ok_or_else(|| format!("{s:?} is not a Spark operator: expected apache or kubeflow"))
    }
}

impl Serialize for SparkOperator {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SparkOperator {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_groups_and_selectors() {
        for op in SparkOperator::ALL {
            assert_eq!(op.as_str().parse::<SparkOperator>(), Ok(op));
            assert_eq!(SparkOperator::of_api_version(&op.api_version()), Some(op));
        }
        assert_eq!(SparkOperator::Apache.api_version(), "spark.apache.org/v1");
        assert_eq!(
            SparkOperator::of_api_version("spark.apache.org/v1beta1"),
            Some(SparkOperator::Apache)
        );
        assert_eq!(SparkOperator::of_api_version("batch/v1"), None);
        assert_eq!(SparkOperator::of_api_version("v1"), None);
        assert_eq!(
            SparkOperator::Kubeflow.driver_selector("pi"),
            "sparkoperator.k8s.io/app-name=pi,spark-role=driver"
        );
        assert!("Apache".parse::<SparkOperator>().is_err());
    }
}
