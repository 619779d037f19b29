#!/usr/bin/env python3
"""Drives the simulated cluster with the official Kubernetes Python client (PyPI `kubernetes`)
and its typed models, as a program written against a real cluster does: namespaces, Jobs and
pods created, read, listed, patched, watched and deleted. The models leave `kind` and
`apiVersion` out of the bodies they send; the API server fills them in from the endpoint.

Usage: official_client.py KUBECONFIG
Prints a JSON summary of what it saw on stdout; any difference from a real cluster's answers
fails with a message on stderr and a non-zero exit.
"""

import json
import sys

try:
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
except ImportError as error:
    sys.stderr.write(
        f"the official Kubernetes Python client is not importable ({error}): "
        "install it with `pip install kubernetes==33.1.0` (.ci/run does)\n"
    )
    sys.exit(3)

NAMESPACE = "python-typed"
WATCH_SECONDS = 60


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def api_error(call):
    """The ApiException a call raises (it must raise one)."""
    try:
        call()
    except ApiException as error:
        return error
    fail("expected an API error, got none")


def container(name, script):
    return client.V1Container(
        name=name, image="busybox:1.36", command=["sh", "-c", script]
    )


def wait_for(list_call, name, done, **kwargs):
    """Watches objects of one list call until `done` holds for the named one."""
    stream = watch.Watch()
    for event in stream.stream(
        list_call,
        field_selector=f"metadata.name={name}",
        timeout_seconds=WATCH_SECONDS,
        **kwargs,
    ):
        if done(event["object"]):
            stream.stop()
            return event
    fail(f"{name} did not get there within {WATCH_SECONDS}s of watching")


def wait_deleted(list_call, name, read_call, **kwargs):
    """Watches until the named object is deleted (at once if it already is)."""
    stream = watch.Watch()
    if not gone(read_call):
        for event in stream.stream(
            list_call,
            field_selector=f"metadata.name={name}",
            timeout_seconds=WATCH_SECONDS,
            **kwargs,
        ):
            if event["type"] == "DELETED":
                stream.stop()
                break
    expect(gone(read_call), f"{name} is gone")


def gone(read_call):
    """Whether a read answers 404."""
    try:
        read_call()
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def main():
    config.load_kube_config(config_file=sys.argv[1])
    core = client.CoreV1Api()
    batch = client.BatchV1Api()
    summary = {}

    # Namespaces.
    created = core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE, labels={"by": "python"}))
    )
    expect(created.kind == "Namespace" and created.api_version == "v1", f"created {created}")
    summary["namespace"] = {"kind": created.kind, "phase": created.status.phase}
    again = api_error(lambda: core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))))
    summary["namespaceAgain"] = {"status": again.status, "reason": json.loads(again.body)["reason"]}
    read = core.read_namespace(NAMESPACE)
    expect(read.metadata.uid == created.metadata.uid, "read a different namespace")
    listed = core.list_namespace(label_selector="by=python")
    summary["namespacesListed"] = [n.metadata.name for n in listed.items]
    patched = core.patch_namespace(NAMESPACE, {"metadata": {"labels": {"patched": "yes"}}})
    summary["namespaceLabels"] = patched.metadata.labels

    # A Job, from typed models.
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="hello", labels={"app": "typed"}),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[container("main", "echo hello from the typed client")],
                )
            ),
        ),
    )
    created_job = batch.create_namespaced_job(NAMESPACE, job)
    expect(created_job.kind == "Job" and created_job.api_version == "batch/v1", f"created {created_job}")
    summary["job"] = {"kind": created_job.kind, "apiVersion": created_job.api_version}
    read_job = batch.read_namespaced_job("hello", NAMESPACE)
    expect(read_job.spec.template.spec.containers[0].name == "main", "the job reads back")
    jobs = batch.list_namespaced_job(NAMESPACE, label_selector="app=typed")
    summary["jobsListed"] = [j.metadata.name for j in jobs.items]
    patched_job = batch.patch_namespaced_job("hello", NAMESPACE, {"metadata": {"labels": {"patched": "yes"}}})
    summary["jobLabels"] = patched_job.metadata.labels
    event = wait_for(
        batch.list_namespaced_job,
        "hello",
        lambda j: any(c.type == "Complete" and c.status == "True" for c in (j.status.conditions or [])),
        namespace=NAMESPACE,
    )
    # ADDED when it had finished before the watch began, else MODIFIED.
    expect(event["type"] in ("ADDED", "MODIFIED"), f"a {event['type']} event")
    summary["jobFinished"] = {"succeeded": event["object"].status.succeeded}
    status = batch.read_namespaced_job_status("hello", NAMESPACE)
    summary["jobStatusSucceeded"] = status.status.succeeded
    pods = core.list_namespaced_pod(NAMESPACE, label_selector="job-name=hello")
    expect(len(pods.items) == 1, f"one pod for the job, got {len(pods.items)}")
    summary["jobLog"] = core.read_namespaced_pod_log(pods.items[0].metadata.name, NAMESPACE)

    # An unknown field under fieldValidation=Strict (a dict body: the models have no such field).
    body = client.ApiClient().sanitize_for_serialization(job)
    body["metadata"]["name"] = "strict"
    body["spec"]["colour"] = "red"
    strict = api_error(lambda: batch.create_namespaced_job(NAMESPACE, body, field_validation="Strict"))
    summary["strict"] = {"status": strict.status, "message": json.loads(strict.body)["message"]}

    # A pod of its own.
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="single"),
        spec=client.V1PodSpec(restart_policy="Never", containers=[container("main", "echo single")]),
    )
    created_pod = core.create_namespaced_pod(NAMESPACE, pod)
    expect(created_pod.kind == "Pod" and created_pod.api_version == "v1", f"created {created_pod}")
    core.patch_namespaced_pod("single", NAMESPACE, {"metadata": {"annotations": {"note": "patched"}}})
    event = wait_for(
        core.list_namespaced_pod,
        "single",
        lambda p: p.status.phase == "Succeeded",
        namespace=NAMESPACE,
    )
    summary["pod"] = {
        "phase": event["object"].status.phase,
        "annotation": event["object"].metadata.annotations.get("note"),
        "log": core.read_namespaced_pod_log("single", NAMESPACE),
    }
    core.delete_namespaced_pod("single", NAMESPACE, grace_period_seconds=0)
    wait_deleted(core.list_namespaced_pod, "single", lambda: core.read_namespaced_pod("single", NAMESPACE), namespace=NAMESPACE)
    summary["podDeleted"] = True

    # Deletes: the Job with its pods, then the namespace.
    batch.delete_namespaced_job(
        "hello", NAMESPACE, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    wait_deleted(batch.list_namespaced_job, "hello", lambda: batch.read_namespaced_job("hello", NAMESPACE), namespace=NAMESPACE)
    summary["jobDeleted"] = True
    summary["podsLeft"] = len(core.list_namespaced_pod(NAMESPACE).items)
    core.delete_namespace(NAMESPACE)
    wait_deleted(core.list_namespace, NAMESPACE, lambda: core.read_namespace(NAMESPACE))
    summary["namespaceDeleted"] = True
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
