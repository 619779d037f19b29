//! The resource types the cluster serves: the built-in ones and those added by
//! CustomResourceDefinitions, with what discovery says about each.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

pub use crate::store::GroupResource;
use crate::store::meta;

/// What the server does with objects of a type beyond generic storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Plain storage.
    Generic,
    /// core/v1 Namespace.
    Namespace,
    /// core/v1 Node.
    Node,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Event.
    Event,
    /// core/v1 Secret.
    Secret,
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// batch/v1 Job.
    Job,
    /// rbac Role.
    Role,
    /// rbac RoleBinding.
    RoleBinding,
    /// rbac ClusterRole.
    ClusterRole,
    /// rbac ClusterRoleBinding.
    ClusterRoleBinding,
    /// apiextensions CustomResourceDefinition.
    CustomResourceDefinition,
    /// An object served for a CustomResourceDefinition.
    Custom,
    /// authorization SelfSubjectAccessReview (create only, not stored).
    SelfSubjectAccessReview,
    /// authorization SelfSubjectRulesReview (create only, not stored).
    SelfSubjectRulesReview,
    /// authorization SubjectAccessReview (create only, not stored).
    SubjectAccessReview,
    /// authentication SelfSubjectReview (create only, not stored).
    SelfSubjectReview,
}

/// A printer column declared by a CustomResourceDefinition.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column title.
    pub name: String,
    /// Column type (`string`, `integer`, `date`, ...).
    pub column_type: String,
    /// JSON path of the value, e.g. `.status.phase`.
    pub json_path: String,
    /// Priority (0 = shown by default).
    pub priority: i64,
    /// Description.
    pub description: String,
}

/// A resource type and everything discovery says about it.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// API group.
    pub group: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// Plural name.
    pub resource: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Namespaced or cluster scoped.
    pub namespaced: bool,
    /// Short names (`po`, `ns`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Verbs.
    pub verbs: Vec<&'static str>,
    /// Served subresources (`status`, `log`, `eviction`).
    pub subresources: Vec<&'static str>,
    /// Kind-specific behaviour.
    pub behavior: Behavior,
    /// Whether objects carry `metadata.generation` bumped on spec changes.
    pub has_generation: bool,
    /// Whether a delete answers with the deleted object (else a Status).
    pub returns_deleted_object: bool,
    /// Printer columns of a custom resource.
    pub printer_columns: Vec<PrinterColumn>,
    /// Whether the object is only created, never stored (reviews).
    pub create_only: bool,
}

impl ResourceType {
    /// The group resource (storage key).
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    /// `v1` or `batch/v1` for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The preferred (and storage) version.
    pub fn preferred_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    /// Whether the `status` subresource is served.
    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct Builtin {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    subresources: &'static [&'static str],
    behavior: Behavior,
    has_generation: bool,
    returns_deleted_object: bool,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        subresources: &["status", "finalize"],
        behavior: Behavior::Namespace,
        has_generation: false,
        returns_deleted_object: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        subresources: &["status"],
        behavior: Behavior::Node,
        has_generation: false,
        returns_deleted_object: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &["status", "log", "eviction", "binding"],
        behavior: Behavior::Pod,
        has_generation: false,
        returns_deleted_object: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        behavior: Behavior::Event,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::Secret,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        subresources: &[],
        behavior: Behavior::ConfigMap,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        subresources: &["status"],
        behavior: Behavior::PersistentVolumeClaim,
        has_generation: false,
        returns_deleted_object: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        categories: &[],
        subresources: &["token"],
        behavior: Behavior::ServiceAccount,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "resourcequotas",
        singular: "resourcequota",
        kind: "ResourceQuota",
        namespaced: true,
        short_names: &["quota"],
        categories: &[],
        subresources: &["status"],
        behavior: Behavior::Generic,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        subresources: &["status"],
        behavior: Behavior::Generic,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "apps",
        version: "v1",
        resource: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &["status"],
        behavior: Behavior::Generic,
        has_generation: true,
        returns_deleted_object: false,
    },
    Builtin {
        group: "batch",
        version: "v1",
        resource: "jobs",
        singular: "job",
        kind: "Job",
        namespaced: true,
        short_names: &[],
        categories: &["all"],
        subresources: &["status"],
        behavior: Behavior::Job,
        has_generation: true,
        returns_deleted_object: true,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::Role,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::RoleBinding,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::ClusterRole,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::ClusterRoleBinding,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        resource: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        subresources: &["status"],
        behavior: Behavior::CustomResourceDefinition,
        has_generation: true,
        returns_deleted_object: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::SelfSubjectAccessReview,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::SelfSubjectRulesReview,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        resource: "subjectaccessreviews",
        singular: "subjectaccessreview",
        kind: "SubjectAccessReview",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::SubjectAccessReview,
        has_generation: false,
        returns_deleted_object: false,
    },
    Builtin {
        group: "authentication.k8s.io",
        version: "v1",
        resource: "selfsubjectreviews",
        singular: "selfsubjectreview",
        kind: "SelfSubjectReview",
        namespaced: false,
        short_names: &[],
        categories: &[],
        subresources: &[],
        behavior: Behavior::SelfSubjectReview,
        has_generation: false,
        returns_deleted_object: false,
    },
];

