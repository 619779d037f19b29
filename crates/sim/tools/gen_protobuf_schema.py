#!/usr/bin/env python3
"""Generates crates/sim/src/api/protobuf_schema.rs: the field tables of the Kubernetes protobuf
messages the simulated cluster decodes (what kubectl's typed clients send), taken from the
prost bindings of the k8s-pb crate, with JSON field names taken from k8s-openapi.

Usage:
    gen_protobuf_schema.py ~/.cargo/registry/src/*/k8s-pb-0.9.0/src \
        ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33 > crates/sim/src/api/protobuf_schema.rs
    cargo fmt --all
"""

import os
import re
import sys

PB, OPENAPI = sys.argv[1], sys.argv[2]

# Roots: (module, message, apiVersion).
ROOTS = [
    ("api::core::v1", "Secret", "v1"),
    ("api::core::v1", "ConfigMap", "v1"),
    ("api::core::v1", "Namespace", "v1"),
    ("api::core::v1", "ServiceAccount", "v1"),
    ("api::core::v1", "Pod", "v1"),
    ("api::core::v1", "PersistentVolumeClaim", "v1"),
    ("api::core::v1", "Binding", "v1"),
    ("api::batch::v1", "Job", "batch/v1"),
    ("api::rbac::v1", "Role", "rbac.authorization.k8s.io/v1"),
    ("api::rbac::v1", "ClusterRole", "rbac.authorization.k8s.io/v1"),
    ("api::rbac::v1", "RoleBinding", "rbac.authorization.k8s.io/v1"),
    ("api::rbac::v1", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1"),
    ("api::policy::v1", "Eviction", "policy/v1"),
    ("api::authorization::v1", "SelfSubjectAccessReview", "authorization.k8s.io/v1"),
    ("api::authorization::v1", "SubjectAccessReview", "authorization.k8s.io/v1"),
    ("api::authorization::v1", "SelfSubjectRulesReview", "authorization.k8s.io/v1"),
    ("api::authentication::v1", "SelfSubjectReview", "authentication.k8s.io/v1"),
    ("api::authentication::v1", "TokenRequest", "authentication.k8s.io/v1"),
    ("apimachinery::pkg::apis::meta::v1", "DeleteOptions", "v1"),
]

# Messages with a special JSON form.
SPECIAL = {
    "apimachinery::pkg::apis::meta::v1::Time": "Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime": "MicroTime",
    "apimachinery::pkg::api::resource::Quantity": "Quantity",
    "apimachinery::pkg::util::intstr::IntOrString": "IntOrString",
    "apimachinery::pkg::runtime::RawExtension": "Raw",
    "apimachinery::pkg::apis::meta::v1::FieldsV1": "Raw",
    "apimachinery::pkg::apis::meta::v1::Duration": "Duration",
}

SCALARS = {"string": "Str", "bytes": "Bytes", "int32": "Int", "int64": "Int", "uint32": "Int",
           "uint64": "Int", "bool": "Bool", "double": "Double", "float": "Double"}


def parse_module(path, module):
    text = open(path).read()
    messages = {}
    for m in re.finditer(r"::prost::Message\)\]\s*pub struct (\w+) \{(.*?)\n\}", text, re.S):
        name, body = m.group(1), m.group(2)
        fields = []
        for chunk in body.split("#[prost(")[1:]:
            attrs, rest = chunk.split(")]", 1)
            decl = re.search(r"pub (r#)?(\w+):(.*)", rest, re.S)
            rust_name = decl.group(2)
            type_lines = []
            for line in decl.group(3).split("\n"):
                if line.strip().startswith("///"):
                    break
                type_lines.append(line.strip())
            rust_type = "".join(type_lines).strip().rstrip(",").replace(",>", ">")
            tag = int(re.search(r'tag = "(\d+)"', attrs).group(1))
            fields.append((attrs, rust_name, rust_type, tag))
        messages[name] = fields
    return messages


MODULES = {}
for root, _, files in os.walk(PB):
    for f in files:
        if f == "mod.rs":
            rel = os.path.relpath(root, PB)
            module = rel.replace(os.sep, "::")
            MODULES[module] = parse_module(os.path.join(root, f), module)


def resolve(module, rust_type):
    t = rust_type
    for wrapper in ["::core::option::Option<", "::prost::alloc::vec::Vec<"]:
        if t.startswith(wrapper):
            t = t[len(wrapper):-1]
    parts = t.split("::")
    if parts[0] != "super":
        return module, parts[-1]
    base = module.split("::")
    while parts and parts[0] == "super":
        base.pop()
        parts.pop(0)
    return "::".join(base + parts[:-1]), parts[-1]


def openapi_names(message):
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", message).lower()
    names = {}
    for root, _, files in os.walk(OPENAPI):
        if snake + ".rs" in files:
            text = open(os.path.join(root, snake + ".rs")).read()
            for m in re.finditer(r'"(\w+)" => Field::Key_(\w+)', text):
                names[m.group(2)] = m.group(1)
    return names


def camel(name):
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


order, index, pending = [], {}, []


def want(module, name):
    key = module + "::" + name
    if key in SPECIAL:
        return None
    if key not in index:
        index[key] = len(order)
        order.append((module, name))
        pending.append((module, name))
    return index[key]


for module, name, _ in ROOTS:
    want(module, name)

tables = {}
while pending:
    module, name = pending.pop(0)
    fields = MODULES[module][name]
    json_names = openapi_names(name)
    out = []
    for attrs, rust_name, rust_type, tag in fields:
        json = json_names.get(rust_name, camel(rust_name))
        repeated = "repeated" in attrs
        kind_word = attrs.split(",")[0].strip()
        if kind_word.startswith("map") or kind_word.startswith("btree_map"):
            key_t, val_t = re.search(r'map = "(\w+), (\w+)', attrs).groups()
            if val_t == "message":
                inner = rust_type.split(",", 1)[1].strip().rstrip(",").rstrip(">").rstrip(",")
                vmod, vname = resolve(module, inner)
                special = SPECIAL.get(vmod + "::" + vname)
                kind = f"Kind::MapMessage({want(vmod, vname)})" if not special else f"Kind::Map{special}"
            else:
                kind = "Kind::MapStr" if val_t == "string" else "Kind::MapBytes"
        elif kind_word == "message":
            mmod, mname = resolve(module, rust_type)
            special = SPECIAL.get(mmod + "::" + mname)
            kind = f"Kind::{special}" if special else f"Kind::Message({want(mmod, mname)})"
        elif kind_word.startswith("bytes"):
            kind = "Kind::Bytes"
        else:
            kind = "Kind::" + SCALARS[kind_word]
        out.append((tag, json, kind, repeated))
    tables[(module, name)] = out

print("//! Field tables of the Kubernetes protobuf messages kubectl's typed clients send")
print("//! (generated by `crates/sim/tools/gen_protobuf_schema.py` from the k8s-pb 0.9 bindings and")
print("//! the JSON names of k8s-openapi 0.29; do not edit by hand).")
print()
print("use super::protobuf_types::{Field, Kind, Message};")
print()
print("/// Top-level kinds: (apiVersion, kind, message index).")
print("pub static ROOTS: &[(&str, &str, usize)] = &[")
for module, name, api_version in ROOTS:
    print(f'    ("{api_version}", "{name}", {index[module + "::" + name]}),')
print("];")
print()
print("/// Every message, by index.")
print("pub static MESSAGES: &[Message] = &[")
for i, (module, name) in enumerate(order):
    print(f'    Message {{ name: "{module}::{name}", fields: &[')
    for tag, json, kind, repeated in tables[(module, name)]:
        print(f'        Field {{ tag: {tag}, json: "{json}", kind: {kind}, repeated: {"true" if repeated else "false"} }},')
    print("    ] },")
print("];")
