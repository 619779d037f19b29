//! `kubeferry rbac`: the namespaced Role kubeferry needs, ready for `kubectl apply -f -`.

use std::process::ExitCode;

use kubeferry::JobKind;
use kubeferry::kube::rbac;

use crate::args::{Cli, RbacArgs};
use crate::output::{Structured, print_structured};

/// Runs `kubeferry rbac`.
pub fn rbac(cli: &Cli, args: &RbacArgs) -> anyhow::Result<ExitCode> {
    let namespace = cli.cluster.namespace.as_deref();
    let kinds = match args.kinds.as_slice() {
        [] => &JobKind::ALL[..],
        some => some,
    };
    let permissions = rbac::permissions(kinds);
    let role = rbac::role(&args.name, namespace, &permissions);
    let format = cli.output.format.structured().unwrap_or(Structured::Yaml);
    let mut documents = vec![serde_json::to_value(&role)?];
    if let Some(account) = &args.service_account {
        let (account, binding) = rbac::binding(&args.name, account, namespace);
        documents.push(serde_json::to_value(&account)?);
        documents.push(serde_json::to_value(&binding)?);
    }
    match format {
        Structured::Yaml => {
            for (i, document) in documents.iter().enumerate() {
                if i > 0 {
                    println!("---");
                }
                if i == 0 {
                    for permission in &permissions {
                        println!(
                            "# {} {}: {}",
                            permission.verbs.join(","),
                            qualified(permission.group, permission.resource),
                            permission.why
                        );
                    }
                }
                print!("{}", serde_saphyr::to_string(document)?);
            }
        }
        Structured::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": documents});
            print_structured(Structured::Json, &list)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