fn builtin_type(b: &Builtin) -> ResourceType {
    let create_only = matches!(
        b.behavior,
        Behavior::SelfSubjectAccessReview
            | Behavior::SelfSubjectRulesReview
            | Behavior::SubjectAccessReview
            | Behavior::SelfSubjectReview
    );
    let verbs: Vec<&'static str> = if create_only {
        vec!["create"]
    } else if b.behavior == Behavior::Namespace {
        ALL_VERBS
            .iter()
            .copied()
            .filter(|v| *v != "deletecollection")
            .collect()
    } else {
        ALL_VERBS.to_vec()
    };
    ResourceType {
        group: b.group.to_string(),
        versions: vec![b.version.to_string()],
        resource: b.resource.to_string(),
        singular: b.singular.to_string(),
        kind: b.kind.to_string(),
        list_kind: format!("{}List", b.kind),
        namespaced: b.namespaced,
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        categories: b.categories.iter().map(|s| s.to_string()).collect(),
        verbs,
        subresources: b.subresources.to_vec(),
        behavior: b.behavior,
        has_generation: b.has_generation,
        returns_deleted_object: b.returns_deleted_object,
        printer_columns: Vec::new(),
        create_only,
    }
}

/// The set of served resource types; CustomResourceDefinitions add and remove entries.
pub struct Registry {
    types: RwLock<Vec<Arc<ResourceType>>>,
    by_group_resource: RwLock<HashMap<GroupResource, Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with the built-in types.
    pub fn new() -> Self {
        let registry = Registry {
            types: RwLock::new(Vec::new()),
            by_group_resource: RwLock::new(HashMap::new()),
        };
        for b in BUILTINS {
            registry.insert(builtin_type(b));
        }
        registry
    }

    /// Adds or replaces a type.
    pub fn insert(&self, rt: ResourceType) {
        let rt = Arc::new(rt);
        let gr = rt.group_resource();
        let mut types = self.types.write();
        types.retain(|t| t.group_resource() != gr);
        types.push(rt.clone());
        self.by_group_resource.write().insert(gr, rt);
    }

    /// Removes a type.
    pub fn remove(&self, gr: &GroupResource) {
        self.types.write().retain(|t| &t.group_resource() != gr);
        self.by_group_resource.write().remove(gr);
    }

    /// The type served at group/version/resource.
    pub fn lookup(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceType>> {
        let rt = self
            .by_group_resource
            .read()
            .get(&GroupResource::new(group, resource))
            .cloned()?;
        rt.versions.iter().any(|v| v == version).then_some(rt)
    }

    /// The type stored under a group resource.
    pub fn get(&self, gr: &GroupResource) -> Option<Arc<ResourceType>> {
        self.by_group_resource.read().get(gr).cloned()
    }

    /// The type of a kind in a group.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.types
            .read()
            .iter()
            .find(|t| t.group == group && t.kind == kind)
            .cloned()
    }

    /// Every served type, in registration order.
    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.types.read().clone()
    }

    /// Served groups with their versions (preferred first), core (`""`) first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.types.read().iter() {
            match groups.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) => {
                    for v in &t.versions {
                        if !versions.contains(v) {
                            versions.push(v.clone());
                        }
                    }
                }
                None => groups.push((t.group.clone(), t.versions.clone())),
            }
        }
        groups
    }
}

/// Builds the resource type a CustomResourceDefinition declares; `None` when the definition
/// lacks the names or versions it needs.
pub fn type_from_crd(crd: &Value) -> Option<ResourceType> {
    let spec = crd.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let resource = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names
        .get("listKind")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    let versions_json = spec.get("versions")?.as_array()?;
    let mut served: Vec<&Value> = versions_json
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .collect();
    // The storage version is preferred when served, as the real server orders by priority.
    served.sort_by_key(|v| !v.get("storage").and_then(Value::as_bool).unwrap_or(false));
    if served.is_empty() {
        return None;
    }
    let versions: Vec<String> = served
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let preferred = served[0];
    let has_status = preferred
        .pointer("/subresources/status")
        .is_some_and(|s| !s.is_null());
    let printer_columns = preferred
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    Some(PrinterColumn {
                        name: c.get("name")?.as_str()?.to_string(),
                        column_type: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .to_string(),
                        json_path: c.get("jsonPath")?.as_str()?.to_string(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        description: c
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ResourceType {
        group,
        versions,
        resource,
        singular,
        kind,
        list_kind,
        namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
        short_names: meta::strings(names.get("shortNames")),
        categories: meta::strings(names.get("categories")),
        verbs: ALL_VERBS.to_vec(),
        subresources: if has_status {
            vec!["status"]
        } else {
            Vec::new()
        },
        behavior: Behavior::Custom,
        has_generation: true,
        returns_deleted_object: false,
        printer_columns,
        create_only: false,
    })
}
